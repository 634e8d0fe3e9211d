"""Property-based fuzz of pipeline TOML values (issue 13): whatever a TOML file puts in a
pipeline's fields — wrong types, NaN, ±inf, huge or negative numbers, booleans, strings,
arrays, tables, unknown keys — ``retrieval.pipeline.from_toml`` either loads it or raises a
``ValueError`` whose message is one line. Never another exception, never a traceback."""

from __future__ import annotations

import math

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.pipeline import PIPELINES, PipelineConfig, from_toml, to_dict

NAMES = sorted(PIPELINES)


def _leaves(obj: dict, prefix: tuple = ()) -> list[tuple]:
    out = []
    for key, value in obj.items():
        if isinstance(value, dict):
            out.extend(_leaves(value, prefix + (key,)))
        else:
            out.append(prefix + (key,))
    return out


def _set(doc: dict, path: tuple, value) -> None:
    for key in path[:-1]:
        if not isinstance(doc.get(key), dict):
            doc[key] = {}
        doc = doc[key]
    doc[path[-1]] = value


scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 1, 2**31, 2**62, 10**9, 10**12, -(10**12)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0]),
    st.text(max_size=30),
    st.sampled_from(["", "rrf", "concept", "none", "strong", "min-max", "nan", "inf", "1e9", "\x00", "🙂"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=8), scalars, max_size=3))


@st.composite
def pipeline_documents(draw) -> dict:
    name = draw(st.sampled_from(NAMES))
    doc = to_dict(PIPELINES[name])
    leaves = _leaves(doc)
    for path in draw(st.lists(st.sampled_from(leaves), min_size=1, max_size=4, unique=True)):
        _set(doc, path, draw(values))
    if draw(st.booleans()):
        _set(doc, (draw(st.sampled_from(["base", "fusion", "name"])),), draw(st.one_of(st.sampled_from(NAMES), values)))
    if draw(st.integers(0, 4)) == 0:
        _set(doc, (draw(st.text(min_size=1, max_size=10)),), draw(values))
    return doc


def _check(text: str) -> None:
    try:
        config = from_toml(text, "fuzz.toml")
    except ValueError as error:
        message = str(error)
        assert message and "\n" not in message, message
        return
    assert isinstance(config, PipelineConfig)


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(pipeline_documents())
def test_any_pipeline_toml_value_loads_or_raises_one_line_value_error(doc):
    try:
        text = tomli_w.dumps(doc)
    except (TypeError, ValueError):  # not representable in TOML at all (e.g. a NUL in a key)
        return
    _check(text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(max_size=200))
def test_any_text_as_pipeline_toml_loads_or_raises_one_line_value_error(text):
    _check(text)
