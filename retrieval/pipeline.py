"""Pipelines: a named, frozen config composing routing → fusion → ranking → budget.

A pipeline carries its fusion's parameters (``params``, an instance of the fusion's own
class in ``retrieval.fusion``) plus routing, ranking and budget — nothing else.
``run_pipeline(candidates, config)`` re-scores a whole query set from its candidate table
(no index access); ``search(handle, text, config)`` answers one query. A pipeline is named
(``PIPELINES``) or read from TOML (``base = "rrf"`` then ``[rrf] rrf_k = 30``).
``knobs(config)`` lists its parameters by dotted path (``rrf.rrf_k``, ``max_results``,
``adaptive.profiles.debug.w_sparse``) and ``with_param`` sets one, validated.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import tomllib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from retrieval.bm25 import MATCH_MODES, Filters
from retrieval.candidates import ROW_COLUMNS, Candidates, build_candidates, derived, doc_table
from retrieval.dataset import Query, scrub_text
from retrieval.fusion import FUSIONS, Scored, get_fusion
from retrieval.fusion._base import recency_decay
from retrieval.params import KnobRef, Params, build, choice, flag, integer, number, plain, walk_knobs
from retrieval.profiles import PRESETS, Profile, QualityFactors, preset
from retrieval.ranking import Ranking, rank_rows, visible_rows
from retrieval.routing import TIMELINE_DAYS, fast_path_target, route_intent, triggers_timeline

ROUTES = ("fast", "timeline", "hybrid")
MAX_DEPTH = 10_000
"""Largest per-path candidate depth (and so ``max_results``) a pipeline may ask for."""


@dataclass(frozen=True)
class PipelineConfig(Params):
    name: str
    fusion: str = "rrf"
    description: str = ""
    max_results: int = integer(10, "max results", "results returned per query",
                               lo=1, hi=50, min=1, max=MAX_DEPTH)
    candidate_multiplier: float = number(2.0, "candidate multiplier",
                                         "per-path candidates = ⌈max_results × this⌉ (unless depth is set)",
                                         lo=1.0, hi=10.0, step=0.5, min=1.0, max=1000.0)
    depth: int | None = integer(None, "depth", "per-path candidates (overrides the multiplier)",
                                lo=1, hi=200, min=1, max=MAX_DEPTH)
    min_score: float | None = number(None, "min score", "drop results scoring below this",
                                     lo=0.0, hi=1.0, step=0.01)
    min_similarity: float | None = number(
        None, "min similarity", "relevance floor: drop a candidate whose cosine to the query is below this, "
        "whichever path found it, so an unrelated query gets an empty answer (Lingxi's 0–3, seed 004); "
        "not applied when the query has no vector (keyword-only)", lo=0.0, hi=1.0, step=0.01, min=-1.0, max=1.0)
    token_budget: int | None = integer(None, "token budget", "stop adding results past this many tokens",
                                       lo=100, hi=8000, step=100, min=1, max=100_000_000)
    fast_path: bool = flag(False, "fast path", "a query naming a memory file reads that file (seed 000)")
    timeline_path: bool = flag(False, "timeline path", "a 'what did we do lately' query reads the journal (seed 000)")
    keyword_match: str = choice("any", MATCH_MODES, "keyword match",
                                "BM25 path: any = a memory holding some query word (OR); all = every query word "
                                "(AND, as OpenClaw's FTS query, seed 002). Both lists are in the candidate pool.")
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


def _adaptive(**changes) -> Params:
    return get_fusion("adaptive").params(**changes)


PIPELINES: dict[str, PipelineConfig] = {p.name: p for p in (
    PipelineConfig("vector", "vector", "Vector-only baseline (cosine, LanceDB)."),
    PipelineConfig("bm25", "bm25", "BM25-only baseline (Tantivy)."),
    PipelineConfig("rrf", "rrf", "Seed 000 hybrid search: RRF k=60 over vector and BM25, 2× candidates."),
    PipelineConfig("weighted", "weighted", "Weighted union 0.7 vector / 0.3 text, BM25 rank → 1/(1+rank)."),
    PipelineConfig("adaptive", "adaptive", "Seed 001 fusion with one fixed profile (concept)."),
    PipelineConfig(
        "seed-salience", "salience",
        "Seed 000: a file-naming query gets that whole file (one result); a 'recent' query the journal of the "
        "last 7 days, newest date first, up to 1500 tokens (no search); else hybrid RRF → salience → top 10 "
        "within 1500 tokens.",
        fast_path=True, timeline_path=True, token_budget=1500),
    PipelineConfig(
        "seed-adaptive", "adaptive",
        "Seed 001: intent router picks debug/concept/timeline/brainstorm; (Σ w·S) × F_conf × F_vit with "
        "strong/weak/medium/none penalties (see penalty strengths).",
        candidate_multiplier=3.0, params=_adaptive(intent_router=True)),
    PipelineConfig(
        "seed-adaptive-learned", "adaptive",
        "Seed 001 fusion, profile chosen by a learned intent router (logistic regression on the query "
        "embedding, cross-validated on labelled intents; the rules where nothing is labelled).",
        candidate_multiplier=3.0, params=_adaptive(intent_router=True, router="learned")),
    PipelineConfig(
        "openclaw", "weighted",
        "OpenClaw: 0.7 vector / 0.3 BM25-rank, candidate multiplier 4, min score 0.35, max 6.",
        max_results=6, candidate_multiplier=4.0, min_score=0.35, keyword_match="all"),
    PipelineConfig(
        "vector-threshold", "vector",
        "Seed 003's similar-pattern lookup alone, over every memory: vector top-3 at cosine ≥ 0.85.",
        max_results=3, candidate_multiplier=1.0, min_score=0.85),
    PipelineConfig(
        "lingxi", "weighted",
        "Lingxi (seed 004): 10 candidates per path, weighted union 0.7/0.3, top 0–3 over a cosine floor "
        "of 0.3 (nothing relevant → empty), keyword-only when vectors fail.",
        max_results=3, depth=10, min_similarity=0.3),
    PipelineConfig("wsum", "wsum", "ranx wsum: 0.5·minmax(cos) + 0.5·minmax(BM25), each path normalised per query."),
    PipelineConfig("combsum", "combsum", "CombSUM (Fox & Shaw): minmax(cos) + minmax(BM25)."),
    PipelineConfig("combmnz", "combmnz", "CombMNZ (Fox & Shaw): (minmax(cos) + minmax(BM25)) × paths that found it."),
    PipelineConfig("dbsf", "combsum", "Qdrant DBSF: each path's mean ± 3σ mapped to [0, 1], then summed.",
                   params=get_fusion("combsum").params(norm="dbsf")),
    PipelineConfig("opensearch", "mean", "OpenSearch normalization processor: min-max, arithmetic mean 0.5/0.5."),
    PipelineConfig("relative-score", "relative_score",
                   "Weaviate relative score fusion: 0.75·minmax(cos) + 0.25·minmax(BM25)."),
)}


# ---- TOML ------------------------------------------------------------------------------

_PRESET_NAMES = {p.name: p for p in PRESETS}


def _profile_table(profile: Profile) -> Any:
    """A preset unchanged is written as its name; an edited one as the fields that differ."""
    base = _PRESET_NAMES.get(profile.name)
    if base == profile:
        return profile.name
    return plain(profile, base)


def _params_table(config: PipelineConfig) -> dict:
    params = config.params
    if config.fusion != "adaptive":
        return plain(params)
    out = {"intent_router": params.intent_router, "half_life_days": params.half_life_days,
           "profile": _profile_table(params.profile)}
    if params.router != "rules":
        out["router"] = params.router
    if params.profiles != PRESETS:
        out["profiles"] = {p.name: {k: v for k, v in plain(p, _PRESET_NAMES.get(p.name)).items() if k != "name"}
                           for p in params.profiles if _PRESET_NAMES.get(p.name) != p}
    return out


def to_dict(config: PipelineConfig) -> dict:
    """The TOML table of a pipeline: top-level routing/ranking/budget, then ``[<fusion>]``."""
    out = {k: v for k, v in plain(config).items() if k != "params"}
    table = _params_table(config)
    if table:
        out[config.fusion] = table
    return out


def to_toml(config: PipelineConfig) -> str:
    return tomli_w.dumps(to_dict(config))


def _quality(raw, current, where):
    return build(QualityFactors, raw, current, where)


def _profile(raw, current, where) -> Profile:
    """A profile from a preset name, or a table (merged over the preset of the same name)."""
    if isinstance(raw, str):
        try:
            return preset(raw)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    name = raw.get("name") if isinstance(raw, dict) else None
    base = _PRESET_NAMES.get(name) if isinstance(name, str) else None
    if base is None:
        base = current if current is not None and name in (None, current.name) else Profile(name or "custom")
    return build(Profile, raw, base, where, {"quality": _quality})


def _profiles(raw, current, where) -> tuple[Profile, ...]:
    """Profiles as a table keyed by name (edits over the presets) or an array of tables."""
    if isinstance(raw, dict):
        out = {p.name: p for p in (current or PRESETS)}
        for name, table in raw.items():
            if not isinstance(table, dict):
                raise ValueError(f"{where}.{name}: expected a table")
            out[name] = _profile({**table, "name": name}, out.get(name), f"{where}.{name}")
        return tuple(out.values())
    if isinstance(raw, list):
        return tuple(_profile(p, None, f"{where}[{i}]") for i, p in enumerate(raw))
    raise ValueError(f"{where}: expected a table of profiles")


_NESTED = {"profile": _profile, "profiles": _profiles, "quality": _quality}


def _legacy_sections(data: dict, fusion: str, where: str) -> None:
    """Files written before pipelines carried only their own fusion held every fusion's
    section. Drop a foreign section that only repeats its defaults; refuse one that sets
    something, saying how to convert the file."""
    for name in sorted(set(data) & set(FUSIONS) - {fusion}):
        section = data[name]
        if fusion == "salience" and name == "rrf" and isinstance(section, dict):
            # old salience pipelines took the semantic term's rrf_k from [rrf]
            data.setdefault("salience", {}).setdefault("rrf_k", section.get("rrf_k", 60.0))
            data.pop(name)
            continue
        try:
            unchanged = _params_from(name, section, None, f"{where}.{name}") == FUSIONS[name].params()
        except ValueError:
            unchanged = False
        if not unchanged:
            raise ValueError(f"{where}: section [{name}] does not apply to this pipeline (fusion = {fusion}); "
                             f"delete it, or set fusion = \"{name}\" (files from before each pipeline "
                             f"carried only its own fusion held every section)")
        data.pop(name)


def _params_from(fusion: str, raw, current, where: str) -> Params:
    return build(get_fusion(fusion).params, raw, current, where, _NESTED)


def from_dict(data: dict, where: str = "pipeline") -> PipelineConfig:
    """A config from a table; ``base = "<pipeline>"`` starts from a named pipeline."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table")
    data = dict(data)
    # [tuning]: how `rwb tune` found this file (eval.tune); a record, not a setting
    if not isinstance(data.pop("tuning", {}), dict):
        raise ValueError(f"{where}: tuning must be a table (the record `rwb tune` writes)")
    base_name = data.pop("base", None)
    if base_name is not None and not isinstance(base_name, str):
        raise ValueError(f"{where}: base must be a pipeline name, got {base_name!r}")
    fusion = data.get("fusion")
    if fusion is not None and not isinstance(fusion, str):
        raise ValueError(f"{where}: fusion must be a string, got {fusion!r}")
    base = get_pipeline(base_name) if base_name else None
    fusion = fusion or (base.fusion if base else "rrf")
    get_fusion(fusion)
    _legacy_sections(data, fusion, where)
    current = base.params if base is not None and base.fusion == fusion else get_fusion(fusion).params()
    params = _params_from(fusion, data.pop(fusion, {}), current, f"{where}.{fusion}")
    if "params" in data:
        raise ValueError(f"{where}: unknown key(s) ['params']; put the fusion's parameters under [{fusion}]")
    if "name" not in data:
        data["name"] = f"{base_name}-custom" if base_name else "custom"
    data["fusion"] = fusion
    start = dataclasses.replace(base, params=params, fusion=fusion) if base else None
    return build(PipelineConfig, {**data, "params": params}, start, where)


def from_toml(text: str, where: str = "pipeline") -> PipelineConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{where}: invalid TOML ({error})") from None
    return from_dict(data, where)


def get_pipeline(name_or_path: str | PipelineConfig) -> PipelineConfig:
    """A registered pipeline by name, or a TOML file path."""
    if isinstance(name_or_path, PipelineConfig):
        return name_or_path
    if not isinstance(name_or_path, str):
        raise ValueError(f"a pipeline is a name or a .toml path, got {name_or_path!r}")
    if name_or_path in PIPELINES:
        return PIPELINES[name_or_path]
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise ValueError(f"pipeline file {name_or_path!r} does not exist")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"pipeline file {name_or_path!r} cannot be read: {error}") from None
        return from_toml(text, str(path))
    raise ValueError(f"unknown pipeline {name_or_path!r}; choose from {sorted(PIPELINES)} or give a .toml file")


# ---- parameters ------------------------------------------------------------------------

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


def with_param(config: PipelineConfig, path: str, value) -> PipelineConfig:
    """A validated copy of ``config`` with parameter ``path`` set to ``value``.

    ``path`` must be one of ``knobs(config)``: a parameter of another fusion, or one this
    configuration does not use, is refused with the list of those it has."""
    _knob(config, path)
    parts = path.split(".")
    try:
        if parts[0] == config.fusion and len(parts) > 1:
            return dataclasses.replace(config, params=_replace(config.params, parts[1:], value))
        return _replace(config, parts, value)
    except ValueError as error:
        message, leaf = str(error), parts[-1]
        raise ValueError(path + message[len(leaf):] if message.startswith(f"{leaf} ") else f"{path}: {message}") from None


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
    parameter class (a sweep's inner step: the pipeline's own, already validated settings are
    shared rather than checked again, as ``with_param`` would for each point)."""
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


# ---- running ---------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class PipelineRun:
    config: PipelineConfig
    ranking: Ranking
    scored: Scored
    route: tuple[str, ...]     # per query
    profile: tuple[str, ...]   # per query ("" when no profile applies)


@dataclass(frozen=True, eq=False)
class Fused:
    """A pipeline's scores over a candidate table, with what ranking them needs
    (``rank_rows``'s arguments): the step before ranking, shared by ``run_pipeline`` and by
    the evaluators that score a configuration without building a ``Ranking`` (``eval.fast``)."""

    config: PipelineConfig
    table: Candidates                        # the keyword-match view the scores are over
    scored: Scored
    route: np.ndarray                        # per query: index into ROUTES
    max_results: int | np.ndarray            # one cap, or one per query
    min_score: float | None
    token_budget: int | np.ndarray | None    # one budget, or one per query (−1: none)
    keep: np.ndarray | None                  # rows ``min_score`` never drops (routed ones)
    depth: int | None = None                 # every row outside visible_rows(table, depth) scores −inf


def all_hybrid(c: Candidates) -> np.ndarray:
    """Every query on the hybrid route (2), once per table (read-only)."""
    return derived(c, ("all hybrid",), lambda: np.full(c.n_queries, 2, dtype=np.int8))


def fuse(c: Candidates, config: PipelineConfig) -> Fused:
    """Route and fuse every query of a candidate table (no ranking)."""
    c = c.with_keyword_match(config.keyword_match)  # the BM25 path's OR or AND list
    visible = visible_rows(c, config.path_depth)
    route = all_hybrid(c)  # 0 fast, 1 timeline, 2 hybrid
    if config.fast_path or config.timeline_path:
        route = route.copy()
        if config.fast_path:
            has = np.bincount(c.query_idx[c.via_fast], minlength=c.n_queries) > 0
            route[has] = 0
        if config.timeline_path:
            has = np.bincount(c.query_idx[c.via_timeline], minlength=c.n_queries) > 0
            route[(route == 2) & has & c.timeline] = 1
    routed = (config.fast_path or config.timeline_path) and bool((route < 2).any())
    row_route = route[c.query_idx] if routed else None
    hybrid_rows = row_route == 2 if routed else None
    fusion = FUSIONS[config.fusion]
    # every query hybrid (the usual case): the table's own visible mask, no copy
    scored = fusion.score(c, visible & hybrid_rows if routed else visible, config.path_depth, config.params)
    score = scored.score
    max_results, budget, keep = config.max_results, config.token_budget, None
    if routed:
        fast = (row_route == 0) & c.via_fast
        timeline = (row_route == 1) & c.via_timeline
        # file order within the query's own fast-path rows, so a score never depends on
        # which other rows (or queries) the candidate table happens to hold
        last_line = np.zeros(c.n_queries)
        np.maximum.at(last_line, c.query_idx[fast], c.line_start[fast])
        file_order = 1.0 - c.line_start / (1.0 + last_line[c.query_idx])
        newest = recency_decay(created_age(c), 30.0)  # newest DATE first, not edit time
        score = np.where(fast, file_order, np.where(timeline, newest, score))
        components = {k: np.where(hybrid_rows, v, 0.0) for k, v in scored.components.items()}
        components["fast"] = np.where(fast, file_order, 0.0)
        components["timeline"] = np.where(timeline, newest, 0.0)
        scored = Scored(score, components, scored.multipliers)
        # seed 000: the fast path returns the whole file (no cap, no budget); the timeline
        # path reads the journal until the token budget is full (no cap)
        widest = int(np.diff(c.offsets).max(initial=1)) or 1
        max_results = np.where(route == 2, config.max_results, widest)
        if budget is not None:
            budget = np.where(route == 0, -1, budget)
        keep = ~hybrid_rows
    if config.min_similarity is not None:
        with_vector = np.array([not _keyword_only(notes) for notes in c.degraded], dtype=bool)
        below = (c.dense_sim < config.min_similarity) & with_vector[c.query_idx]
        if routed:
            below &= hybrid_rows
        score = np.where(below, -np.inf, score)
        scored = Scored(score, scored.components, scored.multipliers)
    return Fused(config, c, scored, route, max_results, config.min_score, budget, keep,
                 None if routed else config.path_depth)


def run_pipeline(c: Candidates, config: PipelineConfig) -> PipelineRun:
    """Route, fuse and rank every query of a candidate table."""
    return ranked(fuse(c, config))


def ranked(fused: Fused) -> PipelineRun:
    """Rank fused scores: the ranked run, with each query's route and profile."""
    c, config = fused.table, fused.config
    ranking = rank_rows(c, fused.scored.score, fused.max_results, fused.min_score, fused.token_budget,
                        keep=fused.keep)
    fusion = FUSIONS[config.fusion]
    routes = tuple(np.array([ROUTES[0], ROUTES[1], fusion.route], dtype=object)[fused.route].tolist())
    if fusion.route == "hybrid" and any(c.degraded):
        # no query vector (embedder or vectors unavailable): only the keyword path answered
        routes = tuple("keyword-only" if r == "hybrid" and _keyword_only(notes) else r
                       for r, notes in zip(routes, c.degraded))
    profiles = fusion.profile_names(c, config.params) if fusion.profile_names else ("",) * c.n_queries
    return PipelineRun(config, ranking, fused.scored, routes, profiles)


def created_age(c: Candidates) -> np.ndarray:
    """Days since each row's memory was created (its journal date), the timeline path's order."""
    return c.cols["created_age"]


def _keyword_only(notes: tuple[str, ...]) -> bool:
    return any(note.endswith("keyword-only") for note in notes)


# ---- one query -------------------------------------------------------------------------

@dataclass(frozen=True)
class Result:
    id: str
    rank: int
    score: float
    components: dict[str, float]
    path: str
    text: str
    title: str = ""
    token_count: int = 0
    members: tuple[str, ...] = ()  # a whole-file result (fast path): its memories in line order


@dataclass(frozen=True)
class Response:
    query: str
    pipeline: str
    route: str
    profile: str
    degraded: list[str]
    total_tokens: int
    budget_remaining: int | None
    results: list[Result]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def response_for(c: Candidates, run: PipelineRun, qi: int, documents) -> Response:
    """The response a user sees for query ``qi`` of a candidate table."""
    rows = run.ranking.for_query(qi)
    results = []
    for rank, row in enumerate(rows):
        doc = documents[int(c.doc_idx[row])]
        parts = {k: float(v[row]) for k, v in run.scored.components.items() if v[row] != 0.0}
        parts.update({f"x {k}": float(v[row]) for k, v in run.scored.multipliers.items()})
        results.append(Result(doc.id, rank, float(run.scored.score[row]), parts, doc.path, doc.text, doc.title,
                              int(c.token_count[row])))
    total = int(run.ranking.total_tokens[qi])
    budget = run.config.token_budget
    degraded = list(c.degraded[qi])
    params = run.config.params
    if getattr(params, "router", None) == "learned" and params.intent_router and c.learned_route is None:
        # the learned router is fitted on a labelled query set (eval.learned_router); a table
        # without its routes (a free-text query, a set without intents) follows the rules
        degraded.append("learned router not fitted for this query: seed 001's rule router chose the profile")
    return Response(
        query=c.query_texts[qi], pipeline=run.config.name, route=run.route[qi], profile=run.profile[qi],
        degraded=degraded, total_tokens=total,
        budget_remaining=(budget - total) if budget is not None else None, results=results,
    )


def whole_file(response: Response) -> Response:
    """A fast-path response as seed 000 returns it: ONE result, the whole target file (its
    memories in line order, joined by newlines) with its token count; other routes unchanged."""
    if response.route != ROUTES[0] or not response.results:
        return response
    first = response.results[0]
    tokens = sum(r.token_count for r in response.results)
    result = Result(first.path, 0, 1.0, {"fast": 1.0}, first.path, "\n".join(r.text for r in response.results),
                    "", tokens, tuple(r.id for r in response.results))
    return dataclasses.replace(response, results=[result])


def _routed_without_search(handle, query: Query, config: PipelineConfig, scope: str, group: str,
                           project: str) -> Candidates | None:
    """The candidate table of a query the fast or timeline path answers, built from the memory
    store alone — no embedding, no vector or BM25 search (seed 000: "零搜索开销", "不触发向量搜索").
    None when neither path applies, so the query is searched."""
    target = fast_path_target(query.text) if config.fast_path else None
    timeline = config.timeline_path and triggers_timeline(query.text)
    if not target and not timeline:
        return None
    dataset = handle.dataset
    table = doc_table(dataset)
    allowed = table.allowed(Filters(scope or query.scope, project, group or query.group))
    now = dataset.query_reference_time(query)
    created = table.features["created_ts"]
    via_fast = (table.path == target) & allowed if target else np.zeros(len(allowed), dtype=bool)
    since = (now - timedelta(days=TIMELINE_DAYS)).timestamp()
    via_timeline = (table.journal & (created >= since) & (created <= now.timestamp()) & allowed
                    if timeline else np.zeros(len(allowed), dtype=bool))
    if via_fast.any():
        via_timeline = np.zeros(len(allowed), dtype=bool)  # the fast path answered: stop there
    idx = np.flatnonzero(via_fast | via_timeline)
    if not len(idx):
        return None
    n, f = len(idx), table.features
    known = {
        "query_idx": np.zeros(n, np.int32), "doc_idx": idx.astype(np.int32),
        "dense_rank": np.full(n, -1, np.int32), "bm25_rank": np.full(n, -1, np.int32),
        "via_fast": via_fast[idx], "via_timeline": via_timeline[idx],
        "age_days": np.maximum(0.0, (now.timestamp() - f["updated_ts"][idx]) / 86400.0).astype(np.float32),
        "created_age": np.maximum(0.0, (now.timestamp() - created[idx]) / 86400.0).astype(np.float32),
        "in_window": np.full(n, np.nan, np.float32),
        **{name: f[name][idx] for name in ("confidence", "vitality", "reinforcement", "access_count",
                                           "token_count", "tie_key", "line_start")},
    }
    cols = {name: known.get(name, np.full(n, -1, np.int32) if name.endswith("_rank") else np.zeros(n, np.float32))
            for name in ROW_COLUMNS}
    return Candidates(
        dataset=dataset.name, fingerprint=dataset.fingerprint, embedder="none (no search)",
        pool_depth=config.path_depth, doc_ids=tuple(handle.doc_ids), query_ids=(query.id,),
        query_texts=(query.text,), offsets=np.array([0, n], dtype=np.int64), fast_target=(target or "",),
        timeline=np.array([timeline]), intent_route=(route_intent(query.text),), window=("",),
        degraded=(tuple(handle.degraded),), cols=cols)


def search(handle, text: str, config: PipelineConfig | str = "rrf", scope: str = "", group: str = "",
           project: str = "") -> Response:
    """Answer one free-text query with a pipeline (retrieval + scoring).

    A query the fast or timeline path answers is read from the memory store without any
    search; a fast-path answer is one result, the whole file (``whole_file``)."""
    config = get_pipeline(config)
    query = Query(id="query", text=scrub_text(text))
    c = _routed_without_search(handle, query, config, scope, group, project)
    if c is None:
        c = build_candidates(handle, [query], pool_depth=config.path_depth, scope=scope, group=group,
                             project=project)
    return whole_file(response_for(c, run_pipeline(c, config), 0, handle.dataset.documents))
