"""Tune's state and its one update function: refusals leave the state unchanged, a link's
changed parameters rebuild the same configuration."""

from __future__ import annotations

import pytest

from eval.experiments.tune_state import (TuneState, changed_params, decode_changes, encode_changes,
                                         update)
from eval.stores.configs import resolve_config
from retrieval.pipeline import with_params


def state(label: str = "rrf") -> TuneState:
    return TuneState(resolve_config(label), label)


def test_knob_move_sets_the_value_and_keeps_the_rest():
    new, refusal = update(state(), ("knob", "rrf.rrf_k", 10.0), resolve_config)
    assert refusal is None and new.config.params.rrf_k == 10.0
    assert new.config.params.w_dense == 1.0 and new.source == "rrf"


def test_a_fusion_switch_names_the_configuration_after_its_fusion():
    new, refusal = update(state(), ("knob", "fusion", "wsum"), resolve_config)
    assert refusal is None and (new.config.name, new.config.fusion) == ("wsum", "wsum")
    back, _ = update(new, ("knob", "fusion", "rrf"), resolve_config)
    assert back.config.name == "rrf"


def test_knob_of_another_fusion_is_refused_not_raised():
    before = state("seed-adaptive")
    after, refusal = update(before, ("knob", "rrf.rrf_k", 10.0), resolve_config)
    assert after == before
    assert refusal.label == "rrf.rrf_k" and "has no parameter" in refusal.message


def test_invalid_value_is_refused_with_the_engine_message():
    before = state()
    after, refusal = update(before, ("knob", "rrf.rrf_k", -5.0), resolve_config)
    assert after == before and "rrf_k" in refusal.message


def test_unknown_source_is_refused_and_reset_returns_to_the_source():
    moved, _ = update(state(), ("knob", "rrf.w_dense", 0.25), resolve_config)
    same, refusal = update(moved, ("source", "no-such-pipeline"), resolve_config)
    assert same == moved and refusal is not None
    reset, refusal = update(moved, ("reset",), resolve_config)
    assert refusal is None and reset.config == resolve_config("rrf")


def test_query_survives_free_text():
    s1, _ = update(state(), ("query", 3), resolve_config)
    s2, _ = update(s1, ("mode", "Free text"), resolve_config)
    assert s2.query_index(10) is None
    s3, _ = update(s2, ("mode", "Query set"), resolve_config)
    assert s3.query_index(10) == 3
    assert s3.query_index(2) == 0                     # a shorter query set: the first query


@pytest.mark.parametrize("label, moves", [
    ("rrf", {"rrf.rrf_k": 10.0, "max_results": 3}),
    ("seed-adaptive", {"adaptive.half_life_days": 10.0}),
    ("rrf", {"fusion": "weighted"}),
])
def test_changed_params_rebuild_the_configuration_through_a_link(label, moves):
    start = resolve_config(label)
    config = with_params(start, moves)
    changes = changed_params(config, start)
    assert set(changes) == set(moves) or "fusion" in moves
    assert with_params(start, decode_changes(encode_changes(changes))) == config


def test_decode_refuses_malformed_items():
    with pytest.raises(ValueError, match="path=value"):
        decode_changes(["rrf.rrf_k"])
    with pytest.raises(ValueError, match="not a value"):
        decode_changes(["rrf.rrf_k=ten"])
