"""Differential tests: every fusion whose method ranx has, against ``ranx.fuse``.

Each path's top ``DEPTH`` of a candidate table becomes a ranx ``Run`` (scores for the
score norms; for the rank norms, ``−rank``, so ranx sees the path's own order even where raw
scores tie, since ranx orders ties arbitrarily); ranx normalises and fuses; every
(query, document) score must agree to 1e-9, and the two rankings must agree once ties are
broken by document id. Cases where the documented edge rules differ from ranx are left out
here and tested by hand in each module's test file: a min-max over a single hit or all-equal
hits (ranx 0, here 1.0) and a z-score miss (ranx 0, here the path's lowest z), so z-scores
are compared on the documents both paths returned.
Tables: a hand-built one (three queries, partial overlap, no ties) and the real pool of the
tiny fixture (real Tantivy, LanceDB, MiniLM)."""

from __future__ import annotations

import numpy as np
import pytest
from ranx import Run, fuse

from eval.stores.pool import load_pool
from retrieval.fusion import get_fusion
from retrieval.fusion._base import in_path
from tests.conftest import make_candidates

DEPTH = 8

# (fusion, its params, ranx norm, ranx method, ranx params, rows compared: "all" or "both")
CASES = {
    "wsum-minmax": ("wsum", {"w_dense": 0.7, "w_sparse": 0.3, "norm": "minmax"}, "min-max", "wsum",
                    {"weights": [0.7, 0.3]}, "all"),
    "wsum-zscore": ("wsum", {"w_dense": 0.4, "w_sparse": 0.6, "norm": "zscore"}, "zmuv", "wsum",
                    {"weights": [0.4, 0.6]}, "both"),
    "wsum-rank_linear": ("wsum", {"w_dense": 0.6, "w_sparse": 0.4, "norm": "rank_linear"}, "rank", "wsum",
                         {"weights": [0.6, 0.4]}, "all"),
    "combsum-minmax": ("combsum", {"norm": "minmax"}, "min-max", "sum", {}, "all"),
    "combsum-zscore": ("combsum", {"norm": "zscore"}, "zmuv", "sum", {}, "both"),
    "combsum-rank_linear": ("combsum", {"norm": "rank_linear"}, "rank", "sum", {}, "all"),
    "combmnz-minmax": ("combmnz", {"norm": "minmax"}, "min-max", "mnz", {}, "all"),
    "combmnz-rank_linear": ("combmnz", {"norm": "rank_linear"}, "rank", "mnz", {}, "all"),
    "relative_score": ("relative_score", {"alpha": 0.75}, "min-max", "wsum", {"weights": [0.75, 0.25]}, "all"),
    "relative_score-0.3": ("relative_score", {"alpha": 0.3}, "min-max", "wsum", {"weights": [0.3, 0.7]}, "all"),
    "rrf": ("rrf", {}, None, "rrf", {"k": 60}, "all"),
    "rrf-k10": ("rrf", {"rrf_k": 10.0}, None, "rrf", {"k": 10}, "all"),
}


def hand_table():
    """Three queries; no two hits of a path share a score; overlaps partial."""
    return make_candidates([
        [{"id": "a", "dense_rank": 0, "dense_sim": 0.81, "bm25_rank": 2, "bm25_score": 4.5},
         {"id": "b", "dense_rank": 1, "dense_sim": 0.74, "bm25_rank": 0, "bm25_score": 11.0},
         {"id": "c", "dense_rank": 2, "dense_sim": 0.52},
         {"id": "d", "dense_rank": 3, "dense_sim": 0.33, "bm25_rank": 1, "bm25_score": 7.25},
         {"id": "e", "dense_sim": 0.1, "bm25_rank": 3, "bm25_score": 1.5},
         {"id": "f", "dense_rank": 4, "dense_sim": 0.3}],
        [{"id": "a", "dense_rank": 1, "dense_sim": 0.6, "bm25_rank": 1, "bm25_score": 3.0},
         {"id": "g", "dense_rank": 0, "dense_sim": 0.9, "bm25_rank": 0, "bm25_score": 9.0},
         {"id": "h", "dense_rank": 2, "dense_sim": 0.2, "bm25_rank": 2, "bm25_score": 0.5}],
        [{"id": "b", "dense_rank": 0, "dense_sim": 0.45},
         {"id": "c", "dense_rank": 1, "dense_sim": 0.4, "bm25_rank": 1, "bm25_score": 2.0},
         {"id": "i", "dense_rank": 2, "dense_sim": 0.05, "bm25_rank": 0, "bm25_score": 6.0},
         {"id": "j", "bm25_rank": 2, "bm25_score": 1.0}],
    ])


def path_run(c, path: str, by_rank: bool) -> Run:
    """One path's top ``DEPTH`` per query as a ranx run."""
    rank = c.dense_rank if path == "dense" else c.bm25_rank
    raw = c.dense_sim if path == "dense" else c.bm25_score
    out = {}
    for qi, q_id in enumerate(c.query_ids):
        rows = np.flatnonzero((c.query_idx == qi) & in_path(rank, DEPTH))
        out[q_id] = {c.doc_ids[c.doc_idx[r]]: float(-rank[r] if by_rank else raw[r]) for r in rows}
    return Run(out, name=path)


def ours(c, fusion: str, params: dict) -> dict[str, dict[str, float]]:
    entry = get_fusion(fusion)
    score = entry.score(c, c.visible(DEPTH), DEPTH, entry.params(**params)).score
    out: dict[str, dict[str, float]] = {q: {} for q in c.query_ids}
    for r in np.flatnonzero(np.isfinite(score)):
        out[c.query_ids[c.query_idx[r]]][c.doc_ids[c.doc_idx[r]]] = float(score[r])
    return out


def single_or_tied(c, qi: int) -> bool:
    """A path of query ``qi`` whose hits all share one score (min-max rules differ from ranx)."""
    for rank, raw in ((c.dense_rank, c.dense_sim), (c.bm25_rank, c.bm25_score)):
        hits = raw[(c.query_idx == qi) & in_path(rank, DEPTH)]
        if len(hits) and hits.max() == hits.min():
            return True
    return False


def on_both_paths(c, q_id: str, doc_id: str) -> bool:
    rows = np.flatnonzero((c.query_idx == c.query_ids.index(q_id)) & (c.doc_idx == c.doc_ids.index(doc_id)))
    return bool(in_path(c.dense_rank[rows], DEPTH).all() and in_path(c.bm25_rank[rows], DEPTH).all())


def by_score_then_id(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda d: (-round(scores[d], 9), d))


def check_against_ranx(c, case: str) -> int:
    fusion, params, norm, method, ranx_params, rows = CASES[case]
    by_rank = norm in ("rank", None)
    reference = fuse([path_run(c, "dense", by_rank), path_run(c, "sparse", by_rank)],
                     norm=norm, method=method, params=ranx_params).to_dict()
    mine = ours(c, fusion, params)
    compared = 0
    for qi, q_id in enumerate(c.query_ids):
        if norm == "min-max" and single_or_tied(c, qi):
            continue
        theirs = reference.get(q_id, {})
        if rows == "both":
            keep = [d for d in mine[q_id] if on_both_paths(c, q_id, d)]
            mine_q, theirs = {d: mine[q_id][d] for d in keep}, {d: theirs[d] for d in keep}
        else:
            mine_q = mine[q_id]
        assert set(mine_q) == set(theirs), f"{q_id}: documents differ"
        for doc_id, value in mine_q.items():
            assert value == pytest.approx(theirs[doc_id], rel=1e-9, abs=1e-9), f"{case} {q_id} {doc_id}"
        assert by_score_then_id(mine_q) == by_score_then_id(theirs)
        compared += len(mine_q)
    return compared


@pytest.mark.parametrize("case", sorted(CASES))
def test_fusion_equals_ranx_fuse_on_a_hand_built_table(case):
    c = hand_table()
    assert check_against_ranx(c, case) >= (5 if CASES[case][-1] == "both" else 13)


@pytest.fixture(scope="module")
def pool(tiny, rwb_home):
    return load_pool(tiny)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fusion_equals_ranx_fuse_on_the_tiny_fixtures_real_pool(pool, case):
    assert check_against_ranx(pool, case) > 0
