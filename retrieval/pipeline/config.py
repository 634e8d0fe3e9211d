"""A pipeline's configuration and its parameters by dotted path.

``PipelineConfig`` is a frozen, validated config composing routing → fusion → ranking →
budget: it carries its fusion's parameters (``params``, an instance of the fusion's own class
in ``retrieval.fusion``) plus routing, ranking and budget — nothing else. ``knobs(config)``
lists its parameters by dotted path (``rrf.rrf_k``, ``max_results``,
``adaptive.profiles.debug.w_sparse``; ``fusion`` names the method itself). ``get_param`` reads
one, ``with_params`` sets any number of them, validated, and ``diff_params`` says which differ
between two configurations (``retrieval.params.same``: exact) — the one getter, setter and diff
every surface calls. These paths are the names the TOML form, ``--param``, the Tune knobs and
their link, and the Sweep axes use.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from dataclasses import dataclass

from retrieval.bm25 import MATCH_MODES
from retrieval.fusion import FUSIONS, get_fusion
from retrieval.limits import MAX_DEPTH
from retrieval.params import (ENGINE_WRITES, KnobRef, Params, ParamWarning, _declared, choice, flag, integer, number, same,
                              walk_knobs, walk_warnings)


@dataclass(frozen=True)
class PipelineConfig(Params):
    name: str
    fusion: str = "rrf"
    description: str = ""
    max_results: int = integer(10, "max results", "results returned per query",
                               lo=1, hi=50, min=1, max=MAX_DEPTH, group="limits",
                               engine=ENGINE_WRITES)
    candidate_multiplier: float = number(2.0, "candidate multiplier",
                                         "per-path candidates = ⌈max_results × this⌉ (unless depth is set)",
                                         lo=1.0, hi=10.0, step=0.5, min=1.0, max=1000.0, group="limits",
                                         engine=ENGINE_WRITES)
    depth: int | None = integer(None, "depth", "per-path candidates (overrides the multiplier)",
                                lo=1, hi=200, min=1, max=MAX_DEPTH, group="limits",
                                engine=ENGINE_WRITES)
    min_score: float | None = number(None, "min score", "drop results scoring below this",
                                     lo=0.0, hi=1.0, step=0.01, group="limits", engine=(None,))
    min_similarity: float | None = number(
        None, "min similarity",
        "relevance floor on the vector path: drop a candidate only the vector path found whose "
        "cosine to the query is below this, so an unrelated query gets an empty answer (Lingxi's "
        "0–3, seed 004); a keyword hit is never dropped (recall first); not applied when the "
        "query has no vector (keyword-only)", lo=0.0, hi=1.0, step=0.01, min=-1.0, max=1.0, group="limits",
        engine=(None,))
    token_budget: int | None = integer(None, "token budget", "stop adding results past this many tokens",
                                       lo=100, hi=8000, step=100, min=1, max=100_000_000, group="limits",
                                       engine=(None,))
    fast_path: bool = flag(False, "fast path", "a query naming a memory file reads that file (seed 000)",
                           group="limits", engine=(False,))
    timeline_path: bool = flag(False, "timeline path", "a 'what did we do lately' query reads the journal (seed 000)",
                               group="limits", engine=(False,))
    keyword_match: str = choice("any", MATCH_MODES, "keyword match",
                                "BM25 path: any = a memory holding some query word (OR); all = every query word "
                                "(AND, as OpenClaw's FTS query, seed 002); technical = some "
                                "technical word of the query: error codes (weighted most), "
                                "identifiers, paths, technical names in any language; Han bigrams "
                                "only re-rank (Lingxi's grep, seed 004). All three "
                                "lists are in the candidate pool.", group="limits", engine=("any",))
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


def fits(config: PipelineConfig, pool_depth: int, what: str = "",
         fix: str = "rerun with --pool-depth {depth}") -> PipelineConfig:
    """``config`` when the candidates it takes per path (``path_depth``) are in a pool of depth
    ``pool_depth``; otherwise ``ValueError`` naming both: ``what`` names the configuration
    (default: the pipeline by name), ``fix`` says what to do (``{depth}``: the depth it needs).
    The one check of a configuration against a pool, wherever one is checked."""
    if config.path_depth > pool_depth:
        raise ValueError(f"{what or f'pipeline {config.name!r}'} takes {config.path_depth} candidates per path "
                         f"but the pool holds {pool_depth}; " + fix.format(depth=config.path_depth))
    return config


# ---- parameters by dotted path ---------------------------------------------------------

def knobs(config: PipelineConfig) -> list[KnobRef]:
    """Every parameter the pipeline uses, by dotted path: routing, ranking and budget at the
    top level, the fusion's own under ``<fusion>.``."""
    top = [k for k in walk_knobs(config) if not k.path.startswith("params.")]
    return top + list(walk_knobs(config.params, f"{config.fusion}."))


def warnings_of(config: PipelineConfig) -> list[ParamWarning]:
    """What the owners of ``config``'s parameters declare worth a word (``Params.warnings``), each
    with its owner's path as ``knobs`` names it (``""`` for the pipeline's own, ``rrf`` for the
    fusion's, ``adaptive.profile.quality`` for a profile's factors)."""
    own = [ParamWarning("", group, text) for group, text in config.warnings()]
    return own + list(walk_warnings(config.params, f"{config.fusion}."))


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


FUSION_PATH = "fusion"
"""The path of the fusion method itself: read by ``get_param``, set by ``with_params`` (the
pipeline then takes the new method's default parameters and is named after it)."""

ABSENT = object()
"""What ``diff_params`` reports for a path one of the two configurations does not have."""


def get_param(config: PipelineConfig, path: str):
    """The value of parameter ``path`` (as ``knobs`` names it, or ``fusion``) — the one getter;
    ``ValueError`` naming the parameters ``config`` has when it has no such path."""
    if path == FUSION_PATH:
        return config.fusion
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


def _switch(config: PipelineConfig, fusion) -> PipelineConfig:
    """``config`` with another fusion method, at that method's defaults, named after it (an
    ``rrf`` switched to wsum is a wsum)."""
    if fusion == config.fusion:
        return config
    try:
        return dataclasses.replace(config, name=str(fusion), fusion=fusion, params=None)
    except ValueError as error:
        raise ParamError(str(error), FUSION_PATH, fusion) from None


@functools.lru_cache(maxsize=None)
def _declared_names(cls: type) -> frozenset[str]:
    return frozenset(name for name, _ in _declared(cls))


def _own_fields(config: PipelineConfig, values: dict) -> dict | None:
    """``{field: value}`` when every path of ``values`` is an active top-level parameter of the
    pipeline's own fusion (``rrf.rrf_k`` → ``rrf_k``), else None."""
    params, head = config.params, config.fusion + "."
    declared = _declared_names(type(params))
    out = {}
    for path, value in values.items():
        if not path.startswith(head):
            return None
        name = path[len(head):]
        if name not in declared or not params.active(name):
            return None
        out[name] = value
    return out


def with_params(config: PipelineConfig, values: dict) -> PipelineConfig:
    """A validated copy of ``config`` with each parameter ``path`` of ``values`` set to its value
    — the one way a configuration is changed (``--param``, sweeps, tuning, the Tune knobs and
    their link, the pages).

    Each path must be one of ``knobs(config)`` or ``fusion`` (applied first: the pipeline then
    takes that method's defaults and its name): a parameter of another fusion, or one this
    configuration does not use, is refused with the list of those it has. A refused value
    raises ``ParamError`` (a ``ValueError`` naming the path). When every path is a top-level
    parameter of the pipeline's own fusion (a sweep's point), the parameter class validates the
    new values in one copy and the pipeline's other, already validated settings are shared."""
    values = dict(values)
    if FUSION_PATH in values:
        config = _switch(config, values.pop(FUSION_PATH))
    fields = _own_fields(config, values)
    if fields:
        try:
            out = copy.copy(config)
            object.__setattr__(out, "params", dataclasses.replace(config.params, **fields))
            return out
        except ValueError:
            pass  # refused: worded below, path by path
    out = config
    for path, value in values.items():
        out = _set_one(out, path, value)
    return out


def diff_params(base: PipelineConfig, other: PipelineConfig) -> dict[str, tuple]:
    """``{path: (in base, in other)}`` for each parameter (``fusion`` first, then the knobs of
    ``base``, then those only ``other`` has) whose values are not ``same``; a path one of them
    lacks has ``ABSENT`` there. The one "what changed": Tune's link, the Profiles page's diff and
    the saved TOML (``retrieval.params.plain``) agree on it."""
    a = {FUSION_PATH: base.fusion, **{ref.path: ref.value for ref in knobs(base)}}
    b = {FUSION_PATH: other.fusion, **{ref.path: ref.value for ref in knobs(other)}}
    out = {}
    for path in dict.fromkeys([*a, *b]):
        x, y = a.get(path, ABSENT), b.get(path, ABSENT)
        if not same(x, y):
            out[path] = (x, y)
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
