"""Fusion formulas checked by hand on small candidate tables (no index needed).

Expected values are written as the arithmetic of each formula, so a reader can check them.
Ranks are 0-based, as in the candidate table.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from retrieval.dataset import Document
from retrieval.pipeline import PIPELINES, PipelineConfig, response_for, run_pipeline
from retrieval.profiles import PENALTIES, preset
from retrieval.ranking import rank_rows
from retrieval.scoring import (
    AdaptiveParams, RRFParams, SalienceParams, WeightedParams, adaptive, quality_multiplier, recency_decay,
    rrf, salience, text_scores, weighted,
)
from tests.conftest import make_candidates, ranked_ids, score_of


def everything_visible(c):
    return np.ones(c.n_rows, dtype=bool)


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

def test_recency_decay_table_half_life_30_days():
    ages = np.array([0, 7, 15, 30, 60, 90], dtype=np.float32)
    decay = recency_decay(ages, 30.0)
    assert decay.tolist() == pytest.approx([0.5 ** (a / 30) for a in [0, 7, 15, 30, 60, 90]])
    assert np.round(decay, 3).tolist() == [1.000, 0.851, 0.707, 0.500, 0.250, 0.125]


def test_recency_decay_of_an_undated_memory_is_zero():
    assert recency_decay(np.array([np.nan, 0.0]), 30.0).tolist() == [0.0, 1.0]


def test_quality_step_values_at_and_around_the_thresholds():
    strong = PENALTIES["strong"]
    confidence = np.array([1.0, 0.95, 0.9, 0.89, 0.6, 0.59, 0.4], dtype=np.float32)  # float32 as in candidates
    vitality = np.array([100, 81, 80, 50, 30, 29, 0], dtype=np.float32)
    f_conf, f_vit = quality_multiplier(confidence, vitality, strong)
    assert f_conf.tolist() == [1.0, 1.0, 1.0, 0.8, 0.8, 0.5, 0.5]
    assert f_vit.tolist() == [1.2, 1.2, 1.0, 1.0, 1.0, 0.8, 0.8]


def test_penalty_none_disables_both_multipliers():
    f_conf, f_vit = quality_multiplier(np.array([0.1, 0.7, 1.0]), np.array([0, 50, 100]), PENALTIES["none"])
    assert f_conf.tolist() == [1.0, 1.0, 1.0]
    assert f_vit.tolist() == [1.0, 1.0, 1.0]


# ---- adaptive quality fusion (seed 001) --------------------------------------------------

def seed001_table(n_queries: int = 1, **kw):
    """A highly similar but low-confidence inference (L) and a less similar verified memory (V);
    both are equal keyword hits of the same age."""
    rows = [
        {"id": "L", "dense_rank": 0, "dense_sim": 0.9, "bm25_rank": 0, "bm25_score": 5.0,
         "confidence": 0.4, "vitality": 20, "age_days": 10.0},
        {"id": "V", "dense_rank": 1, "dense_sim": 0.7, "bm25_rank": 1, "bm25_score": 5.0,
         "confidence": 0.95, "vitality": 50, "age_days": 10.0},
    ]
    return make_candidates([rows] * n_queries, **kw)


def adaptive_pipeline(profile: str) -> PipelineConfig:
    return PipelineConfig(f"adaptive-{profile}", "adaptive", adaptive=AdaptiveParams(profile=preset(profile)))


def test_debug_profile_sinks_a_similar_low_confidence_memory_below_a_verified_one():
    c = seed001_table()
    decay10 = 0.5 ** (10 / 30)
    run = run_pipeline(c, adaptive_pipeline("debug"))
    # debug: w = 0.3 / 0.9 / 0.1, strong penalty: F_conf(0.4) = 0.5, F_vit(20) = 0.8
    assert score_of(c, run.scored.score, "L") == pytest.approx((0.3 * 0.9 + 0.9 * 1 + 0.1 * decay10) * 0.5 * 0.8)
    assert score_of(c, run.scored.score, "V") == pytest.approx((0.3 * 0.7 + 0.9 * 1 + 0.1 * decay10) * 1.0 * 1.0)
    assert ranked_ids(c, run.ranking) == ["V", "L"]
    assert run.profile == ("debug",)


def test_brainstorm_profile_applies_no_penalty():
    c = seed001_table()
    run = run_pipeline(c, adaptive_pipeline("brainstorm"))
    # brainstorm: w = 0.6 / 0.1 / 0.0, no confidence or vitality factor
    assert score_of(c, run.scored.score, "L") == pytest.approx(0.6 * 0.9 + 0.1 * 1)
    assert score_of(c, run.scored.score, "V") == pytest.approx(0.6 * 0.7 + 0.1 * 1)
    assert ranked_ids(c, run.ranking) == ["L", "V"]


def test_intent_router_picks_the_profile_per_query():
    c = seed001_table(n_queries=2, intent_route=["debug", "brainstorm"])
    run = run_pipeline(c, PIPELINES["seed-adaptive"])
    assert run.profile == ("debug", "brainstorm")
    assert ranked_ids(c, run.ranking, 0) == ["V", "L"]
    assert ranked_ids(c, run.ranking, 1) == ["L", "V"]


def test_adaptive_components_and_multipliers():
    """S_sparse is BM25 over the query's best BM25; S_time is 1/0 inside/outside a named
    window; S_graph is 1 for a linked memory; the multipliers are reported."""
    c = make_candidates([[
        {"id": "a", "dense_sim": 0.5, "dense_rank": 0, "bm25_score": 8.0, "bm25_rank": 0, "in_window": 1.0,
         "confidence": 0.9, "vitality": 81},
        {"id": "b", "dense_sim": -0.2, "dense_rank": 1, "bm25_score": 2.0, "bm25_rank": 1, "in_window": 0.0,
         "graph": 1.0, "confidence": 0.6, "vitality": 80},
    ]])
    profile = replace(preset("timeline"), w_graph=0.5)
    scored = adaptive(c, everything_visible(c), 20, AdaptiveParams(profile=profile))
    # timeline: 0.4 / 0.3 / 0.8 (+ graph 0.5 here), medium penalty: mid confidence → 0.85
    assert score_of(c, scored.score, "a") == pytest.approx((0.4 * 0.5 + 0.3 * 8 / 8 + 0.8 * 1) * 1.0 * 1.2)
    assert score_of(c, scored.score, "b") == pytest.approx((0.4 * 0 + 0.3 * 2 / 8 + 0.8 * 0 + 0.5 * 1) * 0.85 * 1.0)
    assert score_of(c, scored.multipliers["confidence"], "b") == 0.85
    assert score_of(c, scored.multipliers["vitality"], "a") == 1.2


# ---- weighted union (OpenClaw, Lingxi) ---------------------------------------------------

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
    c = make_candidates([[{"id": "A", "bm25_rank": 0, "bm25_score": 5.0},
                          {"id": "B", "bm25_rank": 1, "bm25_score": 4.0},
                          {"id": "C", "bm25_rank": 2, "bm25_score": 1.0}]])
    run = run_pipeline(c, PIPELINES["openclaw"])
    assert ranked_ids(c, run.ranking) == ["A", "B"]  # C: 1/(1+2) = 0.333 < 0.35
    assert run.ranking.score.tolist() == pytest.approx([(0.7 + 0.3) * 1 / (1 + 0), (0.7 + 0.3) * 1 / (1 + 1)])


def test_openclaw_pipeline_applies_min_score_and_max_results():
    config = PIPELINES["openclaw"]
    assert (config.max_results, config.candidate_multiplier, config.min_score) == (6, 4.0, 0.35)
    assert (config.weighted.vector_weight, config.weighted.text_weight) == (0.7, 0.3)
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
    config = PIPELINES["lingxi"]
    rows = [{"id": f"d{i:02}", "dense_rank": i, "dense_sim": 0.9 - i / 100} for i in range(12)]
    rows[11] |= {"bm25_rank": 0, "bm25_score": 9.0}  # found by BM25 at rank 0 and by vectors at rank 11
    c = make_candidates([rows])
    run = run_pipeline(c, config)
    assert config.path_depth == 10
    assert ranked_ids(c, run.ranking) == ["d00", "d01", "d02"]
    # beyond the vector path's depth 10, d11 keeps only its keyword score (not 0.7 · 0.79 + 0.3)
    assert score_of(c, run.scored.score, "d11") == pytest.approx(0.7 * 0 + 0.3 * 1 / (1 + 0))
    assert run.scored.score[c.dense_rank == 10].tolist() == [-math.inf]  # not retrieved at all


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

def test_salience_by_hand_on_three_documents():
    c = make_candidates([[
        {"id": "A", "dense_rank": 0, "bm25_rank": 0, "bm25_score": 3.0, "reinforcement": 4, "access_count": 12,
         "age_days": 0.0},
        {"id": "B", "dense_rank": 1, "reinforcement": 1, "access_count": 3, "age_days": 30.0},
        {"id": "C", "dense_rank": 2, "bm25_rank": 1, "bm25_score": 1.0, "reinforcement": 0, "access_count": 0,
         "age_days": 60.0},
    ]])
    scored = salience(c, everything_visible(c), 20, SalienceParams())
    rrf_a = 1 / (60 + 0 + 1) + 1 / (60 + 0 + 1)
    rrf_b = 1 / (60 + 1 + 1)
    rrf_c = 1 / (60 + 2 + 1) + 1 / (60 + 1 + 1)
    max_r, max_a = 4, 12
    expected = {
        "A": 0.50 * rrf_a / rrf_a + 0.20 * math.log(4 + 1) / math.log(max_r + 2) + 0.20 * 1.0
             + 0.10 * math.log(12 + 1) / math.log(max_a + 2),
        "B": 0.50 * rrf_b / rrf_a + 0.20 * math.log(1 + 1) / math.log(max_r + 2) + 0.20 * 0.5
             + 0.10 * math.log(3 + 1) / math.log(max_a + 2),
        "C": 0.50 * rrf_c / rrf_a + 0.20 * math.log(0 + 1) / math.log(max_r + 2) + 0.20 * 0.25
             + 0.10 * math.log(0 + 1) / math.log(max_a + 2),
    }
    for doc_id, value in expected.items():
        assert score_of(c, scored.score, doc_id) == pytest.approx(value)
    assert score_of(c, scored.components["recency"], "B") == pytest.approx(0.20 * 0.5)
    assert ranked_ids(c, rank_rows(c, scored.score, 10)) == ["A", "C", "B"]


# ---- ranking: ties, min score, token budget ----------------------------------------------

def test_equal_scores_are_ordered_by_document_id():
    c = make_candidates([[{"id": i} for i in ["d3", "d1", "d2"]]])
    ranking = rank_rows(c, np.array([0.5, 0.5, 0.5]), max_results=10)
    assert ranked_ids(c, ranking) == ["d1", "d2", "d3"]


def budget_table(tokens_per_query):
    return make_candidates([[{"id": f"d{i}", "token_count": t} for i, t in enumerate(tokens)]
                            for tokens in tokens_per_query])


def test_token_budget_accumulates_and_stops():
    c = budget_table([[40, 50, 30]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), max_results=10, token_budget=100)
    assert ranked_ids(c, ranking) == ["d0", "d1"]  # 40 + 50 = 90; + 30 = 120 > 100
    assert ranking.total_tokens.tolist() == [40 + 50]


def test_token_budget_stops_at_the_first_result_that_does_not_fit():
    """Seed 000's loop stops; it does not skip a long memory to take a shorter one after it."""
    c = budget_table([[40, 70, 10]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), max_results=10, token_budget=100)
    assert ranked_ids(c, ranking) == ["d0"]


def test_token_budget_is_per_query():
    c = budget_table([[40, 50, 30], [90, 20]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0, 2.0, 1.0]), max_results=10, token_budget=100)
    assert ranked_ids(c, ranking, 1) == ["d0"]
    assert ranking.total_tokens.tolist() == [40 + 50, 90]


def test_token_budget_in_a_pipeline_response():
    c = make_candidates([[
        {"id": "d0", "dense_rank": 0, "token_count": 40},
        {"id": "d1", "dense_rank": 1, "token_count": 50},
        {"id": "d2", "dense_rank": 2, "token_count": 30},
    ]])
    run = run_pipeline(c, PipelineConfig("rrf-100", "rrf", token_budget=100))
    response = response_for(c, run, 0, [Document(id=d, text=d) for d in c.doc_ids])
    assert [r.id for r in response.results] == ["d0", "d1"]
    assert response.total_tokens == 40 + 50
    assert response.budget_remaining == 100 - (40 + 50)


def test_min_score_and_max_results():
    c = make_candidates([[{"id": f"d{i}"} for i in range(5)]])
    score = np.array([0.9, 0.5, 0.35, 0.3, -math.inf])
    assert ranked_ids(c, rank_rows(c, score, max_results=10, min_score=0.35)) == ["d0", "d1", "d2"]
    assert ranked_ids(c, rank_rows(c, score, max_results=2)) == ["d0", "d1"]
    assert ranked_ids(c, rank_rows(c, score, max_results=10)) == ["d0", "d1", "d2", "d3"]  # −inf: not seen


# ---- routes: fast path in file order, timeline newest first --------------------------------

def test_fast_route_scores_file_order_within_the_query():
    """Query 0 asks for a memory file (lines 3 and 5); its score depends only on its own
    fast-path rows, not on line 100 of another query's file or on line 50 of a search hit."""
    c = make_candidates([
        [{"id": "pref-a", "via_fast": True, "line_start": 5}, {"id": "pref-b", "via_fast": True, "line_start": 3},
         {"id": "hit", "dense_rank": 0, "dense_sim": 0.9, "line_start": 50}],
        [{"id": "task", "via_fast": True, "line_start": 100}],
    ])
    run = run_pipeline(c, PIPELINES["seed-salience"])
    assert run.route == ("fast", "fast")
    assert ranked_ids(c, run.ranking, 0) == ["pref-b", "pref-a"]  # file order; the search hit is not used
    assert run.ranking.score[run.ranking.query_idx == 0].tolist() == pytest.approx([1 - 3 / (1 + 5), 1 - 5 / (1 + 5)])


def test_timeline_route_orders_newest_first_and_ignores_search_hits():
    c = make_candidates([[
        {"id": "old", "via_timeline": True, "age_days": 6.0},
        {"id": "new", "via_timeline": True, "age_days": 1.0},
        {"id": "hit", "dense_rank": 0, "dense_sim": 0.99, "bm25_rank": 0, "bm25_score": 9.0},
    ]], timeline=[True])
    run = run_pipeline(c, PIPELINES["seed-salience"])
    assert run.route == ("timeline",)
    assert ranked_ids(c, run.ranking) == ["new", "old"]
    assert run.ranking.score.tolist() == pytest.approx([0.5 ** (1 / 30), 0.5 ** (6 / 30)])
    # a pipeline without the timeline path searches normally
    assert ranked_ids(c, run_pipeline(c, PIPELINES["rrf"]).ranking)[0] == "hit"
