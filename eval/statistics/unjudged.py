"""Does a comparison's verdict survive the documents nobody judged?

A paired comparison of two rankings A and B on ``metric@k`` counts every unjudged document as
non-relevant. ``verdict_bounds`` recomputes it twice over the same counted queries, each time
grading the unjudged documents of the two top k against one side:

- **for A**: an unjudged document only in A's top k is counted relevant (grade 1), one only in
  B's top k non-relevant, one in both relevant where A ranks it higher, else non-relevant;
- **for B**: the mirror image.

Every other assignment of those documents lies between the two for the per-query difference of
any single document, so the two recomputations bound where the judgments could take the
comparison (a document in both tops is assigned by which side ranks it higher, the direction
in which its grade moves the difference). The verdict — a gain or a loss significant at
``alpha`` by the paired t-test, or no significant difference — **holds either way** when both
bounds give the one the comparison shows; otherwise it **depends on** the unjudged documents
of the two tops (counted, and listed: the pairs to judge first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from eval.metrics.measure import Judged, judge, judge_afresh, parse_metric, per_query
from eval.statistics.significance import paired_t
from retrieval.candidates import Candidates
from retrieval.ranking import Ranking

ALPHA = 0.05


def verdict(delta: float, p: float, alpha: float = ALPHA) -> str:
    """"gain", "loss" (significant at ``alpha``) or "none"."""
    if not (isinstance(p, float) and math.isfinite(p)) or p >= alpha or abs(delta) <= 1e-12:
        return "none"
    return "gain" if delta > 0 else "loss"


@dataclass(frozen=True)
class Bounds:
    metric: str
    delta: float                     # B − A as the judgments stand (unjudged = non-relevant)
    p: float
    delta_for_a: float               # with the unjudged documents graded for A …
    p_for_a: float
    delta_for_b: float               # … and for B
    p_for_b: float
    unjudged: tuple[tuple[str, str], ...]  # (query id, document id) in either top k, ungraded

    @property
    def verdicts(self) -> tuple[str, str, str]:
        return (verdict(self.delta, self.p), verdict(self.delta_for_a, self.p_for_a),
                verdict(self.delta_for_b, self.p_for_b))

    @property
    def holds(self) -> bool:
        return len(set(self.verdicts)) == 1

    def text(self) -> str:
        """One line: whether the verdict holds, with the range of the difference."""
        span = f"Δ {self.delta_for_a:+.3f} … {self.delta_for_b:+.3f}"
        if not self.unjudged:
            return f"{self.metric}: every document of both tops is judged"
        if self.holds:
            return (f"{self.metric}: the verdict holds either way ({span} with the "
                    f"{len(self.unjudged)} unjudged documents of the two tops graded for one side or the other)")
        return (f"{self.metric}: the verdict depends on {len(self.unjudged)} unjudged documents "
                f"({span}; judge them first)")

    def to_json(self) -> dict:
        return {"metric": self.metric, "delta": self.delta, "p": self.p, "delta_for_a": self.delta_for_a,
                "p_for_a": self.p_for_a, "delta_for_b": self.delta_for_b, "p_for_b": self.p_for_b,
                "unjudged": len(self.unjudged), "holds": self.holds, "verdicts": list(self.verdicts)}


def _tops(c: Candidates, ranking: Ranking, k: int) -> list[list[int]]:
    """Each query's top-k document positions (in the table's ``doc_ids``)."""
    out: list[list[int]] = [[] for _ in range(c.n_queries)]
    for row, qi, rank in zip(ranking.rows, ranking.query_idx, ranking.rank):
        if rank < k:
            out[int(qi)].append(int(c.doc_idx[row]))
    return out


def _graded(counted: Sequence[str], tops_a: Mapping[str, Sequence], tops_b: Mapping[str, Sequence],
            qrels: dict[str, dict[str, int]], name=lambda d: d) -> tuple[dict, dict, list]:
    """The judgments with the unjudged documents of each counted query's two top k graded for A,
    and for B (see the module docstring), and those (query id, document id) pairs."""
    for_a: dict[str, dict[str, int]] = {q: dict(g) for q, g in qrels.items()}
    for_b: dict[str, dict[str, int]] = {q: dict(g) for q, g in qrels.items()}
    unjudged = []
    for qid in counted:
        graded = qrels.get(qid, {})
        top_a, top_b = list(tops_a.get(qid, ())), list(tops_b.get(qid, ()))
        rank_a = {d: r for r, d in enumerate(top_a)}
        rank_b = {d: r for r, d in enumerate(top_b)}
        k = max(len(top_a), len(top_b))
        for d in dict.fromkeys([*top_a, *top_b]):
            doc = name(d)
            if doc in graded:
                continue
            unjudged.append((qid, doc))
            a_first = rank_a.get(d, k) < rank_b.get(d, k)
            for_a.setdefault(qid, {})[doc] = 1 if a_first else 0
            for_b.setdefault(qid, {})[doc] = 0 if a_first else 1
    return for_a, for_b, unjudged


def verdict_bounds(c: Candidates, qrels: dict[str, dict[str, int]], a: Ranking, b: Ranking,
                   metric: str = "ndcg@5", judged: Judged | None = None) -> Bounds:
    """The comparison B − A on ``metric`` over the counted queries of ``qrels``, as the
    judgments stand and with the unjudged documents of both top k graded for A, then for B."""
    _, k = parse_metric(metric)
    judged = judged if judged is not None else judge(c, qrels)
    counted = judged.judged
    tops_a, tops_b = _tops(c, a, k), _tops(c, b, k)
    ids = [qid for qi, qid in enumerate(c.query_ids) if counted[qi]]
    position = {qid: qi for qi, qid in enumerate(c.query_ids)}
    for_a, for_b, unjudged = _graded(ids, {q: tops_a[position[q]] for q in ids},
                                     {q: tops_b[position[q]] for q in ids}, qrels, lambda d: c.doc_ids[d])

    def compared(labels: dict) -> tuple[float, float]:
        j = judged if labels is qrels else judge_afresh(c, labels)
        va = np.nan_to_num(per_query(c, j, a, [metric])[metric][counted])
        vb = np.nan_to_num(per_query(c, j, b, [metric])[metric][counted])
        return float(vb.mean() - va.mean()) if len(va) else 0.0, paired_t(va, vb)

    delta, p = compared(qrels)
    d_a, p_a = compared(for_a) if unjudged else (delta, p)
    d_b, p_b = compared(for_b) if unjudged else (delta, p)
    return Bounds(metric, delta, p, d_a, p_a, d_b, p_b, tuple(unjudged))


def list_bounds(a: Mapping[str, Sequence[str]], b: Mapping[str, Sequence[str]], qrels: dict[str, dict[str, int]],
                metric: str = "ndcg@5") -> Bounds:
    """``verdict_bounds`` of two rankings given as document-id lists by query id (``rwb check``:
    a snapshot's frozen top ids against today's), scored by ranx over the queries of ``qrels``
    with a relevant judgment that both rankings hold."""
    from eval.metrics.ranx_io import judged_query_ids, lists_run, ranx_per_query, to_qrels

    _, k = parse_metric(metric)
    counted = [q for q in judged_query_ids(qrels) if q in a and q in b]
    if not counted:
        raise ValueError(f"{metric}: no judged query is in both rankings")
    for_a, for_b, unjudged = _graded(counted, {q: a[q][:k] for q in counted}, {q: b[q][:k] for q in counted},
                                     qrels)

    def compared(labels: dict) -> tuple[float, float]:
        used = {q: labels[q] for q in counted}
        judged = to_qrels(used)
        va = ranx_per_query(judged, lists_run({q: a[q] for q in counted}, used, "a"), [metric])[metric]
        vb = ranx_per_query(judged, lists_run({q: b[q] for q in counted}, used, "b"), [metric])[metric]
        xa, xb = np.array([va[q] for q in counted]), np.array([vb[q] for q in counted])
        return float(xb.mean() - xa.mean()), paired_t(xa, xb)

    delta, p = compared(qrels)
    d_a, p_a = compared(for_a) if unjudged else (delta, p)
    d_b, p_b = compared(for_b) if unjudged else (delta, p)
    return Bounds(metric, delta, p, d_a, p_a, d_b, p_b, tuple(unjudged))
