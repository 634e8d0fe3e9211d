"""A vectorised evaluator over a candidate table and a ranking, equal to ranx.

Used on every slider move and in sweeps: the grade of every candidate row and the
ideal DCG of every query are computed once (``judge``, ``ideal_dcg``); scoring a ranking is
then one compiled pass over it per cutoff (``eval.kernels``), equal bit for bit to the
``bincount`` sums it replaced. Definitions follow ranx (``tests/test_fast_eval.py`` checks every
metric against ranx on random runs with ties):

- ``ndcg@k``: Σ_{i≤k} rel_i / log2(i+1) over the ideal ordering's same sum (Järvelin; linear gain);
- ``ndcg_burges@k``: the same with the exponential gain 2^rel − 1 (Burges et al., ICML 2005);
- ``recall@k``: relevant retrieved in the top k / all relevant;
- ``precision@k``: relevant retrieved in the top k / k;
- ``mrr@k``: 1 / rank of the first relevant result in the top k (0 if none);
- ``hit_rate@k``: 1 if any relevant result is in the top k;
- ``map@k``: Σ precision@i over relevant ranks i ≤ k / all relevant; bare ``map``: over the
  whole ranking (ranx's and trec_eval's MAP; the only name without a cutoff).

A document is relevant when its grade is > 0. Only queries with at least one relevant
judgment count (``eval.runs`` makes the same choice for ranx); a counted query with no
results scores 0, and so does a counted query the candidate table lacks (``n_missing``:
it has no row here, but it is in the mean's denominator, as ranx would count it).
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass

import numpy as np

from eval.kernels import KINDS, cut_stats, finish_all
from retrieval.candidates import Candidates
from retrieval.ranking import Ranking

METRICS = ("ndcg", "recall", "precision", "mrr", "hit_rate", "map", "ndcg_burges")
UNCUT = ("map",)  # names also valid without @K: the whole ranking (k = 0 below)
DEFAULT_METRICS = ("ndcg@5", "recall@5", "mrr@5", "precision@5", "hit_rate@5")
_METRIC = re.compile(r"^([a-z_]+)@(\d+)$")


def parse_metric(name: str) -> tuple[str, int]:
    """``(name, k)``; ``k`` is 0 for an uncut metric (bare ``map``: the whole ranking)."""
    if name in UNCUT:
        return name, 0
    match = _METRIC.match(name)
    if not match or match.group(1) not in METRICS or int(match.group(2)) < 1:
        raise ValueError(f"unknown metric {name!r}; use NAME@K with NAME in {list(METRICS)}, e.g. ndcg@5, "
                         "or map (over the whole ranking)")
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


_DERIVED: "weakref.WeakKeyDictionary[Judged, dict]" = weakref.WeakKeyDictionary()
_DISC = np.log2(np.arange(64) + 2.0)


def discounts(n: int) -> np.ndarray:
    """``log2(rank + 2)`` for ranks ``0 … n − 1`` (the DCG discount), computed once."""
    global _DISC
    if n > len(_DISC):
        _DISC = np.log2(np.arange(max(n, 2 * len(_DISC))) + 2.0)
    return _DISC


def _derived(judged: Judged, key, build):
    """Arrays derived from a ``Judged`` once (gains, ideal DCG per cutoff), kept with it."""
    table = _DERIVED.get(judged)
    if table is None:
        table = _DERIVED[judged] = {}
    value = table.get(key)
    if value is None:
        value = table[key] = build()
    return value


def gains(judged: Judged, metric: str) -> np.ndarray:
    """Each candidate row's gain: its grade (``ndcg``) or ``2^grade − 1`` (``ndcg_burges``)."""
    if metric != "ndcg_burges":
        return judged.grade
    return _derived(judged, "burges", lambda: 2.0 ** judged.grade - 1.0)


def ideal_dcg(judged: Judged, metric: str, k: int) -> np.ndarray:
    """Per query: the DCG of the ideal ordering cut at ``k`` (0 for a query without relevant grades)."""
    def build():
        width = min(k, judged.ideal.shape[1])
        ideal = judged.ideal[:, :width]
        ideal = 2.0 ** ideal - 1.0 if metric == "ndcg_burges" else ideal
        return (ideal / np.log2(np.arange(width) + 2.0)).sum(axis=1)
    if metric not in ("ndcg", "ndcg_burges"):
        return _derived(judged, "zeros", lambda: np.zeros(len(judged.judged)))
    return _derived(judged, (metric, k), build)


def safe_relevant(judged: Judged) -> np.ndarray:
    """Relevant documents per query as float64, 1.0 where there are none (a safe divisor)."""
    def build():
        n_rel = judged.n_relevant.astype(np.float64)
        return np.where(n_rel > 0, n_rel, 1.0)
    return _derived(judged, "safe_rel", build)


def per_query(c: Candidates, judged: Judged, ranking: Ranking, metrics=DEFAULT_METRICS) -> dict[str, np.ndarray]:
    """Each metric's value for every query (NaN for queries without relevant judgments).

    One compiled pass over the ranking per cutoff (``eval.kernels.cut_stats``)."""
    out: dict[str, np.ndarray] = {}
    n_q = c.n_queries
    safe_rel = safe_relevant(judged)
    rows = np.ascontiguousarray(ranking.rows, dtype=np.int64)
    qidx = np.ascontiguousarray(ranking.query_idx, dtype=np.int64)
    rank = np.ascontiguousarray(ranking.rank, dtype=np.int64)
    disc = discounts(int(rank.max(initial=-1)) + 1)
    shared: dict[tuple, tuple] = {}  # per (cutoff, gain): the sums, computed once for all metrics
    for name in metrics:
        metric, k = parse_metric(name)
        key = (k, metric == "ndcg_burges")
        if key not in shared:
            sums = (np.zeros(n_q), np.zeros(n_q), np.zeros(n_q), np.zeros(n_q))
            cut_stats(rows, qidx, rank, judged.grade, gains(judged, metric), k, disc, *sums)
            shared[key] = sums
        value = np.empty(n_q)
        finish_all(KINDS.index(metric), k, *shared[key], ideal_dcg(judged, metric, k), safe_rel, judged.judged, value)
        out[name] = value
    return out


def mean_metrics(c: Candidates, judged: Judged, ranking: Ranking, metrics=DEFAULT_METRICS) -> dict[str, float]:
    """Mean of each metric over the counted queries (missing ones add 0 to the sum)."""
    values = per_query(c, judged, ranking, metrics)
    if judged.n_judged == 0:
        return {name: 0.0 for name in metrics}
    return {name: float(np.nansum(v)) / judged.n_judged for name, v in values.items()}
