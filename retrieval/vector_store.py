"""Dense vector store: a LanceDB table (cosine distance) with an exact in-memory fallback.

Prefilters are built from validated values only: strings are quoted with ``'`` doubled,
so a value such as ``' OR '1'='1`` is compared as a literal and matches nothing.
Above ``ANN_THRESHOLD`` rows an ANN index is built (``ann_index``: IVF_SQ, √n partitions,
through ``create_index("vector", config=…)``) and LanceDB searches it with ``SEARCH_KNOBS``
(60 partitions probed, 5 × limit candidates re-ranked on the stored vectors). IVF_SQ keeps one
byte per dimension, so its distances are close to exact; on the 1M-row benchmark it reaches
the recall target where IVF_PQ did not, and trains faster (BENCHMARKS.md, "1M rows").
Below the threshold search is exact, and it runs in memory: the table's own vectors are read
once per store into a float32 matrix (unit rows) and scanned with one matrix-vector product,
faster than LanceDB's flat search (BENCHMARKS.md, "Engine findings"). The scan applies the
prefilters with LanceDB's own semantics (an undated row, NaN ``created_ts``, passes
``created_after`` as DataFusion orders NaN above every number, and fails ``created_before``)
and returns the same top ``depth`` (``tests/retrieval/test_vector_store.py``); equal similarities keep
table order, at the cut too.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from retrieval.files import mapped_rows
from retrieval.limits import MAX_DEPTH, check_size

os.environ.setdefault("LANCEDB_LOG", "error")

ANN_THRESHOLD = 100_000
WRITE_BATCH_ROWS = 8_192
"""Rows per batch handed to LanceDB's ``create_table``: it reads several batches ahead of what
it has written, so their size bounds what a build holds on top of the table (BENCHMARKS.md,
issue 45)."""
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


@dataclass(frozen=True)
class RowColumns:
    """The rows' metadata as columns: a NumPy or Arrow array (or a list) per field, all of one
    length. A large build passes this instead of one ``Row`` object per row."""

    id: object
    scope: object
    project: object
    group: object
    created_ts: object  # float64 epoch seconds, NaN when undated

    @classmethod
    def of(cls, rows: Sequence[Row]) -> "RowColumns":
        return cls([r.id for r in rows], [r.scope for r in rows], [r.project for r in rows],
                   [r.group for r in rows], np.array([r.created_ts for r in rows], dtype=np.float64))

    def __len__(self) -> int:
        return len(self.id)


# LanceDB query-builder calls made on an indexed table: partitions probed, candidates
# re-ranked on the stored float32 vectors (× limit), HNSW candidate list (HNSW indexes only)
SEARCH_KNOBS = {"nprobes": 60, "refine_factor": 5, "ef": None}
HNSW_TYPES = ("IvfHnswSq", "IvfHnswPq", "IvfHnswFlat")


def ann_index(rows: int, dim: int):
    """The ANN index built from ``ANN_THRESHOLD`` rows (LanceDB's ``create_index`` config)."""
    from lancedb.index import IvfSq

    return IvfSq(distance_type="cosine", num_partitions=max(16, int(np.sqrt(rows))))


class VectorStore:
    """LanceDB table of unit vectors plus metadata columns used for prefilters."""

    def __init__(self, table):
        self._table = table
        try:
            vector_indices = [i for i in table.list_indices() if list(i.columns) == ["vector"]]
        except Exception:  # an unreadable index list means: search it as a flat table
            vector_indices = []
        self.indexed = bool(vector_indices)
        self.index_type: str | None = vector_indices[0].index_type if vector_indices else None  # e.g. "IvfPq"
        self._scan: _Scan | None = None
        self._scan_lock = threading.Lock()

    @classmethod
    def build(cls, path: Path, rows: "Sequence[Row] | RowColumns", vectors: np.ndarray,
              ann_threshold: int = ANN_THRESHOLD) -> "VectorStore":
        """Write the table (and, from ``ann_threshold`` rows, its ANN index, ``ann_index``).

        The table is written ``WRITE_BATCH_ROWS`` rows at a time: each batch's vector column is
        an Arrow view of those rows of ``vectors`` (no copy when they are C-ordered float32, as
        embedders return them), or, when ``vectors`` is a memory-mapped ``.npy``, those rows read
        from its file (``retrieval.files.mapped_rows``), so no whole copy is held; ``rows`` may
        be ``RowColumns`` so that a large build holds no per-row Python objects.
        ``ann_threshold`` exists for tests."""
        import lancedb
        import pyarrow as pa

        columns = rows if isinstance(rows, RowColumns) else RowColumns.of(rows)
        if not isinstance(vectors, np.ndarray):
            vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(columns):
            raise ValueError(f"{len(columns)} rows but vectors of shape {vectors.shape}")
        count, dim = vectors.shape
        schema = pa.schema([("id", pa.string()), ("vector", pa.list_(pa.float32(), dim)),
                            ("scope", pa.string()), ("project", pa.string()), ("grp", pa.string()),
                            ("created_ts", pa.float64())])

        def part(column, lo: int, hi: int, kind):
            if isinstance(column, pa.ChunkedArray):
                return column.slice(lo, hi - lo).combine_chunks().cast(kind)
            if isinstance(column, pa.Array):
                return column.slice(lo, hi - lo).cast(kind)
            return pa.array(column[lo:hi], type=kind)

        def batches():
            for lo in range(0, count, WRITE_BATCH_ROWS):
                hi = min(lo + WRITE_BATCH_ROWS, count)
                matrix = np.ascontiguousarray(mapped_rows(vectors, lo, hi), dtype=np.float32)
                yield pa.record_batch([
                    part(columns.id, lo, hi, pa.string()),
                    pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), dim),
                    part(columns.scope, lo, hi, pa.string()),
                    part(columns.project, lo, hi, pa.string()),
                    part(columns.group, lo, hi, pa.string()),
                    part(columns.created_ts, lo, hi, pa.float64()),
                ], schema=schema)

        # handed over as a stream of batches: given a whole pa.Table, create_table holds two more
        # copies of it (peak 4.7 GiB for 1.5 GiB of vectors, 2.1 GiB streamed)
        stream = pa.RecordBatchReader.from_batches(schema, batches())
        table = lancedb.connect(str(path)).create_table(TABLE, stream, mode="overwrite")
        del stream
        if count >= ann_threshold:
            table.create_index("vector", config=ann_index(count, dim), replace=True)
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
               nprobes: int | None = None) -> list[tuple[str, float]]:
        """Top ``depth`` (doc id, cosine similarity), best first: the in-memory scan below the
        ANN threshold, LanceDB's index above it."""
        depth = check_size("depth", depth, 0, MAX_DEPTH)
        if depth == 0:
            return []
        where = where_clause(filters)  # refuses a value that cannot be quoted, as LanceDB would see it
        if not self.indexed:
            scan = self._loaded_scan()
            if scan is not None:
                return scan.search(np.asarray(vector, dtype=np.float32), depth, filters)
        return self.lance_search(vector, depth, filters, nprobes, where)

    def lance_search(self, vector: np.ndarray, depth: int, filters: VectorFilters = VectorFilters(),
                     nprobes: int | None = None, where: str | None = None) -> list[tuple[str, float]]:
        """LanceDB's own search (flat, or the ANN index with ``SEARCH_KNOBS``; ``nprobes``
        overrides theirs), whatever the table's size."""
        depth = check_size("depth", depth, 0, MAX_DEPTH)
        if depth == 0:
            return []
        try:
            query = self._table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
            where = where if where is not None else where_clause(filters)
            if where:
                query = query.where(where, prefilter=True)
            if self.indexed:
                for knob, value in (SEARCH_KNOBS | ({"nprobes": nprobes} if nprobes is not None else {})).items():
                    if value is not None and (knob != "ef" or self.index_type in HNSW_TYPES):
                        query = getattr(query, knob)(value)
            result = query.limit(depth).select(["id", "_distance"]).to_arrow()
        except (ValueError, TypeError):
            raise
        except Exception as error:
            raise VectorStoreUnavailable(f"LanceDB search failed: {error}") from error
        ids = result.column("id").to_pylist()
        distances = result.column("_distance").to_numpy()
        return [(doc_id, float(1.0 - d)) for doc_id, d in zip(ids, distances)]

    def _loaded_scan(self) -> "_Scan | None":
        """The table read into memory once (None above ``ANN_THRESHOLD`` rows: LanceDB searches)."""
        if self._scan is None:
            with self._scan_lock:
                if self._scan is None:
                    try:
                        if self._table.count_rows() >= ANN_THRESHOLD:
                            return None
                        self._scan = _Scan(_read_columns(self._table, _Scan.COLUMNS))
                    except Exception as error:
                        raise VectorStoreUnavailable(f"cannot read the LanceDB table: {error}") from error
        return self._scan


def _read_columns(table, columns: tuple[str, ...]):
    """The table's ``columns`` as one Arrow table (not the other columns a table may hold)."""
    try:
        return table.to_lance().to_table(columns=list(columns))
    except Exception:  # no Lance dataset behind it (a remote table): read it whole
        return table.to_arrow().select(list(columns))


def _top_rows(sims: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the ``depth`` highest ``sims``, best first, equal values in position order —
    also at the cut: every value tied with the last one kept competes (``argpartition`` alone
    keeps an arbitrary one of them, so a depth-50 and a depth-100 search could disagree)."""
    if depth < len(sims):
        kth = sims[np.argpartition(-sims, depth - 1)[depth - 1]]
        top = np.flatnonzero(sims >= kth)
    else:
        top = np.arange(len(sims))
    return top[np.lexsort((top, -sims[top]))][:depth]


class _Scan:
    """A LanceDB table's rows in memory: unit float32 vectors and the prefilter columns."""

    COLUMNS = ("id", "vector", "scope", "project", "grp", "created_ts")

    def __init__(self, data):
        import pyarrow.compute as pc

        self.ids = data.column("id").to_pylist()
        vectors = data.column("vector").combine_chunks()
        dim = vectors.type.list_size
        matrix = vectors.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        matrix = matrix.reshape(len(self.ids), dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.unit = np.ascontiguousarray(matrix / np.where(norms > 0, norms, 1.0), dtype=np.float32)
        self.columns = {name: np.asarray(pc.fill_null(data.column(name), "").to_pylist(), dtype=object)
                        for name in ("scope", "project", "grp")}
        self.created = data.column("created_ts").to_numpy().astype(np.float64)

    def mask(self, filters: VectorFilters) -> np.ndarray | None:
        keep = None
        for column, value in (("scope", filters.scope), ("project", filters.project), ("grp", filters.group)):
            if value:
                hit = self.columns[column] == value
                keep = hit if keep is None else keep & hit
        if filters.created_after is not None:
            hit = (self.created >= filters.created_after) | np.isnan(self.created)  # NaN sorts above all
            keep = hit if keep is None else keep & hit
        if filters.created_before is not None:
            hit = self.created <= filters.created_before
            keep = hit if keep is None else keep & hit
        return keep

    def search(self, vector: np.ndarray, depth: int, filters: VectorFilters) -> list[tuple[str, float]]:
        norm = float(np.linalg.norm(vector))
        sims = self.unit @ (vector / np.float32(norm if norm > 0 else 1.0))
        keep = self.mask(filters)
        candidates = np.flatnonzero(keep) if keep is not None else None
        if candidates is not None:
            sims = sims[candidates]
        depth = min(depth, len(sims))
        if depth <= 0:
            return []
        top = _top_rows(sims, depth)
        rows = candidates[top] if candidates is not None else top
        # LanceDB reports 1 − cosine distance in float32: the same rounding here
        return [(self.ids[r], float(1.0 - np.float32(1.0 - s))) for r, s in zip(rows.tolist(), sims[top].tolist())]


class ExactSearch:
    """Brute-force cosine search over the same vectors (OpenClaw's in-memory fallback)."""

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, rows: "Sequence[Row] | RowColumns"):
        columns = rows if isinstance(rows, RowColumns) else RowColumns.of(rows)
        self.ids = list(ids)
        self.vectors = vectors
        self._scope = np.asarray(columns.scope, dtype=object)
        self._project = np.asarray(columns.project, dtype=object)
        self._group = np.asarray(columns.group, dtype=object)
        self._created = np.asarray(columns.created_ts, dtype=np.float64)

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
        top = _top_rows(sims, depth)
        return [(self.ids[i], float(sims[i])) for i in top]
