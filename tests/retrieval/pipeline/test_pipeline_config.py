"""A pipeline carries only what it uses, validated where it is defined: its fusion's own
parameters (from the registry) plus routing, ranking and budget."""

from __future__ import annotations

import dataclasses

import math
from pathlib import Path

import pytest

from retrieval.fusion import FUSIONS
from retrieval.fusion.adaptive import AdaptiveParams
from retrieval.pipeline import (
    PIPELINES, ParamError, PipelineConfig, describe, from_toml, get_pipeline, knobs,
    sweepable_params, to_toml, with_params,
)
from retrieval.profiles import preset

LEGACY = Path(__file__).resolve().parents[2] / "fixtures" / "legacy_pipelines"


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_a_named_pipeline_toml_is_short_and_holds_only_its_own_fusion(name):
    config = PIPELINES[name]
    text = to_toml(config)
    assert len(text.splitlines()) <= 20, text
    assert {f"[{other}]" for other in FUSIONS if other != config.fusion}.isdisjoint(text.splitlines())
    assert from_toml(text) == config


def test_the_rrf_toml_in_full():
    assert to_toml(PIPELINES["rrf"]).splitlines() == [
        'name = "rrf"', 'fusion = "rrf"',
        'description = "Seed 000 hybrid search: RRF k=60 over vector and BM25, 2× candidates."',
        "max_results = 10", "candidate_multiplier = 2.0", "fast_path = false", "timeline_path = false",
        'keyword_match = "any"', "",
        "[rrf]", "rrf_k = 60.0", "w_dense = 1.0", "w_sparse = 1.0", 'weighting = "multiply"',
    ]


def test_a_one_value_profile_edit_is_one_line_of_toml():
    edited = with_params(PIPELINES["seed-adaptive"], {"adaptive.profiles.debug.w_sparse": 0.5})
    extra = set(to_toml(edited).splitlines()) - set(to_toml(PIPELINES["seed-adaptive"]).splitlines())
    assert extra == {"[adaptive.profiles.debug]", "w_sparse = 0.5"}
    assert from_toml(to_toml(edited)) == edited


def test_naming_a_preset_profile_loads_its_weights():
    config = from_toml('base = "adaptive"\n[adaptive]\nprofile = "debug"\n')
    assert config.params.profile == preset("debug")
    assert (config.params.profile.w_dense, config.params.profile.w_sparse) == (0.3, 0.9)
    with pytest.raises(ValueError, match="unknown profile 'nope'"):
        from_toml('base = "adaptive"\n[adaptive]\nprofile = "nope"\n')


@pytest.mark.parametrize("file, expected", [
    ("rrf.toml", PIPELINES["rrf"]),
    ("seed-adaptive-debug-sparse-0.5.toml",
     with_params(PIPELINES["seed-adaptive"], {"adaptive.profiles.debug.w_sparse": 0.5})),
    ("seed-salience-rrf-k-20.toml", with_params(PIPELINES["seed-salience"], {"salience.rrf_k": 20})),
])
def test_files_written_before_the_registry_still_load(file, expected):
    """Those files carried every fusion's section (the rrf one is 123 lines); their descriptions
    are those of their time."""
    assert dataclasses.replace(get_pipeline(str(LEGACY / file)), description=expected.description) == expected


def test_a_foreign_section_that_sets_something_says_how_to_convert():
    with pytest.raises(ValueError, match=r"section \[weighted\] does not apply to this pipeline \(fusion = rrf\); "
                                         r"delete it, or set fusion = \"weighted\""):
        from_toml('fusion = "rrf"\n[weighted]\nvector_weight = 0.5\n')


@pytest.mark.parametrize("toml, message", [
    ('[rrf]\nrrf_k = nan', "rrf_k must be a finite number, got nan"),
    ('[rrf]\nw_dense = inf', "w_dense must be a finite number, got inf"),
    ('[rrf]\nw_sparse = -1.0', "w_sparse must be ≥ 0 and ≤ 100, got -1.0"),
    ('[rrf]\nrrf_k = true', "rrf_k must be a number, got True"),
    ('min_score = nan', "min_score must be a finite number, got nan"),
    ('min_score = "0.3"', "min_score must be a number, got '0.3'"),
    ('fast_path = "false"', "fast_path must be true or false, got 'false'"),
    ('max_results = true', "max_results must be an integer, got True"),
    ('max_results = 1000000000', "max_results must be ≥ 1 and ≤ 10000, got 1000000000"),
    ('depth = 1000000000000', "depth must be ≥ 1 and ≤ 10000, got 1000000000000"),
    ('token_budget = 0', "token_budget must be ≥ 1"),
    ('candidate_multiplier = inf', "candidate_multiplier must be a finite number, got inf"),
    ('max_results = 5000\ncandidate_multiplier = 4.0', "max_results × candidate_multiplier must be ≤ 10000"),
    ('base = 3', "base must be a pipeline name, got 3"),
    ('fusion = "weighted"\n[weighted]\ntext_norm = "softmax"', r"text_norm must be one of \['rank', 'minmax', 'l2', 'zscore'\]"),
    ('fusion = "adaptive"\n[adaptive.profile]\nname = "debug"\nw_dense = nan', "w_dense must be a finite number"),
    ('fusion = "adaptive"\n[adaptive.profile.quality]\nconf_low_factor = -0.5', "conf_low_factor must be ≥ 0"),
    ('fusion = "adaptive"\n[adaptive]\nintent_router = 1', "intent_router must be true or false, got 1"),
])
def test_bad_values_are_refused_naming_the_field(toml, message):
    with pytest.raises(ValueError, match=message):
        from_toml(toml, "p.toml")


def test_with_param_validates_the_value_and_names_the_path():
    with pytest.raises(ValueError, match="rrf.rrf_k must be a finite number, got nan"):
        with_params(PIPELINES["rrf"], {"rrf.rrf_k": math.nan})
    with pytest.raises(ValueError, match=r"'weighted.vector_weight' does not apply to 'rrf' \(fusion = rrf\)"):
        with_params(PIPELINES["rrf"], {"weighted.vector_weight": 0.5})
    assert with_params(PIPELINES["rrf"], {"max_results": 5.0}).max_results == 5


def test_with_params_sets_several_values_and_a_refusal_names_the_path_and_value():
    rrf = PIPELINES["rrf"]
    both = with_params(rrf, {"rrf.rrf_k": 20.0, "rrf.w_dense": 0.5})  # fusion fields: one copy
    assert (both.params.rrf_k, both.params.w_dense, both.params.w_sparse) == (20.0, 0.5, 1.0)
    assert both == with_params(with_params(rrf, {"rrf.rrf_k": 20.0}), {"rrf.w_dense": 0.5})
    mixed = with_params(rrf, {"max_results": 4, "rrf.rrf_k": 30.0})      # a top-level field too
    assert (mixed.max_results, mixed.params.rrf_k) == (4, 30.0)
    assert rrf.params.rrf_k == 60.0 and rrf.max_results == 10
    with pytest.raises(ParamError, match="rrf.rrf_k must be > 0") as refused:
        with_params(rrf, {"rrf.w_dense": 0.5, "rrf.rrf_k": 0.0})
    assert (refused.value.path, refused.value.value) == ("rrf.rrf_k", 0.0)
    with pytest.raises(ParamError, match=r"'weighted.vector_weight' does not apply to 'rrf'"):
        with_params(rrf, {"weighted.vector_weight": 0.5})


def test_knobs_are_derived_from_the_registry_and_only_the_used_ones():
    assert [k.path for k in knobs(PIPELINES["rrf"])] == [
        "max_results", "candidate_multiplier", "depth", "min_score", "min_similarity", "token_budget", "fast_path",
        "timeline_path", "keyword_match", "rrf.rrf_k", "rrf.w_dense", "rrf.w_sparse", "rrf.weighting"]
    rrf_k = next(k for k in knobs(PIPELINES["rrf"]) if k.path == "rrf.rrf_k")
    assert (rrf_k.knob.kind, rrf_k.knob.lo, rrf_k.knob.hi, rrf_k.value) == ("float", 1.0, 200.0, 60.0)
    assert sweepable_params(PIPELINES["vector"]) == ["max_results", "candidate_multiplier", "depth", "min_score",
                                                     "min_similarity", "token_budget"]
    routed = {k.path for k in knobs(PIPELINES["seed-adaptive"])}
    assert "adaptive.profiles.debug.quality.conf_low_factor" in routed
    assert not any(p.startswith("adaptive.profile.") for p in routed)   # the fixed profile is unused


def test_every_fusion_params_class_validates_its_declared_fields():
    for fusion in FUSIONS.values():
        for ref in knobs(PipelineConfig("x", fusion.name)):
            if ref.knob.kind == "float" and ref.path.startswith(f"{fusion.name}."):
                with pytest.raises(ValueError, match="finite"):
                    with_params(PipelineConfig("x", fusion.name), {ref.path: math.inf})


def test_params_of_another_fusion_are_refused_at_construction():
    with pytest.raises(ValueError, match="a rrf pipeline takes RRFParams, got AdaptiveParams"):
        PipelineConfig("x", "rrf", params=AdaptiveParams())


def test_describe_is_one_line_with_the_values():
    line = describe(PIPELINES["openclaw"])
    assert "\n" not in line
    assert "min_score=0.35" in line and "weighted.vector_weight=0.7" in line and "max_results=6" in line


def test_each_knob_declares_its_group_and_a_wrong_group_is_refused():
    """The owner of a parameter says where a page shows it (``Knob.group``): the seed 001
    factors in confidence / vitality, the path weights in weights, the limits after scoring in
    limits; a page never guesses from a name."""
    from retrieval.params import GROUPS, Knob
    from retrieval.pipeline.presets import PIPELINES

    groups = {}
    for config in PIPELINES.values():
        for ref in knobs(config):
            assert ref.knob.group in GROUPS
            groups[ref.path] = ref.knob.group
    assert groups["rrf.w_dense"] == groups["wsum.w_sparse"] == "weights"
    assert groups["adaptive.profile.quality.conf_low_factor"] == "confidence"
    assert groups["adaptive.profile.quality.vit_high"] == "vitality"
    assert groups["adaptive.profile.w_time"] == "weights"
    assert groups["max_results"] == groups["token_budget"] == "limits"
    assert groups["rrf.rrf_k"] == "fusion"
    with pytest.raises(ValueError, match="knob group must be one of"):
        Knob("float", "x", group="weight")
