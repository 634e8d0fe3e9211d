"""The NumPy ranking and evaluator that the compiled kernels replaced, kept as the reference
the kernels must equal bit for bit (``tests/retrieval/test_kernels.py``): a padded (queries × widest pool)
matrix, a stable argsort per query, ``bincount`` sums per metric."""

from __future__ import annotations

import weakref

import numpy as np

from retrieval.candidate_table import Candidates
from eval.metrics.measure import parse_metric
from retrieval.ranking import Ranking

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


def rank_rows_numpy(c: Candidates, score: np.ndarray, max_results: int | np.ndarray, min_score: float | None = None,
              token_budget: int | np.ndarray | None = None, keep: np.ndarray | None = None) -> Ranking:
    """Sort each query's rows by (−score, doc id); drop −inf rows and rows under
    ``min_score`` (where ``keep`` is False); cut to ``max_results``; then accumulate
    token counts in rank order and stop before the first result that would exceed
    ``token_budget`` (seed 000's budget loop).

    ``max_results`` and ``token_budget`` may be per-query arrays (a route that fills the
    budget instead of stopping at a count, or returns a whole file whatever its size);
    a budget of −1 in such an array means none."""
    score = np.asarray(score, dtype=np.float64)
    per_query_max = np.ndim(max_results) > 0
    if per_query_max:
        limits = np.asarray(max_results, dtype=np.int64)
        max_results = int(limits.max(initial=1))
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
    if per_query_max:
        kept &= np.arange(top)[None, :] < limits[:, None]
    if token_budget is not None:
        tokens = np.append(c.token_count, 0)[rows].astype(np.int64)
        budget = np.asarray(token_budget, dtype=np.int64)
        if budget.ndim:
            budget = np.where(budget < 0, np.iinfo(np.int64).max, budget)[:, None]
        # token counts are positive, so the running sum passes the budget once and for all
        kept &= np.cumsum(np.where(kept, tokens, 0), axis=1) <= budget
    qidx, rank = np.nonzero(kept)
    rows = rows[qidx, rank]
    tokens = c.token_count[rows].astype(np.int64)
    total = np.bincount(qidx, weights=tokens, minlength=c.n_queries).astype(np.int64)
    return Ranking(rows, qidx.astype(c.query_idx.dtype), rank, score[rows], total)


def per_query_numpy(c: Candidates, judged, ranking: Ranking, metrics) -> dict[str, np.ndarray]:
    """Each metric's value for every query (NaN for queries without relevant judgments)."""
    out: dict[str, np.ndarray] = {}
    n_q = c.n_queries
    n_rel = judged.n_relevant.astype(np.float64)
    safe_rel = np.where(n_rel > 0, n_rel, 1.0)
    shared: dict[int, tuple] = {}  # per cutoff: the top-k slice, computed once for all metrics
    for name in metrics:
        metric, k = parse_metric(name)
        if k not in shared:
            top = ranking.rank < k if k else np.ones(len(ranking.rank), dtype=bool)
            rows, qidx, rank = ranking.rows[top], ranking.query_idx[top], ranking.rank[top]
            gains = judged.grade[rows]
            relevant = gains > 0
            hits = np.bincount(qidx[relevant], minlength=n_q).astype(np.float64)
            shared[k] = (qidx, rank, gains, relevant, hits)
        qidx, rank, gains, relevant, hits = shared[k]
        if metric in ("ndcg", "ndcg_burges"):
            gain = (lambda g: g) if metric == "ndcg" else (lambda g: 2.0 ** g - 1.0)
            dcg = np.bincount(qidx, weights=gain(gains) / np.log2(rank + 2.0), minlength=n_q)
            width = min(k, judged.ideal.shape[1])
            idcg = (gain(judged.ideal[:, :width]) / np.log2(np.arange(width) + 2.0)).sum(axis=1)
            value = np.divide(dcg, idcg, out=np.zeros(n_q), where=idcg > 0)
        elif metric == "recall":
            value = hits / safe_rel
        elif metric == "precision":
            value = hits / k
        elif metric == "hit_rate":
            value = (hits > 0).astype(np.float64)
        elif metric == "mrr":
            value = np.zeros(n_q)
            rq, rr = qidx[relevant], rank[relevant]  # grouped by query, in rank order
            first = np.flatnonzero(np.r_[True, rq[1:] != rq[:-1]]) if len(rq) else rq
            value[rq[first]] = 1.0 / (rr[first] + 1.0)
        else:  # map
            rq = qidx[relevant]
            # running count of relevant results within each query, in rank order
            running = np.arange(1, len(rq) + 1) - np.searchsorted(rq, rq, side="left")
            value = np.bincount(rq, weights=running / (rank[relevant] + 1.0), minlength=n_q) / safe_rel
        out[name] = np.where(judged.judged, value, np.nan)
    return out
