"""CombSUM (Fox & Shaw 1994; ranx ``sum``) and Qdrant's DBSF as CombSUM over mean ± 3σ, by hand."""

from __future__ import annotations

import pytest

from retrieval.fusion.combsum import CombSumParams, combsum
from retrieval.fusion._base import NORMS
from retrieval.fusion.wsum import WsumParams, wsum
from retrieval.pipeline import PIPELINES, run_pipeline
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of, two_path_table


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


def test_dbsf_equals_qdrant_client_beyond_three_sigma():
    """Eleven BM25 hits, one far above the rest: Qdrant's DBSF (qdrant-client
    distribution_based_score_fusion, not clipped) gives it (s − (μ − 3σ)) / 6σ > 1; ours too."""
    from qdrant_client.http import models
    from qdrant_client.hybrid.fusion import distribution_based_score_fusion

    scores = [40.0] + [1.0] * 10
    rows = [{"id": f"d{i:02}", "bm25_rank": i, "bm25_score": s, "dense_rank": i, "dense_sim": 0.9 - i / 20}
            for i, s in enumerate(scores)]
    c = make_candidates([rows])
    scored = combsum(c, everything_visible(c), 20, CombSumParams(norm="dbsf"))
    ours = scored.score
    legs = [[models.ScoredPoint(id=i, version=0, score=0.9 - i / 20) for i in range(11)],
            [models.ScoredPoint(id=i, version=0, score=s) for i, s in enumerate(scores)]]
    theirs = {p.id: p.score for p in distribution_based_score_fusion(legs, limit=20)}
    assert theirs == pytest.approx({i: score_of(c, ours, f"d{i:02}") for i in range(11)})
    # the BM25 outlier: z = 10/√11 sample σs above the mean, (z + 3) / 6 = 1.0025 — not clipped to 1
    assert score_of(c, scored.components["sparse"], "d00") == pytest.approx((10 / 11 ** 0.5 + 3) / 6)
