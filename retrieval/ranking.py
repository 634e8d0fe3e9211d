"""Turn row scores into per-query rankings: sort, min score, max results, token budget.

Ties are broken deterministically by document id, so equal scores always give the
same order (and ranx gets strictly decreasing scores downstream).

Ranking runs on every slider move and thousands of times per sweep, so it is one compiled
pass per query (``retrieval.kernels``) over the query's rows in document-id order, which the
candidate table prepared when it was built (``Candidates.tie_order``): a bounded sorted buffer picks the top ``max_results`` by
(−score, doc id) without sorting the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval import kernels
from retrieval.candidate_table import Candidates


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


def rank_rows(c: Candidates, score: np.ndarray, max_results: int | np.ndarray, min_score: float | None = None,
              token_budget: int | np.ndarray | None = None, keep: np.ndarray | None = None) -> Ranking:
    """Sort each query's rows by (−score, doc id); drop −inf rows and rows under
    ``min_score`` (where ``keep`` is False); cut to ``max_results``; then accumulate
    token counts in rank order and stop before the first result that would exceed
    ``token_budget`` (seed 000's budget loop).

    ``max_results`` and ``token_budget`` may be per-query arrays (a route that fills the
    budget instead of stopping at a count, or returns a whole file whatever its size);
    a budget of −1 in such an array means none.

    NaN scores are never kept; a ``+inf`` score takes its place in the order but is not
    kept either (only finite scores rank)."""
    score = np.ascontiguousarray(score, dtype=np.float64)
    order, offsets, tokens, width = c.tie_order, c.order_offsets, c.row_tokens, c.widest
    limits = budgets = None
    if np.ndim(max_results) > 0:
        limits = np.ascontiguousarray(max_results, dtype=np.int64)
        max_results = int(limits.max(initial=1))
    if token_budget is not None and np.ndim(token_budget) > 0:
        budgets = np.asarray(token_budget, dtype=np.int64)
        budgets = np.ascontiguousarray(np.where(budgets < 0, np.iinfo(np.int64).max, budgets))
        token_budget = None
    top = min(int(max_results), width)
    rows, qidx, rank, total = kernels.rank(score, order, offsets, top, tokens, min_score, keep, token_budget,
                                           limits, budgets)
    return Ranking(rows, qidx.astype(c.query_idx.dtype), rank, score[rows], total)
