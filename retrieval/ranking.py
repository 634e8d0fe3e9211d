"""Turn row scores into per-query rankings: sort, min score, max results, token budget.

Ties are broken deterministically by document id, so equal scores always give the
same order (and ranx gets strictly decreasing scores downstream).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidates import Candidates


@dataclass(frozen=True, eq=False)
class Ranking:
    """Kept candidate rows in rank order, grouped by query."""

    rows: np.ndarray        # candidate row index of each kept result
    query_idx: np.ndarray   # its query
    rank: np.ndarray        # 0-based rank within the query
    score: np.ndarray
    total_tokens: np.ndarray  # per query

    def for_query(self, qi: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.query_idx, [qi, qi + 1])
        return self.rows[lo:hi]


def rank_rows(c: Candidates, score: np.ndarray, max_results: int, min_score: float | None = None,
              token_budget: int | None = None, keep: np.ndarray | None = None) -> Ranking:
    """Sort each query's rows by (−score, doc id); drop −inf rows and rows under
    ``min_score`` (where ``keep`` is False); cut to ``max_results``; then accumulate
    token counts in rank order and stop before the first result that would exceed
    ``token_budget`` (seed 000's budget loop)."""
    candidate = np.isfinite(score)
    if min_score is not None:
        above = score >= min_score
        candidate &= above if keep is None else (above | keep)
    idx = np.flatnonzero(candidate)
    order = idx[np.lexsort((c.tie_key[idx], -score[idx], c.query_idx[idx]))]
    qidx = c.query_idx[order]
    starts = np.searchsorted(qidx, qidx, side="left")
    rank = np.arange(len(order)) - starts
    cut = rank < max_results
    order, qidx, rank = order[cut], qidx[cut], rank[cut]
    tokens = c.token_count[order].astype(np.int64)
    if token_budget is not None:
        running = np.cumsum(tokens)
        first = np.searchsorted(qidx, qidx, side="left")
        before = np.where(first > 0, running[first - 1], 0)
        # token counts are positive, so the running sum passes the budget once and for all
        within = running - before <= token_budget
        order, qidx, rank, tokens = order[within], qidx[within], rank[within], tokens[within]
    total = np.bincount(qidx, weights=tokens, minlength=c.n_queries).astype(np.int64)
    return Ranking(order, qidx, rank, score[order], total)

