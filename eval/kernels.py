"""Compiled metric kernels (numba): a ranking's per-query sums in one pass, and a whole batch of
configurations scored from their fused scores without building a ranking for any of them.

``cut_stats`` walks a ``Ranking`` (rows grouped by query, in rank order) once per cutoff and
accumulates what every metric of ``eval.fast`` needs: hits, DCG, the reciprocal rank of the
first relevant result and the average-precision sum. The sums run in rank order from 0.0, the
order ``numpy.bincount`` adds its weights in, so every value equals the NumPy evaluator's bit
for bit (``tests/test_kernels.py``).

``batch_values`` is the sweep's inner loop: for each configuration (a row of a score matrix)
and each query it selects the top rows with ``retrieval.kernels.select_query`` — the same
selection, ties and token budget as ``rank_rows`` — and turns them straight into one metric's
value. ``finish`` is the one place the per-query sums become metric values; both paths use it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from retrieval.kernels import buffer_size, select_query

KINDS = ("ndcg", "recall", "precision", "mrr", "hit_rate", "map", "ndcg_burges")
"""Metric kinds by code (the index into this tuple)."""


@njit(cache=True, nogil=True, error_model="numpy")
def cut_stats(rows, qidx, rank, grade, gain, k, disc, hits, dcg, rr, ap):
    """Per-query sums over the entries with ``rank < k`` (all of them when ``k`` is 0):
    relevant hits, Σ gain/log2(rank+2), 1/(rank+1) of the first relevant entry, and
    Σ (relevant so far)/(rank+1) over the relevant entries. Outputs start zeroed."""
    for i in range(len(rows)):
        r = rank[i]
        if k > 0 and r >= k:
            continue
        q = qidx[i]
        row = rows[i]
        dcg[q] += gain[row] / disc[r]
        if grade[row] > 0:
            hits[q] += 1.0
            if hits[q] == 1.0:
                rr[q] = 1.0 / (r + 1.0)
            ap[q] += hits[q] / (r + 1.0)


@njit(cache=True, nogil=True, error_model="numpy")
def finish(kind, k, hits, dcg, rr, ap, idcg, safe_rel, judged):
    """One query's metric value from its sums (NaN for a query that does not count)."""
    if not judged:
        return np.nan
    if kind == 0 or kind == 6:
        return dcg / idcg if idcg > 0 else 0.0
    if kind == 1:
        return hits / safe_rel
    if kind == 2:
        return hits / k
    if kind == 3:
        return rr
    if kind == 4:
        return 1.0 if hits > 0 else 0.0
    return ap / safe_rel


@njit(cache=True, nogil=True, error_model="numpy")
def finish_all(kind, k, hits, dcg, rr, ap, idcg, safe_rel, judged, out):
    for q in range(len(out)):
        out[q] = finish(kind, k, hits[q], dcg[q], rr[q], ap[q], idcg[q], safe_rel[q], judged[q])


@njit(cache=True, nogil=True, error_model="numpy")
def batch_values(scores, order, offsets, tops, limits, use_min, min_scores, keeps, keep_of, tokens, use_budget,
                 budgets, kind, k, grade, gain, disc, idcg, safe_rel, judged, out):
    """``out[b, q]``: metric ``kind``@``k`` of query ``q`` ranked by ``scores[b]`` — the top
    ``min(tops[b], limits[b, q])`` rows as ``rank_rows`` keeps them (``min_scores[b]`` where
    ``use_min[b]``, unless ``keeps[keep_of[b]]`` marks the row; ``budgets[b, q]`` tokens where
    ``use_budget[b]``), cut at ``k`` (0: the whole ranking)."""
    n_b = scores.shape[0]
    n_q = len(offsets) - 1
    widest = 0
    for b in range(n_b):
        widest = max(widest, tops[b])
    size = buffer_size(offsets, widest)
    buf_s = np.empty(size, dtype=np.float64)
    buf_r = np.empty(size, dtype=np.int64)
    no_keep = np.zeros(0, dtype=np.bool_)
    for b in range(n_b):
        score = scores[b]
        use_keep = keep_of[b] >= 0
        keep = keeps[keep_of[b]] if use_keep else no_keep
        for q in range(n_q):
            m = min(tops[b], limits[b, q])
            if k > 0:
                m = min(m, k)
            hits = 0.0
            dcg = 0.0
            rr = 0.0
            ap = 0.0
            if m > 0:
                count, n_inf = select_query(score, order, offsets[q], offsets[q + 1], m, use_min[b],
                                            min_scores[b], keep, use_keep, buf_s, buf_r)
                slots = min(count, m - n_inf)
                running = 0
                for i in range(slots):
                    row = buf_r[i]
                    running += tokens[row]
                    if use_budget[b] and running > budgets[b, q]:
                        continue
                    r = n_inf + i
                    dcg += gain[row] / disc[r]
                    if grade[row] > 0:
                        hits += 1.0
                        if hits == 1.0:
                            rr = 1.0 / (r + 1.0)
                        ap += hits / (r + 1.0)
            out[b, q] = finish(kind, k, hits, dcg, rr, ap, idcg[q], safe_rel[q], judged[q])


