"""A judging queue: the unjudged documents in two pipelines' top k, ordered by how much their
grade could change the comparison.

For each query and each document in the top ``k`` of pipeline A or B that the qrels do not
grade, the comparison ``d = nDCG@k(A) − nDCG@k(B)`` of that query is computed twice: with the
document graded 0 and graded ``top`` (the highest grade in the qrels). Grading it relevant also
raises the query's ideal DCG, and a query with no relevant judgment so far starts to count
(its ``d`` when graded 0 is 0: it does not count). The **swing** ``|d(top) − d(0)|`` is how far
that one judgment can move the query's comparison; divided by the queries that count it is how
far it can move the difference of the means. The queue lists the pairs by swing, largest first
(ties: query id, then document id). nDCG@k is ``eval.metrics.measure``'s (linear gain, ranx's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.ranking import Ranking


@dataclass(frozen=True)
class Hole:
    query_id: str
    doc_id: str
    rank_a: int | None  # 1-based rank in A's top k (None: not there)
    rank_b: int | None
    delta_if_0: float  # nDCG@k(A) − nDCG@k(B) on this query with the document graded 0
    delta_if_top: float  # … graded the top grade
    swing: float  # |delta_if_top − delta_if_0|
    swing_on_mean: float  # swing / the queries that count (with it graded top)

    def to_json(self) -> dict:
        return {
            "query_id": self.query_id,
            "doc_id": self.doc_id,
            "rank_a": self.rank_a,
            "rank_b": self.rank_b,
            "delta_if_0": self.delta_if_0,
            "delta_if_top": self.delta_if_top,
            "swing": self.swing,
            "swing_on_mean": self.swing_on_mean,
        }


def _ndcg(ranked: list[str], grades: dict[str, float], k: int) -> float:
    dcg = sum(grades.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _top(c: Candidates, ranking: Ranking, qi: int, k: int) -> list[str]:
    return [c.doc_ids[int(c.doc_idx[r])] for r in ranking.for_query(qi)[:k]]


def holes(
    c: Candidates,
    qrels: dict[str, dict[str, int]],
    ranking_a: Ranking,
    ranking_b: Ranking,
    k: int = 5,
) -> list[Hole]:
    """Every unjudged (query, document) pair in either top ``k``, largest swing first."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"--k must be a positive integer, got {k!r}")
    top_grade = max((g for judgments in qrels.values() for g in judgments.values()), default=1)
    top_grade = float(max(top_grade, 1))
    counted = sum(1 for judgments in qrels.values() if any(g > 0 for g in judgments.values()))
    out = []
    for qi, query_id in enumerate(c.query_ids):
        a, b = _top(c, ranking_a, qi, k), _top(c, ranking_b, qi, k)
        grades = {d: float(g) for d, g in (qrels.get(query_id) or {}).items()}
        has_relevant = any(g > 0 for g in grades.values())
        for doc in dict.fromkeys(a + b):
            if doc in grades:
                continue
            as_top = {**grades, doc: top_grade}
            d_top = _ndcg(a, as_top, k) - _ndcg(b, as_top, k)
            d_zero = _ndcg(a, grades, k) - _ndcg(b, grades, k) if has_relevant else 0.0
            swing = abs(d_top - d_zero)
            n = counted + (0 if has_relevant else 1)
            out.append(
                Hole(
                    query_id,
                    doc,
                    a.index(doc) + 1 if doc in a else None,
                    b.index(doc) + 1 if doc in b else None,
                    d_zero,
                    d_top,
                    swing,
                    swing / max(n, 1),
                )
            )
    out.sort(key=lambda h: (-h.swing, h.query_id, h.doc_id))
    return out
