"""The candidate pool of a dataset's query set, computed once and persisted.

Keyed by (dataset fingerprint, embedder, analyzer, pool depth): an evaluation or a
sweep reads the stored table and never re-embeds or re-searches. A dataset that carries its
own runs (``eval.importers.runs``) is retrieved from them whatever the embedder asked for: its
pool is built from the run files, with no index or model, under the label ``runs:<hash>``; a
pool of ``--embedder precomputed`` is keyed by the hash of the dataset's vectors.
The stored file is a
cache: a damaged one (truncated, empty, altered — detected by its checksum) is rebuilt,
and one that cannot be written (full disk, read-only ``$RWB_HOME``) is skipped with a
notice; neither ever fails an evaluation.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Callable

from retrieval.bm25 import DEFAULT_ANALYZER, get_analyzer
from eval.importers.runs import dataset_run_lists, has_runs, runs_label
from retrieval.candidates import (
    DEFAULT_POOL_DEPTH, Candidates, PoolCorrupt, build_candidates, candidates_from_runs,
)
from retrieval.dataset import Dataset
from retrieval.embedders import DEFAULT_EMBEDDER
from retrieval.files import clean_temporaries, safe_component
from retrieval.index import IndexHandle, open_index, rwb_home
from retrieval.object_store import ObjectStoreError, pull_missing, push
from retrieval.precomputed import PRECOMPUTED, PrecomputedEmbedder, vectors_label
from retrieval.limits import MAX_DEPTH, check_size

POOL_VERSION = 8
# 2: checksummed file layout; 3: the keyword path's AND list (bm25_all_*), analyzer;
# 4: created_age (the timeline path's journal-date order); 5: exact search keeps table order among
# equal similarities at the depth cut; 6: the keyword path's technical-term list (bm25_tech_*);
# 7: each document's memory_type (doc_types)
# 8: the technical list requires an error code, identifier or name (bigrams only re-rank)


def _stderr_notice(text: str) -> None:
    print(f"rwb: {text}", file=sys.stderr)


def pool_embedder(dataset: Dataset, embedder: str, handle: IndexHandle | None = None) -> str:
    """The label the pool is retrieved and stored under: ``embedder``, or the dataset's runs.
    With precomputed vectors, ``handle`` (open on them) gives the hash it was opened with, so the
    vectors are not hashed again."""
    if has_runs(dataset.root):
        return runs_label(dataset.root)
    if embedder != PRECOMPUTED:
        return embedder
    if handle is not None and isinstance(handle.embedder, PrecomputedEmbedder):
        return handle.embedder.model_id
    return vectors_label(dataset.root)


def pool_path(dataset: Dataset, embedder: str, pool_depth: int, analyzer: str = DEFAULT_ANALYZER,
              handle: IndexHandle | None = None) -> Path:
    embedder = pool_embedder(dataset, embedder, handle)
    key = f"{dataset.fingerprint}|{embedder}|{get_analyzer(analyzer).version}|{pool_depth}|{POOL_VERSION}"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return rwb_home() / "candidates" / f"{safe_component(dataset.name)}-{digest}.npz"


def load_pool(dataset: Dataset, embedder: str = DEFAULT_EMBEDDER, pool_depth: int = DEFAULT_POOL_DEPTH,
              progress: Callable[[str, int, int], None] | None = None, refresh: bool = False,
              on_notice: Callable[[str], None] | None = _stderr_notice,
              analyzer: str = DEFAULT_ANALYZER, handle: IndexHandle | None = None) -> Candidates:
    """Candidates for every query of ``dataset``: from the store, or retrieved once and stored.

    ``analyzer`` names the BM25 analyzer (``retrieval.bm25.ANALYZERS``); each has its own index
    and its own stored pool. ``handle``: the index of (``dataset``, ``embedder``, ``analyzer``)
    already open in this process (``prepare``'s), retrieved from instead of opening it a second
    time — which would load, hash and check the vectors and every file of the build again while
    the first handle still holds them."""
    pool_depth = check_size("pool_depth", pool_depth, 1, MAX_DEPTH)
    analyzer = get_analyzer(analyzer).name
    if not dataset.queries:
        raise ValueError(f"dataset {dataset.name!r} has no queries to evaluate")
    if handle is not None and (handle.dataset is not dataset or handle.embedder_name != embedder
                               or handle.analyzer != analyzer):
        handle = None  # another index than the one asked for: open that one
    notice = on_notice or (lambda text: None)
    path = pool_path(dataset, embedder, pool_depth, analyzer, handle)
    clean_temporaries(path)  # a killed save's temporary, even when the stored pool is reused
    if not refresh:
        pull_missing(path)  # an s3:// home: the shared pool, when there is one
    if path.is_file() and not refresh:
        try:
            stored = Candidates.load(path)
            if stored.analyzer != analyzer:
                raise PoolCorrupt(f"{path}: retrieved with the {stored.analyzer!r} analyzer, not {analyzer!r}")
            return stored
        except (OSError, PoolCorrupt) as error:
            notice(f"candidate pool damaged ({error}); retrieving it again")
    step = (lambda done, total: progress("retrieve", done, total)) if progress else None
    if has_runs(dataset.root):
        dense, sparse = dataset_run_lists(dataset.root)
        label = runs_label(dataset.root)
        candidates = candidates_from_runs(dataset, dense, sparse, pool_depth, label, analyzer, step)
    else:
        handle = handle or open_index(dataset, embedder, progress=progress, on_notice=on_notice,
                                      analyzer=analyzer)
        candidates = build_candidates(handle, dataset.queries, pool_depth, progress=step)
    keyword_only = any("keyword-only" in note for notes in candidates.degraded for note in notes)
    if not keyword_only:  # a degraded pool is not kept: the next run retries the vectors
        try:
            candidates.save(path)
        except OSError as error:  # the store is a cache: a full or read-only disk costs time only
            notice(f"candidate pool not saved ({error.strerror or error}); it will be retrieved again next time")
        else:
            try:
                push(path)  # an s3:// home: one PUT of the whole pool (it is keyed by its content)
            except ObjectStoreError as error:
                notice(f"candidate pool not shared ({error})")
    return candidates


STEP_NAMES = {"bm25": "Indexing keywords (BM25)", "embed": "Embedding documents", "lance": "Writing the vector index",
              "retrieve": "Retrieving candidates for every query"}
"""What each progress stage of ``prepare`` does, in words a page or a command line can show."""


def prepare(dataset: Dataset, embedder: str = DEFAULT_EMBEDDER,
            progress: Callable[[str, int, int], None] | None = None, rebuild: bool = False,
            on_notice: Callable[[str], None] | None = _stderr_notice,
            analyzer: str = DEFAULT_ANALYZER, needed_only: bool = False):
    """Build (or open) ``dataset``'s indexes and, when it has queries, its default candidate
    pool — everything the workbench's first page needs. Returns the index handle and the pool
    (or ``None``). ``needed_only``: a dataset whose pool comes from its runs
    (``eval.importers.runs``) needs no index for it, so none is built (handle ``None``;
    free-text search builds it when asked)."""
    handle = None
    if not (needed_only and has_runs(dataset.root) and dataset.queries):
        handle = open_index(dataset, embedder, progress=progress, rebuild=rebuild,
                            on_notice=on_notice, analyzer=analyzer)
    pool = None
    if dataset.queries:
        encoded = getattr(handle and handle.embedder, "encoded", None)
        pool = load_pool(dataset, embedder, DEFAULT_POOL_DEPTH, progress=progress, refresh=rebuild,
                         on_notice=on_notice, analyzer=analyzer, handle=handle)
        if encoded is not None:  # the handle's count stays the documents its index encoded (what
            handle.embedder.encoded = encoded  # `rwb index` reports), not the queries the pool did
    return handle, pool

