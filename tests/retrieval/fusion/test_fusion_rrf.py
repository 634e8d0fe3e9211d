"""RRF (seed 000 ``_rrf_merge``) checked by hand on small candidate tables.

Expected values are written as the arithmetic of the formula; ranks are 0-based."""

from __future__ import annotations

import pytest

from retrieval.dataset import Document
from retrieval.fusion.rrf import RRFParams, rrf
from retrieval.pipeline import PIPELINES, PipelineConfig, response_for, run_pipeline
from retrieval.ranking import rank_rows
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of

# ---- RRF (seed 000 _rrf_merge) ----------------------------------------------------------

def seed000_rrf_table():
    """Seed 000's example: vector returns [A, B, C], FTS returns [B, D, A]."""
    return make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.9, "bm25_rank": 2, "bm25_score": 1.0},
        {"id": "B", "dense_rank": 1, "dense_sim": 0.8, "bm25_rank": 0, "bm25_score": 3.0},
        {"id": "C", "dense_rank": 2, "dense_sim": 0.7},
        {"id": "D", "bm25_rank": 1, "bm25_score": 2.0},
    ]])


def test_rrf_seed000_example_scores_and_order():
    c = seed000_rrf_table()
    scored = rrf(c, everything_visible(c), 20, RRFParams())
    expected = {
        "A": 1 / (60 + 0 + 1) + 1 / (60 + 2 + 1),
        "B": 1 / (60 + 1 + 1) + 1 / (60 + 0 + 1),
        "C": 1 / (60 + 2 + 1),
        "D": 1 / (60 + 1 + 1),
    }
    for doc_id, value in expected.items():
        assert score_of(c, scored.score, doc_id) == pytest.approx(value)
    # the rounded values seed 000 prints
    assert [round(score_of(c, scored.score, d), 4) for d in "BADC"] == [0.0325, 0.0323, 0.0161, 0.0159]
    ranking = rank_rows(c, scored.score, max_results=10)
    assert ranked_ids(c, ranking) == ["B", "A", "D", "C"]


def test_rrf_seed000_example_through_the_rrf_pipeline():
    c = seed000_rrf_table()
    run = run_pipeline(c, PIPELINES["rrf"])
    assert ranked_ids(c, run.ranking) == ["B", "A", "D", "C"]
    assert run.ranking.score.tolist() == pytest.approx([
        1 / (60 + 1 + 1) + 1 / (60 + 0 + 1),
        1 / (60 + 0 + 1) + 1 / (60 + 2 + 1),
        1 / (60 + 1 + 1),
        1 / (60 + 2 + 1),
    ])
    response = response_for(c, run, 0, [Document(id=d, text=f"text of {d}") for d in c.doc_ids])
    assert response.route == "hybrid"
    first = response.results[0]
    assert (first.id, first.rank) == ("B", 0)
    # the components a user sees add up to the score
    assert first.components == pytest.approx({"dense": 1 / (60 + 1 + 1), "sparse": 1 / (60 + 0 + 1)})


def test_rrf_weights_and_rrf_k():
    c = seed000_rrf_table()
    scored = rrf(c, everything_visible(c), 20, RRFParams(rrf_k=10, w_dense=2.0, w_sparse=0.5))
    assert score_of(c, scored.score, "A") == pytest.approx(2.0 / (10 + 0 + 1) + 0.5 / (10 + 2 + 1))
    assert score_of(c, scored.score, "D") == pytest.approx(0.5 / (10 + 1 + 1))


def test_rrf_counts_only_ranks_within_the_pipeline_depth():
    """A pipeline with depth 2 retrieves ranks 0 and 1 of each path: C (vector rank 2) is not
    seen at all, and A's keyword rank 2 no longer counts."""
    c = seed000_rrf_table()
    run = run_pipeline(c, PipelineConfig("rrf-depth-2", "rrf", depth=2))
    assert ranked_ids(c, run.ranking) == ["B", "A", "D"]
    assert score_of(c, run.scored.score, "A") == pytest.approx(1 / (60 + 0 + 1))


# ---- recency decay and the quality multipliers -----------------------------------------


def test_rrf_compiled_score_equals_the_sum_of_its_numpy_components_bit_for_bit():
    """The table-driven pass performs the same float operations as the plain formula
    ``where(in path, w / (k + rank + 1), 0)`` summed over both paths, −inf where not visible."""
    import numpy as np

    from retrieval.fusion._base import in_path
    rng = np.random.default_rng(7)
    rows = [[{"id": f"d{i}", "dense_rank": int(rng.integers(-1, 50)), "bm25_rank": int(rng.integers(-1, 50))}
             for i in range(40)] for _ in range(3)]
    c = make_candidates(rows)
    visible = c.visible(20) & (rng.random(c.n_rows) < 0.9)
    for params in (RRFParams(), RRFParams(rrf_k=7.5, w_dense=0.3, w_sparse=1.7), RRFParams(w_dense=0.0)):
        for depth in (1, 5, 20):
            dense = np.where(in_path(c.dense_rank, depth), params.w_dense / (params.rrf_k + c.dense_rank + 1.0), 0.0)
            sparse = np.where(in_path(c.bm25_rank, depth), params.w_sparse / (params.rrf_k + c.bm25_rank + 1.0), 0.0)
            scored = rrf(c, visible, depth, params)
            assert np.array_equal(scored.score, np.where(visible, dense + sparse, -np.inf))
            assert np.array_equal(scored.components["dense"], dense)
            assert np.array_equal(scored.components["sparse"], sparse)


# ---- weighting = qdrant: Qdrant's weighted RRF ---------------------------------------------

def test_qdrant_weighting_divides_the_rank_by_the_weight():
    """qdrant-client hybrid/fusion.py: 1 / ((pos + 1) / w + k − 1) with k = rrf_k + 1, so
    1 / ((rank + 1) / w + rrf_k); seed 000's table, weights 2 (vector) and 0.5 (BM25)."""
    c = seed000_rrf_table()
    params = RRFParams(w_dense=2.0, w_sparse=0.5, weighting="qdrant")
    scored = rrf(c, everything_visible(c), 20, params)
    expected = {
        "A": 1 / ((0 + 1) / 2 + 60) + 1 / ((2 + 1) / 0.5 + 60),
        "B": 1 / ((1 + 1) / 2 + 60) + 1 / ((0 + 1) / 0.5 + 60),
        "C": 1 / ((2 + 1) / 2 + 60),
        "D": 1 / ((1 + 1) / 0.5 + 60),
    }
    for doc_id, value in expected.items():
        assert score_of(c, scored.score, doc_id) == pytest.approx(value)
        assert score_of(c, scored.components["dense"] + scored.components["sparse"], doc_id) == score_of(
            c, scored.score, doc_id)
    # multiplying instead: 2/61 + 0.5/63 for A — another function, another number
    multiplied = rrf(c, everything_visible(c), 20, RRFParams(w_dense=2.0, w_sparse=0.5)).score
    assert score_of(c, multiplied, "A") == pytest.approx(2 / 61 + 0.5 / 63)
    assert score_of(c, multiplied, "A") != pytest.approx(expected["A"])


def test_qdrant_weighting_with_unit_weights_is_plain_rrf_and_weight_zero_drops_the_path():
    c = seed000_rrf_table()
    visible = everything_visible(c)
    assert rrf(c, visible, 20, RRFParams(weighting="qdrant")).score.tolist() == pytest.approx(
        rrf(c, visible, 20, RRFParams()).score.tolist())
    zero = rrf(c, visible, 20, RRFParams(w_sparse=0.0, weighting="qdrant"))  # Qdrant: weight ≤ 0 → 0
    assert score_of(c, zero.score, "D") == 0.0
    assert score_of(c, zero.score, "A") == pytest.approx(1 / (1 + 60))


def test_qdrant_weighting_equals_qdrant_client_on_the_same_lists():
    """The same two lists fused by qdrant-client's own reciprocal_rank_fusion (k = rrf_k + 1)."""
    from qdrant_client.http import models
    from qdrant_client.hybrid.fusion import reciprocal_rank_fusion

    c = seed000_rrf_table()
    params = RRFParams(rrf_k=5.0, w_dense=1.5, w_sparse=0.25, weighting="qdrant")
    ours = rrf(c, everything_visible(c), 20, params).score
    ids = {d: i for i, d in enumerate("ABCD")}
    point = lambda d: models.ScoredPoint(id=ids[d], version=0, score=0.0)  # noqa: E731
    fused = reciprocal_rank_fusion([[point(d) for d in "ABC"], [point(d) for d in "BDA"]], limit=10,
                                   ranking_constant_k=6, weights=[1.5, 0.25])
    assert {p.id: p.score for p in fused} == pytest.approx({ids[d]: score_of(c, ours, d) for d in "ABCD"})


def test_an_unknown_weighting_is_refused():
    with pytest.raises(ValueError, match="weighting must be one of"):
        RRFParams(weighting="divide")
