"""Build, check and open the indexes of a (dataset, embedder) pair.

Layout under ``$RWB_HOME`` (default ``./.rwb``)::

    indexes/<dataset>-<pathhash>/<embedder>/builds/<key>/   manifest.json, ids.json,
                                                          vectors.npy, lance/, bm25/
    indexes/<dataset>-<pathhash>/<embedder>/current -> builds/<key>

A build is written aside and published by atomically replacing the ``current``
symlink, so a build killed at any point leaves the previous index usable. The
manifest records the dataset fingerprint, model and analyzer; any mismatch, or a
missing or corrupt file, triggers a rebuild. Unchanged texts are never re-encoded
(the embedding cache is keyed by model and text hash).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from retrieval.bm25 import ANALYZER_VERSION, BM25Index, IndexedDoc
from retrieval.dataset import Dataset
from retrieval.embedders import (
    DEFAULT_EMBEDDER, CachedEmbedder, Embedder, EmbedderUnavailable, EmbeddingCache, load_embedder,
)
from retrieval.vector_store import ExactSearch, Row, VectorStore, VectorStoreUnavailable

FORMAT_VERSION = 1
Progress = Callable[[str, int, int], None]


def rwb_home() -> Path:
    return Path(os.environ.get("RWB_HOME", ".rwb")).resolve()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "x"


def index_dir(dataset: Dataset, embedder_name: str) -> Path:
    where = hashlib.sha1(str(dataset.root.resolve()).encode()).hexdigest()[:8]
    return rwb_home() / "indexes" / f"{_slug(dataset.name)}-{where}" / _slug(embedder_name)


def doc_rows(dataset: Dataset) -> list[Row]:
    return [
        Row(d.id, d.scope, d.project, d.group, d.created_at.timestamp() if d.created_at else float("nan"))
        for d in dataset.documents
    ]


def index_text(doc) -> str:
    """Text that is embedded and indexed: title (if any) then body."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


class IndexCorrupt(RuntimeError):
    pass


@dataclass
class IndexHandle:
    """Everything retrieval needs, opened once per process."""

    dataset: Dataset
    embedder_name: str
    path: Path
    manifest: dict
    doc_ids: list[str]
    bm25: BM25Index
    vectors: np.ndarray | None
    exact: ExactSearch | None
    store: VectorStore | None
    embedder: Embedder | None
    degraded: list[str] = field(default_factory=list)


@contextmanager
def _build_lock(directory: Path):
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wanted_manifest(dataset: Dataset, model_id: str | None) -> dict:
    return {
        "format": FORMAT_VERSION,
        "dataset": dataset.name,
        "dataset_fingerprint": dataset.fingerprint,
        "model": model_id,
        "analyzer": ANALYZER_VERSION,
        "documents": len(dataset.documents),
    }


def read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((directory / "current" / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _check(build: Path, manifest: dict) -> None:
    """Raise IndexCorrupt when a published build is incomplete or damaged."""
    try:
        ids = json.loads((build / "ids.json").read_text("utf-8"))
        if len(ids) != manifest["documents"]:
            raise IndexCorrupt(f"ids.json holds {len(ids)} ids, manifest says {manifest['documents']}")
        bm25 = BM25Index.open(build / "bm25")
        if bm25.num_docs != len(ids):
            raise IndexCorrupt(f"BM25 index holds {bm25.num_docs} documents, expected {len(ids)}")
        if manifest["model"]:
            vectors = np.load(build / "vectors.npy", mmap_mode="r")
            if vectors.shape[0] != len(ids):
                raise IndexCorrupt(f"vectors.npy holds {vectors.shape[0]} rows, expected {len(ids)}")
            if not (build / "lance").is_dir():
                raise IndexCorrupt("the LanceDB folder is missing")
    except IndexCorrupt:
        raise
    except Exception as error:
        raise IndexCorrupt(f"{type(error).__name__}: {error}") from error


def _publish(directory: Path, build: Path) -> None:
    """Swap ``current`` to ``build`` atomically; keep the previous build for open readers."""
    current = directory / "current"
    previous = Path(os.readlink(current)).name if current.is_symlink() else None
    link = directory / f".current-{uuid.uuid4().hex}"
    os.symlink(Path("builds") / build.name, link)
    os.replace(link, current)
    _dir_fsync(directory)
    for old in (directory / "builds").iterdir():
        if old.name not in (build.name, previous):
            shutil.rmtree(old, ignore_errors=True)


def _dir_fsync(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _build(dataset: Dataset, directory: Path, embedder: CachedEmbedder | None, progress: Progress | None) -> Path:
    builds = directory / "builds"
    builds.mkdir(parents=True, exist_ok=True)
    build = builds / f"tmp-{uuid.uuid4().hex}"
    build.mkdir()
    docs = dataset.documents
    ids = [d.id for d in docs]
    rows = doc_rows(dataset)
    texts = [index_text(d) for d in docs]
    BM25Index.build(build / "bm25", (
        IndexedDoc(d.id, t, d.scope, d.project, d.group) for d, t in zip(docs, texts)
    ))
    if progress:
        progress("bm25", len(docs), len(docs))
    model_id = None
    if embedder is not None:
        vectors = embedder.encode(texts, (lambda done, total: progress("embed", done, total)) if progress else None)
        np.save(build / "vectors.npy", vectors)
        VectorStore.build(build / "lance", rows, vectors)
        model_id = embedder.model_id
        if progress:
            progress("lance", len(docs), len(docs))
    (build / "ids.json").write_text(json.dumps(ids), "utf-8")
    manifest = _wanted_manifest(dataset, model_id) | {"built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (build / "manifest.json").write_text(json.dumps(manifest, indent=2), "utf-8")
    final = builds / f"{dataset.fingerprint[:12]}-{uuid.uuid4().hex[:6]}"
    os.rename(build, final)
    return final


def _embedder(name: str) -> tuple[CachedEmbedder | None, str | None]:
    try:
        inner = load_embedder(name)
    except EmbedderUnavailable as error:
        return None, str(error)
    return CachedEmbedder(inner, EmbeddingCache(rwb_home() / "embeddings.sqlite")), None


def open_index(dataset: Dataset, embedder_name: str = DEFAULT_EMBEDDER, progress: Progress | None = None,
               rebuild: bool = False, on_notice: Callable[[str], None] | None = None) -> IndexHandle:
    """Open the current index, building or rebuilding it when missing, stale or corrupt."""
    directory = index_dir(dataset, embedder_name)
    embedder, embed_error = _embedder(embedder_name)
    degraded = [f"embedder unavailable ({embed_error}): keyword-only"] if embed_error else []
    wanted = _wanted_manifest(dataset, embedder.model_id if embedder else None)
    with _build_lock(directory):
        manifest = read_manifest(directory)
        current = directory / "current"
        stale = rebuild or manifest is None or any(manifest.get(k) != v for k, v in wanted.items())
        if not stale:
            try:
                _check(current.resolve(), manifest)
            except IndexCorrupt as error:
                if on_notice:
                    on_notice(f"index at {current.resolve()} is damaged ({error}); rebuilding")
                stale = True
        if stale:
            _publish(directory, _build(dataset, directory, embedder, progress))
            manifest = read_manifest(directory)
        build = current.resolve()
    return _open_build(dataset, embedder_name, build, manifest, embedder, degraded)


def _open_build(dataset, embedder_name, build, manifest, embedder, degraded) -> IndexHandle:
    ids = json.loads((build / "ids.json").read_text("utf-8"))
    bm25 = BM25Index.open(build / "bm25")
    vectors = exact = store = None
    if manifest["model"]:
        vectors = np.load(build / "vectors.npy")
        exact = ExactSearch(ids, vectors, doc_rows(dataset))
        try:
            store = VectorStore.open(build / "lance")
        except VectorStoreUnavailable as error:
            degraded = degraded + [f"vector store unavailable ({error}): exact in-memory search"]
    return IndexHandle(dataset, embedder_name, build, manifest, ids, bm25, vectors, exact, store, embedder,
                       degraded)
