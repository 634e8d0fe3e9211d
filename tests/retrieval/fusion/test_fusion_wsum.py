"""Weighted sum of normalised path scores (ranx ``wsum``), by hand; ranx itself in
tests/retrieval/fusion/test_fusion_ranx.py, the norms' edge cases in tests/retrieval/fusion/test_fusion_normalise.py."""

from __future__ import annotations

import math

import pytest

from retrieval.fusion.wsum import WsumParams, wsum
from retrieval.pipeline import PIPELINES, run_pipeline
from tests.conftest import everything_visible, ranked_ids, score_of, two_path_table

R = math.sqrt(3 / 2)  # |z| of the outer two of three evenly spaced scores


def test_default_is_half_minmax_cosine_plus_half_minmax_bm25():
    c = two_path_table()
    scored = wsum(c, everything_visible(c), 20, WsumParams())
    expected = {"A": 0.5 * 1 + 0.5 * 0, "B": 0.5 * (0.5 - 0.25) / 0.5 + 0.5 * 1,
                "C": 0.5 * 0 + 0.5 * 0, "D": 0.5 * 0 + 0.5 * (6 - 2) / (10 - 2)}
    for doc_id, value in expected.items():
        assert score_of(c, scored.score, doc_id) == pytest.approx(value)
    for doc_id in "ABCD":  # the components add up to the score
        assert score_of(c, scored.components["dense"] + scored.components["sparse"], doc_id) == pytest.approx(
            score_of(c, scored.score, doc_id))


def test_weights_with_zscores_and_a_miss_at_the_lowest_z():
    c = two_path_table()
    scored = wsum(c, everything_visible(c), 20, WsumParams(w_dense=0.7, w_sparse=0.3, norm="zscore"))
    assert score_of(c, scored.score, "A") == pytest.approx(0.7 * R + 0.3 * -R)
    assert score_of(c, scored.score, "B") == pytest.approx(0.7 * 0 + 0.3 * R)
    assert score_of(c, scored.score, "C") == pytest.approx(0.7 * -R + 0.3 * -R)  # BM25 missed C: lowest z
    assert score_of(c, scored.score, "D") == pytest.approx(0.7 * -R + 0.3 * 0)


def test_weights_with_dbsf_and_rank_norms():
    c = two_path_table()
    dbsf = wsum(c, everything_visible(c), 20, WsumParams(w_dense=0.7, w_sparse=0.3, norm="dbsf")).score
    # sample σ 0.25 and 4: (s − (μ − 3σ)) / 6σ
    assert score_of(c, dbsf, "A") == pytest.approx(0.7 * (0.75 + 0.25) / 1.5 + 0.3 * (2 + 6) / 24)
    assert score_of(c, dbsf, "D") == pytest.approx(0.7 * 0 + 0.3 * (6 + 6) / 24)
    rank = wsum(c, everything_visible(c), 20, WsumParams(w_dense=0.7, w_sparse=0.3, norm="rank")).score
    assert score_of(c, rank, "A") == pytest.approx(0.7 * 1 / (1 + 0) + 0.3 * 1 / (1 + 2))
    assert score_of(c, rank, "B") == pytest.approx(0.7 * 1 / (1 + 1) + 0.3 * 1 / (1 + 0))


def test_the_wsum_pipeline_ranks_by_the_weighted_sum():
    c = two_path_table()
    run = run_pipeline(c, PIPELINES["wsum"])
    assert ranked_ids(c, run.ranking) == ["B", "A", "D", "C"]  # 0.75, 0.5, 0.25, 0


@pytest.mark.parametrize("bad, message", [
    ({"w_dense": -0.1}, "w_dense must be ≥ 0"), ({"w_sparse": math.nan}, "w_sparse must be a finite number"),
    ({"w_dense": True}, "w_dense must be a number"), ({"norm": "softmax"}, "norm must be one of"),
])
def test_invalid_parameters_are_refused_naming_the_field(bad, message):
    with pytest.raises(ValueError, match=message):
        WsumParams(**bad)


@pytest.mark.parametrize("norm", ["minmax", "zscore", "dbsf", "rank", "rank_linear"])
def test_compiled_score_equals_the_numpy_formula_bit_for_bit(norm):
    """One compiled pass equals ``w_dense·norm(cos) + w_sparse·norm(BM25)`` written in NumPy."""
    import numpy as np

    from retrieval.fusion._base import normalise
    from tests.conftest import random_two_path_table

    for seed in range(3):
        c = random_two_path_table(seed)
        visible = c.visible(20)
        expected = (0.7 * normalise(c, visible, 20, "dense", norm)[0]
                    + 0.2 * normalise(c, visible, 20, "sparse", norm)[0])
        scored = wsum(c, visible, 20, WsumParams(w_dense=0.7, w_sparse=0.2, norm=norm))
        assert np.array_equal(scored.score, np.where(visible, expected, -np.inf))
        total = scored.components["dense"] + scored.components["sparse"]
        assert np.array_equal(scored.score[visible], total[visible])
