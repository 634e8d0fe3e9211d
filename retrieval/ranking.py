"""Turn row scores into per-query rankings: sort, min score, max results, token budget.

Ties are broken deterministically by document id, so equal scores always give the
same order (and ranx gets strictly decreasing scores downstream).

Ranking runs on every slider move and thousands of times per sweep, so it works on a
padded (queries × widest pool) matrix whose rows are pre-sorted by document id: a
stable sort on the score alone then yields (−score, doc id) order.
"""

from __future__ import annotations

import weakref
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


_LAYOUTS: "weakref.WeakKeyDictionary[Candidates, np.ndarray]" = weakref.WeakKeyDictionary()


def _layout(c: Candidates) -> np.ndarray:
    """(Q, W) matrix of row indices, each query's rows in document-id order; padding = n_rows."""
    layout = _LAYOUTS.get(c)
    if layout is None:
        order = np.lexsort((c.tie_key, c.query_idx))
        qidx = c.query_idx[order]
        position = np.arange(len(order)) - c.offsets[qidx]
        width = int(np.diff(c.offsets).max(initial=0)) or 1
        layout = np.full((c.n_queries, width), c.n_rows, dtype=np.int64)
        layout[qidx, position] = order
        _LAYOUTS[c] = layout
    return layout


def rank_rows(c: Candidates, score: np.ndarray, max_results: int, min_score: float | None = None,
              token_budget: int | None = None, keep: np.ndarray | None = None) -> Ranking:
    """Sort each query's rows by (−score, doc id); drop −inf rows and rows under
    ``min_score`` (where ``keep`` is False); cut to ``max_results``; then accumulate
    token counts in rank order and stop before the first result that would exceed
    ``token_budget`` (seed 000's budget loop)."""
    score = np.asarray(score, dtype=np.float64)
    if min_score is not None:
        below = score < min_score
        if keep is not None:
            below &= ~keep
        score = np.where(below, -np.inf, score)
    layout = _layout(c)
    padded = np.append(score, -np.inf)[layout]
    top = min(max_results, layout.shape[1])
    order = np.argsort(-padded, axis=1, kind="stable")[:, :top]
    rows = np.take_along_axis(layout, order, axis=1)
    kept = np.isfinite(np.take_along_axis(padded, order, axis=1))
    if token_budget is not None:
        tokens = np.append(c.token_count, 0)[rows].astype(np.int64)
        # token counts are positive, so the running sum passes the budget once and for all
        kept &= np.cumsum(np.where(kept, tokens, 0), axis=1) <= token_budget
    qidx, rank = np.nonzero(kept)
    rows = rows[qidx, rank]
    tokens = c.token_count[rows].astype(np.int64)
    total = np.bincount(qidx, weights=tokens, minlength=c.n_queries).astype(np.int64)
    return Ranking(rows, qidx.astype(c.query_idx.dtype), rank, score[rows], total)
