"""A vectorised evaluator over a candidate table and a ranking, equal to ranx.

Used on every slider move and in sweeps: the grade of every candidate row and the
ideal DCG of every query are computed once (``judge``); scoring a ranking is then a few
``bincount`` calls. Definitions follow ranx (``tests/test_fast_eval.py`` checks every
metric against ranx on random runs with ties):

- ``ndcg@k``: Σ_{i≤k} rel_i / log2(i+1) over the ideal ordering's same sum (Järvelin);
- ``recall@k``: relevant retrieved in the top k / all relevant;
- ``precision@k``: relevant retrieved in the top k / k;
- ``mrr@k``: 1 / rank of the first relevant result in the top k (0 if none);
- ``hit_rate@k``: 1 if any relevant result is in the top k;
- ``map@k``: Σ precision@i over relevant ranks i ≤ k / all relevant.

A document is relevant when its grade is > 0. Only queries with at least one relevant
judgment count (``eval.runs`` makes the same choice for ranx); a counted query with no
results scores 0, and so does a counted query the candidate table lacks (``n_missing``:
it has no row here, but it is in the mean's denominator, as ranx would count it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from retrieval.candidates import Candidates
from retrieval.ranking import Ranking

METRICS = ("ndcg", "recall", "precision", "mrr", "hit_rate", "map")
DEFAULT_METRICS = ("ndcg@5", "recall@5", "mrr@5", "precision@5", "hit_rate@5")
_METRIC = re.compile(r"^([a-z_]+)@(\d+)$")


def parse_metric(name: str) -> tuple[str, int]:
    match = _METRIC.match(name)
    if not match or match.group(1) not in METRICS or int(match.group(2)) < 1:
        raise ValueError(f"unknown metric {name!r}; use NAME@K with NAME in {list(METRICS)}, e.g. ndcg@5")
    return match.group(1), int(match.group(2))


@dataclass(frozen=True, eq=False)
class Judged:
    """Qrels aligned with a candidate table."""

    grade: np.ndarray          # per candidate row (0 = not relevant / unjudged)
    ideal: np.ndarray          # (Q, m) relevant grades of each query, sorted descending, 0-padded
    n_relevant: np.ndarray     # per query
    judged: np.ndarray         # per query: has at least one relevant document
    n_missing: int = 0         # counted qrels queries absent from the candidate table (score 0)

    @property
    def n_judged(self) -> int:
        """Queries that count in a mean: judged ones of the table plus the missing ones."""
        return int(self.judged.sum()) + self.n_missing


def judge(c: Candidates, qrels: dict[str, dict[str, int]]) -> Judged:
    # every judgment as one integer key (query index × documents + document index), then one
    # sorted lookup for all candidate rows
    n_docs = len(c.doc_ids)
    position = {doc_id: i for i, doc_id in enumerate(c.doc_ids)}
    keys, values = [], []
    for qi, query_id in enumerate(c.query_ids):
        for doc_id, value in (qrels.get(query_id) or {}).items():
            if doc_id in position:
                keys.append(qi * n_docs + position[doc_id])
                values.append(value)
    keys_arr = np.asarray(keys, dtype=np.int64)
    order = np.argsort(keys_arr)
    keys_arr, values_arr = keys_arr[order], np.asarray(values, dtype=np.float64)[order]
    row_keys = c.query_idx.astype(np.int64) * n_docs + c.doc_idx
    at = np.minimum(np.searchsorted(keys_arr, row_keys), max(len(keys_arr) - 1, 0))
    found = (keys_arr[at] == row_keys) if len(keys_arr) else np.zeros(c.n_rows, dtype=bool)
    grade = np.where(found, values_arr[at] if len(keys_arr) else 0.0, 0.0)
    lists = [sorted((g for g in qrels.get(q, {}).values() if g > 0), reverse=True) for q in c.query_ids]
    width = max((len(x) for x in lists), default=0) or 1
    ideal = np.zeros((c.n_queries, width))
    for qi, grades in enumerate(lists):
        ideal[qi, :len(grades)] = grades
    n_relevant = np.array([len(x) for x in lists], dtype=np.int64)
    present = set(c.query_ids)
    missing = sum(1 for q, judgments in qrels.items() if q not in present and any(g > 0 for g in judgments.values()))
    return Judged(grade, ideal, n_relevant, n_relevant > 0, missing)


def per_query(c: Candidates, judged: Judged, ranking: Ranking, metrics=DEFAULT_METRICS) -> dict[str, np.ndarray]:
    """Each metric's value for every query (NaN for queries without relevant judgments)."""
    out: dict[str, np.ndarray] = {}
    n_q = c.n_queries
    n_rel = judged.n_relevant.astype(np.float64)
    safe_rel = np.where(n_rel > 0, n_rel, 1.0)
    shared: dict[int, tuple] = {}  # per cutoff: the top-k slice, computed once for all metrics
    for name in metrics:
        metric, k = parse_metric(name)
        if k not in shared:
            top = ranking.rank < k
            rows, qidx, rank = ranking.rows[top], ranking.query_idx[top], ranking.rank[top]
            gains = judged.grade[rows]
            relevant = gains > 0
            hits = np.bincount(qidx[relevant], minlength=n_q).astype(np.float64)
            shared[k] = (qidx, rank, gains, relevant, hits)
        qidx, rank, gains, relevant, hits = shared[k]
        if metric == "ndcg":
            dcg = np.bincount(qidx, weights=gains / np.log2(rank + 2.0), minlength=n_q)
            width = min(k, judged.ideal.shape[1])
            idcg = (judged.ideal[:, :width] / np.log2(np.arange(width) + 2.0)).sum(axis=1)
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


def mean_metrics(c: Candidates, judged: Judged, ranking: Ranking, metrics=DEFAULT_METRICS) -> dict[str, float]:
    """Mean of each metric over the counted queries (missing ones add 0 to the sum)."""
    values = per_query(c, judged, ranking, metrics)
    if judged.n_judged == 0:
        return {name: 0.0 for name in metrics}
    return {name: float(np.nansum(v)) / judged.n_judged for name, v in values.items()}
