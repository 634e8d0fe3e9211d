"""The candidate pool of a dataset's query set, computed once and persisted.

Keyed by (dataset fingerprint, embedder, analyzer, pool depth): an evaluation or a
sweep reads the stored table and never re-embeds or re-searches.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

from retrieval.bm25 import ANALYZER_VERSION
from retrieval.candidates import DEFAULT_POOL_DEPTH, Candidates, build_candidates
from retrieval.dataset import Dataset
from retrieval.embedders import DEFAULT_EMBEDDER
from retrieval.index import open_index, rwb_home

POOL_VERSION = 1


def pool_path(dataset: Dataset, embedder: str, pool_depth: int) -> Path:
    key = f"{dataset.fingerprint}|{embedder}|{ANALYZER_VERSION}|{pool_depth}|{POOL_VERSION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return rwb_home() / "candidates" / f"{dataset.name}-{digest}.npz"


def load_pool(dataset: Dataset, embedder: str = DEFAULT_EMBEDDER, pool_depth: int = DEFAULT_POOL_DEPTH,
              progress: Callable[[str, int, int], None] | None = None, refresh: bool = False) -> Candidates:
    """Candidates for every query of ``dataset``: from the store, or retrieved once and stored."""
    if not dataset.queries:
        raise ValueError(f"dataset {dataset.name!r} has no queries to evaluate")
    path = pool_path(dataset, embedder, pool_depth)
    if path.is_file() and not refresh:
        try:
            return Candidates.load(path)
        except (OSError, ValueError, KeyError):
            pass  # damaged: retrieve again below
    handle = open_index(dataset, embedder, progress=progress)
    candidates = build_candidates(
        handle, dataset.queries, pool_depth,
        progress=(lambda done, total: progress("retrieve", done, total)) if progress else None,
    )
    keyword_only = any("keyword-only" in note for notes in candidates.degraded for note in notes)
    if not keyword_only:  # a degraded pool is not kept: the next run retries the vectors
        path.parent.mkdir(parents=True, exist_ok=True)
        candidates.save(path)
    return candidates
