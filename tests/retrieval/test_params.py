"""One setter (``with_params``), one getter (``get_param``), one "what changed" (``diff_params``,
equality ``retrieval.params.same``), and what a parameter's owner declares (``warnings``, ``curve``)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from eval.experiments.tune_state import changed_params, decode_changes, encode_changes
from retrieval.pipeline import PIPELINES, ParamError, from_toml, get_param, knobs, to_toml, with_params
from retrieval.profiles import QualityFactors

ROOT = Path(__file__).resolve().parents[2]
GONE = ("with_param", "params_setter", "with_fusion_fields", "fusion_fields", "apply_point", "point_setter",
        "set_knob", "with_changes", "value_of")


def test_every_other_setter_and_getter_is_gone():
    """The nine setters and three getters of before are one pair: nothing defines another."""
    defined = re.compile(r"^\s*def (" + "|".join(GONE) + r")\(", re.M)
    for package in ("retrieval", "eval", "pages"):
        for path in (ROOT / package).rglob("*.py"):
            assert not defined.search(path.read_text("utf-8")), path
    for module in ("retrieval.pipeline", "retrieval.pipeline.config", "eval.search.space",
                   "eval.experiments.tune_state", "pages._knobs"):
        loaded = importlib.import_module(module)
        assert not [name for name in (*GONE, "apply") if hasattr(loaded, name)], module


def test_the_fusion_is_a_path_of_the_one_setter_and_getter():
    rrf = PIPELINES["rrf"]
    switched = with_params(rrf, {"wsum.w_dense": 0.3, "fusion": "wsum"})    # the fusion first, whatever the order
    assert (get_param(switched, "fusion"), switched.name, get_param(switched, "wsum.w_dense")) == ("wsum", "wsum", 0.3)
    assert with_params(rrf, {"fusion": "rrf"}) is rrf
    with pytest.raises(ParamError, match="fusion") as refused:
        with_params(rrf, {"fusion": "nope"})
    assert refused.value.path == "fusion"
    with pytest.raises(ValueError, match=r"unknown parameter 'rrf.nope'.*rrf.rrf_k"):
        get_param(rrf, "rrf.nope")


def test_equality_is_exact_and_typed():
    from retrieval.params import same
    from retrieval.pipeline import ABSENT

    assert same(60.0, 60.0) and same(None, None) and same("any", "any")
    assert not same(60.0, 60.0 + 1e-12) and not same(1, True) and not same(1, 1.0) and not same(None, ABSENT)


def test_a_float_that_differs_by_1e_12_is_changed_on_the_page_in_the_saved_toml_and_in_the_link():
    """The Profiles page's diff, the TOML saved (relative to a preset profile, too) and Tune's link
    agree: a value differing by 1e-12 is a change everywhere, and each rebuilds the configuration."""
    from pages._tables import diff_configs, toml_diff

    base = PIPELINES["rrf"]
    nudged = with_params(base, {"rrf.rrf_k": 60.0 + 1e-12})
    page = diff_configs(base, nudged)
    assert page.to_dict("records") == [{"parameter": "rrf.rrf_k", "default": "60.0", "this": "60.000000000001"}]
    assert "+rrf_k = 60.000000000001" in toml_diff(base, nudged)
    from retrieval.pipeline import diff_params

    assert diff_params(base, nudged) == {"rrf.rrf_k": (60.0, 60.000000000001)}
    assert from_toml(to_toml(nudged)) == nudged
    assert changed_params(nudged, base) == {"rrf.rrf_k": 60.000000000001}
    assert with_params(base, decode_changes(encode_changes(changed_params(nudged, base)))) == nudged

    adaptive = PIPELINES["seed-adaptive"]
    path = "adaptive.profiles.debug.w_sparse"
    profile = with_params(adaptive, {path: get_param(adaptive, path) + 1e-12})
    assert list(diff_configs(adaptive, profile)["parameter"]) == [path] == list(diff_params(adaptive, profile))
    assert from_toml(to_toml(profile)) == profile                  # the profile table holds the change
    assert diff_configs(adaptive, with_params(adaptive, {path: get_param(adaptive, path)})).empty


def test_a_diff_across_fusions_lists_each_sides_parameters():
    from retrieval.pipeline import ABSENT, diff_params

    rrf, wsum = PIPELINES["rrf"], with_params(PIPELINES["rrf"], {"fusion": "wsum"})
    changes = diff_params(rrf, wsum)
    assert changes["fusion"] == ("rrf", "wsum") and changes["rrf.rrf_k"] == (60.0, ABSENT)
    assert all(before is ABSENT for path, (before, _) in changes.items() if path.startswith("wsum."))
    assert set(changed_params(wsum, rrf)) == {"fusion"} | {r.path for r in knobs(wsum)} - {r.path for r in knobs(rrf)}


def test_warnings_are_declared_by_the_owner_with_its_path_and_group():
    from retrieval.pipeline import warnings_of

    rrf = PIPELINES["rrf"]
    assert warnings_of(rrf) == []
    silent = with_params(rrf, {"rrf.w_dense": 0.0, "rrf.w_sparse": 0.0})
    (warning,) = warnings_of(silent)
    assert (warning.path, warning.group) == ("rrf", "weights") and "Both weights are 0" in warning.text
    factors = QualityFactors(conf_mid_factor=1.5, vit_low_factor=1.1)   # 1.5 > high 1.0; 1.1 > mid 1.0
    assert [(group, text.split(":")[1].strip()) for group, text in factors.warnings()] == [
        ("confidence", "F_conf mid (1.5) is above F_conf high (1)"),
        ("vitality", "F_vit low (1.1) is above F_vit mid (1)")]
    adaptive = with_params(PIPELINES["seed-adaptive"], {"adaptive.profiles.debug.quality.conf_mid_factor": 1.5})
    assert [(w.path, w.group) for w in warnings_of(adaptive)] == [("adaptive.profiles.debug.quality", "confidence")]


def test_the_sweep_curve_is_declared_by_its_owner():
    assert [ref.path for ref in knobs(PIPELINES["rrf"]) if ref.knob.curve] == ["rrf.rrf_k"]
    assert [ref.path for ref in knobs(PIPELINES["wsum"]) if ref.knob.curve] == []
