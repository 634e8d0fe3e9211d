"""Scoring a whole query set from its candidate table: route, fuse, rank.

``fuse(candidates, config)`` routes and fuses every query (no index access, no ranking);
``ranked`` ranks fused scores into a ``PipelineRun``; ``run_pipeline`` is both. The
evaluators that score a configuration without building a ranking start from ``fuse``.
``routes``: per query, the profile a fitted intent router chose (``eval.learning.router``), an
argument over the one table — read by a fusion that follows the learned router, None where
none was fitted (the rules route).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion import FUSIONS, Scored
from retrieval.fusion.learned.features import FIXED_FEATURES, FIXED_PIPELINES
from retrieval.fusion._base import LazyComponents, recency_decay, segment_max, segment_min
from retrieval.pipeline.config import PipelineConfig
from retrieval.pipeline.presets import PIPELINES
from retrieval.ranking import Ranking, rank_rows

ROUTES = ("fast", "timeline", "hybrid")


@dataclass(frozen=True, eq=False)
class PipelineRun:
    config: PipelineConfig
    ranking: Ranking
    scored: Scored
    route: tuple[str, ...]     # per query
    profile: tuple[str, ...]   # per query ("" when no profile applies)
    routes: tuple[str, ...] | None = None  # the learned routes it was scored with (None: none fitted)


@dataclass(frozen=True, eq=False)
class Fused:
    """A pipeline's scores over a candidate table, with what ranking them needs
    (``rank_rows``'s arguments): the step before ranking, shared by ``run_pipeline`` and by
    the evaluators that score a configuration without building a ``Ranking`` (``eval.metrics.measure``)."""

    config: PipelineConfig
    table: Candidates                        # the keyword-match view the scores are over
    scored: Scored
    route: np.ndarray                        # per query: index into ROUTES
    max_results: int | np.ndarray            # one cap, or one per query
    min_score: float | None
    token_budget: int | np.ndarray | None    # one budget, or one per query (−1: none)
    keep: np.ndarray | None                  # rows ``min_score`` never drops (routed ones)
    depth: int | None = None                 # every row outside table.visible(depth) scores −inf
    routes: tuple[str, ...] | None = None    # the learned routes it was scored with


def all_hybrid(c: Candidates) -> np.ndarray:
    """Every query on the hybrid route (2)."""
    return np.full(c.n_queries, 2, dtype=np.int8)


def fuse(c: Candidates, config: PipelineConfig, routes: tuple[str, ...] | None = None) -> Fused:
    """Route and fuse every query of a candidate table (no ranking); ``routes``: the learned
    router's profile per query, for a fusion that follows it."""
    c = c.with_keyword_match(config.keyword_match)  # the BM25 path's OR, AND or technical list
    visible = c.visible(config.path_depth)
    route = all_hybrid(c)  # 0 fast, 1 timeline, 2 hybrid
    if config.fast_path or config.timeline_path:
        if config.fast_path:
            has = np.bincount(c.query_idx[c.via_fast], minlength=c.n_queries) > 0
            route[has] = 0
        if config.timeline_path:
            has = np.bincount(c.query_idx[c.via_timeline], minlength=c.n_queries) > 0
            route[(route == 2) & has & c.timeline] = 1
    routed = (config.fast_path or config.timeline_path) and bool((route < 2).any())
    row_route = route[c.query_idx] if routed else None
    hybrid_rows = row_route == 2 if routed else None
    fusion = FUSIONS[config.fusion]
    # every query hybrid (the usual case): the table's own visible mask, no copy
    scored = fusion.score(c, visible & hybrid_rows if routed else visible, config.path_depth, config.params,
                          **({"routes": routes} if fusion.routed else {}),
                          **({"fixed": fixed_pipeline_features(c)} if fusion.nested else {}))
    score = scored.score
    max_results, budget, keep = config.max_results, config.token_budget, None
    if routed:
        fast = (row_route == 0) & c.via_fast
        timeline = (row_route == 1) & c.via_timeline
        # file order within the query's own fast-path rows, so a score never depends on
        # which other rows (or queries) the candidate table happens to hold
        last_line = np.zeros(c.n_queries)
        np.maximum.at(last_line, c.query_idx[fast], c.line_start[fast])
        file_order = 1.0 - c.line_start / (1.0 + last_line[c.query_idx])
        newest = recency_decay(created_age(c), 30.0)  # newest DATE first, not edit time
        score = np.where(fast, file_order, np.where(timeline, newest, score))
        components = {k: np.where(hybrid_rows, v, 0.0) for k, v in scored.components.items()}
        components["fast"] = np.where(fast, file_order, 0.0)
        components["timeline"] = np.where(timeline, newest, 0.0)
        scored = Scored(score, components, scored.multipliers)
        # seed 000: the fast path returns the whole file (no cap, no budget); the timeline
        # path reads the journal until the token budget is full (no cap)
        widest = int(np.diff(c.offsets).max(initial=1)) or 1
        max_results = np.where(route == 2, config.max_results, widest)
        if budget is not None:
            budget = np.where(route == 0, -1, budget)
        keep = ~hybrid_rows
    if config.min_similarity is not None:
        # seed 004: recall first — the floor applies to rows only the vector path found; a
        # keyword hit (within the path depth) is never dropped by it
        with_vector = np.array([not _keyword_only(notes) for notes in c.degraded], dtype=bool)
        keyword_hit = (c.bm25_rank >= 0) & (c.bm25_rank < config.path_depth)
        below = (c.dense_sim < config.min_similarity) & with_vector[c.query_idx] & ~keyword_hit
        if routed:
            below &= hybrid_rows
        score = np.where(below, -np.inf, score)
        scored = Scored(score, scored.components, scored.multipliers)
    fused = Fused(config, c, scored, route, max_results, config.min_score, budget, keep,
                  None if routed else config.path_depth, routes)
    return _by_kind(fused, routes)


def _by_kind(fused: Fused, routes: tuple[str, ...] | None) -> Fused:
    """A learned model restricted to the kinds of query it was trained on
    (``LearnedParams.kinds``): every query whose labelled kind (``Candidates.query_kinds``) is
    another gets its ``fallback`` pipeline's scores, route, cap and budget instead — the whole
    fixed pipeline for that query. A query without a label (a free query) gets the model."""
    params, c = fused.config.params, fused.table
    kinds = getattr(params, "kinds", ())
    if not kinds or not c.query_kinds:
        return fused
    other = np.array([bool(k) and k not in kinds for k in c.query_kinds], dtype=bool)
    if not other.any():
        return fused
    fallback = PIPELINES.get(params.fallback)
    if fallback is None:
        raise ValueError(f"the learned model's fallback {params.fallback!r} is not a named pipeline; "
                         f"choose from {sorted(PIPELINES)}")
    return merge_per_query(fused, fuse(c, fallback, routes), other)


def merge_per_query(a: Fused, b: Fused, use_b: np.ndarray) -> Fused:
    """``a``'s scoring for most queries and ``b``'s for the queries ``use_b`` marks: each side's
    scores with its own ``min_score`` already applied (a row under it becomes −inf unless kept),
    per-query routes, caps and budgets (−1: none) — ranked exactly as each side alone ranks
    those queries."""
    c = a.table
    n_q = c.n_queries

    def cut(f: Fused) -> np.ndarray:
        score = np.asarray(f.scored.score, dtype=np.float64)
        if f.min_score is not None:
            kept = f.keep if f.keep is not None else np.zeros(c.n_rows, dtype=bool)
            score = np.where((score < f.min_score) & ~kept, -np.inf, score)
        return score

    def per_query(value, none) -> np.ndarray:
        return np.broadcast_to(np.asarray(none if value is None else value, dtype=np.int64), (n_q,))

    rows_b = use_b[c.query_idx]
    score = np.where(rows_b, cut(b), cut(a))
    mine = a.scored.components
    components = LazyComponents(lambda: {**{k: np.where(rows_b, 0.0, v) for k, v in mine.items()},
                                          "fallback": np.where(rows_b, score, 0.0)})
    scored = Scored(score, components, a.scored.multipliers)
    return Fused(a.config, c, scored, np.where(use_b, b.route, a.route),
                 np.where(use_b, per_query(b.max_results, 0), per_query(a.max_results, 0)), None,
                 np.where(use_b, per_query(b.token_budget, -1), per_query(a.token_budget, -1)), None,
                 None, a.routes)


def fixed_pipeline_features(c: Candidates) -> np.ndarray:
    """(rows, ``retrieval.fusion.learned.features.FIXED_FEATURES``): each fixed pipeline's per-query min-max
    score and reciprocal rank (``fuse`` at the pipeline's preset; ranked by (−score, doc id) as
    ``rank_rows`` ranks), once per table: the columns a nested fusion (the learned one) is given."""

    def build():
        widest = int(np.diff(c.offsets).max(initial=1)) or 1
        scores, rranks = [], []
        for name in FIXED_PIPELINES:
            score = np.asarray(fuse(c, PIPELINES[name]).scored.score, dtype=np.float64)
            finite = np.isfinite(score)
            lo = segment_min(c, score, finite)
            hi = segment_max(c, score, finite)
            span = hi - lo
            scores.append(
                np.where(finite, np.where(span > 0, (score - lo) / np.where(span > 0, span, 1.0), 1.0), 0.0)
            )
            ranking = rank_rows(c, score, widest)
            rrank = np.zeros(c.n_rows)
            rrank[ranking.rows] = 1.0 / (1.0 + ranking.rank)
            rranks.append(rrank)
        return np.column_stack(scores + rranks) if c.n_rows else np.zeros((0, len(FIXED_FEATURES)))

    return c.derived(("fixed pipeline features",), build)


def run_pipeline(c: Candidates, config: PipelineConfig, routes: tuple[str, ...] | None = None) -> PipelineRun:
    """Route, fuse and rank every query of a candidate table (``routes``: as ``fuse``)."""
    return ranked(fuse(c, config, routes))


def ranked(fused: Fused) -> PipelineRun:
    """Rank fused scores: the ranked run, with each query's route and profile."""
    c, config = fused.table, fused.config
    ranking = rank_rows(c, fused.scored.score, fused.max_results, fused.min_score, fused.token_budget,
                        keep=fused.keep)
    fusion = FUSIONS[config.fusion]
    routes = tuple(np.array([ROUTES[0], ROUTES[1], fusion.route], dtype=object)[fused.route].tolist())
    if fusion.route == "hybrid" and any(c.degraded):
        # no query vector (embedder or vectors unavailable): only the keyword path answered
        routes = tuple("keyword-only" if r == "hybrid" and _keyword_only(notes) else r
                       for r, notes in zip(routes, c.degraded))
    profiles = (fusion.profile_names(c, config.params, fused.routes) if fusion.profile_names
                else ("",) * c.n_queries)
    return PipelineRun(config, ranking, fused.scored, routes, profiles, fused.routes)


def created_age(c: Candidates) -> np.ndarray:
    """Days since each row's memory was created (its journal date), the timeline path's order."""
    return c.cols["created_age"]


def _keyword_only(notes: tuple[str, ...]) -> bool:
    return any(note.endswith("keyword-only") for note in notes)
