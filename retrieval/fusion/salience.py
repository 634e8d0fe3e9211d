"""Salience: RRF relevance blended with reinforcement, recency and access.

``0.50·semantic + 0.20·reinforcement + 0.20·recency + 0.10·access`` where semantic is the
RRF score (``rrf_k``, unit weights) divided by the query's best RRF score, reinforcement and
access are ``log(x+1)/log(max+2)`` over the query's result set, and recency is
``exp(−ln2/half_life · days_old)`` (half-life 30 days).
Source: seed 000 ``compute_salience``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, Scored, finish, recency_decay, segment_max
from retrieval.fusion.rrf import RRFParams, rrf
from retrieval.params import Params, number


def _weight(default: float, label: str, help: str):
    return number(default, label, help, lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")


@dataclass(frozen=True)
class SalienceParams(Params):
    w_semantic: float = _weight(0.5, "w_semantic", "weight of the RRF score / the query's best")
    w_reinforcement: float = _weight(0.2, "w_reinforcement", "weight of log(reinforcement+1)/log(max+2)")
    w_recency: float = _weight(0.2, "w_recency", "weight of exp(−ln2/half_life · age)")
    w_access: float = _weight(0.1, "w_access", "weight of log(access_count+1)/log(max+2)")
    half_life_days: float = number(30.0, "recency half-life (days)", "seed 000: 30",
                                   lo=1.0, hi=365.0, step=1.0, min=0.0, max=1e6, min_exclusive=True)
    rrf_k: float = number(60.0, "rrf_k", "rank constant of the RRF behind the semantic term (seed 000: 60)",
                          lo=1.0, hi=200.0, step=1.0, min=0.0, max=1e6, min_exclusive=True)


def log_share(values: np.ndarray, c: Candidates, visible: np.ndarray) -> np.ndarray:
    """``log(x + 1) / log(max_x + 2)`` with max over the query's result set (seed 000)."""
    peak = segment_max(c, values, visible)
    return np.log1p(values) / np.log(peak + 2.0)


def salience(c: Candidates, visible: np.ndarray, depth: int, params: SalienceParams = SalienceParams()) -> Scored:
    """The seed 000 salience above; components are the four weighted terms."""
    fused = rrf(c, visible, depth, RRFParams(rrf_k=params.rrf_k)).score
    raw = np.where(visible, fused, 0.0)
    best = segment_max(c, raw, visible)
    semantic = np.where(best > 0, raw / np.where(best > 0, best, 1.0), 0.0)
    parts = {
        "semantic": params.w_semantic * semantic,
        "reinforcement": params.w_reinforcement * log_share(c.reinforcement.astype(np.float64), c, visible),
        "recency": params.w_recency * recency_decay(c.age_days, params.half_life_days),
        "access": params.w_access * log_share(c.access_count.astype(np.float64), c, visible),
    }
    return finish(sum(parts.values()), visible, parts)


FUSION = Fusion("salience", SalienceParams, salience,
                "0.5·semantic + 0.2·reinforcement + 0.2·recency + 0.1·access", "seed 000")
