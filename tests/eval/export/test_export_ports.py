"""The engine ports used as export oracles, held to golden values checked by hand against the
engines' own code (and, where the engine's own unit tests give values, those values).

OpenSearch: neural-search ``src/main/java/org/opensearch/neuralsearch/processor/`` (ported in
``tests/opensearch_port.py``); expected values of ``*ScoreCombinationTechniqueTests.java`` and
``MinMaxScoreNormalizationTechniqueTests.java`` in ``src/test/java/…/processor/``.
Weaviate: ``usecases/traverser/hybrid/hybrid_fusion.go`` (ported in ``tests/weaviate_port.py``);
expected values of ``usecases/traverser/hybrid/fusion_test.go`` ``TestFusionRelativeScore``.
"""

from __future__ import annotations

import math

import pytest

from tests import opensearch_port as os_port
from tests import weaviate_port as wv_port

W = [0.45, 0.15, 0.4]  # the weights of neural-search's combination tests


def test_opensearch_min_max_replaces_only_an_exact_zero():
    # MinMaxScoreNormalizationTechniqueTests: [0.9, 0.7, 0.1] -> [1.0, 0.75, MIN_SCORE]
    assert os_port.min_max([0.9, 0.7, 0.1]) == pytest.approx([1.0, (0.7 - 0.1) / (0.9 - 0.1), 0.001])
    # a value just above the minimum is kept, not raised to 0.001 (calculateNormalizedScore)
    assert os_port.min_max([12.0, 2.001, 2.0])[1] == pytest.approx((2.001 - 2.0) / 10.0, rel=1e-3)
    # one hit, or equal scores: SINGLE_RESULT_SCORE
    assert os_port.min_max([5.0]) == [1.0] and os_port.min_max([3.0, 3.0]) == [1.0, 1.0]


def test_opensearch_l2_equals_neural_search_test_values():
    # L2ScoreNormalizationTechniqueTests.testNormalizedScoresAreSetAtCorrectIndices
    assert os_port.l2([2.0, 3.0]) == pytest.approx([0.5547, 0.8321], abs=1e-4)
    assert os_port.l2([4.0, 5.0]) == pytest.approx([0.6247, 0.7809], abs=1e-4)
    assert os_port.l2([1.0]) == [1.0] and os_port.l2([0.0, 0.0]) == [0.0, 0.0]  # norm 0 → MIN_SCORE 0


def test_opensearch_rrf_scores_are_one_over_rank_constant_plus_position_plus_one():
    # RRFNormalizationTechnique.calculateNormalizedScore: 1 / (rank_constant + position + 1), 10 decimals
    assert os_port.rrf_scores(3, 60) == pytest.approx([1 / 61, 1 / 62, 1 / 63], rel=1e-7)
    assert os_port.rrf_scores(1, 1)[0] == 0.5


@pytest.mark.parametrize("combine, scores, expected", [
    # neural-search's own tests (DELTA_FOR_ASSERTION 0.0001 there)
    (os_port.geometric_mean, [1.0, 0.5, 0.3], 0.5567),
    (os_port.geometric_mean, [1.0, 0.0, 0.6], 0.7863),
    (os_port.harmonic_mean, [1.0, 0.5, 0.3], 0.48),
    (os_port.harmonic_mean, [1.0, 0.0, 0.6], 0.7611),
    (os_port.arithmetic_mean, [1.0, 0.0, 0.6], 0.69),
])
def test_opensearch_means_equal_neural_search_test_values(combine, scores, expected):
    assert combine(scores, W) == pytest.approx(expected, abs=1e-4)


def test_opensearch_means_by_hand():
    # geometric: exp(Σ w ln s / Σ w) over the scores > 0 only: the 0 (missed) and its weight left out
    assert os_port.geometric_mean([1.0, 0.0, 0.6], W) == pytest.approx(
        math.exp((0.45 * math.log(1.0) + 0.4 * math.log(0.6)) / (0.45 + 0.4)), rel=1e-6)
    # harmonic: Σ w / Σ (w / s) over the scores > 0
    assert os_port.harmonic_mean([1.0, 0.0, 0.6], W) == pytest.approx((0.45 + 0.4) / (0.45 / 1.0 + 0.4 / 0.6), rel=1e-6)
    # arithmetic: a 0 counts, with its weight
    assert os_port.arithmetic_mean([0.5, 0.0], [0.3, 0.7]) == pytest.approx(0.3 * 0.5, rel=1e-6)
    # a path that found nothing: all scores 0 -> 0
    assert os_port.geometric_mean([0.0, 0.0], [0.5, 0.5]) == 0.0 == os_port.harmonic_mean([0.0, 0.0], [0.5, 0.5])
    # RRF sums weight · score (RRFScoreCombinationTechnique.combine)
    assert os_port.rrf_sum([1 / 61, 1 / 62], [0.25, 0.75]) == pytest.approx(0.25 / 61 + 0.75 / 62, rel=1e-6)


def test_opensearch_hybrid_skips_a_missed_path_in_the_geometric_mean():
    """X found by the keyword path only (normalised 1.0 there), Y by both (1.0 and 0.001): the
    geometric mean leaves X's missing score out, so X (1.0) ranks above Y (√0.001)."""
    keyword = [("X", 8.0), ("Y", 8.0), ("Z", 1.0)]
    vector = [("Z", 0.9), ("Y", 0.2)]
    processor = {"normalization-processor": {"normalization": {"technique": "min_max"},
                                             "combination": {"technique": "geometric_mean",
                                                             "parameters": {"weights": [0.5, 0.5]}}}}
    fused = dict(os_port.hybrid([keyword, vector], processor))
    assert fused["X"] == pytest.approx(1.0)
    assert fused["Y"] == pytest.approx(math.sqrt(1.0 * 0.001), rel=1e-5)
    assert fused["Z"] == pytest.approx(math.sqrt(0.001 * 1.0), rel=1e-5)


@pytest.mark.parametrize("weights, scores, expected_scores, expected_order", [
    # Weaviate fusion_test.go TestFusionRelativeScore, rows 2, 3 and 9
    ([0.5, 0.5], [[0, 2, 0.1], [0, 0.2, 2]], [0.55, 0.525, 0], ["1", "2", "0"]),
    ([0.75, 0.25], [[0.5, 0.5, 0], [0, 0.01, 0.001]], [1, 0.75, 0.025], ["1", "0", "2"]),
    ([0.75, 0.25], [[1, 1], [1, 2]], [1, 0.75], ["1", "0"]),
])
def test_weaviate_relative_score_equals_weaviate_test_values(weights, scores, expected_scores, expected_order):
    sets = [[(str(j), s) for j, s in enumerate(values)] for values in scores]
    fused = wv_port.relative_score(weights, sets)
    assert [d for d, _ in fused] == expected_order
    assert [s for _, s in fused] == pytest.approx(expected_scores, abs=1e-4)


def test_weaviate_ranked_fusion_by_hand():
    """FusionRanked: float32(weight / (i + 60)), i 0-based, summed over the legs."""
    keyword, vector = [("A", 9.0), ("B", 3.0)], [("B", 0.9), ("C", 0.5)]
    fused = dict(wv_port.ranked([0.25, 0.75], [keyword, vector]))
    assert fused["A"] == pytest.approx(0.25 / 60, rel=1e-6)
    assert fused["B"] == pytest.approx(0.25 / 61 + 0.75 / 60, rel=1e-6)
    assert fused["C"] == pytest.approx(0.75 / 61, rel=1e-6)


def test_weaviate_legs_and_their_depth():
    """searcher.go: keyword leg first with 1 − alpha, vector leg with alpha, a leg of weight 0
    not run; explorer_hybrid.go: each leg max(QUERY_HYBRID_MAXIMUM_RESULTS, limit) deep."""
    assert wv_port.legs(0.75, ["k"], ["v"]) == ([0.25, 0.75], [["k"], ["v"]])
    assert wv_port.legs(1.0, ["k"], ["v"]) == ([1.0], [["v"]])
    assert wv_port.legs(0.0, ["k"], ["v"]) == ([1.0], [["k"]])
    assert wv_port.leg_depth(10) == 100 and wv_port.leg_depth(10, 20) == 20 and wv_port.leg_depth(150) == 150
