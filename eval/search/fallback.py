"""The fixed pipelines a procedure that recommends a pipeline falls back to.

``rwb tune``, ``rwb learn`` and ``rwb sweep`` never recommend a tuned or learned pipeline over
one the user already had without checking: each chooses, on the queries it may look at, among
its own candidates and every named fixed pipeline (``fixed_candidates``), and a candidate of its
own is taken only when it scores strictly higher than the best of those (``choose_fixed``).
"""

from __future__ import annotations

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.pipeline import PIPELINES, PipelineConfig


def fixed_candidates(c: Candidates, routes: tuple[str, ...] | None = None,
                     first: PipelineConfig | None = None) -> dict[str, PipelineConfig]:
    """The fixed pipelines a procedure that recommends a pipeline chooses its fallback from:
    ``first`` (wins a tie), then every named preset of ``retrieval.pipeline.PIPELINES`` the pool is
    deep enough for (``seed-adaptive-learned`` only where learned routes were fitted)."""
    out = {first.name: first} if first is not None else {}
    for name, cfg in PIPELINES.items():
        if name in out or cfg.path_depth > c.pool_depth:
            continue
        if name == "seed-adaptive-learned" and routes is None:
            continue
        out[name] = cfg
    return out


def choose_fixed(values: dict[str, np.ndarray], positions: np.ndarray) -> str:
    """The fixed pipeline with the best mean on ``positions`` (the first named on a tie): on a
    training part, the fallback a tuned or learned candidate must beat."""
    return max(values, key=lambda name: float(values[name][positions].mean()))
