"""Compiled per-query kernels (numba): top-k selection over a fused score, one pass per query.

Ranking a whole query set is the inner loop of every knob move and every sweep point. NumPy
needs a padded (queries × widest pool) matrix and a full stable argsort per query; these
kernels walk each query's rows once, in tie order (document id), and keep the best
``top`` in a small sorted buffer (``select_query``) — or, for a long cut, take a stable merge
sort of the query's finite scores. Either way the order is exactly NumPy's
``argsort(-score, kind="stable")`` over rows in tie order:

- scores descending; an equal score keeps the earlier row in tie order (lower document id);
- ``+inf`` rows come first and take a rank each but are not kept (``isfinite``), ``−inf``
  and NaN rows last and never kept — as the padded-matrix ranking did;
- ``min_score`` turns a row below it into ``−inf`` unless ``keep`` marks it;
- the token budget accumulates the kept rows' tokens in rank order and keeps a row while
  the running sum is ≤ the budget (seed 000's loop; ``within_budget``, which
  ``eval.metrics.kernels.batch_sums`` calls as well).

Compiled lazily with ``cache=True`` and no explicit signatures: the first call on a machine
compiles and writes the machine code next to this file; a later process loads it from there
on its first call of each kernel (``select_query.signatures`` is empty until then).
"""

from __future__ import annotations

import numpy as np
from numba import njit

INSERTION_MAX = 48
"""Cuts up to this many results use the sorted buffer; longer ones a stable merge sort."""


@njit(cache=True, nogil=True)
def select_query(score, order, lo, hi, m, use_min, min_score, keep, use_keep, buf_s, buf_r):
    """The best ``m`` finite rows among ``order[lo:hi]`` (rows in tie order) into ``buf_r``
    (best first). Returns (rows selected, +inf rows seen): the selected rows' ranks start
    after the +inf rows, and only the first ``m − n_inf`` of them fall inside the cut.

    The sorted buffer's entry bar is kept in a register (``bar``: −inf until the buffer is
    full, then its last score), so most rows cost one comparison, which NaN and −inf fail as
    well; an equal score goes after the entries already there (the earlier row in tie order
    wins a tie)."""
    count = 0
    n_inf = 0
    if m <= INSERTION_MAX:
        bar = -np.inf
        for j in range(lo, hi):
            r = order[j]
            s = score[r]
            if not s > bar:
                continue
            if use_min and s < min_score and not (use_keep and keep[r]):
                continue
            if s == np.inf:
                n_inf += 1
                continue
            if count < m:
                p = count
                count += 1
            else:
                p = m - 1
            while p > 0 and buf_s[p - 1] < s:
                buf_s[p] = buf_s[p - 1]
                buf_r[p] = buf_r[p - 1]
                p -= 1
            buf_s[p] = s
            buf_r[p] = r
            if count == m:
                bar = buf_s[m - 1]
        return count, n_inf
    n = 0
    for j in range(lo, hi):
        r = order[j]
        s = score[r]
        if use_min and s < min_score and not (use_keep and keep[r]):
            continue
        if s == np.inf:
            n_inf += 1
        elif s == s and s != -np.inf:
            buf_s[n] = -s
            buf_r[n] = r
            n += 1
    if n == 0:
        return 0, n_inf
    idx = np.argsort(buf_s[:n], kind="mergesort")
    count = min(n, m)
    rows = buf_r[idx[:count]].copy()
    for i in range(count):
        buf_r[i] = rows[i]
    return count, n_inf


@njit(cache=True, nogil=True)
def buffer_size(offsets, m):
    """Scratch length ``select_query`` needs for a cut of ``m`` over these queries."""
    if m <= INSERTION_MAX:
        return max(m, 1)
    widest = 1
    for q in range(len(offsets) - 1):
        widest = max(widest, offsets[q + 1] - offsets[q])
    return widest


@njit(cache=True, nogil=True)
def within_budget(buf_r, slots, tokens, budget, buf_rank):
    """The token budget over the rows ``select_query`` put in ``buf_r[:slots]`` (best first):
    their tokens accumulate in rank order and a row is kept while the running sum is ≤
    ``budget`` (a row past it is skipped; a later, cheaper one may still fit). Compacts the kept
    rows to the front of ``buf_r``, writes each one's position in the cut (0-based, skipped rows
    counted) into ``buf_rank``, and returns how many were kept."""
    running = 0
    n = 0
    for i in range(slots):
        r = buf_r[i]
        running += tokens[r]
        if running > budget:
            continue
        buf_r[n] = r  # n ≤ i: compacting in place
        buf_rank[n] = i
        n += 1
    return n


@njit(cache=True, nogil=True)
def rank_queries(score, order, offsets, top, limits, use_min, min_score, keep, use_keep, tokens, use_budget,
                 budgets, out_rows, out_qidx, out_rank, total):
    """Rank every query: writes the kept rows grouped by query in rank order into
    ``out_rows``/``out_qidx``/``out_rank`` and each query's token total into ``total``;
    returns how many rows were kept. Query ``q`` keeps rank positions below
    ``min(top, limits[q])`` and stops adding tokens past ``budgets[q]``."""
    n_q = len(offsets) - 1
    size = buffer_size(offsets, top)
    buf_s = np.empty(size, dtype=np.float64)
    buf_r = np.empty(size, dtype=np.int64)
    buf_rank = np.empty(size, dtype=np.int64)
    k = 0
    for q in range(n_q):
        m = min(top, limits[q])
        if m <= 0:
            total[q] = 0
            continue
        count, n_inf = select_query(score, order, offsets[q], offsets[q + 1], m, use_min, min_score,
                                    keep, use_keep, buf_s, buf_r)
        n = min(count, m - n_inf)
        if use_budget:
            n = within_budget(buf_r, n, tokens, budgets[q], buf_rank)
        spent = 0
        for i in range(n):
            r = buf_r[i]
            out_rows[k] = r
            out_qidx[k] = q
            out_rank[k] = n_inf + (buf_rank[i] if use_budget else i)
            spent += tokens[r]
            k += 1
        total[q] = spent
    return k


def tie_order(query_idx: np.ndarray, tie_key: np.ndarray) -> np.ndarray:
    """Row indices grouped by query, each query's rows in tie-key order (stable)."""
    return np.lexsort((tie_key, query_idx)).astype(np.int64)


_NO_MASK = np.zeros(0, dtype=np.bool_)


def rank(score: np.ndarray, order: np.ndarray, offsets: np.ndarray, top: int, tokens: np.ndarray,
         min_score: float | None = None, keep: np.ndarray | None = None, token_budget: int | None = None,
         limits: np.ndarray | None = None, budgets: np.ndarray | None = None):
    """(rows, query of each, rank of each, token total per query) of the kept rows.

    ``score`` float64, ``order``/``offsets``/``tokens`` int64 (``retrieval.ranking`` keeps
    them per table); ``limits`` / ``budgets``: optional per-query int64 caps on the rank
    position and on the tokens (``token_budget`` is the same cap for every query)."""
    n_q = len(offsets) - 1
    capacity = min(n_q * max(top, 0), len(score))
    rows = np.empty(capacity, dtype=np.int64)
    qidx = np.empty(capacity, dtype=np.int64)
    ranks = np.empty(capacity, dtype=np.int64)
    total = np.zeros(n_q, dtype=np.int64)
    if top <= 0 or n_q == 0:
        return rows[:0], qidx[:0], ranks[:0], total
    if limits is None:
        limits = np.full(n_q, top, dtype=np.int64)
    use_budget = budgets is not None or token_budget is not None
    if budgets is None:
        budgets = np.full(n_q, int(token_budget) if token_budget is not None else 0, dtype=np.int64)
    n = rank_queries(score, order, offsets, int(top), limits, min_score is not None,
                     float(min_score) if min_score is not None else 0.0,
                     _NO_MASK if keep is None else np.ascontiguousarray(keep, dtype=np.bool_), keep is not None,
                     tokens, use_budget, budgets, rows, qidx, ranks, total)
    return rows[:n], qidx[:n], ranks[:n], total
