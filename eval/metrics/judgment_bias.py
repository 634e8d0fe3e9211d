"""How much of a ranking was never judged, and metrics that do not count the unjudged as
non-relevant.

A document is **judged** for a query when the qrels hold any grade for the pair (0 included);
**relevant** when that grade is > 0. Per query, over a ranking (``retrieval.ranking.Ranking``):

- ``judged@k``: judged documents among the top ``k`` / ``k`` (a list shorter than ``k`` counts
  its missing places as unjudged), as ir_measures' ``Judged@k``;
- ``ndcg_cond@k`` — nDCG'@k, the condensed list (Sakai, SIGIR 2007, "Alternatives to Bpref"):
  every unjudged document is removed from the ranking, the rest close up, and nDCG@k (linear
  gain, ``eval.metrics.measure``'s definition and ideal) is computed on what remains — so a
  judged document ranked below ``k`` can move into the top ``k``;
- ``bpref`` (Buckley & Voorhees, SIGIR 2004), as trec_eval's ``m_bpref.c`` computes it over the
  whole ranking: with ``R`` relevant and ``N`` judged non-relevant documents for the query,
  ``bpref = (1/R) Σ_{relevant retrieved r} (1 − min(n_r, R) / min(R, N))``, ``n_r`` the judged
  non-relevant documents ranked above ``r`` (a term is 1 when ``n_r`` is 0); unjudged documents
  are skipped. ranx's ``bpref`` is the same where ``N > 0`` (it divides by ``min(R, N)`` even when
  that is 0).

The queries that count are those of every other metric: at least one relevant judgment
(``eval.metrics.measure.judge``); a counted query the table lacks scores 0. Pure NumPy, over the
candidate table's rows.

``eval.statistics.judged_below.bias_table`` gives each pipeline's figures beside a baseline's and
says when a pipeline's judged@k is clearly below the baseline's.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from eval.metrics.measure import discounts, ideal_dcg, judge
from retrieval.candidate_table import Candidates
from retrieval.ranking import Ranking

BIAS_METRICS = ("judged", "ndcg_cond", "bpref")
LABELS = {"judged": "judged@{k}", "ndcg_cond": "nDCG'@{k}", "bpref": "bpref"}


def label(metric: str, k: int) -> str:
    """How a table names the metric: ``judged@5``, ``nDCG'@5``, ``bpref``."""
    return LABELS[metric].format(k=k)


def judged_rows(c: Candidates, qrels: dict[str, dict[str, int]]) -> np.ndarray:
    """Per candidate row: whether the qrels hold a grade (any, 0 included) for its pair
    (``Judged.any_grade``, aligned with the judgments)."""
    return judge(c, qrels).any_grade


def non_relevant_counts(c: Candidates, qrels: dict[str, dict[str, int]]) -> np.ndarray:
    """Per query of the table: judged non-relevant documents (grade ≤ 0) in the qrels."""
    return np.array(
        [sum(1 for g in (qrels.get(q) or {}).values() if g <= 0) for q in c.query_ids],
        dtype=np.int64,
    )


def _judged_share(is_judged: np.ndarray, q: np.ndarray, rank: np.ndarray, k: int,
                  n_q: int) -> np.ndarray:
    top = rank < k
    return np.bincount(q[top], weights=is_judged[top].astype(np.float64), minlength=n_q) / k


def judged_per_query(
    c: Candidates, qrels: dict[str, dict[str, int]], ranking: Ranking, k: int = 5
) -> np.ndarray:
    """``judged@k`` alone per query of the table (NaN where it does not count): what
    ``per_query_bias`` gives as ``"judged"``, without the other two."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    rows = np.asarray(ranking.rows, dtype=np.int64)
    q = np.asarray(ranking.query_idx, dtype=np.int64)
    share = _judged_share(judged_rows(c, qrels)[rows], q, np.asarray(ranking.rank), k, c.n_queries)
    return np.where(judge(c, qrels).judged, share, np.nan)


def per_query_bias(
    c: Candidates, qrels: dict[str, dict[str, int]], ranking: Ranking, k: int = 5
) -> dict[str, np.ndarray]:
    """``judged@k``, ``ndcg_cond@k`` and ``bpref`` per query of the table (NaN where it does
    not count)."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    judged = judge(c, qrels)
    n_q = c.n_queries
    rows = np.asarray(ranking.rows, dtype=np.int64)
    q = np.asarray(ranking.query_idx, dtype=np.int64)
    rank = np.asarray(ranking.rank, dtype=np.int64)
    is_judged = judged_rows(c, qrels)[rows]
    grade = judged.grade[rows]
    judged_k = _judged_share(is_judged, q, rank, k, n_q)
    # condensed list: each judged result's rank among the judged results of its query
    order = np.lexsort((rank, q))
    q_s, judged_s, grade_s = q[order], is_judged[order], grade[order]
    running = np.cumsum(judged_s)
    first = np.searchsorted(q_s, np.arange(n_q))
    before = np.concatenate([[0], running])[first]  # judged results of the earlier queries
    cond_rank = running - before[q_s] - 1
    keep = judged_s & (cond_rank < k)
    disc = discounts(int(k))
    dcg = np.bincount(q_s[keep], weights=grade_s[keep] / disc[cond_rank[keep]], minlength=n_q)
    idcg = ideal_dcg(judged, "ndcg", int(k))
    ndcg_cond = np.divide(dcg, idcg, out=np.zeros(n_q), where=idcg > 0)
    # bpref: judged non-relevant results ranked above each relevant one
    nonrel_s = judged_s & (grade_s <= 0)
    nonrel_run = np.cumsum(nonrel_s)
    nonrel_before = nonrel_run - nonrel_s - np.concatenate([[0], nonrel_run])[first][q_s]
    big_r = judged.n_relevant.astype(np.float64)
    big_n = non_relevant_counts(c, qrels).astype(np.float64)
    relevant = judged_s & (grade_s > 0)
    denom = np.minimum(big_r, big_n)[q_s]
    term = np.where(
        nonrel_before > 0,
        1.0 - np.minimum(nonrel_before, big_r[q_s]) / np.where(denom > 0, denom, 1.0),
        1.0,
    )
    bpref_sum = np.bincount(q_s[relevant], weights=term[relevant], minlength=n_q)
    bpref = np.divide(bpref_sum, big_r, out=np.zeros(n_q), where=big_r > 0)
    counted = judged.judged
    return {
        name: np.where(counted, value, np.nan)
        for name, value in (("judged", judged_k), ("ndcg_cond", ndcg_cond), ("bpref", bpref))
    }


def bias_means(
    c: Candidates, qrels: dict[str, dict[str, int]], ranking: Ranking, k: int = 5
) -> dict[str, float]:
    """Each measure's mean over the counted queries (those the table lacks add 0)."""
    judged = judge(c, qrels)
    values = per_query_bias(c, qrels, ranking, k)
    n = judged.n_judged
    return {name: (float(np.nansum(v)) / n if n else 0.0) for name, v in values.items()}


def judged_at(
    c: Candidates,
    qrels: dict[str, dict[str, int]],
    ranking: Ranking,
    k: int,
    queries: Sequence[int] | np.ndarray | None = None,
) -> float:
    """Mean ``judged@k`` over the pool queries ``queries`` (default: the counted ones)."""
    values = judged_per_query(c, qrels, ranking, k)
    picked = (
        values[np.asarray(queries, dtype=np.int64)]
        if queries is not None
        else values[~np.isnan(values)]
    )
    return float(np.nanmean(picked)) if len(picked) else 0.0
