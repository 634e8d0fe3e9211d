"""What every exporter shares: the registry entry, the refusal, and the walk of the declarations
of the configuration it is given.

An exporter declares the stages it runs (``Exporter.stages``) and, per fusion it translates,
the fusion parameters its translation reads (``Exporter.reads``). Before it writes anything,
``check_declared`` walks the pipeline's declared knobs (``retrieval.params``: each says what an
engine must support, ``Knob.engine``) and the fusion's declared parameters: a value that is not
every engine's plain query and that the exporter does not declare, a fusion it does not
translate, or a parameter its translation does not read is refused, all in one line. So a stage
or a parameter added without an engine declaration is refused by every exporter until one says
how it runs it.

The BM25 analyzer a pipeline was tuned with (``retrieval.bm25.ANALYZERS``, ``rwb export
--analyzer``) is declared the same way: ``Exporter.analyzers`` names those the engine has an
equivalent analysis of, ``Exporter.no_analyzer`` why it has none of the others; an analyzer the
exporter does not name is refused before anything is written."""

from __future__ import annotations

import json

from dataclasses import dataclass, field
from typing import Callable, Mapping

from retrieval.params import ENGINE_WRITES, declared
from retrieval.pipeline import PipelineConfig


class NotExpressible(ValueError):
    """The engine has no stage that computes this part of the pipeline."""


@dataclass(frozen=True, eq=False)
class Exporter:
    """One engine's export: ``write`` turns a configuration the walk accepted into the file.

    ``supported``: the fusions it can express, in words (the refusal names them); ``reads``:
    fusion name → the parameters its translation reads (every active one must be there);
    ``stages``: the stages beyond every engine's plain query it runs (``"name"`` for a
    number or flag, ``"name=value"`` for a choice); ``analyzers``: rwb BM25 analyzer → the
    engine's equivalent analysis, in words (``write`` is given the analyzer and writes it);
    ``no_analyzer``: rwb BM25 analyzer → why the engine has no equivalent (the refusal's
    reason)."""

    engine: str
    summary: str
    write: Callable[[PipelineConfig, str | None], str]
    suffix: str
    supported: str
    reads: Mapping[str, frozenset[str]]
    stages: frozenset[str] = field(default_factory=frozenset)
    analyzers: Mapping[str, str] = field(default_factory=dict)
    no_analyzer: Mapping[str, str] = field(default_factory=dict)

    def export(self, config: PipelineConfig, analyzer: str | None = None, notes: tuple[str, ...] = ()) -> str:
        """The exported file of ``config`` (with the engine's analysis of the BM25 ``analyzer``
        the pipeline was tuned with; None: the analyzer is not part of the export);
        ``NotExpressible`` (one line) for whatever of it this engine does not run. ``notes``:
        lines the file carries for its reader (a JSON file's ``notes``, a Python file's comments),
        e.g. where the pipeline's figures come from."""
        check_declared(self, config, analyzer)
        return with_notes(self.write(config, analyzer), self.suffix, notes)


def with_notes(text: str, suffix: str, notes: tuple[str, ...]) -> str:
    """``text`` with ``notes`` added: to the ``notes`` list of a JSON document, or as comment
    lines above a Python file (each note on one line: control characters escaped, so no note
    can end the comment and become code)."""
    if not notes:
        return text
    if suffix == ".json":
        data = json.loads(text)
        data.setdefault("notes", []).extend(notes)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return "".join(f"# {json.dumps(note, ensure_ascii=False)[1:-1]}\n" for note in notes) + text


WHY = {  # what a fusion needs that a hybrid query of these engines does not have
    "adaptive": "intent routing between fusion profiles, time/graph features and the "
    "confidence/vitality multipliers F_conf·F_vit",
    "salience": "reinforcement, recency and access terms (memory metadata) added to RRF",
    "weighted": "raw cosine plus a rank- or score-normalised BM25 (OpenClaw's formula)",
    "combmnz": "the CombMNZ multiplier (number of paths that found the document)",
    "vector": "nothing to fuse: run the engine's plain vector search",
    "bm25": "nothing to fuse: run the engine's plain keyword search",
}


def refuse(engine: str, config: PipelineConfig, what: str, instead: str) -> NotExpressible:
    return NotExpressible(f"{engine} cannot express {what} (pipeline {config.name!r}); {instead}")


def refuse_fusion(engine: str, config: PipelineConfig, supported: str) -> NotExpressible:
    reason = WHY.get(config.fusion)
    detail = f"fusion {config.fusion!r}"
    detail += f" — {reason}" if reason else f" with {config.params}"
    return refuse(engine, config, detail, f"{engine} can express: {supported}")


def check_analyzer(exporter: Exporter, config: PipelineConfig, analyzer: str | None) -> None:
    """Refuse a BM25 ``analyzer`` ``exporter`` does not declare an equivalent of, naming why and
    the analyzers it has (None: the analyzer is not part of the export, nothing to check)."""
    if analyzer is None or analyzer in exporter.analyzers:
        return
    why = exporter.no_analyzer.get(analyzer, "no equivalent declared by this export")
    instead = ("tune with " + " or ".join(f"--analyzer {name} ({how})" for name, how in sorted(exporter.analyzers.items()))
               if exporter.analyzers else
               f"{exporter.engine} has no equivalent of any rwb analyzer; leave --analyzer out (text without "
               "Han characters tokenizes alike under all of them)")
    raise refuse(exporter.engine, config, f"the BM25 analyzer {analyzer!r} ({why})", instead)


def check_declared(exporter: Exporter, config: PipelineConfig, analyzer: str | None = None) -> None:
    """Refuse, in one line, a BM25 ``analyzer`` (when given) and every stage of ``config`` and
    every parameter of its fusion that ``exporter`` does not declare it runs (the module
    docstring says how)."""
    check_analyzer(exporter, config, analyzer)
    engine = exporter.engine
    missing = []
    for name, knob in declared(type(config)):
        value = getattr(config, name)
        if knob.engine == ENGINE_WRITES or (isinstance(knob.engine, tuple) and value in knob.engine):
            continue
        stage = f"{name}={value}" if knob.kind == "choice" else name
        if stage not in exporter.stages:
            missing.append(f"{knob.label} ({name} = {value!r})")
    if missing:
        raise refuse(engine, config, ", ".join(missing), "remove them to export the fusion alone")
    reads = exporter.reads.get(config.fusion)
    if reads is None:
        raise refuse_fusion(engine, config, exporter.supported)
    unread = [f"{config.fusion}.{name} = {getattr(config.params, name)!r}"
              for name, _ in declared(type(config.params)) if config.params.active(name) and name not in reads]
    if unread:
        raise refuse(engine, config, ", ".join(unread) + " (a parameter this export does not translate)",
                     f"{engine} can express: {exporter.supported}")
    check_weights(engine, config)


def check_weights(engine: str, config: PipelineConfig) -> None:
    """Refuse path weights that are both 0 (every document would score 0)."""
    params = config.params
    if hasattr(params, "w_dense") and hasattr(params, "w_sparse") and not params.w_dense + params.w_sparse > 0:
        raise refuse(engine, config, f"both path weights 0 ({config.fusion}.w_dense = {config.fusion}.w_sparse = 0: "
                     "every document would score 0)", "give at least one path a weight > 0")


def rrf_multiplies(engine: str, config: PipelineConfig) -> None:
    """Refuse an ``rrf`` whose terms ``engine`` cannot compute: its RRF multiplies a term by its
    weight (or has no weights), so ``weighting = 'qdrant'`` is expressible only with both
    weights 1, where the two weightings agree."""
    params = config.params
    if params.weighting != "multiply" and not params.w_dense == params.w_sparse == 1.0:
        raise refuse(engine, config,
                     f"rrf.weighting = {params.weighting!r} with weights {params.w_dense:g} / {params.w_sparse:g} "
                     "(Qdrant's 1 / ((rank + 1) / w + rrf_k); this engine's RRF is w / (rrf_k + rank + 1))",
                     "set rrf.weighting = 'multiply', or both weights to 1")


def share(w_dense: float, w_sparse: float) -> float:
    """The vector share ``w_dense / (w_dense + w_sparse)``: a fusion whose score is a positive
    multiple of another ranks the same."""
    total = w_dense + w_sparse
    if not total > 0:
        raise ValueError("the path weights sum to 0: nothing would be ranked")
    return round(w_dense / total, 12)  # 0.6 / 0.8 is 0.75, not 0.7499999999999999


def shares(engine: str, config: PipelineConfig, digits: int) -> tuple[float, float]:
    """``(sparse share, dense share)`` of the path weights rounded to ``digits`` as the engine
    is given them; refused when a weight > 0 rounds to 0 (the engine would drop that path)."""
    params = config.params
    dense = round(share(params.w_dense, params.w_sparse), digits)
    sparse = round(1.0 - dense, digits)
    for name, weight, given in (("w_dense", params.w_dense, dense), ("w_sparse", params.w_sparse, sparse)):
        if weight > 0 and given == 0:
            raise refuse(engine, config,
                         f"{config.fusion}.{name} = {weight:g}, a share that rounds to 0 in the engine's "
                         f"weights ({digits} decimals): the path would be dropped",
                         f"set {config.fusion}.{name} to 0 or to a share of at least {10 ** -digits:g}")
    return sparse, dense


def fusion_params(config: PipelineConfig) -> dict:
    return {name: getattr(config.params, name) for name, _ in declared(type(config.params))}
