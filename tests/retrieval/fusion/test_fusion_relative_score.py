"""Weaviate's relative score fusion, by hand: alpha · minmax(cos) + (1 − alpha) · minmax(BM25)."""

from __future__ import annotations

import pytest

from retrieval.fusion.relative_score import RelativeScoreParams, relative_score
from retrieval.fusion.wsum import WsumParams, wsum
from retrieval.pipeline import PIPELINES, run_pipeline
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of, two_path_table


def test_weaviate_default_alpha_0_75():
    c = two_path_table()
    score = relative_score(c, everything_visible(c), 20, RelativeScoreParams()).score
    assert [score_of(c, score, d) for d in "ABCD"] == pytest.approx(
        [0.75 * 1 + 0.25 * 0, 0.75 * (0.5 - 0.25) / 0.5 + 0.25 * 1, 0.75 * 0 + 0.25 * 0, 0.75 * 0 + 0.25 * 4 / 8])
    run = run_pipeline(c, PIPELINES["relative-score"])
    assert ranked_ids(c, run.ranking) == ["A", "B", "D", "C"]  # 0.75, 0.625, 0.125, 0


def test_alpha_1_is_the_vector_path_and_0_the_keyword_path():
    c = two_path_table()
    vector = relative_score(c, everything_visible(c), 20, RelativeScoreParams(alpha=1.0)).score
    keyword = relative_score(c, everything_visible(c), 20, RelativeScoreParams(alpha=0.0)).score
    assert [score_of(c, vector, d) for d in "ABCD"] == pytest.approx([1, 0.5, 0, 0])
    assert [score_of(c, keyword, d) for d in "ABCD"] == pytest.approx([0, 1, 0, 0.5])


def test_a_single_or_tied_path_gives_its_hits_the_full_weight():
    """Weaviate: 'If all scores are identical min and max are the same => just set score to the weight.'"""
    c = make_candidates([
        [{"id": "E", "dense_rank": 0, "dense_sim": 0.6}, {"id": "F", "bm25_rank": 0, "bm25_score": 3.0}],
        [{"id": "G", "dense_rank": 0, "dense_sim": 0.5, "bm25_rank": 0, "bm25_score": 2.0},
         {"id": "H", "dense_rank": 1, "dense_sim": 0.5, "bm25_rank": 1, "bm25_score": 2.0}],
    ])
    score = relative_score(c, everything_visible(c), 20, RelativeScoreParams(alpha=0.6)).score
    assert [score_of(c, score, "E", 0), score_of(c, score, "F", 0)] == pytest.approx([0.6, 1 - 0.6])
    assert [score_of(c, score, "G", 1), score_of(c, score, "H", 1)] == pytest.approx([0.6 + 0.4, 0.6 + 0.4])


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.75, 1.0])
def test_relative_score_is_wsum_of_minmax_with_alpha_and_one_minus_alpha(alpha):
    c = two_path_table()
    visible = everything_visible(c)
    assert relative_score(c, visible, 20, RelativeScoreParams(alpha=alpha)).score.tolist() == pytest.approx(
        wsum(c, visible, 20, WsumParams(w_dense=alpha, w_sparse=1 - alpha, norm="minmax")).score.tolist())


@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("inf")])
def test_alpha_outside_0_1_is_refused(alpha):
    with pytest.raises(ValueError, match="alpha must be"):
        RelativeScoreParams(alpha=alpha)
