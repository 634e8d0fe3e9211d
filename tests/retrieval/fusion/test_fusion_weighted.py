"""Weighted union (seeds 002, 004) and its BM25 normalisations, by hand."""

from __future__ import annotations

import math

import numpy as np

import pytest

from retrieval.fusion.weighted import WeightedParams, text_scores, weighted
from retrieval.pipeline import PIPELINES, run_pipeline, with_params
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of


def weighted_table():
    return make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.8, "bm25_rank": 1, "bm25_score": 4.0},
        {"id": "B", "dense_rank": 1, "dense_sim": 0.6, "bm25_rank": 0, "bm25_score": 6.0},
        {"id": "C", "dense_rank": 2, "dense_sim": 0.5},
        {"id": "D", "bm25_rank": 2, "bm25_score": 1.0, "dense_sim": 0.4},
    ]])


def test_weighted_is_0_7_cosine_plus_0_3_rank_score_and_a_missed_path_counts_0():
    c = weighted_table()
    scored = weighted(c, everything_visible(c), 20, WeightedParams())
    assert score_of(c, scored.score, "A") == pytest.approx(0.7 * 0.8 + 0.3 * 1 / (1 + 1))
    assert score_of(c, scored.score, "B") == pytest.approx(0.7 * 0.6 + 0.3 * 1 / (1 + 0))
    assert score_of(c, scored.score, "C") == pytest.approx(0.7 * 0.5 + 0.3 * 0)
    # D's cosine is known (0.4) but the vector path did not return it: it contributes 0
    assert score_of(c, scored.score, "D") == pytest.approx(0.7 * 0 + 0.3 * 1 / (1 + 2))


def test_weighted_keyword_only_query_scores_by_the_text_score_alone():
    """When the vector path returned nothing for a query (embedder unavailable), the text
    score carries both weights, as in OpenClaw's FTS-only mode; OpenClaw's min score 0.35
    would otherwise drop every keyword hit (0.3 · 1 < 0.35)."""
    # each hit holds every query word, so openclaw's AND keyword list (keyword_match "all") is the same
    rows = [{"id": "A", "bm25_rank": 0, "bm25_score": 5.0}, {"id": "B", "bm25_rank": 1, "bm25_score": 4.0},
            {"id": "C", "bm25_rank": 2, "bm25_score": 1.0}]
    c = make_candidates([[r | {"bm25_all_rank": r["bm25_rank"], "bm25_all_score": r["bm25_score"]} for r in rows]])
    run = run_pipeline(c, PIPELINES["openclaw"])
    assert ranked_ids(c, run.ranking) == ["A", "B"]  # C: 1/(1+2) = 0.333 < 0.35
    assert run.ranking.score.tolist() == pytest.approx([(0.7 + 0.3) * 1 / (1 + 0), (0.7 + 0.3) * 1 / (1 + 1)])


def test_openclaw_pipeline_applies_min_score_and_max_results():
    config = PIPELINES["openclaw"]
    assert (config.max_results, config.candidate_multiplier, config.min_score) == (6, 4.0, 0.35)
    assert (config.params.vector_weight, config.params.text_weight) == (0.7, 0.3)
    assert config.path_depth == 6 * 4
    # nine documents found by the vector path only: score = 0.7 · cosine
    sims = [0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.45]
    rows = [{"id": f"d{i}", "dense_rank": i, "dense_sim": s} for i, s in enumerate(sims)]
    c = make_candidates([rows, rows[-3:]])
    run = run_pipeline(c, config)
    assert ranked_ids(c, run.ranking, 0) == ["d0", "d1", "d2", "d3", "d4", "d5"]  # max 6
    # 0.7·0.6 = 0.42 ≥ 0.35 is kept, 0.7·0.45 = 0.315 < 0.35 is dropped
    assert ranked_ids(c, run.ranking, 1) == ["d6", "d7"]
    assert run.ranking.score[run.ranking.query_idx == 1].tolist() == pytest.approx([0.7 * 0.65, 0.7 * 0.6])


def test_lingxi_pipeline_takes_10_per_path_and_returns_top_3():
    """Seed 004 F2: 0.7 × semantic + 0.3 × keyword (rank mapped by 1/(1+rank)), sorted by it,
    top 0–3 — a weighted sort, no keyword tier (issue 44)."""
    config = PIPELINES["lingxi"]
    rows = [{"id": f"d{i:02}", "dense_rank": i, "dense_sim": 0.9 - i / 100} for i in range(12)]
    # found by the keyword path (its technical-term list) at rank 0 and by vectors at rank 11
    rows[11] |= {"bm25_tech_rank": 0, "bm25_tech_score": 9.0}
    # found by both paths within their depth: 0.7 · 0.85 + 0.3 · 1/(1+1) = 0.745 beats d00's 0.63
    rows[5] |= {"bm25_tech_rank": 1, "bm25_tech_score": 5.0}
    c = make_candidates([rows])
    run = run_pipeline(c, config)
    assert config.path_depth == 10
    assert ranked_ids(c, run.ranking) == ["d05", "d00", "d01"]
    assert score_of(c, run.scored.score, "d05") == pytest.approx(0.7 * 0.85 + 0.3 * 0.5)
    # beyond the vector path's depth 10, d11 keeps only its keyword score (not 0.7 · 0.79 + 0.3),
    # 0.3 < d02's 0.7 · 0.88: the seed's sort leaves it out of the three
    assert score_of(c, run.scored.score, "d11") == pytest.approx(0.7 * 0 + 0.3 * 1 / (1 + 0))
    assert run.scored.score[c.dense_rank == 10].tolist() == [-math.inf]  # not retrieved at all
    # the keyword_first knob (a departure from F2) puts both keyword hits first
    first = run_pipeline(c, with_params(config, {"weighted.keyword_first": True}))
    assert ranked_ids(c, first.ranking) == ["d05", "d11", "d00"]
    assert score_of(c, first.scored.score, "d11") == pytest.approx(0.3 + 1.0)


def norm_table():
    """Query 0: three keyword hits (4, 2, 1) and a miss; query 1: one hit;
    query 2: two hits with equal scores; query 3: no hit."""
    return make_candidates([
        [{"id": "a", "bm25_rank": 0, "bm25_score": 4.0}, {"id": "b", "bm25_rank": 1, "bm25_score": 2.0},
         {"id": "c", "bm25_rank": 2, "bm25_score": 1.0}, {"id": "m", "dense_rank": 0, "dense_sim": 0.5}],
        [{"id": "a", "bm25_rank": 0, "bm25_score": 7.0}, {"id": "m", "dense_rank": 0, "dense_sim": 0.5}],
        [{"id": "a", "bm25_rank": 0, "bm25_score": 3.0}, {"id": "b", "bm25_rank": 1, "bm25_score": 3.0}],
        [{"id": "m", "dense_rank": 0, "dense_sim": 0.5}],
    ])


def test_text_norm_minmax_per_query_with_single_hit_and_all_equal_cases():
    c = norm_table()
    text = text_scores(c, everything_visible(c), 20, "minmax")
    assert [score_of(c, text, d, 0) for d in "abcm"] == pytest.approx([(4 - 1) / (4 - 1), (2 - 1) / (4 - 1), 0, 0])
    assert score_of(c, text, "a", 1) == 1.0  # a single hit: 1.0 (a hit beats a miss)
    assert score_of(c, text, "m", 1) == 0.0
    assert [score_of(c, text, d, 2) for d in "ab"] == [1.0, 1.0]  # all equal: 1.0 each
    assert score_of(c, text, "m", 3) == 0.0  # no hit at all


def test_text_norm_zscore_per_query_with_single_hit_and_all_equal_cases():
    c = norm_table()
    text = text_scores(c, everything_visible(c), 20, "zscore")
    mean = (4 + 2 + 1) / 3
    std = math.sqrt(((4 - mean) ** 2 + (2 - mean) ** 2 + (1 - mean) ** 2) / 3)
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731 - the standard normal CDF
    assert [score_of(c, text, d, 0) for d in "abc"] == pytest.approx([phi((s - mean) / std) for s in (4, 2, 1)])
    assert score_of(c, text, "c", 0) > 0.0  # the weakest hit still beats a miss
    assert score_of(c, text, "m", 0) == 0.0  # missed by the keyword path
    assert score_of(c, text, "a", 1) == 0.5  # single hit: std 0 → Φ(0)
    assert [score_of(c, text, d, 2) for d in "ab"] == [0.5, 0.5]  # all equal: std 0 → Φ(0)


def test_text_norm_rank_is_one_over_one_plus_rank():
    c = norm_table()
    text = text_scores(c, everything_visible(c), 20, "rank")
    assert [score_of(c, text, d, 0) for d in "abcm"] == pytest.approx([1 / (1 + 0), 1 / (1 + 1), 1 / (1 + 2), 0])


def test_weighted_with_minmax_norm():
    c = norm_table()
    scored = weighted(c, everything_visible(c), 20, WeightedParams(text_norm="minmax"))
    assert score_of(c, scored.score, "b", 0) == pytest.approx(0.7 * 0 + 0.3 * (2 - 1) / (4 - 1))
    assert score_of(c, scored.score, "m", 0) == pytest.approx(0.7 * 0.5 + 0.3 * 0)


# ---- salience (seed 000 compute_salience) ------------------------------------------------


def test_zscore_norm_with_no_keyword_hit_in_the_table_scores_the_vector_alone():
    # a single free-text query the keyword path found nothing for: bincount over no rows is int64
    c = make_candidates([[{"id": "a", "dense_sim": 0.8, "dense_rank": 0}, {"id": "b", "dense_sim": 0.5, "dense_rank": 1}]])
    scored = weighted(c, np.ones(c.n_rows, dtype=bool), 10, WeightedParams(text_norm="zscore"))
    assert scored.score.tolist() == pytest.approx([0.7 * 0.8, 0.7 * 0.5])


@pytest.mark.parametrize("norm", ["rank", "minmax", "zscore"])
def test_compiled_score_equals_the_numpy_formula_bit_for_bit(norm):
    """The score is one compiled pass; it equals ``vector_weight·cos + w·text`` written in NumPy
    (``w`` = both weights on a keyword-only query), −inf where not visible, and the components
    a page shows still sum to it."""
    from retrieval.fusion._base import in_path
    from tests.conftest import random_two_path_table

    for seed in range(3):
        c = random_two_path_table(seed)
        visible = c.visible(20)
        params = WeightedParams(vector_weight=0.6, text_weight=0.3, text_norm=norm)
        vec = np.where(in_path(c.dense_rank, 20), c.dense_sim.astype(np.float64), 0.0)
        found = np.bincount(c.query_idx[visible & in_path(c.dense_rank, 20)], minlength=c.n_queries) > 0
        weight = np.where(found[c.query_idx], 0.3, 0.3 + 0.6)
        expected = 0.6 * vec + weight * text_scores(c, visible, 20, norm)
        scored = weighted(c, visible, 20, params)
        assert np.array_equal(scored.score, np.where(visible, expected, -np.inf))
        total = scored.components["dense"] + scored.components["sparse"]
        assert np.array_equal(scored.score[visible], total[visible])


def test_keyword_first_puts_every_keyword_hit_above_every_vector_only_memory():
    """Lingxi (seed 004 US-1): B, a keyword hit with a low cosine, outranks A and C, found by the
    vector path only; its score is 0.7·0.1 + 0.3·1 + (0.7 + 0.3)."""
    c = make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.9},
        {"id": "B", "dense_rank": 2, "dense_sim": 0.1, "bm25_rank": 0, "bm25_score": 3.0},
        {"id": "C", "dense_rank": 1, "dense_sim": 0.8},
    ]])
    plain = weighted(c, everything_visible(c), 20, WeightedParams())
    first = weighted(c, everything_visible(c), 20, WeightedParams(keyword_first=True))
    assert score_of(c, plain.score, "B") == pytest.approx(0.7 * 0.1 + 0.3)       # below A and C
    assert score_of(c, first.score, "B") == pytest.approx(0.7 * 0.1 + 0.3 + 1.0)
    assert score_of(c, first.score, "A") == pytest.approx(0.7 * 0.9)              # unchanged
    assert not PIPELINES["lingxi"].params.keyword_first and not PIPELINES["weighted"].params.keyword_first
