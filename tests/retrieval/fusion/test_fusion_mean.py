"""OpenSearch's normalization processor means (arithmetic, geometric, harmonic), by hand.

Normalised scores of a hit are floored at 0.001 (OpenSearch MIN_SCORE: min-max gives the
lowest hit 0.001); a missed path counts 0 in the arithmetic mean and 0.001 in the others."""

from __future__ import annotations

import math

import pytest

from retrieval.fusion.mean import MeanParams, mean
from retrieval.pipeline import PIPELINES, run_pipeline
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of

F = 0.001  # the floor
R = math.sqrt(3 / 2)


def table():
    """Dense returns A 0.75, B 0.5, C 0.25; BM25 returns B 10, D 6, A 2.
    Min-max: dense A 1, B 0.5, C 0 → 0.001; BM25 B 1, D 0.5, A 0 → 0.001."""
    return make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.75, "bm25_rank": 2, "bm25_score": 2.0},
        {"id": "B", "dense_rank": 1, "dense_sim": 0.5, "bm25_rank": 0, "bm25_score": 10.0},
        {"id": "C", "dense_rank": 2, "dense_sim": 0.25},
        {"id": "D", "dense_sim": 0.125, "bm25_rank": 1, "bm25_score": 6.0},
    ]])


EXPECTED = {
    "arithmetic": {"A": (0.5 * 1 + 0.5 * F) / 1, "B": (0.5 * 0.5 + 0.5 * 1) / 1,
                   "C": (0.5 * F + 0.5 * 0) / 1, "D": (0.5 * 0 + 0.5 * 0.5) / 1},
    "geometric": {"A": math.sqrt(1 * F), "B": math.sqrt(0.5 * 1), "C": math.sqrt(F * F), "D": math.sqrt(F * 0.5)},
    "harmonic": {"A": 1 / (0.5 / 1 + 0.5 / F), "B": 1 / (0.5 / 0.5 + 0.5 / 1),
                 "C": 1 / (0.5 / F + 0.5 / F), "D": 1 / (0.5 / F + 0.5 / 0.5)},
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_each_mean_of_minmax_scores_with_equal_weights(kind):
    c = table()
    scored = mean(c, everything_visible(c), 20, MeanParams(mean=kind))
    for doc_id, value in EXPECTED[kind].items():
        assert score_of(c, scored.score, doc_id) == pytest.approx(value), doc_id
        # the components split the score and add up to it
        assert score_of(c, scored.components["dense"] + scored.components["sparse"], doc_id) == pytest.approx(value)


def test_weights_of_a_geometric_and_a_harmonic_mean():
    c = table()
    visible = everything_visible(c)
    geometric = mean(c, visible, 20, MeanParams(w_dense=0.8, w_sparse=0.2, mean="geometric")).score
    assert score_of(c, geometric, "B") == pytest.approx(math.exp((0.8 * math.log(0.5) + 0.2 * math.log(1)) / 1.0))
    harmonic = mean(c, visible, 20, MeanParams(w_dense=3.0, w_sparse=1.0, mean="harmonic")).score
    assert score_of(c, harmonic, "B") == pytest.approx((3 + 1) / (3 / 0.5 + 1 / 1))


def test_zscores_at_or_below_the_mean_are_floored():
    """OpenSearch z_score: z ≤ 0 becomes 0.001 (A's BM25 z is −R, B's dense z is 0)."""
    c = table()
    score = mean(c, everything_visible(c), 20, MeanParams(norm="zscore")).score
    assert score_of(c, score, "A") == pytest.approx(0.5 * R + 0.5 * F)
    assert score_of(c, score, "B") == pytest.approx(0.5 * F + 0.5 * R)
    assert score_of(c, score, "C") == pytest.approx(0.5 * F + 0.5 * 0)


@pytest.mark.parametrize("kind", ["geometric", "harmonic"])
def test_a_missed_path_counts_as_the_floor_so_being_found_never_hurts(kind):
    """X is found by the vector path only, Y by both with the lowest BM25 score: OpenSearch
    would skip X's missing score and rank X (0.8) above Y; here they tie."""
    c = make_candidates([[
        {"id": "X", "dense_rank": 0, "dense_sim": 0.9},
        {"id": "Y", "dense_rank": 1, "dense_sim": 0.9, "bm25_rank": 1, "bm25_score": 1.0},
        {"id": "Z", "dense_rank": 2, "dense_sim": 0.1, "bm25_rank": 0, "bm25_score": 5.0},
    ]])
    score = mean(c, everything_visible(c), 20, MeanParams(mean=kind)).score
    assert score_of(c, score, "X") == pytest.approx(score_of(c, score, "Y"))
    assert score_of(c, score, "X") == pytest.approx(math.sqrt(1 * F) if kind == "geometric" else 1 / (0.5 + 0.5 / F))


def test_the_opensearch_pipeline_is_the_minmax_arithmetic_mean():
    c = table()
    config = PIPELINES["opensearch"]
    assert (config.params.norm, config.params.mean, config.params.w_dense, config.params.w_sparse) == (
        "minmax", "arithmetic", 0.5, 0.5)
    assert ranked_ids(c, run_pipeline(c, config).ranking) == ["B", "A", "D", "C"]  # 0.75, 0.5005, 0.25, 0.0005


@pytest.mark.parametrize("bad, message", [
    ({"w_dense": 0.0, "w_sparse": 0.0}, "w_dense \\+ w_sparse must be > 0"),
    ({"mean": "median"}, "mean must be one of"),
    ({"w_sparse": -1.0}, "w_sparse must be ≥ 0"),
])
def test_invalid_parameters_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        MeanParams(**bad)


# ---- semantics = opensearch: neural-search's processor exactly ------------------------------

@pytest.mark.parametrize("kind", ["geometric", "harmonic"])
def test_opensearch_semantics_leave_a_missed_path_out(kind):
    """The table above, OpenSearch's way: C (vector only, min-max 0 → 0.001) and D (BM25 only,
    0.5) are scored on their one path; A's BM25 0 → 0.001 (an exact 0 is replaced)."""
    c = table()
    score = mean(c, everything_visible(c), 20, MeanParams(mean=kind, semantics="opensearch")).score
    expected = {"geometric": {"A": math.sqrt(1 * F), "B": math.sqrt(0.5 * 1), "C": F, "D": 0.5},
                "harmonic": {"A": 1 / (0.5 / 1 + 0.5 / F), "B": 1 / (0.5 / 0.5 + 0.5 / 1), "C": F, "D": 0.5}}[kind]
    for doc_id, value in expected.items():
        assert score_of(c, score, doc_id) == pytest.approx(value), doc_id


def test_opensearch_semantics_keep_a_score_below_the_floor():
    """min-max 0.0001 (just above the minimum) stays 0.0001 in OpenSearch; ours floors it to 0.001."""
    c = make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.9, "bm25_rank": 0, "bm25_score": 12.0},
        {"id": "B", "dense_rank": 1, "dense_sim": 0.5, "bm25_rank": 1, "bm25_score": 2.001},
        {"id": "C", "dense_rank": 2, "dense_sim": 0.1, "bm25_rank": 2, "bm25_score": 2.0},
    ]])
    visible = everything_visible(c)
    low = (2.001 - 2.0) / 10.0
    theirs = mean(c, visible, 20, MeanParams(semantics="opensearch")).score
    ours = mean(c, visible, 20, MeanParams()).score
    assert score_of(c, theirs, "B") == pytest.approx(0.5 * 0.5 + 0.5 * low)
    assert score_of(c, ours, "B") == pytest.approx(0.5 * 0.5 + 0.5 * F)


@pytest.mark.parametrize("kind", ["arithmetic", "geometric", "harmonic"])
def test_opensearch_semantics_equal_the_neural_search_port(kind):
    """The same two lists through tests/opensearch_port.py (min_max + *_mean.combine)."""
    from tests import opensearch_port

    c = table()
    ours = mean(c, everything_visible(c), 20, MeanParams(w_dense=0.3, w_sparse=0.7, mean=kind,
                                                          semantics="opensearch")).score
    processor = {"normalization-processor": {"normalization": {"technique": "min_max"},
                                             "combination": {"technique": f"{kind}_mean",
                                                             "parameters": {"weights": [0.7, 0.3]}}}}
    keyword, vector = [("B", 10.0), ("D", 6.0), ("A", 2.0)], [("A", 0.75), ("B", 0.5), ("C", 0.25)]
    theirs = dict(opensearch_port.hybrid([keyword, vector], processor))
    assert theirs == pytest.approx({d: score_of(c, ours, d) for d in "ABCD"}, rel=1e-6)


def test_the_opensearch_pipeline_uses_opensearch_semantics():
    assert PIPELINES["opensearch"].params.semantics == "opensearch"
