"""What Tune shows, as one value: the configuration and the query that produced the ranking.

Every widget of the Tune page derives its value from a ``TuneState`` and every action (a knob
move, a starting point, a reset, a query, a mode, a configuration handed over by another page
or a link) goes through ``update``, which returns the next state and, when the action is
refused, why. The state is never half-changed: a refused action leaves it as it was.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Callable

from eval.statistics.provenance import Provenance
from retrieval.candidates import DEFAULT_POOL_DEPTH
from retrieval.pipeline import ABSENT, FUSION_PATH, PipelineConfig, diff_params, fits, knobs, with_params

MODES = ("Query set", "Free text")


@dataclass(frozen=True)
class TuneState:
    config: PipelineConfig
    source: str                       # the starting label ("rrf", "profile:debug", "saved:x")
    mode: str = MODES[0]
    query: int = 0                    # index in the query set; kept while free text is shown
    text: str = ""
    provenance: Provenance | None = None  # chosen or fitted on a dataset's queries (handed over so)

    def query_index(self, n_queries: int) -> int | None:
        """The query-set index this state ranks (``None`` in free-text mode or without queries)."""
        if self.mode != MODES[0] or n_queries <= 0:
            return None
        return self.query if 0 <= self.query < n_queries else 0


@dataclass(frozen=True)
class Refusal:
    label: str
    message: str


def has_knob(config: PipelineConfig, path: str) -> bool:
    return path == FUSION_PATH or any(ref.path == path for ref in knobs(config))


def within_pool(config: PipelineConfig, pool_depth: int = DEFAULT_POOL_DEPTH) -> PipelineConfig:
    """``config`` when its per-path depth fits the candidate pool; ``ValueError`` otherwise."""
    return fits(config, pool_depth, "the pipeline", "lower max results, the multiplier or the depth")


def changed_params(config: PipelineConfig, start: PipelineConfig) -> dict[str, object]:
    """The knobs of ``config`` whose value differs from ``start`` (``diff_params``: the fusion
    first), as Tune's link carries them."""
    return {path: now for path, (_, now) in diff_params(start, config).items() if now is not ABSENT}


def encode_changes(changes: dict[str, object]) -> list[str]:
    """``path=value`` strings (the value as JSON) for a URL."""
    return [f"{path}={json.dumps(value)}" for path, value in changes.items()]


def decode_changes(items: list[str]) -> dict[str, object]:
    """The inverse of ``encode_changes``; ``ValueError`` for an item that is not ``path=<json>``."""
    out: dict[str, object] = {}
    for item in items:
        path, sep, raw = item.partition("=")
        if not sep or not path:
            raise ValueError(f"a changed parameter is written path=value, got {item!r}")
        try:
            out[path] = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError(f"parameter {path}: {raw!r} is not a value") from None
    return out


def update(state: TuneState, action: tuple, resolve: Callable[[str], PipelineConfig],
           pool_depth: int = DEFAULT_POOL_DEPTH) -> tuple[TuneState, Refusal | None]:
    """The state after ``action``, and the refusal when it was not applied.

    Actions: ``("knob", path, value)``, ``("source", label)`` (start from a pipeline or profile),
    ``("reset",)``, ``("config", config, label_or_None[, provenance])`` (handed over by another
    page; the provenance when it was chosen or fitted on the dataset's queries),
    ``("mode", mode)``, ``("query", index)``, ``("text", text)``. ``resolve`` turns a label into
    its configuration (``ValueError`` for an unknown one). A knob the configuration no longer
    has (a widget left over from before a switch) is refused, never raised."""
    kind = action[0]
    if kind == "knob":
        _, path, value = action
        if not has_knob(state.config, path):
            return state, Refusal(path, f"{state.config.name} has no parameter {path} "
                                        "(the knobs changed)")
        try:
            config = within_pool(with_params(state.config, {path: value}), pool_depth)
            moved = state.provenance.moved_by_hand() if state.provenance and config != state.config else state.provenance
            return dataclasses.replace(state, config=config, provenance=moved), None
        except (ValueError, TypeError) as error:
            return state, Refusal(path, str(error))
    if kind in ("source", "reset"):
        label = action[1] if kind == "source" else state.source
        try:
            config = resolve(label)
        except (ValueError, OSError) as error:
            return state, Refusal(str(label), str(error))
        return dataclasses.replace(state, config=config, source=label, provenance=None), None
    if kind == "config":
        _, config, label, *given = action
        return dataclasses.replace(state, config=config, source=label or state.source,
                                   provenance=given[0] if given else None), None
    if kind == "mode":
        if action[1] not in MODES:
            return state, Refusal("mode", f"unknown mode {action[1]!r}")
        return dataclasses.replace(state, mode=action[1]), None
    if kind == "query":
        index = action[1]
        if not isinstance(index, int) or index < 0:
            return state, Refusal("query", f"no query {index!r}")
        return dataclasses.replace(state, query=index), None
    if kind == "text":
        return dataclasses.replace(state, text=str(action[1] or "")), None
    raise ValueError(f"unknown Tune action {kind!r}")
