"""The search space of rwb sweep, rwb tune and the Sweep page (eval/search/space.py): ranges and
their grid, sum constraints, --param parsing, and a grid point applied to a pipeline."""

from __future__ import annotations

import itertools
import math

import pytest

from eval.search.space import ParamSpec, Space, not_valid, parse_param, parse_sum, point_values, spaced
from retrieval.pipeline import PIPELINES, ParamError, with_params

RRF = PIPELINES["rrf"]
ADAPTIVE = PIPELINES["seed-adaptive"]


def test_values_are_the_decimal_grid_points():
    assert ParamSpec("w", 0, 1, 0.1).values == tuple(i / 10 for i in range(11))
    assert ParamSpec("w", 0, 1, 0.1).values[3] == 0.3            # not 0.30000000000000004
    assert ParamSpec("k", 10, 100, 30).values == (10, 40, 70, 100)
    assert ParamSpec("k", 10, 95, 30).values == (10, 40, 70)      # hi is an upper bound
    assert ParamSpec("k", 5, 5, 1).values == (5,)
    assert parse_param("max_results=3:5:1", RRF).values == (3, 4, 5)  # integer field stays integer


def test_a_three_way_weight_grid_summing_to_one_keeps_all_66_points():
    names = [f"adaptive.profiles.debug.{w}" for w in ("w_dense", "w_sparse", "w_time")]
    specs = tuple(parse_param(f"{n}=0:1:0.1", ADAPTIVE) for n in names)
    space = Space(specs, (parse_sum("+".join(names) + "=1", specs),))
    points = list(space.grid())
    assert len(points) == math.comb(10 + 2, 2) == 66          # compositions of 10 tenths into 3 parts
    assert len(set(points)) == 66
    assert all(math.isclose(sum(p), 1.0) for p in points)
    # the float == test ranx uses loses some of them (0.2 + 0.7 + 0.1 == 0.9999999999999999)
    exact = [p for p in itertools.product(specs[0].values, repeat=3) if p[0] + p[1] + p[2] == 1.0]
    assert len(exact) < 66
    assert (0.2, 0.7, 0.1) in points and (0.2, 0.7, 0.1) not in exact


def test_a_plain_grid_is_the_full_product():
    space = Space((parse_param("rrf.rrf_k=10:60:10", RRF), parse_param("rrf.w_dense=0:1:0.5", RRF)))
    assert list(space.grid()) == [(k, w) for k in (10, 20, 30, 40, 50, 60) for w in (0.0, 0.5, 1.0)]


@pytest.mark.parametrize("text, message", [
    ("rrf.rrf_k", "expected name=lo:hi:step"),
    ("rrf.rrf_k=1:2", "expected name=lo:hi:step"),
    ("rrf.rrf_k=a:2:1", "must be numbers"),
    ("rrf.rrf_k=50:10:5", r"lo \(50\) must be ≤ hi \(10\)"),
    ("rrf.rrf_k=10:50:0", "step must be > 0"),
    ("rrf.rrf_k=10:50:-5", "step must be > 0"),
    ("rrf.k=10:50:5", "unknown parameter 'rrf.k'.*its parameters: .*rrf.rrf_k"),
    ("weighted.vector_weight=0:1:0.5", r"'weighted.vector_weight' does not apply to 'rrf' \(fusion = rrf\)"),
    ("max_results=1:5:0.5", "integer parameter"),
])
def test_bad_params_are_refused_with_the_reason(text, message):
    with pytest.raises(ValueError, match=message):
        parse_param(text, RRF)


def test_a_point_is_applied_with_integer_parameters_as_int_and_refused_naming_the_value():
    specs = (parse_param("rrf.rrf_k=10:30:10", RRF), parse_param("max_results=3:5:1", RRF))
    config = with_params(RRF, point_values(specs, (20.0, 4.0)))
    assert config.params.rrf_k == 20.0
    assert config.max_results == 4 and type(config.max_results) is int
    assert RRF.params.rrf_k == 60.0 and RRF.max_results == 10          # the base is not touched
    refusal = r"rrf.rrf_k=0 is not valid for pipeline 'rrf': rrf.rrf_k must be > 0"
    with pytest.raises(ParamError) as refused:
        with_params(RRF, point_values(specs, (0.0, 4.0)))
    with pytest.raises(ValueError, match=refusal):
        raise not_valid(RRF, refused.value)


def test_spaced_gives_evenly_spaced_values_and_whole_numbers_for_integers():
    assert spaced("rrf.w_dense", 1.0, 0.0, 5, False).values == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert spaced("max_results", 2.4, 9.6, 4, True).values == (2, 5, 8)   # 2 … 10 by round(8/3) = 3
    assert spaced("rrf.rrf_k", 5.0, 5.0, 3, False).values == (5.0,)
