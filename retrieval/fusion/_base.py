"""What every fusion module shares: the ``Scored`` result, the registry entry ``Fusion``,
and the per-query helpers over a candidate table (rows grouped by query)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from retrieval.candidates import Candidates
from retrieval.params import Params

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Scored:
    """The score of every row (−inf for rows the pipeline does not see), its additive
    components (they sum to the score) and any multipliers applied."""

    score: np.ndarray
    components: dict[str, np.ndarray]
    multipliers: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class NoParams(Params):
    """A fusion without parameters (the single-path baselines)."""


@dataclass(frozen=True)
class Fusion:
    """A registry entry: one per module of ``retrieval.fusion``.

    ``score(c, visible, depth, params) -> Scored`` is pure and vectorised; ``params`` is the
    frozen class holding (and validating) the method's parameters and knobs; ``paths`` the
    retrieval paths it reads (a route is reported as vector / keyword / hybrid from it);
    ``variants`` further parameter sets the shared conformance suite runs;
    ``profile_names(c, params)`` names the profile applied per query, where that applies."""

    name: str
    params: type[Params]
    score: Callable[..., Scored]
    summary: str
    source: str
    paths: tuple[str, ...] = ("dense", "sparse")
    variants: tuple[Params, ...] = ()
    profile_names: Callable[[Candidates, Params], tuple[str, ...]] | None = None

    @property
    def route(self) -> str:
        return {("dense",): "vector", ("sparse",): "keyword"}.get(self.paths, "hybrid")


def in_path(ranks: np.ndarray, depth: int) -> np.ndarray:
    """Rows a path returned within its top ``depth`` (ranks are 0-based, −1 = not returned)."""
    return (ranks >= 0) & (ranks < depth)


def segment_max(c: Candidates, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Per-row maximum of ``values`` over the visible rows of the same query (0 if none)."""
    out = np.full(c.n_queries, -np.inf)
    np.maximum.at(out, c.query_idx[visible], values[visible])
    out[~np.isfinite(out)] = 0.0
    return out[c.query_idx]


def segment_min(c: Candidates, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Per-row minimum of ``values`` over the visible rows of the same query (0 if none)."""
    out = np.full(c.n_queries, np.inf)
    np.minimum.at(out, c.query_idx[visible], values[visible])
    out[~np.isfinite(out)] = 0.0
    return out[c.query_idx]


def recency_decay(age_days: np.ndarray, half_life_days: float) -> np.ndarray:
    """``exp(−ln2 / half_life · age)`` (seed 000: 7 d → 0.851, 30 d → 0.5); undated → 0."""
    decay = np.exp(-(LN2 / half_life_days) * np.asarray(age_days, dtype=np.float64))
    return np.where(np.isnan(decay), 0.0, decay)


def finish(score: np.ndarray, visible: np.ndarray, components: dict, multipliers: dict | None = None) -> Scored:
    """Hide unseen rows behind −inf; components are left as computed (only a ranked, hence
    visible, row's components are ever read), which keeps every knob move cheap."""
    return Scored(np.where(visible, score, -np.inf), components, multipliers or {})
