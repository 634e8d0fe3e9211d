"""Pipelines: a named, frozen config composing routing → fusion → ranking → budget.

``run_pipeline(candidates, config)`` re-scores a whole query set from its candidate
table (no index access); ``search(handle, text, config)`` answers one query.
A pipeline is named (``PIPELINES``) or read from a TOML file; ``with_param`` sets
any numeric field by dotted path (``rrf.rrf_k``, ``adaptive.profiles.debug.w_sparse``).
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import tomli_w

from retrieval.candidates import Candidates, build_candidates
from retrieval.dataset import Query, scrub_text
from retrieval.profiles import PRESETS, Profile, QualityFactors, preset
from retrieval.ranking import Ranking, rank_rows
from retrieval.scoring import (
    FUSERS, AdaptiveParams, RRFParams, SalienceParams, Scored, WeightedParams, recency_decay,
)

ROUTES = ("fast", "timeline", "hybrid")


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    fusion: str = "rrf"
    description: str = ""
    max_results: int = 10
    candidate_multiplier: float = 2.0
    depth: int | None = None          # per-path candidates; default ceil(max_results × multiplier)
    min_score: float | None = None
    token_budget: int | None = None
    fast_path: bool = False
    timeline_path: bool = False
    rrf: RRFParams = field(default_factory=RRFParams)
    weighted: WeightedParams = field(default_factory=WeightedParams)
    adaptive: AdaptiveParams = field(default_factory=AdaptiveParams)
    salience: SalienceParams = field(default_factory=SalienceParams)

    def __post_init__(self):
        if self.fusion not in FUSERS:
            raise ValueError(f"unknown fusion {self.fusion!r}; choose from {sorted(FUSERS)}")
        if not isinstance(self.max_results, int) or self.max_results < 1:
            raise ValueError(f"max_results must be an integer ≥ 1, got {self.max_results!r}")
        if not self.candidate_multiplier >= 1:
            raise ValueError(f"candidate_multiplier must be ≥ 1, got {self.candidate_multiplier!r}")
        if self.depth is not None and (not isinstance(self.depth, int) or self.depth < 1):
            raise ValueError(f"depth must be an integer ≥ 1, got {self.depth!r}")
        if self.token_budget is not None and (not isinstance(self.token_budget, int) or self.token_budget < 1):
            raise ValueError(f"token_budget must be an integer ≥ 1, got {self.token_budget!r}")

    @property
    def path_depth(self) -> int:
        """Candidates taken from each path: ``depth`` or ⌈max_results × candidate_multiplier⌉."""
        return self.depth or math.ceil(self.max_results * self.candidate_multiplier - 1e-9)

    def __str__(self) -> str:
        return self.name


PIPELINES: dict[str, PipelineConfig] = {p.name: p for p in (
    PipelineConfig("vector", "vector", "Vector-only baseline (cosine, LanceDB)."),
    PipelineConfig("bm25", "bm25", "BM25-only baseline (Tantivy)."),
    PipelineConfig("rrf", "rrf", "Seed 000 hybrid search: RRF k=60 over vector and BM25, 2× candidates."),
    PipelineConfig("weighted", "weighted", "Weighted union 0.7 vector / 0.3 text, BM25 rank → 1/(1+rank)."),
    PipelineConfig("adaptive", "adaptive", "Seed 001 fusion with one fixed profile (concept)."),
    PipelineConfig(
        "seed-salience", "salience",
        "Seed 000: fast path → timeline path → hybrid RRF → salience → 1500-token budget.",
        fast_path=True, timeline_path=True, token_budget=1500),
    PipelineConfig(
        "seed-adaptive", "adaptive",
        "Seed 001: intent router picks a profile; relevance × confidence × vitality multipliers.",
        candidate_multiplier=3.0, adaptive=AdaptiveParams(intent_router=True)),
    PipelineConfig(
        "openclaw", "weighted",
        "OpenClaw: 0.7 vector / 0.3 BM25-rank, candidate multiplier 4, min score 0.35, max 6.",
        max_results=6, candidate_multiplier=4.0, min_score=0.35),
    PipelineConfig(
        "vector-threshold", "vector",
        "Seed 003: vector top-3 with a 0.85 cosine similarity threshold.",
        max_results=3, candidate_multiplier=1.0, min_score=0.85),
    PipelineConfig(
        "lingxi", "weighted",
        "Lingxi: 10 candidates per path, weighted union 0.7/0.3, top 3, keyword-only when vectors fail.",
        max_results=3, depth=10),
)}


# ---- TOML and parameters ---------------------------------------------------------------

def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def to_dict(config: PipelineConfig) -> dict:
    return _plain(config)


def to_toml(config: PipelineConfig) -> str:
    return tomli_w.dumps(to_dict(config))


def _build(cls, data: dict, base, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table, got {type(data).__name__}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(names)}")
    values = {}
    for name, f in names.items():
        current = getattr(base, name) if base is not None else None
        if name not in data:
            if base is not None:
                values[name] = current
            continue
        raw = data[name]
        nested = {"rrf": RRFParams, "weighted": WeightedParams, "adaptive": AdaptiveParams,
                  "salience": SalienceParams, "profile": Profile, "quality": QualityFactors}.get(name)
        if nested is not None:
            values[name] = _build(nested, raw, current if current is not None else None, f"{where}.{name}")
        elif name == "profiles":
            if not isinstance(raw, list):
                raise ValueError(f"{where}.profiles: expected an array of tables")
            values[name] = tuple(_build(Profile, p, _preset_or_none(p), f"{where}.profiles[{i}]")
                                 for i, p in enumerate(raw))
        else:
            values[name] = raw
    try:
        return cls(**values)
    except TypeError as error:
        raise ValueError(f"{where}: {error}") from None


def _preset_or_none(data) -> Profile | None:
    name = data.get("name") if isinstance(data, dict) else None
    return next((p for p in PRESETS if p.name == name), None)


def from_dict(data: dict, where: str = "pipeline") -> PipelineConfig:
    """A config from a table; ``base = "<pipeline>"`` starts from a named pipeline."""
    data = dict(data)
    base_name = data.pop("base", None)
    base = get_pipeline(base_name) if base_name else PipelineConfig(data.get("name", "custom"))
    if "name" not in data:
        data["name"] = base.name if base_name is None else f"{base_name}-custom"
    return _build(PipelineConfig, data, base, where)


def from_toml(text: str, where: str = "pipeline") -> PipelineConfig:
    try:
        return from_dict(tomllib.loads(text), where)
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{where}: invalid TOML ({error})") from None


def get_pipeline(name_or_path: str | PipelineConfig) -> PipelineConfig:
    """A registered pipeline by name, or a TOML file path."""
    if isinstance(name_or_path, PipelineConfig):
        return name_or_path
    if name_or_path in PIPELINES:
        return PIPELINES[name_or_path]
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.is_file():
        if not path.is_file():
            raise ValueError(f"pipeline file {name_or_path!r} does not exist")
        return from_toml(path.read_text("utf-8"), str(path))
    raise ValueError(f"unknown pipeline {name_or_path!r}; choose from {sorted(PIPELINES)} or give a .toml file")


def get_param(config, path: str):
    obj = config
    for part in path.split("."):
        if isinstance(obj, tuple):
            obj = next((p for p in obj if getattr(p, "name", None) == part), None)
            if obj is None:
                raise ValueError(f"{path}: no profile named {part!r}")
        elif dataclasses.is_dataclass(obj) and part in {f.name for f in dataclasses.fields(obj)}:
            obj = getattr(obj, part)
        else:
            raise ValueError(f"unknown parameter {path!r}")
    return obj


def with_param(config, path: str, value):
    """A copy of ``config`` with the field at dotted ``path`` set to ``value``."""
    head, _, rest = path.partition(".")
    if isinstance(config, tuple):
        if not any(p.name == head for p in config):
            raise ValueError(f"no profile named {head!r}; have {[p.name for p in config]}")
        return tuple(with_param(p, rest, value) if p.name == head else p for p in config)
    if not dataclasses.is_dataclass(config) or head not in {f.name for f in dataclasses.fields(config)}:
        raise ValueError(f"unknown parameter {path!r}")
    if rest:
        return dataclasses.replace(config, **{head: with_param(getattr(config, head), rest, value)})
    current = getattr(config, head)
    if isinstance(current, int) and not isinstance(current, bool) and float(value).is_integer():
        value = int(value)
    return dataclasses.replace(config, **{head: value})


def numeric_params(config: PipelineConfig) -> list[str]:
    """Every dotted path to a numeric field of ``config`` (for sweeps and widgets)."""
    out = []

    def walk(obj, prefix):
        if isinstance(obj, tuple):
            for p in obj:
                walk(p, f"{prefix}{p.name}.")
        elif dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                walk(getattr(obj, f.name), f"{prefix}{f.name}.")
        elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
            out.append(prefix[:-1])

    walk(config, "")
    return out


# ---- running ---------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class PipelineRun:
    config: PipelineConfig
    ranking: Ranking
    scored: Scored
    route: tuple[str, ...]     # per query
    profile: tuple[str, ...]   # per query ("" when no profile applies)


def _fuse(c: Candidates, visible: np.ndarray, config: PipelineConfig) -> Scored:
    depth = config.path_depth
    if config.fusion == "salience":
        return FUSERS["salience"](c, visible, depth, config.salience, config.rrf)
    params = {"rrf": config.rrf, "weighted": config.weighted, "adaptive": config.adaptive}.get(config.fusion)
    return FUSERS[config.fusion](c, visible, depth, params)


def run_pipeline(c: Candidates, config: PipelineConfig) -> PipelineRun:
    """Route, fuse and rank every query of a candidate table."""
    visible = c.visible(config.path_depth)
    route = np.full(c.n_queries, 2, dtype=np.int8)  # 0 fast, 1 timeline, 2 hybrid
    if config.fast_path:
        has = np.bincount(c.query_idx[c.via_fast], minlength=c.n_queries) > 0
        route[has] = 0
    if config.timeline_path:
        has = np.bincount(c.query_idx[c.via_timeline], minlength=c.n_queries) > 0
        route[(route == 2) & has & c.timeline] = 1
    row_route = route[c.query_idx]
    hybrid_rows = row_route == 2
    scored = _fuse(c, visible & hybrid_rows, config)
    score = scored.score
    components = dict(scored.components)
    if (route < 2).any():
        fast = (row_route == 0) & c.via_fast
        timeline = (row_route == 1) & c.via_timeline
        # file order within the query's own fast-path rows, so a score never depends on
        # which other rows (or queries) the candidate table happens to hold
        last_line = np.zeros(c.n_queries)
        np.maximum.at(last_line, c.query_idx[fast], c.line_start[fast])
        file_order = 1.0 - c.line_start / (1.0 + last_line[c.query_idx])
        newest = recency_decay(c.age_days, 30.0)
        score = np.where(fast, file_order, np.where(timeline, newest, score))
        components = {k: np.where(hybrid_rows, v, 0.0) for k, v in components.items()}
        components["fast"] = np.where(fast, file_order, 0.0)
        components["timeline"] = np.where(timeline, newest, 0.0)
        scored = Scored(score, components, scored.multipliers)
    ranking = rank_rows(c, score, config.max_results, config.min_score, config.token_budget, keep=~hybrid_rows)
    searched = {"vector": "vector", "bm25": "keyword"}.get(config.fusion, "hybrid")
    routes = tuple(np.array([ROUTES[0], ROUTES[1], searched], dtype=object)[route].tolist())
    if config.fusion == "adaptive":
        profiles = tuple(config.adaptive.profile_named(p).name if config.adaptive.intent_router
                         else config.adaptive.profile.name for p in c.intent_route)
    else:
        profiles = ("",) * c.n_queries
    return PipelineRun(config, ranking, scored, routes, profiles)


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
        results.append(Result(doc.id, rank, float(run.scored.score[row]), parts, doc.path, doc.text, doc.title))
    total = int(run.ranking.total_tokens[qi])
    budget = run.config.token_budget
    return Response(
        query=c.query_texts[qi], pipeline=run.config.name, route=run.route[qi], profile=run.profile[qi],
        degraded=list(c.degraded[qi]), total_tokens=total,
        budget_remaining=(budget - total) if budget is not None else None, results=results,
    )


def search(handle, text: str, config: PipelineConfig | str = "rrf", scope: str = "", group: str = "",
           project: str = "") -> Response:
    """Answer one free-text query with a pipeline (retrieval + scoring)."""
    config = get_pipeline(config)
    query = Query(id="query", text=scrub_text(text))
    c = build_candidates(handle, [query], pool_depth=config.path_depth, scope=scope, group=group, project=project)
    return response_for(c, run_pipeline(c, config), 0, handle.dataset.documents)
