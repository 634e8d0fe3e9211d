"""The memorisation check of ``rwb learn``: does a model score queries of a group it was trained
on better than queries of a new group?"""

from __future__ import annotations

import math

import numpy as np

LEAK_MARGIN = 0.01


def memorisation_check(spec: str, by_query: np.ndarray, by_group: np.ndarray, n_groups: int) -> dict:
    """The same model's held-out values with folds by query and by group, per query: when the
    by-query figure is above the by-group one by more than ``LEAK_MARGIN`` and by more than two
    standard errors of the paired difference, the model scores queries of a group it was
    trained on better than queries of a new group — it memorised something of the group (a
    passage, a conversation) — and ``warn`` is True."""
    delta = np.asarray(by_query, dtype=np.float64) - np.asarray(by_group, dtype=np.float64)
    se = float(delta.std(ddof=1) / math.sqrt(len(delta))) if len(delta) > 1 else 0.0
    gap = float(delta.mean()) if len(delta) else 0.0
    return {"model": spec, "by_query": round(float(np.mean(by_query)), 6),
            "by_group": round(float(np.mean(by_group)), 6), "gap": round(gap, 6),
            "se": round(se, 6), "groups": int(n_groups),
            "warn": bool(gap > LEAK_MARGIN and gap > 2 * se)}
