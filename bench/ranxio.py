"""The peer's inputs: ranx Qrels and the two path Runs (dense, BM25) of a candidate table.

Built once per query set, outside every timed region (the counterpart of our stored pool).
A path run holds, per counted query, the documents that path ranked within ``depth`` with
their raw scores (cosine; BM25), nudged by ``-1e-9 · rank`` so ties keep the engine's order
(ranx orders equal scores arbitrarily). Counted queries a path returned nothing for get an
empty list, as ranx requires every run to hold exactly the qrels' queries.
"""

from __future__ import annotations

import numpy as np
from ranx import Qrels, Run

from retrieval.candidate_table import Candidates

try:  # the harness's adapters decide which queries count; same rule, kept in one place
    from eval.metrics.ranx_io import judged_query_ids, to_qrels
except ImportError:  # pragma: no cover - before eval/metrics/ranx_io.py existed
    def judged_query_ids(qrels, query_ids=None):
        relevant = {q for q, j in qrels.items() if any(g > 0 for g in j.values())}
        return sorted(relevant) if query_ids is None else [q for q in query_ids if q in relevant]

    def to_qrels(qrels):
        return Qrels({q: dict(qrels[q]) for q in judged_query_ids(qrels)})


def path_lists(c: Candidates, depth: int, path: str, normalise: str | None = None) -> dict[str, dict[str, float]]:
    """{query id: {doc id: score}} of one path (``dense`` or ``bm25``) within ``depth``.

    ``normalise="minmax"`` applies the engine's per-query min-max (``retrieval.fusion.weighted``:
    a single hit or all-equal hits → 1.0); used only to check that both tools optimise the
    same objective."""
    rank = c.dense_rank if path == "dense" else c.bm25_rank
    score = (c.dense_sim if path == "dense" else c.bm25_score).astype(np.float64)
    doc_ids = c.doc_ids
    out: dict[str, dict[str, float]] = {}
    for qi, query_id in enumerate(c.query_ids):
        lo, hi = int(c.offsets[qi]), int(c.offsets[qi + 1])
        r = rank[lo:hi]
        keep = np.flatnonzero((r >= 0) & (r < depth))
        keep = keep[np.argsort(r[keep], kind="stable")]
        s = score[lo:hi][keep]
        if normalise == "minmax" and len(s):
            span = s.max() - s.min()
            s = (s - s.min()) / span if span > 0 else np.ones_like(s)
        s = s - 1e-9 * np.arange(len(s))
        out[query_id] = {doc_ids[int(c.doc_idx[lo + i])]: float(v) for i, v in zip(keep, s)}
    return out


def path_runs(c: Candidates, qrels: dict[str, dict[str, int]], depth: int, normalise: dict[str, str | None] | None = None
              ) -> tuple[Qrels, Run, Run]:
    """(ranx Qrels of the counted queries, dense Run, BM25 Run) over the same queries."""
    normalise = normalise or {}
    counted = judged_query_ids(qrels)
    runs = []
    for path in ("dense", "bm25"):
        lists = path_lists(c, depth, path, normalise.get(path))
        run = {q: lists.get(q, {}) for q in counted}
        runs.append(Run(run, name=path))
    return to_qrels(qrels), runs[0], runs[1]
