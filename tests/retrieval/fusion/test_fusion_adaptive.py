"""Adaptive quality fusion (seed 001): recency, F_conf/F_vit steps, profiles and the router, by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from retrieval.fusion._base import recency_decay
from retrieval.fusion.adaptive import AdaptiveParams, adaptive, band_counts, quality_multiplier
from retrieval.pipeline import PIPELINES, PipelineConfig, run_pipeline
from retrieval.profiles import PENALTIES, preset
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of


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
    # the Tune page's band counts follow the same steps: (high, mid, low)
    counts = band_counts(confidence, vitality, strong)
    assert counts == {"confidence": (3, 2, 2), "vitality": (2, 3, 2)}


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
    return PipelineConfig(f"adaptive-{profile}", "adaptive", params=AdaptiveParams(profile=preset(profile)))


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
