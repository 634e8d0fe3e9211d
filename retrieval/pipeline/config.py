"""A pipeline's configuration and its parameters by dotted path.

``PipelineConfig`` is a frozen, validated config composing routing → fusion → ranking →
budget: it carries its fusion's parameters (``params``, an instance of the fusion's own class
in ``retrieval.fusion``) plus routing, ranking and budget — nothing else. ``knobs(config)``
lists its parameters by dotted path (``rrf.rrf_k``, ``max_results``,
``adaptive.profiles.debug.w_sparse``); ``get_param`` reads one and ``with_params`` sets any
number of them, validated (``with_param``: one). These paths are the names the TOML form,
``--param``, the Tune knobs and the Sweep axes use.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from retrieval.bm25 import MATCH_MODES
from retrieval.fusion import FUSIONS, get_fusion
from retrieval.limits import MAX_DEPTH
from retrieval.params import KnobRef, Params, choice, flag, integer, number, walk_knobs


@dataclass(frozen=True)
class PipelineConfig(Params):
    name: str
    fusion: str = "rrf"
    description: str = ""
    max_results: int = integer(10, "max results", "results returned per query",
                               lo=1, hi=50, min=1, max=MAX_DEPTH, group="limits")
    candidate_multiplier: float = number(2.0, "candidate multiplier",
                                         "per-path candidates = ⌈max_results × this⌉ (unless depth is set)",
                                         lo=1.0, hi=10.0, step=0.5, min=1.0, max=1000.0, group="limits")
    depth: int | None = integer(None, "depth", "per-path candidates (overrides the multiplier)",
                                lo=1, hi=200, min=1, max=MAX_DEPTH, group="limits")
    min_score: float | None = number(None, "min score", "drop results scoring below this",
                                     lo=0.0, hi=1.0, step=0.01, group="limits")
    min_similarity: float | None = number(
        None, "min similarity",
        "relevance floor on the vector path: drop a candidate only the vector path found whose "
        "cosine to the query is below this, so an unrelated query gets an empty answer (Lingxi's "
        "0–3, seed 004); a keyword hit is never dropped (recall first); not applied when the "
        "query has no vector (keyword-only)", lo=0.0, hi=1.0, step=0.01, min=-1.0, max=1.0, group="limits")
    token_budget: int | None = integer(None, "token budget", "stop adding results past this many tokens",
                                       lo=100, hi=8000, step=100, min=1, max=100_000_000, group="limits")
    fast_path: bool = flag(False, "fast path", "a query naming a memory file reads that file (seed 000)",
                           group="limits")
    timeline_path: bool = flag(False, "timeline path", "a 'what did we do lately' query reads the journal (seed 000)",
                               group="limits")
    keyword_match: str = choice("any", MATCH_MODES, "keyword match",
                                "BM25 path: any = a memory holding some query word (OR); all = every query word "
                                "(AND, as OpenClaw's FTS query, seed 002); technical = some "
                                "technical word of the query: error codes (weighted most), "
                                "identifiers, paths, technical names in any language; Han bigrams "
                                "only re-rank (Lingxi's grep, seed 004). All three "
                                "lists are in the candidate pool.", group="limits")
    params: Params | None = None

    def check(self) -> None:
        for name in ("name", "description"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {getattr(self, name)!r}")
        fusion = get_fusion(self.fusion)
        if self.params is None:
            object.__setattr__(self, "params", fusion.params())
        elif type(self.params) is not fusion.params:
            raise ValueError(f"a {self.fusion} pipeline takes {fusion.params.__name__}, "
                             f"got {type(self.params).__name__}")
        if self.path_depth > MAX_DEPTH:
            raise ValueError(f"max_results × candidate_multiplier must be ≤ {MAX_DEPTH}, "
                             f"got {self.max_results} × {self.candidate_multiplier:g}")

    @property
    def path_depth(self) -> int:
        """Candidates taken from each path: ``depth`` or ⌈max_results × candidate_multiplier⌉."""
        return self.depth or math.ceil(self.max_results * self.candidate_multiplier - 1e-9)

    def __str__(self) -> str:
        return self.name


# ---- parameters by dotted path ---------------------------------------------------------

def knobs(config: PipelineConfig) -> list[KnobRef]:
    """Every parameter the pipeline uses, by dotted path: routing, ranking and budget at the
    top level, the fusion's own under ``<fusion>.``."""
    top = [k for k in walk_knobs(config) if not k.path.startswith("params.")]
    return top + list(walk_knobs(config.params, f"{config.fusion}."))


def sweepable_params(config: PipelineConfig) -> list[str]:
    """The numeric parameters a sweep may vary (those ``knobs`` marks sweepable)."""
    return [k.path for k in knobs(config) if k.knob.sweepable]


def _names(config: PipelineConfig, limit: int = 12) -> str:
    names = [k.path for k in knobs(config)]
    more = f" … and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _knob(config: PipelineConfig, path: str) -> KnobRef:
    for ref in knobs(config):
        if ref.path == path:
            return ref
    head = path.split(".", 1)[0]
    if head in FUSIONS and head != config.fusion:
        raise ValueError(f"{path!r} does not apply to {config.name!r} (fusion = {config.fusion}); "
                         f"its parameters: {_names(config)}")
    raise ValueError(f"unknown parameter {path!r} for {config.name!r}; its parameters: {_names(config)}")


def get_param(config: PipelineConfig, path: str):
    """The value of parameter ``path`` (as ``knobs`` names it)."""
    return _knob(config, path).value


def _replace(obj, parts: list[str], value):
    head, rest = parts[0], parts[1:]
    if isinstance(obj, tuple):
        return tuple(_replace(p, rest, value) if p.name == head else p for p in obj)
    if not rest:
        return dataclasses.replace(obj, **{head: value})
    return dataclasses.replace(obj, **{head: _replace(getattr(obj, head), rest, value)})


class ParamError(ValueError):
    """A value refused for parameter ``path`` (the message names the path)."""

    def __init__(self, message: str, path: str, value):
        super().__init__(message)
        self.path, self.value = path, value


def with_param(config: PipelineConfig, path: str, value) -> PipelineConfig:
    """A validated copy of ``config`` with parameter ``path`` set to ``value`` (``with_params``
    of one value)."""
    return with_params(config, {path: value})


def _set_one(config: PipelineConfig, path: str, value) -> PipelineConfig:
    try:
        _knob(config, path)
    except ValueError as error:
        raise ParamError(str(error), path, value) from None
    parts = path.split(".")
    try:
        if parts[0] == config.fusion and len(parts) > 1:
            return dataclasses.replace(config, params=_replace(config.params, parts[1:], value))
        return _replace(config, parts, value)
    except ValueError as error:
        message, leaf = str(error), parts[-1]
        own = message.startswith(f"{leaf} ")  # the class names the field: name the path instead
        worded = path + message[len(leaf):] if own else f"{path}: {message}"
        raise ParamError(worded, path, value) from None


def with_params(config: PipelineConfig, values: dict) -> PipelineConfig:
    """A validated copy of ``config`` with each parameter ``path`` of ``values`` set to its value
    — the one way a configuration is changed by path (``--param``, sweeps, tuning, the knobs).

    Each path must be one of ``knobs(config)``: a parameter of another fusion, or one this
    configuration does not use, is refused with the list of those it has. A refused value
    raises ``ParamError`` (a ``ValueError`` naming the path)."""
    return params_setter(config, tuple(values))(tuple(values.values()))


def params_setter(config: PipelineConfig, paths) -> Callable[[Sequence], PipelineConfig]:
    """``with_params`` of ``config`` for many value lists over the same ``paths`` (a sweep's
    inner step). When every path is a top-level field of the pipeline's own fusion, the paths
    are checked once and a value list replaces those fields only (``with_fusion_fields``)."""
    paths = tuple(paths)

    def one_by_one(values) -> PipelineConfig:
        out = config
        for path, value in zip(paths, values):
            out = _set_one(out, path, value)
        return out

    fields = fusion_fields(config, paths)
    if fields is None or not set(paths) <= {ref.path for ref in knobs(config)}:
        return one_by_one

    def setter(values) -> PipelineConfig:
        try:
            return with_fusion_fields(config, **dict(zip(fields, values)))
        except ValueError:
            return one_by_one(values)  # the same refusal, worded as ``with_param`` words it
    return setter


def fusion_fields(config: PipelineConfig, paths) -> tuple[str, ...] | None:
    """The field names when every path is a top-level parameter of the pipeline's own fusion
    (``rrf.rrf_k`` → ``rrf_k``), else None: such changes need only ``with_fusion_fields``."""
    names = []
    for path in paths:
        head, _, field_name = path.partition(".")
        if head != config.fusion or "." in field_name or field_name not in config.params.__dataclass_fields__:
            return None
        names.append(field_name)
    return tuple(names)


def with_fusion_fields(config: PipelineConfig, **values) -> PipelineConfig:
    """``config`` with top-level fields of its fusion's parameters replaced, validated by the
    parameter class (``params_setter``'s fast path: the pipeline's own, already validated
    settings are shared rather than checked again, as ``with_param`` would for each point)."""
    params = dataclasses.replace(config.params, **values)
    out = copy.copy(config)
    object.__setattr__(out, "params", params)
    return out


def describe(config: PipelineConfig) -> str:
    """One line: what the pipeline does, then its settings (a profile by name)."""
    values = [f"{k.path}={_fmt(k.value)}" for k in walk_knobs(config)
              if k.value is not None and not k.path.startswith("params.") and k.value is not False]
    for f in dataclasses.fields(config.params):
        if not config.params.active(f.name):
            continue
        value = getattr(config.params, f.name)
        if isinstance(value, Params):
            value = getattr(value, "name", None)
        if value is not None and not isinstance(value, tuple):
            values.append(f"{config.fusion}.{f.name}={_fmt(value)}")
    return f"{config.description or get_fusion(config.fusion).summary} [{', '.join(values)}]"


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
