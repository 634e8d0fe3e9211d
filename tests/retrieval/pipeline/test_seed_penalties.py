"""Seed 001's penalty strengths (issue 12, item 7): the factors each strength sets, the
profiles that use them, and where a user reads it (``rwb pipelines``, the knobs' help)."""

from __future__ import annotations

import pytest

from eval.cli import main as rwb_main
from retrieval.fusion.adaptive import AdaptiveParams, adaptive
from retrieval.pipeline import PIPELINES, knobs
from retrieval.profiles import PENALTIES, Profile, preset
from tests.conftest import everything_visible, make_candidates, score_of


def test_each_profile_has_the_strength_of_seed_001s_table():
    # §4: Debug 强惩罚, Concept 弱惩罚, Timeline 中等, Brainstorm 无惩罚
    assert {p: preset(p).quality for p in ("debug", "concept", "timeline", "brainstorm")} == {
        "debug": PENALTIES["strong"], "concept": PENALTIES["weak"],
        "timeline": PENALTIES["medium"], "brainstorm": PENALTIES["none"]}
    # §2.2 quantifies the strong one: C ≥ 0.9 → 1.0, C < 0.6 → 0.5
    strong = PENALTIES["strong"]
    assert (strong.conf_high, strong.conf_high_factor, strong.conf_low, strong.conf_low_factor) == (0.9, 1.0, 0.6, 0.5)


def test_the_concept_profile_penalises_low_confidence_weakly():
    # one memory, cosine 1.0 (dense path rank 0), no BM25, C = 0.4 (< 0.6), V = 50, age 0 days
    c = make_candidates([[{"id": "m", "dense_rank": 0, "dense_sim": 1.0, "confidence": 0.4, "vitality": 50.0}]])
    concept = adaptive(c, everything_visible(c), 10, AdaptiveParams(profile=preset("concept"))).score
    debug = adaptive(c, everything_visible(c), 10, AdaptiveParams(profile=preset("debug"))).score
    # concept: (0.8·1.0 + 0.2·0 + 0.1·recency 1.0) × F_conf 0.8 (weak) × F_vit 1.0 = 0.72
    assert score_of(c, concept, "m") == pytest.approx((0.8 + 0.1) * 0.8)
    # debug:   (0.3·1.0 + 0.9·0 + 0.1·1.0) × F_conf 0.5 (strong) × 1.0 = 0.2
    assert score_of(c, debug, "m") == pytest.approx((0.3 + 0.1) * 0.5)


def test_a_profile_built_without_factors_is_the_concept_one():
    assert Profile("concept", 0.8, 0.2, 0.1) == preset("concept")
    assert Profile().quality.conf_low_factor == 0.8


def test_the_knob_help_says_how_strengths_map_to_factors():
    helps = {k.path: k.knob.help for k in knobs(PIPELINES["seed-adaptive"])}
    low = helps["adaptive.profiles.concept.quality.conf_low_factor"]
    assert "seed 001" in low and "0.5" in low and "weak 0.8 (concept)" in low and "none 1.0" in low
    assert "strong 0.8, medium 0.85, weak 0.9, none 1.0" in helps["adaptive.profiles.concept.quality.conf_mid_factor"]


def test_rwb_pipelines_lists_the_penalty_strengths(capsys):
    assert rwb_main(["pipelines"]) == 0
    out = capsys.readouterr().out
    assert "penalty strengths (seed 001" in out
    assert "weak    F_conf 1 / 0.9 / 0.8 (C ≥ 0.9 / between / C < 0.6)" in out and out.count("— concept") == 1
    assert "strong  F_conf 1 / 0.8 / 0.5" in out and "none    F_conf 1 / 1 / 1" in out
