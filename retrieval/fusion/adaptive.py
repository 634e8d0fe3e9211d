"""Adaptive quality fusion with intent profiles.

``S = (w_dense·S_dense + w_sparse·S_sparse + w_time·S_time + w_graph·S_graph) × F_conf(C) × F_vit(V)``

S_dense: cosine clipped to [0, 1]; S_sparse: BM25 / the query's best BM25 (0 when the
keyword path missed it); S_time: 1/0 inside/outside the time window the query names, else
recency decay with ``half_life_days``; S_graph: 1 when linked to a top-3 hit. Weights and
the step functions F_conf/F_vit come from the profile — one fixed profile, or the one the
intent router picks per query (``intent_router``): by the seed's rules, or (``router =
"learned"``) by the logistic regression ``eval.learning.router`` fits on labelled intents, whose
routes given as ``routes`` (``retrieval.pipeline.fuse``'s argument; the rules when none).
Source: seed 001 ``AdaptiveQualityFusion`` (profiles and factors in ``retrieval.profiles``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, Scored, finish, in_path, recency_decay, segment_max
from retrieval.params import Params, choice, flag, number
from retrieval.profiles import PRESETS, Profile, QualityFactors, preset


@dataclass(frozen=True)
class AdaptiveParams(Params):
    profile: Profile = field(default_factory=lambda: preset("concept"))
    profiles: tuple[Profile, ...] = PRESETS
    intent_router: bool = flag(False, "intent router", "pick the profile per query from its intent (seed 001)")
    router: str = choice("rules", ("rules", "learned"), "router",
                         "rules: seed 001's regex router · learned: a logistic regression on query embeddings "
                         "fitted to the dataset's labelled intents (cross-validated; the rules without labels)")
    half_life_days: float = number(30.0, "recency half-life (days)", "S_time outside a named window",
                                   lo=1.0, hi=365.0, step=1.0, min=0.0, max=1e6, min_exclusive=True)

    def check(self) -> None:
        if not isinstance(self.profile, Profile):
            raise ValueError(f"profile must be a profile table or a preset name, got {self.profile!r}")
        if not isinstance(self.profiles, tuple) or not all(isinstance(p, Profile) for p in self.profiles):
            raise ValueError("profiles must be profile tables")
        names = [p.name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError(f"profile names must be unique, got {names}")

    def active(self, name: str) -> bool:
        """The router uses ``profiles``; without it, the one ``profile``."""
        if name == "profile":
            return not self.intent_router
        if name in ("profiles", "router"):
            return self.intent_router
        return True

    def profile_named(self, name: str) -> Profile:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        return self.profile


def quality_bands(confidence: np.ndarray, vitality: np.ndarray, q: QualityFactors
                  ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The steps of F_conf and F_vit under ``q``'s thresholds, as masks ((high, low) of
    confidence, (high, low) of vitality): ``C ≥ conf_high`` is high and ``C < conf_low`` low;
    ``V > vit_high`` high and ``V < vit_low`` low; a document in neither is mid."""
    return ((confidence >= q.conf_high, confidence < q.conf_low),
            (vitality > q.vit_high, vitality < q.vit_low))


def quality_multiplier(confidence: np.ndarray, vitality: np.ndarray, q: QualityFactors
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(F_conf(C), F_vit(V)) as step functions over ``quality_bands`` (``retrieval.profiles``)."""
    (c_high, c_low), (v_high, v_low) = quality_bands(confidence, vitality, q)
    f_conf = np.where(c_high, q.conf_high_factor,
                      np.where(c_low, q.conf_low_factor, q.conf_mid_factor))
    f_vit = np.where(v_high, q.vit_high_factor,
                     np.where(v_low, q.vit_low_factor, q.vit_mid_factor))
    return f_conf, f_vit


def band_counts(confidence: np.ndarray, vitality: np.ndarray, q: QualityFactors
                ) -> dict[str, tuple[int, int, int]]:
    """Documents in each confidence and vitality band, (high, mid, low), under ``q``'s
    thresholds (``quality_bands``)."""
    out = {}
    bands = quality_bands(confidence, vitality, q)
    for name, (high, low) in zip(("confidence", "vitality"), bands):
        n_high, n_low = int(high.sum()), int(low.sum())
        out[name] = (n_high, len(high) - n_high - n_low, n_low)
    return out


def query_routes(c: Candidates, params: AdaptiveParams, routes: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """Each query's routed profile name: the learned router's (``routes``) when chosen and
    fitted, else the rules'."""
    if routes is not None and len(routes) != c.n_queries:
        raise ValueError(f"{len(routes)} learned routes for {c.n_queries} queries")
    return routes if routes is not None and params.router == "learned" else c.intent_route


def profile_arrays(c: Candidates, params: AdaptiveParams,
                   routes: tuple[str, ...] | None = None) -> tuple[list[Profile], np.ndarray]:
    """Profiles in use and each row's profile index (the routed one, or the fixed one)."""
    if not params.intent_router:
        return [params.profile], np.zeros(c.n_rows, dtype=np.int64)
    names, per_query = np.unique(np.asarray(query_routes(c, params, routes), dtype=object).astype(str),
                                 return_inverse=True)
    return [params.profile_named(str(name)) for name in names], per_query[c.query_idx]


def profile_names(c: Candidates, params: AdaptiveParams, routes: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The profile applied to each query."""
    if not params.intent_router:
        return (params.profile.name,) * c.n_queries
    return tuple(params.profile_named(route).name for route in query_routes(c, params, routes))


def signals(c: Candidates, visible: np.ndarray, depth: int, half_life_days: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(S_dense, S_sparse, S_time, S_graph)`` per row, as the module docstring defines them."""
    hit = visible & in_path(c.bm25_rank, depth)
    s_dense = np.clip(c.dense_sim.astype(np.float64), 0.0, 1.0)
    best = segment_max(c, c.bm25_score.astype(np.float64), hit)
    s_sparse = np.where(hit & (best > 0), c.bm25_score / np.where(best > 0, best, 1.0), 0.0)
    window = c.in_window.astype(np.float64)
    s_time = np.where(np.isnan(window), recency_decay(c.age_days, half_life_days), window)
    return s_dense, s_sparse, s_time, c.graph.astype(np.float64)


def adaptive(c: Candidates, visible: np.ndarray, depth: int, params: AdaptiveParams = AdaptiveParams(),
             routes: tuple[str, ...] | None = None) -> Scored:
    """The seed 001 score above, per row, with the multipliers reported separately."""
    profiles, which = profile_arrays(c, params, routes)

    def per_row(get) -> np.ndarray:
        return np.asarray([get(p) for p in profiles], dtype=np.float64)[which]

    s_dense, s_sparse, s_time, s_graph = signals(c, visible, depth, params.half_life_days)
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
    return finish(total, visible, parts, {"confidence": f_conf, "vitality": f_vit})


FUSION = Fusion("adaptive", AdaptiveParams, adaptive,
                "(w·S_dense + w·S_sparse + w·S_time + w·S_graph) × F_conf × F_vit", "seed 001",
                variants=(AdaptiveParams(intent_router=True),) + tuple(AdaptiveParams(profile=p) for p in PRESETS),
                profile_names=profile_names, routed=True)
