"""CombSUM (Fox & Shaw 1994; ranx ``sum``) and Qdrant's DBSF as CombSUM over mean ± 3σ, by hand."""

from __future__ import annotations

import pytest

from retrieval.fusion.combsum import CombSumParams, combsum
from retrieval.fusion._base import NORMS
from retrieval.fusion.wsum import WsumParams, wsum
from retrieval.pipeline import PIPELINES, run_pipeline
from tests.conftest import everything_visible, ranked_ids, score_of, two_path_table


def test_combsum_of_minmax_scores():
    c = two_path_table()
    score = combsum(c, everything_visible(c), 20, CombSumParams()).score
    assert [score_of(c, score, d) for d in "ABCD"] == pytest.approx(
        [1 + 0, (0.5 - 0.25) / 0.5 + 1, 0 + 0, 0 + (6 - 2) / (10 - 2)])


def test_dbsf_is_combsum_of_mean_plus_minus_three_sigma():
    """Qdrant: sample σ (0.25 for the cosines, 4 for BM25), (s − (μ − 3σ)) / 6σ, then the sum."""
    c = two_path_table()
    score = combsum(c, everything_visible(c), 20, CombSumParams(norm="dbsf")).score
    assert score_of(c, score, "A") == pytest.approx((0.75 - (0.5 - 0.75)) / 1.5 + (2 - (6 - 12)) / 24)
    assert score_of(c, score, "B") == pytest.approx((0.5 + 0.25) / 1.5 + (10 + 6) / 24)
    assert score_of(c, score, "C") == pytest.approx((0.25 + 0.25) / 1.5 + 0)
    assert score_of(c, score, "D") == pytest.approx(0 + (6 + 6) / 24)
    run = run_pipeline(c, PIPELINES["dbsf"])
    assert ranked_ids(c, run.ranking) == ["B", "A", "D", "C"]  # 1.1667, 1.0, 0.5, 0.3333


@pytest.mark.parametrize("norm", NORMS)
def test_combsum_is_wsum_with_unit_weights(norm):
    c = two_path_table()
    visible = everything_visible(c)
    assert combsum(c, visible, 20, CombSumParams(norm=norm)).score.tolist() == pytest.approx(
        wsum(c, visible, 20, WsumParams(w_dense=1.0, w_sparse=1.0, norm=norm)).score.tolist())


def test_the_combsum_pipeline_and_an_unknown_norm():
    c = two_path_table()
    assert ranked_ids(c, run_pipeline(c, PIPELINES["combsum"]).ranking) == ["B", "A", "D", "C"]  # 1.5, 1, 0.5, 0
    with pytest.raises(ValueError, match="norm must be one of"):
        CombSumParams(norm="max")
