"""Compiled metric kernels (numba): a ranking's per-query sums in one pass, and a whole batch of
configurations scored from their fused scores without building a ranking for any of them.

``cut_stats`` walks a ``Ranking`` (rows grouped by query, in rank order) once per cutoff and
accumulates what every metric of ``eval.metrics.measure`` needs (``SUMS``: hits, DCG, the
reciprocal rank of the first relevant result, the average-precision sum, the exponential-gain
DCG). The sums run in rank order from 0.0, the
order ``numpy.bincount`` adds its weights in, so every value equals the NumPy evaluator's bit
for bit (``tests/retrieval/test_kernels.py``).

``batch_sums`` is the inner loop of every knob move and every sweep: for each configuration (a
row of a score matrix) and each query it selects the top rows once with
``retrieval.kernels.select_query`` and ``within_budget`` — the same selection, ties and token
budget as ``rank_rows`` — and accumulates the same sums for every cutoff asked, without
building a ranking. ``finish`` is the one place a per-query sum becomes a metric value: the
sum divided by one of the ``SCALES``; which sum over which scale each metric is, is declared in
``eval.metrics.definitions.DEFINITIONS`` (this module names no metric). Both paths use it.

Compiled with ``cache=True``. Numba's cache is keyed on this file alone: after an edit to
``retrieval/kernels.py`` (whose ``select_query`` and ``within_budget`` these kernels compile
in), ``make clean`` drops the cached machine code, or these keep running the old one.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from retrieval.kernels import buffer_size, select_query, within_budget

SUMS = ("hits", "dcg", "rr", "ap", "dcg_exp")
"""The per-query sums the kernels accumulate, by slot: relevant hits, Σ gain/log2(rank+2) with
the linear gain (the grade), the reciprocal rank of the first relevant result, Σ (relevant so
far)/(rank+1) over the relevant results, and the DCG sum with the exponential gain (2^grade − 1).
Which metric reads which is declared in ``eval.metrics.definitions.DEFINITIONS``."""
HITS, DCG, RR, AP, DCG_EXP = range(len(SUMS))
SCALES = ("itself", "ideal", "relevant", "cutoff", "any")
"""What a metric's sum is divided by, by code: nothing (the sum itself), the same sum of the
ideal ordering (0 when that is 0), the query's relevant documents, the cutoff k; ``any`` is 1
when the sum is > 0, else 0. A metric names its sum and scale in ``DEFINITIONS``."""
ITSELF, IDEAL, RELEVANT, CUTOFF, ANY = range(len(SCALES))


@njit(cache=True, nogil=True, error_model="numpy")
def cut_stats(rows, qidx, rank, grade, gain, gain_exp, k, disc, sums):
    """``sums[:, q]`` (slots of ``SUMS``) over the entries with ``rank < k`` (all of them when
    ``k`` is 0); ``gain`` and ``gain_exp`` are each row's linear and exponential gains.
    ``sums`` starts zeroed."""
    for i in range(len(rows)):
        r = rank[i]
        if k > 0 and r >= k:
            continue
        q = qidx[i]
        row = rows[i]
        sums[DCG, q] += gain[row] / disc[r]
        sums[DCG_EXP, q] += gain_exp[row] / disc[r]
        if grade[row] > 0:
            sums[HITS, q] += 1.0
            hits = sums[HITS, q]
            if hits == 1.0:
                sums[RR, q] = 1.0 / (r + 1.0)
            sums[AP, q] += hits / (r + 1.0)


@njit(cache=True, nogil=True, error_model="numpy")
def finish(scale, k, value, idcg, safe_rel, judged):
    """One query's metric value: its sum ``value`` over the scale with code ``scale``
    (``SCALES``; ``idcg`` is the ideal ordering's same sum), NaN for a query that does not count."""
    if not judged:
        return np.nan
    if scale == ITSELF:
        return value
    if scale == IDEAL:
        return value / idcg if idcg > 0 else 0.0
    if scale == RELEVANT:
        return value / safe_rel
    if scale == CUTOFF:
        return value / k
    if scale == ANY:
        return 1.0 if value > 0 else 0.0
    return np.nan


@njit(cache=True, nogil=True, error_model="numpy")
def finish_all(slot, scale, k, sums, idcg, safe_rel, judged, out):
    """``out[q]``: ``finish`` of every query's sum ``slot`` of ``cut_stats``' sums."""
    for q in range(len(out)):
        out[q] = finish(scale, k, sums[slot, q], idcg[q], safe_rel[q], judged[q])


@njit(cache=True, nogil=True, error_model="numpy")
def finish_many(slots, scales, ks, cut_of, sums, idcg, safe_rel, judged, out):
    """``out[m, b, q]``: metric ``m`` (sum ``slots[m]`` over scale ``scales[m]`` at ``ks[m]``, from
    the sums of cutoff ``cut_of[m]``) of configuration ``b`` on query ``q``, for the sums
    ``batch_sums`` wrote."""
    for m in range(out.shape[0]):
        c = cut_of[m]
        for b in range(out.shape[1]):
            for q in range(out.shape[2]):
                out[m, b, q] = finish(scales[m], ks[m], sums[c, slots[m], b, q], idcg[m, q],
                                      safe_rel[q], judged[q])


@njit(cache=True, nogil=True, error_model="numpy")
def batch_sums(scores, order, offsets, tops, limits, use_min, min_scores, keeps, keep_of, tokens, use_budget,
               budgets, cuts, grade, gain, gain_exp, disc, sums):
    """``sums[c, :, b, q]``: the ``SUMS`` (as ``cut_stats``) of query ``q`` ranked by
    ``scores[b]``, cut at ``cuts[c]`` (0: the whole ranking) — the top
    ``min(tops[b], limits[b, q])`` rows as ``rank_rows`` keeps them (``min_scores[b]`` where
    ``use_min[b]``, unless ``keeps[keep_of[b]]`` marks the row; ``budgets[b, q]`` tokens where
    ``use_budget[b]``).
    Each query's top rows are selected once for all cutoffs; ``sums`` starts zeroed."""
    n_b = scores.shape[0]
    n_q = len(offsets) - 1
    n_c = len(cuts)
    deepest = 0  # the largest cutoff, 0 when one of them is the whole ranking
    for c in range(n_c):
        if cuts[c] == 0:
            deepest = 0
            break
        deepest = max(deepest, cuts[c])
    widest = 0
    for b in range(n_b):
        widest = max(widest, tops[b])
    size = buffer_size(offsets, widest)
    buf_s = np.empty(size, dtype=np.float64)
    buf_r = np.empty(size, dtype=np.int64)
    buf_rank = np.empty(size, dtype=np.int64)
    no_keep = np.zeros(0, dtype=np.bool_)
    for b in range(n_b):
        score = scores[b]
        use_keep = keep_of[b] >= 0
        keep = keeps[keep_of[b]] if use_keep else no_keep
        for q in range(n_q):
            m = min(tops[b], limits[b, q])
            if deepest > 0:
                m = min(m, deepest)
            if m <= 0:
                continue
            count, n_inf = select_query(score, order, offsets[q], offsets[q + 1], m, use_min[b],
                                        min_scores[b], keep, use_keep, buf_s, buf_r)
            n = min(count, m - n_inf)
            budgeted = use_budget[b]
            if budgeted:
                n = within_budget(buf_r, n, tokens, budgets[b, q], buf_rank)
            for i in range(n):
                row = buf_r[i]
                r = n_inf + (buf_rank[i] if budgeted else i)
                g = gain[row] / disc[r]
                g2 = gain_exp[row] / disc[r]
                relevant = grade[row] > 0
                for c in range(n_c):
                    if cuts[c] > 0 and r >= cuts[c]:
                        continue
                    sums[c, DCG, b, q] += g
                    sums[c, DCG_EXP, b, q] += g2
                    if relevant:
                        sums[c, HITS, b, q] += 1.0
                        hits = sums[c, HITS, b, q]
                        if hits == 1.0:
                            sums[c, RR, b, q] = 1.0 / (r + 1.0)
                        sums[c, AP, b, q] += hits / (r + 1.0)
