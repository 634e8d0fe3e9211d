"""Per-path score normalisation shared by the score fusions (``retrieval.fusion._base.normalise``),
by hand: every norm on one query, then the edge cases decided once — a single hit, all hits
equal, a path that found nothing, a miss, DBSF's clip — and the pipeline depth."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.fusion._base import NORMS, normalise
from tests.conftest import everything_visible, make_candidates, score_of

R = math.sqrt(3 / 2)  # |z| of the outer two of three evenly spaced scores (population σ)


def three_by_three():
    """Dense returns A 0.75, B 0.5, C 0.25; BM25 returns B 10, D 6, A 2 (D's cosine 0.125
    is known but the vector path did not return it)."""
    return make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.75, "bm25_rank": 2, "bm25_score": 2.0},
        {"id": "B", "dense_rank": 1, "dense_sim": 0.5, "bm25_rank": 0, "bm25_score": 10.0},
        {"id": "C", "dense_rank": 2, "dense_sim": 0.25},
        {"id": "D", "dense_sim": 0.125, "bm25_rank": 1, "bm25_score": 6.0},
    ]])


EXPECTED = {  # norm -> path -> {doc: value}; a miss included
    "minmax": {"dense": {"A": (0.75 - 0.25) / (0.75 - 0.25), "B": (0.5 - 0.25) / 0.5, "C": 0.0, "D": 0.0},
               "sparse": {"B": (10 - 2) / (10 - 2), "D": (6 - 2) / 8, "A": 0.0, "C": 0.0}},
    # mean 0.5, σ = sqrt((0.25² + 0 + 0.25²) / 3); BM25: mean 6, σ = sqrt((4² + 0 + 4²) / 3);
    # a miss takes the path's lowest z
    "zscore": {"dense": {"A": R, "B": 0.0, "C": -R, "D": -R},
               "sparse": {"B": R, "D": 0.0, "A": -R, "C": -R}},
    # sample σ: sqrt((0.25² + 0.25²) / 2) = 0.25 and sqrt((4² + 4²) / 2) = 4; (s − (μ − 3σ)) / 6σ
    "dbsf": {"dense": {"A": (0.75 - (0.5 - 3 * 0.25)) / (6 * 0.25), "B": (0.5 + 0.25) / 1.5,
                       "C": (0.25 + 0.25) / 1.5, "D": 0.0},
             "sparse": {"B": (10 - (6 - 3 * 4)) / (6 * 4), "D": (6 + 6) / 24, "A": (2 + 6) / 24, "C": 0.0}},
    # s / √Σs² over the path's hits (OpenSearch l2), the vector path's s OpenSearch's (1 + cos) / 2:
    # 0.875, 0.75, 0.625; BM25 10, 6, 2
    "l2": {"dense": {"A": 0.875 / math.sqrt(0.875 ** 2 + 0.75 ** 2 + 0.625 ** 2),
                     "B": 0.75 / math.sqrt(0.875 ** 2 + 0.75 ** 2 + 0.625 ** 2),
                     "C": 0.625 / math.sqrt(0.875 ** 2 + 0.75 ** 2 + 0.625 ** 2), "D": 0.0},
           "sparse": {"B": 10 / math.sqrt(140), "D": 6 / math.sqrt(140), "A": 2 / math.sqrt(140), "C": 0.0}},
    "rank": {"dense": {"A": 1 / (1 + 0), "B": 1 / (1 + 1), "C": 1 / (1 + 2), "D": 0.0},
             "sparse": {"B": 1 / (1 + 0), "D": 1 / (1 + 1), "A": 1 / (1 + 2), "C": 0.0}},
    "rank_linear": {"dense": {"A": 1 - 0 / 3, "B": 1 - 1 / 3, "C": 1 - 2 / 3, "D": 0.0},
                    "sparse": {"B": 1 - 0 / 3, "D": 1 - 1 / 3, "A": 1 - 2 / 3, "C": 0.0}},
}


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_each_norm_by_hand(norm, path):
    c = three_by_three()
    value, hit = normalise(c, everything_visible(c), 20, path, norm)
    for doc_id, expected in EXPECTED[norm][path].items():
        assert score_of(c, value, doc_id) == pytest.approx(expected), doc_id
    assert sorted(c.doc_ids[c.doc_idx[r]] for r in np.flatnonzero(hit)) == sorted(
        d for d in "ABCD" if (path, d) not in {("dense", "D"), ("sparse", "C")})


def edge_table():
    """q0: one hit per path; q1: two hits per path, all equal; q2: BM25 found nothing."""
    return make_candidates([
        [{"id": "E", "dense_rank": 0, "dense_sim": 0.6}, {"id": "F", "bm25_rank": 0, "bm25_score": 3.0}],
        [{"id": "G", "dense_rank": 0, "dense_sim": 0.5, "bm25_rank": 0, "bm25_score": 2.0},
         {"id": "H", "dense_rank": 1, "dense_sim": 0.5, "bm25_rank": 1, "bm25_score": 2.0}],
        [{"id": "I", "dense_rank": 0, "dense_sim": 0.9}, {"id": "J", "dense_rank": 1, "dense_sim": 0.3}],
    ])


# a hit whose path's hits all tie: min-max 1.0 (OpenSearch, Weaviate; ranx 0, Qdrant 0.5),
# z-score 0 (ranx), DBSF 0.5 (Qdrant); the rank norms do not look at scores
TIED = {"minmax": 1.0, "zscore": 0.0, "dbsf": 0.5}


@pytest.mark.parametrize("norm", sorted(TIED))
def test_a_single_hit_and_all_equal_hits(norm):
    c = edge_table()
    dense = normalise(c, everything_visible(c), 20, "dense", norm)[0]
    sparse = normalise(c, everything_visible(c), 20, "sparse", norm)[0]
    assert score_of(c, dense, "E", 0) == score_of(c, sparse, "F", 0) == TIED[norm]
    assert [score_of(c, dense, d, 1) for d in "GH"] == [TIED[norm], TIED[norm]]
    assert [score_of(c, sparse, d, 1) for d in "GH"] == [TIED[norm], TIED[norm]]
    # the single hit of the other path is a miss here: 0 (the lowest z of a path whose only z is 0)
    assert score_of(c, dense, "F", 0) == score_of(c, sparse, "E", 0) == 0.0


def test_rank_norms_of_tied_hits_follow_the_paths_order():
    c = edge_table()
    rank = normalise(c, everything_visible(c), 20, "sparse", "rank")[0]
    linear = normalise(c, everything_visible(c), 20, "sparse", "rank_linear")[0]
    assert [score_of(c, rank, d, 1) for d in "GH"] == [1 / (1 + 0), 1 / (1 + 1)]
    assert [score_of(c, linear, d, 1) for d in "GH"] == [1 - 0 / 2, 1 - 1 / 2]


@pytest.mark.parametrize("norm", NORMS)
def test_a_path_that_found_nothing_gives_0(norm):
    c = edge_table()
    value, hit = normalise(c, everything_visible(c), 20, "sparse", norm)
    assert [score_of(c, value, d, 2) for d in "IJ"] == [0.0, 0.0]
    assert not hit[c.query_idx == 2].any()


def test_l2_gives_neural_search_own_golden_values():
    """neural-search ``L2ScoreNormalizationTechniqueTests.testNormalizedScoresAreSetAtCorrectIndices``:
    sub-query scores (2, 3) → 0.5547, 0.8321; (4, 5) → 0.6247, 0.7809; a single 1.0 → 1.0; a
    document a sub-query did not return → 0 (asserted to 1e-4 there); and
    ``testNormalization_whenResultFromOneShardOneSubQuery``: (0.5, 0.2) → s / √(0.5² + 0.2²).
    A path whose hits all score 0 gives 0 (``normalizeSingleScore``: l2Norm == 0 → MIN_SCORE 0).
    BM25 scores go in as they are; the vector path's cosine as OpenSearch's (1 + cos) / 2, so
    cosines 3, 5, 7 are the scores 2, 3, 4."""
    c = make_candidates([
        [{"id": "d1", "bm25_rank": 1, "bm25_score": 2.0, "dense_rank": 1, "dense_sim": 3.0},
         {"id": "d2", "bm25_rank": 0, "bm25_score": 3.0, "dense_rank": 0, "dense_sim": 5.0}],
        [{"id": "d2", "bm25_rank": 0, "bm25_score": 4.0}, {"id": "d1", "bm25_rank": 1, "bm25_score": 5.0}],
        [{"id": "d1", "bm25_rank": 0, "bm25_score": 1.0}, {"id": "d2", "dense_rank": 0, "dense_sim": 1.0}],
        [{"id": "d2", "bm25_rank": 0, "bm25_score": 0.5}, {"id": "d4", "bm25_rank": 1, "bm25_score": 0.2}],
        [{"id": "z", "bm25_rank": 0, "bm25_score": 0.0}],
    ])
    sparse = normalise(c, everything_visible(c), 20, "sparse", "l2")[0]
    dense = normalise(c, everything_visible(c), 20, "dense", "l2")[0]
    assert [score_of(c, sparse, d, 0) for d in ("d1", "d2")] == pytest.approx([0.5547, 0.8321], abs=1e-4)
    assert [score_of(c, dense, d, 0) for d in ("d1", "d2")] == pytest.approx([0.5547, 0.8321], abs=1e-4)
    assert [score_of(c, sparse, d, 1) for d in ("d2", "d1")] == pytest.approx([0.6247, 0.7809], abs=1e-4)
    assert score_of(c, sparse, "d1", 2) == 1.0 and score_of(c, sparse, "d2", 2) == 0.0
    assert [score_of(c, sparse, d, 3) for d in ("d2", "d4")] == pytest.approx(
        [0.5 / math.sqrt(0.29), 0.2 / math.sqrt(0.29)])
    assert score_of(c, sparse, "z", 4) == 0.0


def test_dbsf_is_not_clipped_as_in_qdrant():
    """Eleven hits: one outlier beyond mean ± 3σ (sample σ) on each side of a query. Qdrant's
    ``distr_norm`` (``score_fusion.rs``) does not clip: 1.0025 above, −0.0025 below."""
    high = [{"id": f"h{i:02}", "dense_rank": i, "dense_sim": 1.0 if i == 0 else 0.0} for i in range(11)]
    low = [{"id": f"h{i:02}", "dense_rank": i, "dense_sim": 0.0 if i == 10 else 1.0} for i in range(11)]
    c = make_candidates([high, low])
    value = normalise(c, everything_visible(c), 20, "dense", "dbsf")[0]
    mean, sigma = 1 / 11, math.sqrt(((10 / 11) ** 2 + 10 * (1 / 11) ** 2) / 10)  # = sqrt(1/11)
    assert score_of(c, value, "h00", 0) == pytest.approx((1 - (mean - 3 * sigma)) / (6 * sigma))
    assert score_of(c, value, "h00", 0) == pytest.approx(1.0025, abs=1e-4)
    assert score_of(c, value, "h01", 0) == pytest.approx((0 - (mean - 3 * sigma)) / (6 * sigma))
    mean = 10 / 11  # same σ
    assert score_of(c, value, "h10", 1) == pytest.approx((0 - (mean - 3 * sigma)) / (6 * sigma))
    assert score_of(c, value, "h10", 1) == pytest.approx(-0.0025, abs=1e-4)
    assert score_of(c, value, "h00", 1) == pytest.approx((1 - (mean - 3 * sigma)) / (6 * sigma))


def test_only_hits_within_the_pipeline_depth_count():
    """Depth 2: the vector path returned A and B only, so C is a miss and B is the minimum."""
    c = three_by_three()
    value, hit = normalise(c, everything_visible(c), 2, "dense", "minmax")
    assert [score_of(c, value, d) for d in "ABC"] == [(0.75 - 0.5) / (0.75 - 0.5), (0.5 - 0.5) / 0.25, 0.0]
    assert [score_of(c, hit.astype(float), d) for d in "ABC"] == [1.0, 1.0, 0.0]


def test_rows_of_another_query_or_unseen_rows_do_not_count():
    """The same three dense hits in two queries; in query 1, A is not visible."""
    rows = [{"id": d, "dense_rank": i, "dense_sim": s} for i, (d, s) in enumerate(zip("ABC", (0.75, 0.5, 0.25)))]
    c = make_candidates([rows, rows])
    visible = everything_visible(c)
    visible[(c.query_idx == 1) & (c.doc_idx == c.doc_ids.index("A"))] = False
    value = normalise(c, visible, 20, "dense", "minmax")[0]
    assert [score_of(c, value, d, 0) for d in "ABC"] == [1.0, (0.5 - 0.25) / 0.5, 0.0]
    assert [score_of(c, value, d, 1) for d in "BC"] == [(0.5 - 0.25) / (0.5 - 0.25), 0.0]


def test_an_unknown_norm_or_path_is_refused():
    c = three_by_three()
    with pytest.raises(ValueError, match="norm must be one of"):
        normalise(c, everything_visible(c), 20, "dense", "softmax")
    with pytest.raises(ValueError, match="path must be 'dense' or 'sparse'"):
        normalise(c, everything_visible(c), 20, "graph", "minmax")


# one path's hits: distinct ranks in score order, scores from a small grid so that ties occur
SCORES = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, 7.5, 30.0]), min_size=0, max_size=12)


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(dense=SCORES, sparse=SCORES, misses=st.integers(0, 3))
def test_properties_of_every_norm(dense, sparse, misses):
    """Bounded norms stay in [0, 1]; a higher raw score never normalises lower; a miss never
    beats a hit of the same path (dbsf is Qdrant's, unbounded: test_dbsf_is_not_clipped_as_in_qdrant)."""
    dense, sparse = sorted(dense, reverse=True), sorted(sparse, reverse=True)
    rows = [{"id": f"d{i:02}", "dense_rank": i, "dense_sim": s / 30} for i, s in enumerate(dense)]
    rows += [{"id": f"s{i:02}", "bm25_rank": i, "bm25_score": s} for i, s in enumerate(sparse)]
    rows += [{"id": f"m{i}", "dense_sim": 0.5} for i in range(misses)]  # found by neither path
    if not rows:
        return
    c = make_candidates([rows])
    for path, raw in (("dense", c.dense_sim), ("sparse", c.bm25_score)):
        for norm in NORMS:
            value, hit = normalise(c, everything_visible(c), 50, path, norm)
            if norm not in ("zscore", "dbsf"):
                assert ((value >= 0) & (value <= 1)).all(), (path, norm, value)
            if hit.any():
                if norm != "dbsf":
                    assert (value[~hit] <= value[hit].min() + 1e-12).all(), (path, norm)
                order = np.argsort(-raw[hit], kind="stable")  # the path's own order
                assert (np.diff(value[hit][order]) <= 1e-12).all(), (path, norm)


def test_segment_max_and_min_per_query_over_visible_rows_only():
    from retrieval.fusion._base import segment_max, segment_min

    # q0: rows 3, 7, 5 (row 7 hidden) · q1: no rows at all · q2: one row, hidden · q3: -2, 4
    c = make_candidates([[{"id": "a"}, {"id": "b"}, {"id": "c"}], [], [{"id": "d"}], [{"id": "e"}, {"id": "f"}]])
    values = np.array([3.0, 7.0, 5.0, 9.0, -2.0, 4.0])
    visible = np.array([True, False, True, False, True, True])
    assert segment_max(c, values, visible).tolist() == [5.0, 5.0, 5.0, 0.0, 4.0, 4.0]
    assert segment_min(c, values, visible).tolist() == [3.0, 3.0, 3.0, 0.0, -2.0, -2.0]
    rng = np.random.default_rng(7)                    # against a per-query Python loop
    rows = [[{"id": f"d{j}"} for j in range(rng.integers(0, 6))] for _ in range(40)]
    c = make_candidates(rows)
    values, visible = rng.normal(size=c.n_rows), rng.random(c.n_rows) < 0.7
    for fn, pick in ((segment_max, max), (segment_min, min)):
        expected = [pick((values[r] for r in range(c.n_rows) if c.query_idx[r] == q and visible[r]), default=0.0)
                    for q in c.query_idx]
        assert fn(c, values, visible).tolist() == expected


def test_normalised_scores_are_kept_per_visible_mask_and_never_reused_for_another():
    """A sweep over weights normalises each path once (same table, same mask object): the
    arrays come back read-only and identical; another mask — a routed query set hides rows —
    gets its own values, equal to those of a fresh computation."""
    import numpy as np

    from retrieval.fusion._base import _normalise, normalise
    from tests.conftest import random_two_path_table

    c = random_two_path_table(5)
    visible = c.visible(20)
    first = normalise(c, visible, 20, "sparse", "minmax")
    assert normalise(c, visible, 20, "sparse", "minmax")[0] is first[0]
    assert not first[0].flags.writeable
    narrowed = visible & (c.query_idx != 1)
    again = normalise(c, narrowed, 20, "sparse", "minmax")
    fresh = _normalise(c, narrowed, 20, "sparse", "minmax")
    assert np.array_equal(again[0], fresh[0]) and np.array_equal(again[1], fresh[1])
    assert not np.array_equal(again[1], first[1])
