"""Fusion strategies: a frozen config and a pure vectorised function each.

Every function maps (candidates, visible rows, config) to a ``Scored``: the score of
every row (−inf for rows the pipeline does not see) and its additive components
(they sum to the score), plus any multipliers applied. Functions never mutate input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.special import ndtr

from retrieval.candidates import Candidates
from retrieval.profiles import PRESETS, Profile, QualityFactors, preset

LN2 = math.log(2.0)
TEXT_NORMS = ("rank", "minmax", "zscore")


@dataclass(frozen=True)
class Scored:
    score: np.ndarray
    components: dict[str, np.ndarray]
    multipliers: dict[str, np.ndarray] = field(default_factory=dict)


def _positive(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"{name} must be greater than 0, got {value!r}")


def _non_negative(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value >= 0:
        raise ValueError(f"{name} must be ≥ 0, got {value!r}")


@dataclass(frozen=True)
class RRFParams:
    rrf_k: float = 60.0
    w_dense: float = 1.0
    w_sparse: float = 1.0

    def __post_init__(self):
        _positive("rrf_k", self.rrf_k)
        _non_negative("w_dense", self.w_dense)
        _non_negative("w_sparse", self.w_sparse)


@dataclass(frozen=True)
class WeightedParams:
    vector_weight: float = 0.7
    text_weight: float = 0.3
    text_norm: str = "rank"

    def __post_init__(self):
        _non_negative("vector_weight", self.vector_weight)
        _non_negative("text_weight", self.text_weight)
        if self.text_norm not in TEXT_NORMS:
            raise ValueError(f"text_norm must be one of {list(TEXT_NORMS)}, got {self.text_norm!r}")


@dataclass(frozen=True)
class AdaptiveParams:
    profile: Profile = field(default_factory=lambda: preset("concept"))
    profiles: tuple[Profile, ...] = PRESETS
    intent_router: bool = False
    half_life_days: float = 30.0

    def __post_init__(self):
        _positive("half_life_days", self.half_life_days)
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError(f"profile names must be unique, got {names}")

    def profile_named(self, name: str) -> Profile:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        return self.profile


@dataclass(frozen=True)
class SalienceParams:
    w_semantic: float = 0.5
    w_reinforcement: float = 0.2
    w_recency: float = 0.2
    w_access: float = 0.1
    half_life_days: float = 30.0

    def __post_init__(self):
        for name in ("w_semantic", "w_reinforcement", "w_recency", "w_access"):
            _non_negative(name, getattr(self, name))
        _positive("half_life_days", self.half_life_days)


# ---- per-query helpers ---------------------------------------------------------------

def _segment_max(c: Candidates, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Per-row maximum of ``values`` over the visible rows of the same query (0 if none)."""
    out = np.full(c.n_queries, -np.inf)
    np.maximum.at(out, c.query_idx[visible], values[visible])
    out[~np.isfinite(out)] = 0.0
    return out[c.query_idx]


def _segment_min(c: Candidates, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
    out = np.full(c.n_queries, np.inf)
    np.minimum.at(out, c.query_idx[visible], values[visible])
    out[~np.isfinite(out)] = 0.0
    return out[c.query_idx]


def _in_path(ranks: np.ndarray, depth: int) -> np.ndarray:
    return (ranks >= 0) & (ranks < depth)


def recency_decay(age_days: np.ndarray, half_life_days: float) -> np.ndarray:
    """``exp(−ln2 / half_life · age)`` (seed 000: 7 d → 0.851, 30 d → 0.5); undated → 0."""
    decay = np.exp(-(LN2 / half_life_days) * np.asarray(age_days, dtype=np.float64))
    return np.where(np.isnan(decay), 0.0, decay)


def quality_multiplier(confidence: np.ndarray, vitality: np.ndarray, q: QualityFactors) -> tuple[np.ndarray, np.ndarray]:
    """(F_conf(C), F_vit(V)) as step functions; see ``retrieval.profiles``."""
    f_conf = np.where(confidence >= q.conf_high, q.conf_high_factor,
                      np.where(confidence < q.conf_low, q.conf_low_factor, q.conf_mid_factor))
    f_vit = np.where(vitality > q.vit_high, q.vit_high_factor,
                     np.where(vitality < q.vit_low, q.vit_low_factor, q.vit_mid_factor))
    return f_conf, f_vit


def _finish(score: np.ndarray, visible: np.ndarray, components: dict, multipliers: dict | None = None) -> Scored:
    """Hide unseen rows behind −inf; components are left as computed (only a ranked, hence
    visible, row's components are ever read), which keeps every knob move cheap."""
    return Scored(np.where(visible, score, -np.inf), components, multipliers or {})


# ---- strategies ------------------------------------------------------------------------

def vector(c: Candidates, visible: np.ndarray, depth: int, params: None = None) -> Scored:
    """Vector-only baseline: cosine similarity of the dense path's top ``depth``."""
    seen = visible & _in_path(c.dense_rank, depth)
    sim = c.dense_sim.astype(np.float64)
    return _finish(sim, seen, {"dense": sim})


def bm25(c: Candidates, visible: np.ndarray, depth: int, params: None = None) -> Scored:
    """BM25-only baseline: Tantivy's BM25 score of the keyword path's top ``depth``."""
    seen = visible & _in_path(c.bm25_rank, depth)
    score = c.bm25_score.astype(np.float64)
    return _finish(score, seen, {"sparse": score})


def rrf(c: Candidates, visible: np.ndarray, depth: int, params: RRFParams) -> Scored:
    """Reciprocal rank fusion (seed 000 ``_rrf_merge``): ``Σ_i w_i / (rrf_k + rank_i + 1)``,
    rank 0-indexed, summed over the paths that returned the document."""
    dense = np.where(_in_path(c.dense_rank, depth), params.w_dense / (params.rrf_k + c.dense_rank + 1.0), 0.0)
    sparse = np.where(_in_path(c.bm25_rank, depth), params.w_sparse / (params.rrf_k + c.bm25_rank + 1.0), 0.0)
    return _finish(dense + sparse, visible, {"dense": dense, "sparse": sparse})


def text_scores(c: Candidates, visible: np.ndarray, depth: int, norm: str) -> np.ndarray:
    """BM25 mapped to a comparable scale, 0 where the keyword path missed the document.

    ``rank``: ``1 / (1 + rank)`` (OpenClaw ``bm25RankToScore``); ``minmax``: (s − min)/(max − min)
    per query, 1.0 when all hits tie (a hit beats a miss); ``zscore``: Φ((s − mean)/std),
    the standard normal CDF of the per-query z-score, so every hit lies in (0, 1) and
    still beats a miss (Φ(0) = 0.5 when std is 0)."""
    hit = visible & _in_path(c.bm25_rank, depth)
    raw = c.bm25_score.astype(np.float64)
    if norm == "rank":
        out = 1.0 / (1.0 + np.maximum(0, c.bm25_rank))
    elif norm == "minmax":
        lo, hi = _segment_min(c, raw, hit), _segment_max(c, raw, hit)
        span = hi - lo
        out = np.where(span > 0, (raw - lo) / np.where(span > 0, span, 1.0), 1.0)
    else:
        n = np.bincount(c.query_idx[hit], minlength=c.n_queries).astype(np.float64)
        total = np.bincount(c.query_idx[hit], weights=raw[hit], minlength=c.n_queries)
        mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)
        sq = np.bincount(c.query_idx[hit], weights=(raw[hit] - mean[c.query_idx[hit]]) ** 2, minlength=c.n_queries)
        std = np.sqrt(np.divide(sq, n, out=np.zeros_like(sq), where=n > 0))[c.query_idx]
        out = ndtr(np.where(std > 0, (raw - mean[c.query_idx]) / np.where(std > 0, std, 1.0), 0.0))
    return np.where(hit, out, 0.0)


def weighted(c: Candidates, visible: np.ndarray, depth: int, params: WeightedParams) -> Scored:
    """Weighted union (OpenClaw ``mergeHybridResults``, Lingxi F2):
    ``vector_weight · cosine + text_weight · text_score``; a path that missed the
    document contributes 0. When the vector path returned nothing at all for a query
    (embedder or vector store unavailable: keyword-only), the text score carries both
    weights, as OpenClaw's FTS-only mode scores by the text score alone; otherwise a
    ``min_score`` above ``text_weight`` would drop every keyword hit."""
    in_dense = _in_path(c.dense_rank, depth)
    vec = np.where(in_dense, c.dense_sim.astype(np.float64), 0.0)
    text = text_scores(c, visible, depth, params.text_norm)
    dense_found = np.bincount(c.query_idx[visible & in_dense], minlength=c.n_queries) > 0
    text_weight = np.where(dense_found[c.query_idx], params.text_weight,
                           params.text_weight + params.vector_weight)
    dense, sparse = params.vector_weight * vec, text_weight * text
    return _finish(dense + sparse, visible, {"dense": dense, "sparse": sparse})


def profile_arrays(c: Candidates, params: AdaptiveParams) -> tuple[list[Profile], np.ndarray]:
    """Profiles in use and each row's profile index (the routed one, or the fixed one)."""
    if not params.intent_router:
        return [params.profile], np.zeros(c.n_rows, dtype=np.int64)
    routes, per_query = np.unique(np.asarray(c.intent_route, dtype=object).astype(str), return_inverse=True)
    return [params.profile_named(str(name)) for name in routes], per_query[c.query_idx]


def adaptive(c: Candidates, visible: np.ndarray, depth: int, params: AdaptiveParams) -> Scored:
    """Adaptive quality fusion (seed 001 ``AdaptiveQualityFusion``):
    ``S = (w_dense·S_dense + w_sparse·S_sparse + w_time·S_time + w_graph·S_graph) × F_conf(C) × F_vit(V)``.

    S_dense: cosine clipped to [0, 1]; S_sparse: BM25 / the query's best BM25 (0 when
    the keyword path missed it); S_time: 1/0 inside/outside the time window the query
    names, else recency decay with ``half_life_days``; S_graph: 1 when linked to a top-3
    hit. Weights and F_conf/F_vit come from the profile (routed per query when
    ``intent_router``)."""
    profiles, which = profile_arrays(c, params)

    def per_row(get) -> np.ndarray:
        return np.asarray([get(p) for p in profiles], dtype=np.float64)[which]

    hit = visible & _in_path(c.bm25_rank, depth)
    s_dense = np.clip(c.dense_sim.astype(np.float64), 0.0, 1.0)
    best = _segment_max(c, c.bm25_score.astype(np.float64), hit)
    s_sparse = np.where(hit & (best > 0), c.bm25_score / np.where(best > 0, best, 1.0), 0.0)
    window = c.in_window.astype(np.float64)
    s_time = np.where(np.isnan(window), recency_decay(c.age_days, params.half_life_days), window)
    s_graph = c.graph.astype(np.float64)
    f_conf = np.ones(c.n_rows)
    f_vit = np.ones(c.n_rows)
    for k, profile in enumerate(profiles):
        rows = which == k
        fc, fv = quality_multiplier(c.confidence[rows], c.vitality[rows], profile.quality)
        f_conf[rows], f_vit[rows] = fc, fv
    m = f_conf * f_vit
    parts = {
        "dense": per_row(lambda p: p.w_dense) * s_dense * m,
        "sparse": per_row(lambda p: p.w_sparse) * s_sparse * m,
        "time": per_row(lambda p: p.w_time) * s_time * m,
        "graph": per_row(lambda p: p.w_graph) * s_graph * m,
    }
    total = parts["dense"] + parts["sparse"] + parts["time"] + parts["graph"]
    return _finish(total, visible, parts, {"confidence": f_conf, "vitality": f_vit})


def log_share(values: np.ndarray, c: Candidates, visible: np.ndarray) -> np.ndarray:
    """``log(x + 1) / log(max_x + 2)`` with max over the query's result set (seed 000)."""
    peak = _segment_max(c, values, visible)
    return np.log1p(values) / np.log(peak + 2.0)


def salience(c: Candidates, visible: np.ndarray, depth: int, params: SalienceParams,
             rrf_params: RRFParams = RRFParams()) -> Scored:
    """Salience (seed 000 ``compute_salience``):
    ``0.50·semantic + 0.20·reinforcement + 0.20·recency + 0.10·access`` where semantic is
    the RRF score divided by the query's best RRF score, reinforcement and access are
    ``log(x+1)/log(max+2)`` over the query's result set, and recency is
    ``exp(−ln2/half_life · days_old)`` (half-life 30 days)."""
    fused = rrf(c, visible, depth, rrf_params).score
    raw = np.where(visible, fused, 0.0)
    best = _segment_max(c, raw, visible)
    semantic = np.where(best > 0, raw / np.where(best > 0, best, 1.0), 0.0)
    parts = {
        "semantic": params.w_semantic * semantic,
        "reinforcement": params.w_reinforcement * log_share(c.reinforcement.astype(np.float64), c, visible),
        "recency": params.w_recency * recency_decay(c.age_days, params.half_life_days),
        "access": params.w_access * log_share(c.access_count.astype(np.float64), c, visible),
    }
    return _finish(sum(parts.values()), visible, parts)


Fuser = Callable[..., Scored]
FUSERS: dict[str, Fuser] = {
    "vector": vector,
    "bm25": bm25,
    "rrf": rrf,
    "weighted": weighted,
    "adaptive": adaptive,
    "salience": salience,
}
