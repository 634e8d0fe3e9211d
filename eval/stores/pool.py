"""The candidate pool of a dataset's query set, computed once and persisted.

Keyed by (dataset fingerprint, embedder, analyzer, pool depth): an evaluation or a
sweep reads the stored table and never re-embeds or re-searches. The stored file is a
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
from retrieval.candidates import DEFAULT_POOL_DEPTH, Candidates, PoolCorrupt, build_candidates
from retrieval.dataset import Dataset
from retrieval.embedders import DEFAULT_EMBEDDER
from retrieval.files import safe_component
from retrieval.index import open_index, rwb_home
from retrieval.limits import MAX_DEPTH, check_size

POOL_VERSION = 6
# 2: checksummed file layout; 3: the keyword path's AND list (bm25_all_*), analyzer;
# 4: created_age (the timeline path's journal-date order); 5: exact search keeps table order among
# equal similarities at the depth cut; 6: each document's memory_type (doc_types)


def _stderr_notice(text: str) -> None:
    print(f"rwb: {text}", file=sys.stderr)


def pool_path(dataset: Dataset, embedder: str, pool_depth: int, analyzer: str = DEFAULT_ANALYZER) -> Path:
    key = f"{dataset.fingerprint}|{embedder}|{get_analyzer(analyzer).version}|{pool_depth}|{POOL_VERSION}"
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return rwb_home() / "candidates" / f"{safe_component(dataset.name)}-{digest}.npz"


def load_pool(dataset: Dataset, embedder: str = DEFAULT_EMBEDDER, pool_depth: int = DEFAULT_POOL_DEPTH,
              progress: Callable[[str, int, int], None] | None = None, refresh: bool = False,
              on_notice: Callable[[str], None] | None = _stderr_notice,
              analyzer: str = DEFAULT_ANALYZER) -> Candidates:
    """Candidates for every query of ``dataset``: from the store, or retrieved once and stored.

    ``analyzer`` names the BM25 analyzer (``retrieval.bm25.ANALYZERS``); each has its own index
    and its own stored pool."""
    pool_depth = check_size("pool_depth", pool_depth, 1, MAX_DEPTH)
    analyzer = get_analyzer(analyzer).name
    if not dataset.queries:
        raise ValueError(f"dataset {dataset.name!r} has no queries to evaluate")
    notice = on_notice or (lambda text: None)
    path = pool_path(dataset, embedder, pool_depth, analyzer)
    if path.is_file() and not refresh:
        try:
            stored = Candidates.load(path)
            if stored.analyzer != analyzer:
                raise PoolCorrupt(f"{path}: retrieved with the {stored.analyzer!r} analyzer, not {analyzer!r}")
            return stored
        except (OSError, PoolCorrupt) as error:
            notice(f"candidate pool damaged ({error}); retrieving it again")
    handle = open_index(dataset, embedder, progress=progress, on_notice=on_notice, analyzer=analyzer)
    candidates = build_candidates(
        handle, dataset.queries, pool_depth,
        progress=(lambda done, total: progress("retrieve", done, total)) if progress else None,
    )
    keyword_only = any("keyword-only" in note for notes in candidates.degraded for note in notes)
    if not keyword_only:  # a degraded pool is not kept: the next run retries the vectors
        try:
            candidates.save(path)
        except OSError as error:  # the store is a cache: a full or read-only disk costs time only
            notice(f"candidate pool not saved ({error.strerror or error}); it will be retrieved again next time")
    return candidates
