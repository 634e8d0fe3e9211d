"""Dense vector store: a LanceDB table (cosine distance) with an exact in-memory fallback.

Prefilters are built from validated values only: strings are quoted with ``'`` doubled,
so a value such as ``' OR '1'='1`` is compared as a literal and matches nothing.
Above ``ANN_THRESHOLD`` rows an IVF_PQ index is built; below it search is exact.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from retrieval.limits import MAX_DEPTH, check_size

os.environ.setdefault("LANCEDB_LOG", "error")

ANN_THRESHOLD = 100_000
TABLE = "memories"


class VectorStoreUnavailable(RuntimeError):
    """The LanceDB table cannot be opened or queried."""


@dataclass(frozen=True)
class VectorFilters:
    scope: str = ""
    project: str = ""
    group: str = ""
    created_after: float | None = None  # epoch seconds
    created_before: float | None = None


def sql_literal(value: str) -> str:
    """Quote a user string as an SQL literal (control characters are refused)."""
    if not isinstance(value, str):
        raise TypeError(f"filter value must be a string, got {type(value).__name__}")
    if any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise ValueError("filter value contains control characters or lone surrogates")
    return "'" + value.replace("'", "''") + "'"


def where_clause(filters: VectorFilters) -> str | None:
    parts = []
    for column, value in (("scope", filters.scope), ("project", filters.project), ("grp", filters.group)):
        if value:
            parts.append(f"{column} = {sql_literal(value)}")
    if filters.created_after is not None:
        parts.append(f"created_ts >= {float(filters.created_after)!r}")
    if filters.created_before is not None:
        parts.append(f"created_ts <= {float(filters.created_before)!r}")
    return " AND ".join(parts) or None


@dataclass(frozen=True)
class Row:
    id: str
    scope: str
    project: str
    group: str
    created_ts: float  # NaN when undated


class VectorStore:
    """LanceDB table of unit vectors plus metadata columns used for prefilters."""

    def __init__(self, table):
        self._table = table
        try:
            self.indexed = bool(table.list_indices())
        except Exception:  # an unreadable index list means: search it as a flat table
            self.indexed = False

    @classmethod
    def build(cls, path: Path, rows: Sequence[Row], vectors: np.ndarray) -> "VectorStore":
        import lancedb
        import pyarrow as pa

        db = lancedb.connect(str(path))
        dim = vectors.shape[1]
        data = pa.table({
            "id": [r.id for r in rows],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.astype(np.float32).ravel()), dim),
            "scope": [r.scope for r in rows],
            "project": [r.project for r in rows],
            "grp": [r.group for r in rows],
            "created_ts": pa.array([r.created_ts for r in rows], type=pa.float64()),
        })
        table = db.create_table(TABLE, data, mode="overwrite")
        if len(rows) >= ANN_THRESHOLD:
            partitions = max(16, int(np.sqrt(len(rows))))
            table.create_index(metric="cosine", num_partitions=partitions,
                               num_sub_vectors=max(1, dim // 16), index_type="IVF_PQ")
        return cls(table)

    @classmethod
    def open(cls, path: Path) -> "VectorStore":
        try:
            import lancedb

            return cls(lancedb.connect(str(path)).open_table(TABLE))
        except Exception as error:
            raise VectorStoreUnavailable(f"cannot open the LanceDB table at {path}: {error}") from error

    def count(self) -> int:
        return self._table.count_rows()

    def search(self, vector: np.ndarray, depth: int, filters: VectorFilters = VectorFilters(),
               nprobes: int = 20) -> list[tuple[str, float]]:
        """Top ``depth`` (doc id, cosine similarity), best first."""
        depth = check_size("depth", depth, 0, MAX_DEPTH)
        if depth == 0:
            return []
        try:
            query = self._table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
            where = where_clause(filters)
            if where:
                query = query.where(where, prefilter=True)
            if self.indexed:
                # IVF_PQ distances are approximate: re-rank 10× the candidates exactly
                # (recall@10 0.33 → 0.82 on the 1M-row benchmark, ~1 ms more)
                query = query.nprobes(nprobes).refine_factor(10)
            result = query.limit(depth).select(["id", "_distance"]).to_arrow()
        except (ValueError, TypeError):
            raise
        except Exception as error:
            raise VectorStoreUnavailable(f"LanceDB search failed: {error}") from error
        ids = result.column("id").to_pylist()
        distances = result.column("_distance").to_numpy()
        return [(doc_id, float(1.0 - d)) for doc_id, d in zip(ids, distances)]


class ExactSearch:
    """Brute-force cosine search over the same vectors (OpenClaw's in-memory fallback)."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, rows: Sequence[Row]):
        self.ids = list(ids)
        self.vectors = vectors
        self._scope = np.array([r.scope for r in rows], dtype=object)
        self._project = np.array([r.project for r in rows], dtype=object)
        self._group = np.array([r.group for r in rows], dtype=object)
        self._created = np.array([r.created_ts for r in rows], dtype=np.float64)

    def mask(self, filters: VectorFilters) -> np.ndarray:
        keep = np.ones(len(self.ids), dtype=bool)
        for column, value in ((self._scope, filters.scope), (self._project, filters.project),
                              (self._group, filters.group)):
            if value:
                keep &= column == value
        if filters.created_after is not None:
            keep &= self._created >= filters.created_after
        if filters.created_before is not None:
            keep &= self._created <= filters.created_before
        return keep

    def search(self, vector: np.ndarray, depth: int, filters: VectorFilters = VectorFilters()
               ) -> list[tuple[str, float]]:
        depth = check_size("depth", depth, 0, MAX_DEPTH)
        sims = self.vectors @ np.asarray(vector, dtype=np.float32)
        sims = np.where(self.mask(filters), sims, -np.inf)
        depth = min(depth, int(np.isfinite(sims).sum()))
        if depth <= 0:
            return []
        top = np.argpartition(-sims, depth - 1)[:depth]
        top = top[np.lexsort((top, -sims[top]))]
        return [(self.ids[i], float(sims[i])) for i in top]
