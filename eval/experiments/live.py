"""One pipeline re-scored and evaluated over a whole query set: Tune's hot path (every knob
move), and the evaluation snapshots, ``rwb check`` and the pages that set a configuration against
a baseline read.

``evaluate_config`` routes and fuses every query from the candidate table
(``retrieval.pipeline.fuse``) and scores all of them straight from the fused scores
(``eval.metrics.measure.fused_matrix``: top-k selection and the metrics in one compiled pass, no
``Ranking``). ``LiveRun`` keeps each metric's per-query values, so a paired test against another
run (``eval.statistics.significance.compare_pair``, called by ``eval.experiments.views``) reads
them without scoring again. Its ranked run (``LiveRun.run``: the ranking, the scores with their
per-path components, each query's route and profile) is ranked from the same fused scores when
first asked for; what is derived from it (judged@k, a verdict's bounds against a baseline) is
kept with the run. ``LiveRuns`` is the server's small LRU of runs, shared by every session.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np

from eval.metrics.judgment_bias import judged_per_query
from eval.metrics.measure import DEFAULT_METRICS, Judged, fused_matrix
from eval.statistics.unjudged import Bounds, verdict_bounds
from retrieval.candidate_table import Candidates
from retrieval.pipeline import Fused, PipelineConfig, PipelineRun, fuse, ranked


@dataclass(frozen=True, eq=False)
class LiveRun:
    config: PipelineConfig
    fused: Fused
    judged: Judged
    values: dict[str, np.ndarray]   # metric → per-query value (NaN where the query has no judgments)
    means: dict[str, float]         # over the counted queries (judged; missing ones count 0)
    seconds: float                  # re-score + top-k + metrics

    @cached_property
    def run(self) -> PipelineRun:
        """The ranked run (what a page shows for a query), ranked on first use."""
        return ranked(self.fused)

    def counted(self, metric: str) -> np.ndarray:
        """Per-query values over the counted queries (``Judged.counted``)."""
        return self.judged.counted(self.values[metric])

    def judged_at(self, c: Candidates, qrels: dict, k: int) -> np.ndarray:
        """judged@k per query of this run's ranking (``judged_per_query``), kept with the run per
        ``k``: a baseline's is read on every knob move. ``c`` and ``qrels`` are the table and the
        judgments this run was evaluated on (a changed judgment makes a new run)."""
        kept = self.__dict__.setdefault("_judged_at", {})
        if k not in kept:  # two sessions may both compute it: the same values
            kept[k] = judged_per_query(c, qrels, self.run.ranking, k)
        return kept[k]


    def bounds_against(self, base: "LiveRun", c: Candidates, qrels: dict, metric: str) -> Bounds:
        """Whether this run's verdict against ``base`` on ``metric`` survives the unjudged
        documents of the two tops (``eval.statistics.unjudged``), kept with the run per baseline
        and metric (a changed judgment makes new runs)."""
        kept = self.__dict__.setdefault("_bounds", {})
        key = (base.config, metric)
        if key not in kept:
            kept[key] = verdict_bounds(c, qrels, base.run.ranking, self.run.ranking, metric, self.judged)
        return kept[key]


def evaluate_config(c: Candidates, judged: Judged, config: PipelineConfig,
                    metrics: tuple[str, ...] = DEFAULT_METRICS, routes: tuple[str, ...] | None = None) -> LiveRun:
    """Re-score and evaluate a whole query set (timed with ``perf_counter``); ``routes``: the
    learned router's profile per query (``retrieval.pipeline.fuse``)."""
    start = time.perf_counter()
    metrics = tuple(metrics)
    fused = fuse(c, config, routes)
    out = fused_matrix(judged, [fused], metrics)[:, 0]
    n = judged.n_judged
    totals = np.nansum(out, axis=1).tolist() if n else [0.0] * len(metrics)
    values = dict(zip(metrics, out))
    means = {name: (total / n if n else 0.0) for name, total in zip(metrics, totals)}
    return LiveRun(config, fused, judged, values, means, time.perf_counter() - start)


class LiveRuns:
    """A small LRU of whole-query-set evaluations keyed by anything hashable (the workbench keys
    them by its dataset, the pool's embedder and analyzer, the judgments' revision and the frozen
    configuration, which holds the folder a learned model is read from), shared by every session of the
    server: looked up and updated under a lock, computed outside it (two sessions missing the
    same key at once may both compute it; both get an equal run)."""

    def __init__(self, size: int = 64):
        self.size = size
        self._runs: "OrderedDict[object, LiveRun]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key, compute: Callable[[], LiveRun]) -> LiveRun:
        with self._lock:
            hit = self._runs.get(key)
            if hit is not None:
                self._runs.move_to_end(key)
                return hit
        run = compute()
        with self._lock:
            self._runs[key] = run
            self._runs.move_to_end(key)
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)
        return run

    def clear(self) -> None:
        with self._lock:
            self._runs.clear()
