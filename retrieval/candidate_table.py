"""The candidate table: one row per (query, document) with every raw feature, its visibility
at a per-path depth, and its save/load. A type of its own, importing numpy (and the kernels and
the atomic write it needs) and no engine, so a fusion that reads a table imports no index;
``retrieval.candidates`` builds it."""

from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Hashable

import numpy as np

from retrieval import kernels
from retrieval.files import atomic_write_bytes
from retrieval.keyword_names import DEFAULT_ANALYZER, MATCH_MODES

ROW_COLUMNS = (
    "query_idx", "doc_idx", "dense_sim", "dense_rank", "bm25_score", "bm25_rank", "bm25_all_score",
    "bm25_all_rank", "bm25_tech_score", "bm25_tech_rank", "via_fast", "via_timeline",
    "age_days", "created_age", "in_window", "graph", "confidence", "vitality", "reinforcement", "access_count", "token_count",
    "tie_key", "line_start",
)

@dataclass(frozen=True, eq=False)
class Candidates:
    """Columnar candidate table for a query set; rows grouped by query in order."""

    dataset: str
    fingerprint: str
    embedder: str
    pool_depth: int
    doc_ids: tuple[str, ...]
    query_ids: tuple[str, ...]
    query_texts: tuple[str, ...]
    offsets: np.ndarray          # (Q+1,) row range of each query
    fast_target: tuple[str, ...]  # per query: fast path file or ""
    timeline: np.ndarray         # per query: timeline path triggered
    intent_route: tuple[str, ...]  # per query: routed profile name
    window: tuple[str, ...]      # per query: label of the named time window or ""
    degraded: tuple[tuple[str, ...], ...]
    cols: dict[str, np.ndarray] = field(repr=False)
    analyzer: str = DEFAULT_ANALYZER  # the BM25 analyzer of the index it was retrieved from
    doc_types: tuple[str, ...] = ()  # per document (doc_idx order): memory_type; () if hand-built
    query_kinds: tuple[str, ...] = ()  # per query: its labelled intent ("" none); () where unknown

    def __post_init__(self) -> None:
        """The prepared pool, built once with the table and never changed after (so it is read
        by every session thread without a lock): each query's rows in tie order (document id)
        with the offsets, token counts and widest query the ranking kernels walk; ``best_rank``,
        each row's best 0-based rank over the two paths (``NOT_RETURNED`` where neither returned
        it), so that visibility at any depth is one comparison; the keyword-match views (the
        same rows through the ``all`` and ``technical`` lists, sharing every other column)."""
        offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        shared = {
            "tie_order": kernels.tie_order(self.cols["query_idx"], self.cols["tie_key"]),
            "order_offsets": offsets,
            "row_tokens": np.ascontiguousarray(self.cols["token_count"], dtype=np.int64),
            "widest": int(np.diff(offsets).max(initial=0)) or 1,
        }
        for value in shared.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
        self.__dict__.update(shared)
        self.__dict__.update(_visibility_of(self.cols))
        views = {"any": self}
        if all(f"bm25_{part}_rank" in self.cols for part in MATCH_PARTS.values()):
            for match, part in MATCH_PARTS.items():
                views[match] = self._view({**self.cols, "bm25_rank": self.cols[f"bm25_{part}_rank"],
                                           "bm25_score": self.cols[f"bm25_{part}_score"]})
        for match, view in views.items():  # a view's own "any" is itself, as for the table
            view.__dict__["_views"] = {**views, "any": view}

    def __getstate__(self) -> dict:
        """Pickled (a Ray worker, a copy) as its fields alone; the copy prepares itself afresh."""
        return {f.name: self.__dict__[f.name] for f in fields(self)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__post_init__()

    def _view(self, cols: dict) -> "Candidates":
        """The same table with other keyword columns: every prepared array shared, its own
        ``best_rank`` and its own per-depth values."""
        view = object.__new__(Candidates)
        view.__dict__.update(self.__dict__)
        view.__dict__.update(cols=cols, **_visibility_of(cols))
        return view

    def __getattr__(self, name: str) -> np.ndarray:
        cols = self.__dict__.get("cols")
        if cols is not None and name in cols:
            return cols[name]
        raise AttributeError(name)

    @property
    def n_rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def with_keyword_match(self, match: str) -> "Candidates":
        """The table as keyword match mode ``match`` sees it: for ``all`` the BM25 path's
        ``bm25_rank`` / ``bm25_score`` are those of the AND query (-1 / 0 where it did not
        return the document); ``any`` is the table itself. Same rows in the same order; the
        view shares every other column and was made with the table."""
        if match not in MATCH_MODES:
            raise ValueError(f"keyword match must be one of {list(MATCH_MODES)}, got {match!r}")
        return self._views[match]

    def visible(self, depth: int) -> np.ndarray:
        """Rows a pipeline of this per-path depth retrieves (``best_rank < depth``; read-only,
        the same array on every call)."""
        return self.at_depth(depth).mask

    def at_depth(self, depth: int) -> "Visibility":
        """What the table's rows look like to a pipeline of per-path depth ``depth``: made on
        the first call per depth from ``best_rank`` and kept with the table."""
        seen = self.__dict__["_depths"].get(depth)
        if seen is not None:
            return seen
        seen = self.__dict__["_depths"].setdefault(depth, self.visibility(depth))  # one dict step: atomic
        self.__dict__["_masks"].setdefault(id(seen.mask), seen)
        return seen

    def visibility(self, depth: int) -> "Visibility":
        """``at_depth(depth)`` made afresh (not kept)."""
        if depth > self.pool_depth:
            raise ValueError(f"depth {depth} exceeds the candidate pool depth {self.pool_depth}; "
                             "build candidates with a larger pool_depth")
        mask = self.best_rank < depth
        order = self.tie_order[mask[self.tie_order]]
        offsets = np.zeros(self.n_queries + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.cols["query_idx"][order], minlength=self.n_queries), out=offsets[1:])
        return Visibility(*_read_only((mask, np.flatnonzero(mask), order, offsets)))

    def depth_of(self, mask: np.ndarray) -> "Visibility | None":
        """The ``Visibility`` whose mask is ``mask`` (the same array), else None (a mask made
        afresh, as for a routed query set)."""
        seen = self.__dict__["_masks"].get(id(mask))
        return seen if seen is not None and seen.mask is mask else None

    def derived(self, key: Hashable, build: Callable[[], object], along: np.ndarray | None = None):
        """A value computed from this table alone (at a depth), made on first use and kept with
        it; arrays come back read-only. ``along``: the visible mask it is computed over — kept
        only when that is one of the table's own (``at_depth``), computed afresh otherwise.
        Keys are few (a name, a depth, a norm), so nothing is ever evicted; two threads missing
        the same key may both build it and both get the first one stored."""
        if along is not None and self.depth_of(along) is None:
            return _read_only(build())
        kept = self.__dict__["_kept"]
        value = kept.get(key, _MISS)
        if value is _MISS:
            value = kept.setdefault(key, _read_only(build()))
        return value

    def save(self, path: Path) -> None:
        """Write atomically and durably (``retrieval.files.atomic_write``), with a checksum.

        Layout: ``POOL_MAGIC``, the sha256 of the payload, then the payload (an ``.npz``)."""
        meta = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("offsets", "timeline", "cols")}
        buffer = io.BytesIO()
        np.savez(buffer, offsets=self.offsets, timeline=self.timeline, meta=np.array(json.dumps(meta)),
                 **{f"col_{k}": v for k, v in self.cols.items()})
        payload = buffer.getvalue()
        atomic_write_bytes(path, POOL_MAGIC + hashlib.sha256(payload).digest() + payload)

    @classmethod
    def load(cls, path: Path) -> "Candidates":
        """Read a pool written by ``save``; ``PoolCorrupt`` when it is truncated, empty, altered
        or inconsistent (the caller rebuilds it)."""
        data = Path(path).read_bytes()
        head = len(POOL_MAGIC) + 32
        if len(data) < head or not data.startswith(POOL_MAGIC):
            raise PoolCorrupt(f"{path}: not a candidate pool (empty, truncated or an older format)")
        payload = data[head:]
        if hashlib.sha256(payload).digest() != data[len(POOL_MAGIC):head]:
            raise PoolCorrupt(f"{path}: checksum mismatch (truncated or altered)")
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as npz:
                meta = json.loads(str(npz["meta"]))
                meta.pop("learned_route", None)  # written by older versions (always null there)
                cols = {k[4:]: npz[k] for k in npz.files if k.startswith("col_")}
                meta = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
                        for k, v in meta.items()}
                pool = cls(offsets=npz["offsets"], timeline=npz["timeline"], cols=cols, **meta)
        except Exception as error:  # any decoding failure means a damaged file
            raise PoolCorrupt(f"{path}: cannot be decoded ({type(error).__name__}: {error})") from None
        pool._check_consistent(path)
        return pool

    def _check_consistent(self, path) -> None:
        n_q = len(self.query_ids)
        offsets = np.asarray(self.offsets)
        problems = []
        if set(self.cols) != set(ROW_COLUMNS):
            problems.append(f"columns {sorted(set(self.cols) ^ set(ROW_COLUMNS))} missing or unexpected")
        elif offsets.shape != (n_q + 1,) or offsets[0] != 0 or np.any(np.diff(offsets) < 0):
            problems.append("query offsets are inconsistent")
        elif any(len(v) != offsets[-1] for v in self.cols.values()):
            problems.append("columns have different lengths")
        elif len(self.timeline) != n_q or any(len(x) != n_q for x in (
                self.query_texts, self.fast_target, self.intent_route, self.window, self.degraded)):
            problems.append("per-query fields have different lengths")
        elif self.query_kinds and len(self.query_kinds) != n_q:
            problems.append("per-query kinds have another length")
        elif offsets[-1] and (self.cols["doc_idx"].min() < 0 or self.cols["doc_idx"].max() >= len(self.doc_ids)):
            problems.append("document positions out of range")
        if problems:
            raise PoolCorrupt(f"{path}: {problems[0]}")


class PoolCorrupt(ValueError):
    """A stored candidate pool is damaged; it is rebuilt rather than used."""


POOL_MAGIC = b"RWBPOOL\x02"

MATCH_PARTS = {"all": "all", "technical": "tech"}  # keyword match mode → its columns' infix
NOT_RETURNED = np.iinfo(np.int32).max
"""``best_rank`` of a row neither path returned (the fast and timeline paths' own rows)."""
_MISS = object()


@dataclass(frozen=True, eq=False)
class Visibility:
    """The rows a pipeline of one per-path depth sees: the mask, its row indexes, and each
    query's visible rows in tie order with their offsets (the only rows that can rank)."""

    mask: np.ndarray
    index: np.ndarray
    order: np.ndarray
    offsets: np.ndarray


def _read_only(value):
    for array in (value if isinstance(value, tuple) else (value,)):
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    return value


def _visibility_of(cols: dict) -> dict:
    """A table's (or view's) ``best_rank`` and its empty per-depth stores."""
    dense, sparse = cols["dense_rank"], cols["bm25_rank"]
    best = np.minimum(np.where(dense >= 0, dense, NOT_RETURNED), np.where(sparse >= 0, sparse, NOT_RETURNED))
    best.flags.writeable = False
    return {"best_rank": best, "_depths": {}, "_masks": {}, "_kept": {}}
