"""Build, check and open the indexes of a (dataset, embedder, analyzer) triple.

Layout under ``$RWB_HOME`` (default ``./.rwb``)::

    indexes/<dataset>-<pathhash>/<embedder>/<analyzer>/builds/<key>/   manifest.json, ids.json,
                                                                     vectors.npy, lance/, bm25/
    indexes/<dataset>-<pathhash>/<embedder>/<analyzer>/current -> builds/<key>

The BM25 analyzer (``retrieval.bm25.ANALYZERS``) is part of the identity: each analyzer has
its own folder, so switching analyzers never rebuilds (or serves) the other's index, and the
vectors come from the embedding cache.

A build is written aside, every file fsynced, verified, and published by atomically
replacing the ``current`` symlink, so a build killed at any point leaves the previous
index usable. The manifest records the dataset fingerprint, model and analyzer and the
size and sha256 of every file of the build; any mismatch (a stale build, a missing,
truncated or bit-flipped file — LanceDB data, version or manifest files, Tantivy
segments, ``vectors.npy``, ``ids.json``) triggers a rebuild. Unchanged texts are never
re-encoded (the embedding cache is keyed by model and text hash). ``--embedder precomputed``
takes the dataset's own vectors (``retrieval.precomputed``) and loads no model. A read-only
``$RWB_HOME`` still serves a current, intact index. ``$RWB_HOME=s3://bucket/prefix``: the layout
above lives in a local mirror (``retrieval.object_store``), and a build is published to and
fetched from the bucket by ``retrieval.remote_index``.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from retrieval.bm25 import DEFAULT_ANALYZER, BM25Index, IndexedDoc, analyzer_of_version, get_analyzer
from retrieval.dataset import Dataset
from retrieval.embedders import (
    DEFAULT_EMBEDDER, CachedEmbedder, Embedder, EmbedderUnavailable, EmbeddingCache, load_embedder,
)
from retrieval.files import atomic_write_text, file_sha256, fsync_dir, fsync_tree, safe_component
from retrieval.home import rwb_home  # noqa: F401  (re-exported: retrieval.index.rwb_home)
from retrieval.object_store import is_s3
from retrieval.precomputed import PRECOMPUTED, PrecomputedEmbedder
from retrieval.vector_store import ExactSearch, Row, VectorStore, VectorStoreUnavailable

FORMAT_VERSION = 2  # 2: per-file checksums in the manifest
_UNCHECKED = ("manifest.json",)  # the manifest cannot hold its own checksum
Progress = Callable[[str, int, int], None]
_ENCODE_WITH: ContextVar[Callable[[Embedder, str], Embedder] | None] = ContextVar("rwb_encode_with", default=None)


@contextmanager
def encoding_with(wrap: Callable[[Embedder, str], Embedder]):
    """Inside this block, indexes opened or built in this thread encode the texts missing from
    the embedding cache with ``wrap(model, embedder_name)`` instead of the model itself
    (``retrieval.ray_index``: on Ray workers). ``wrap`` must give the model's vectors bit for
    bit; the cache, the build, its checks and its atomic publish are the local ones."""
    token = _ENCODE_WITH.set(wrap)
    try:
        yield
    finally:
        _ENCODE_WITH.reset(token)


def _slug(text: str) -> str:
    """A single safe path component from a name (see ``retrieval.files.safe_component``)."""
    return safe_component(text)


def index_dir(dataset: Dataset, embedder_name: str, analyzer: str = DEFAULT_ANALYZER) -> Path:
    where = hashlib.sha1(str(dataset.root.resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return (rwb_home() / "indexes" / f"{_slug(dataset.name)}-{where}" / _slug(embedder_name)
            / _slug(get_analyzer(analyzer).name))


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

    @property
    def analyzer(self) -> str:
        """Name of the BM25 analyzer the index was built with."""
        return self.bm25.analyzer


_READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


@contextmanager
def _build_lock(directory: Path):
    """Exclusive lock of an index folder; yields False (no lock) when ``$RWB_HOME`` is read-only."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = open(directory / ".lock", "a")
    except OSError as error:
        if error.errno not in _READ_ONLY:
            raise
        yield False
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wanted_manifest(dataset: Dataset, model_id: str | None, analyzer: str) -> dict:
    return {
        "format": FORMAT_VERSION,
        "dataset": dataset.name,
        "dataset_fingerprint": dataset.fingerprint,
        "model": model_id,
        "analyzer": get_analyzer(analyzer).version,
        "documents": len(dataset.documents),
    }


def read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((directory / "current" / "manifest.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _tracked_files(build: Path) -> list[Path]:
    """Files of a build covered by the manifest's checksums (lock files are Tantivy's scratch)."""
    found = []
    for folder, _, files in os.walk(build):
        for name in files:
            path = Path(folder) / name
            rel = path.relative_to(build).as_posix()
            if rel not in _UNCHECKED and not name.endswith(".lock"):
                found.append(path)
    return sorted(found)


def _checksums(build: Path) -> dict[str, list]:
    return {p.relative_to(build).as_posix(): [p.stat().st_size, file_sha256(p)] for p in _tracked_files(build)}


def _verify_files(build: Path, manifest: dict) -> None:
    """Raise IndexCorrupt naming the first file that is missing, extra, resized or altered."""
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not recorded:
        raise IndexCorrupt("the manifest records no file checksums")
    present = {p.relative_to(build).as_posix(): p for p in _tracked_files(build)}
    for rel, entry in sorted(recorded.items()):
        path = present.pop(rel, None)
        if path is None:
            raise IndexCorrupt(f"{rel} is missing")
        size, digest = entry
        if path.stat().st_size != size:
            raise IndexCorrupt(f"{rel} has {path.stat().st_size} bytes, the manifest says {size}")
        if file_sha256(path) != digest:
            raise IndexCorrupt(f"{rel} does not match its checksum (altered or bit-flipped)")
    if present:
        raise IndexCorrupt(f"unexpected file {sorted(present)[0]}")


def _check(build: Path, manifest: dict) -> None:
    """Raise IndexCorrupt when a published build is incomplete or damaged.

    Pure-Python checks first (ids, the shape of ``vectors.npy``, every file's size and
    sha256), so Tantivy and LanceDB only ever open files that match the manifest."""
    try:
        ids = json.loads((build / "ids.json").read_text("utf-8"))
        if len(ids) != manifest["documents"]:
            raise IndexCorrupt(f"ids.json holds {len(ids)} ids, manifest says {manifest['documents']}")
        if manifest["model"]:
            vectors = np.load(build / "vectors.npy", mmap_mode="r")
            if vectors.shape[0] != len(ids):
                raise IndexCorrupt(f"vectors.npy holds {vectors.shape[0]} rows, expected {len(ids)}")
            if not (build / "lance").is_dir():
                raise IndexCorrupt("the LanceDB folder is missing")
        _verify_files(build, manifest)
        bm25 = _open_bm25(build / "bm25", _manifest_analyzer(manifest))
        if bm25.num_docs != len(ids):
            raise IndexCorrupt(f"BM25 index holds {bm25.num_docs} documents, expected {len(ids)}")
        if manifest["model"]:
            store = VectorStore.open(build / "lance")
            if store.count() != len(ids):
                raise IndexCorrupt(f"the LanceDB table holds {store.count()} rows, expected {len(ids)}")
            if len(ids) and not store.search(np.asarray(vectors[0], dtype=np.float32), 1):
                raise IndexCorrupt("the LanceDB table returns nothing")
    except IndexCorrupt:
        raise
    except Exception as error:
        raise IndexCorrupt(f"{type(error).__name__}: {str(error)[:200]}") from error
    except BaseException as error:  # a pyo3 panic (a BaseException) is damage; a signal never is
        if type(error).__name__ != "PanicException":
            raise
        raise IndexCorrupt(f"{type(error).__name__}: {str(error)[:200]}") from error


def _manifest_analyzer(manifest: dict) -> str:
    analyzer = analyzer_of_version(manifest.get("analyzer"))
    if analyzer is None:
        raise IndexCorrupt(f"the manifest names an unknown analyzer {manifest.get('analyzer')!r}")
    return analyzer.name


def _open_bm25(path: Path, analyzer: str) -> BM25Index:
    """Open a Tantivy index built with ``analyzer``; on a read-only file system (Tantivy insists
    on a lock file) open a private copy in a temporary folder, removed when the process exits."""
    try:
        return BM25Index.open(path, analyzer)
    except ValueError as error:
        if "Read-only file system" not in str(error) and "Permission denied" not in str(error):
            raise
    copy = Path(tempfile.mkdtemp(prefix="rwb-bm25-ro-"))
    atexit.register(shutil.rmtree, copy, True)
    shutil.copytree(path, copy / "bm25", ignore=shutil.ignore_patterns("*.lock"))
    return BM25Index.open(copy / "bm25", analyzer)


def _publish(directory: Path, build: Path) -> None:
    """Swap ``current`` to ``build`` atomically; keep the previous build for open readers."""
    current = directory / "current"
    previous = Path(os.readlink(current)).name if current.is_symlink() else None
    link = directory / f".current-{uuid.uuid4().hex}"
    os.symlink(Path("builds") / build.name, link)
    os.replace(link, current)
    fsync_dir(directory)
    for old in (directory / "builds").iterdir():
        if old.name not in (build.name, previous):
            shutil.rmtree(old, ignore_errors=True)


def _build(dataset: Dataset, directory: Path, embedder: CachedEmbedder | PrecomputedEmbedder | None,
           progress: Progress | None,
           analyzer: str) -> Path:
    """Write a complete build aside, fsync it, verify it, and rename it to its final name.
    On any failure (a full disk included) the partial build is removed and the error raised."""
    builds = directory / "builds"
    builds.mkdir(parents=True, exist_ok=True)
    for stale in builds.glob("tmp-*"):  # left by a killed build (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    build = builds / f"tmp-{uuid.uuid4().hex}"
    build.mkdir()
    try:
        return _build_into(dataset, builds, build, embedder, progress, analyzer)
    except BaseException as error:
        shutil.rmtree(build, ignore_errors=True)
        if isinstance(error, Exception) and _disk_full(directory, error):
            raise IndexUnwritable(errno.ENOSPC, f"no space left on the disk of {directory} while building the index "
                                        f"({str(error).splitlines()[0][:160] if str(error) else type(error).__name__}); "
                                        "free some space and run `rwb index` again") from error
        raise


def _disk_full(directory: Path, error: Exception) -> bool:
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(error)
    if "No space left" in text or "os error 28" in text:
        return True
    try:  # libraries word a short write differently ("3840 requested and 3040 written")
        return shutil.disk_usage(directory).free < 1 << 20
    except OSError:
        return False


def _build_into(dataset: Dataset, builds: Path, build: Path,
                embedder: CachedEmbedder | PrecomputedEmbedder | None,
                progress: Progress | None, analyzer: str) -> Path:
    docs = dataset.documents
    ids = [d.id for d in docs]
    rows = doc_rows(dataset)
    texts = [index_text(d) for d in docs]
    BM25Index.build(build / "bm25", (
        IndexedDoc(d.id, t, d.scope, d.project, d.group) for d, t in zip(docs, texts)
    ), analyzer)
    if progress:
        progress("bm25", len(docs), len(docs))
    model_id = None
    if embedder is not None:
        if isinstance(embedder, PrecomputedEmbedder):  # the dataset's own vectors, by id
            vectors = embedder.encode_documents(ids)
        else:
            step = (lambda done, total: progress("embed", done, total)) if progress else None
            vectors = embedder.encode(texts, step)
        np.save(build / "vectors.npy", vectors)
        del vectors  # the table is written from the file: no copy held while LanceDB builds
        if isinstance(embedder, PrecomputedEmbedder):
            embedder.release_documents()
        VectorStore.build(build / "lance", rows, np.load(build / "vectors.npy", mmap_mode="r"))
        model_id = embedder.model_id
        if progress:
            progress("lance", len(docs), len(docs))
    atomic_write_text(build / "ids.json", json.dumps(ids))
    fsync_tree(build)
    manifest = _wanted_manifest(dataset, model_id, analyzer) | {"built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                                      "files": _checksums(build)}
    atomic_write_text(build / "manifest.json", json.dumps(manifest, indent=2))
    _check(build, manifest)  # verify what is about to be published
    final = builds / f"{dataset.fingerprint[:12]}-{uuid.uuid4().hex[:6]}"
    os.rename(build, final)
    fsync_dir(builds)
    return final


def _embedder(name: str, dataset: Dataset
              ) -> tuple[CachedEmbedder | PrecomputedEmbedder | None, str | None]:
    if name == PRECOMPUTED:  # the dataset's own vectors; a problem in them is the user's to fix
        return PrecomputedEmbedder.of(dataset), None
    try:
        inner = load_embedder(name)
    except EmbedderUnavailable as error:
        return None, str(error)
    wrap = _ENCODE_WITH.get()
    return CachedEmbedder(wrap(inner, name) if wrap else inner, EmbeddingCache(rwb_home() / "embeddings.sqlite")), None


def open_index(dataset: Dataset, embedder_name: str = DEFAULT_EMBEDDER, progress: Progress | None = None,
               rebuild: bool = False, on_notice: Callable[[str], None] | None = None,
               analyzer: str = DEFAULT_ANALYZER) -> IndexHandle:
    """Open the current index of (dataset, embedder, analyzer), building or rebuilding it when
    missing, stale or corrupt.

    Every file of the build is checked against the manifest's checksums before it is reused
    and after it is built. With a read-only ``$RWB_HOME`` a current, intact index is served;
    one that would need a (re)build raises ``IndexUnwritable`` (an ``OSError``) saying why."""
    analyzer = get_analyzer(analyzer).name
    directory = index_dir(dataset, embedder_name, analyzer)
    embedder, embed_error = _embedder(embedder_name, dataset)
    degraded = [f"embedder unavailable ({embed_error}): keyword-only"] if embed_error else []
    # a cache problem is already warned about on stderr by the cache
    if embedder is not None and getattr(getattr(embedder, "cache", None), "problem", None):
        degraded.append(embedder.cache.problem)
    wanted = _wanted_manifest(dataset, embedder.model_id if embedder else None, analyzer)
    shared = _shared(dataset, embedder_name, analyzer)
    with _build_lock(directory) as writable:
        # an s3:// home: the published build, downloaded and verified (retrieval.remote_index)
        pulled = bool(shared) and not rebuild and shared.pull(directory, wanted, on_notice or (lambda text: None))
        manifest = read_manifest(directory)
        current = directory / "current"
        stale = rebuild or manifest is None or any(manifest.get(k) != v for k, v in wanted.items())
        reason = "missing or stale" if manifest is None or not rebuild else "asked to rebuild"
        if not stale and not pulled:
            try:
                _check(current.resolve(), manifest)
            except IndexCorrupt as error:
                reason = f"damaged ({error})"
                if on_notice and writable:
                    on_notice(f"index at {current.resolve()} is damaged ({error}); rebuilding")
                stale = True
        if stale:
            if not writable:
                raise IndexUnwritable(errno.EROFS, f"the index of {dataset.name!r} is {reason} and "
                                      f"{rwb_home()} is not writable; run `rwb index` where it is")
            _publish(directory, _build(dataset, directory, embedder, progress, analyzer))
            manifest = read_manifest(directory)
        build = current.resolve()
        if shared and not pulled:
            shared.publish(build)
    if isinstance(embedder, PrecomputedEmbedder):  # the index holds them now (vectors.npy)
        embedder.release_documents()
    return _open_build(dataset, embedder_name, build, manifest, embedder, degraded)


def open_for_search(dataset: Dataset, embedder_name: str, build: Path, manifest: dict) -> IndexHandle:
    """The build at ``build`` (a ``current`` target of this home, or of a shared one) opened
    for searching only, after every file is checked against ``manifest``: no model is loaded
    and nothing is built (queries come as vectors; ``retrieval.ray_pool``'s workers)."""
    _check(build, manifest)
    return _open_build(dataset, embedder_name, build, manifest, None, [])


def _shared(dataset: Dataset, embedder_name: str, analyzer: str):
    """The index shared through an s3:// ``$RWB_HOME`` (``retrieval.remote_index``), else None."""
    if not is_s3(os.environ.get("RWB_HOME")):
        return None
    from retrieval.remote_index import BuildChecks, shared_index
    return shared_index(dataset, embedder_name, analyzer, BuildChecks(_check, _publish, IndexCorrupt))


class IndexUnwritable(OSError):
    """An index needs building but ``$RWB_HOME`` cannot be written (read-only, or the disk is full)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def _open_build(dataset, embedder_name, build, manifest, embedder, degraded) -> IndexHandle:
    ids = json.loads((build / "ids.json").read_text("utf-8"))
    bm25 = _open_bm25(build / "bm25", _manifest_analyzer(manifest))
    vectors = exact = store = None
    if manifest["model"]:
        vectors = np.load(build / "vectors.npy", mmap_mode="r")  # read-only, shared with the page cache: no second copy
        exact = ExactSearch(ids, vectors, doc_rows(dataset))
        try:
            store = VectorStore.open(build / "lance")
        except VectorStoreUnavailable as error:
            degraded = degraded + [f"vector store unavailable ({error}): exact in-memory search"]
    return IndexHandle(dataset, embedder_name, build, manifest, ids, bm25, vectors, exact, store, embedder,
                       degraded)
