"""One pipeline re-scored over a whole query set with ``eval.fast`` — the Tune page's hot path.

``evaluate_config`` routes, fuses and ranks every query from the candidate table and scores the
ranking per query; ``LiveRun`` keeps the per-query values so a paired test against another run
(``eval.compare.compare_pair``) needs no second pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from eval.fast import DEFAULT_METRICS, Judged, per_query
from retrieval.candidates import Candidates
from retrieval.pipeline import PipelineConfig, PipelineRun, run_pipeline


@dataclass(frozen=True, eq=False)
class LiveRun:
    config: PipelineConfig
    run: PipelineRun
    judged: Judged
    values: dict[str, np.ndarray]   # metric → per-query value (NaN where the query has no judgments)
    means: dict[str, float]         # over the counted queries (judged; missing ones count 0)
    seconds: float                  # re-score + rank + metrics

    def counted(self, metric: str) -> np.ndarray:
        """Per-query values over the counted queries (judged ones, missing ones as 0), as eval.sweep."""
        values = self.values[metric][self.judged.judged]
        return np.concatenate([values, np.zeros(self.judged.n_missing)]) if self.judged.n_missing else values


def evaluate_config(c: Candidates, judged: Judged, config: PipelineConfig,
                    metrics: tuple[str, ...] = DEFAULT_METRICS) -> LiveRun:
    """Re-score, rank and evaluate a whole query set (timed with ``perf_counter``)."""
    start = time.perf_counter()
    run = run_pipeline(c, config)
    values = per_query(c, judged, run.ranking, tuple(metrics))
    n = judged.n_judged
    means = {name: (float(np.nansum(v)) / n if n else 0.0) for name, v in values.items()}
    return LiveRun(config, run, judged, values, means, time.perf_counter() - start)
