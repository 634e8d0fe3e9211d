"""Building the candidate table (``retrieval.candidate_table.Candidates``): retrieve once per
query, keep every raw feature.

``build_candidates``: for each query, the top ``pool_depth`` documents of the dense path and of
the BM25 path (the dense path on a second thread), their union, plus the memories the fast path
(its target file) and the timeline path (journal memories of the last ``TIMELINE_DAYS`` days)
would read. ``candidates_from_runs`` builds the same table from outside runs (one ranked list
per path) instead of the index; ``retrieving_with`` lets ``retrieval.ray_pool`` hand in the path
lists retrieved on Ray workers. One row per (query, document) with the raw features every
strategy needs, all made by one row builder (``query_rows``) from the document table
(``doc_table``: per-document lookups and features, built once per loaded dataset). A pipeline
with a smaller depth sees only rows ranked within its depth on some path, so changing a weight,
``rrf_k`` or the candidate multiplier never touches an index.

Features (``ROW_COLUMNS``): ``dense_sim`` (the cosine; 0 without a query vector, the dense run's
score for a table from runs), ``dense_rank`` / ``bm25_rank`` (0-based, -1 when the path did not
return the document), ``bm25_score`` (0 when absent), ``bm25_all_rank`` / ``bm25_all_score``
(the same for the keyword query in match mode ``all``, every query word required — see "Keyword
match mode" below), ``bm25_tech_rank`` / ``bm25_tech_score`` (the keyword query over the query's
technical terms only, match mode ``technical``: Lingxi's keyword path, seed 004), ``via_fast`` /
``via_timeline`` (the row is the fast path's or the timeline path's), ``age_days`` (reference
time − updated_at), ``created_age`` (reference time − created_at: the journal date the timeline
path orders by), ``in_window`` (1/0 whether the memory's created_at lies in the window the query
names, NaN when it names none), ``graph`` (1 when a ``related`` link joins the memory to one of
the top ``GRAPH_ANCHORS`` hits of the dense or the BM25 ``any`` list), the document fields a row
carries as they are (``retrieval.dataset.ROW_FEATURES``), ``token_count`` and ``tie_key`` (the
document's place in id order, which breaks score ties).

Keyword match mode (``any`` / ``all`` / ``technical``, ``retrieval.bm25.MATCH_MODES``). The BM25
path runs once per mode asked (``matches``; a pool asks all three) per query at retrieval time:
the ``any`` query (OR of the terms), the ``all`` query (every query word required, as OpenClaw's
``buildFtsQuery`` joins its terms with AND, seed 002) and the ``technical`` query (the technical
terms only: error codes, identifiers, technical names, Han bigrams re-ranking their hits;
Lingxi's grep, seed 004); the pool holds the top ``pool_depth`` of each, and
``with_keyword_match("all")`` is the table seen through the ``all`` list (likewise
``technical``). So the mode is a pipeline parameter that re-scores without an index, like every
other, and an ``all`` pipeline of depth d sees exactly Tantivy's AND top d. The alternative —
filtering the stored OR hits by how many query terms they hold — loses every AND hit ranked
below the OR pool depth (a document holding all words can rank under documents holding a few
rare ones), and re-ranking the survivors would need their positions in the AND list anyway; a
second Tantivy query is cheap. BENCHMARKS.md, "Keyword match any vs all", compares the two
designs; only this one is exact by construction. The graph feature's anchors stay those of the
``any`` list.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Sequence

import numpy as np

from retrieval.bm25 import DEFAULT_ANALYZER, MATCH_MODES, Filters
from retrieval.candidate_table import (  # noqa: F401 (the table's names, as importers knew them)
    MATCH_PARTS, NOT_RETURNED, POOL_MAGIC, ROW_COLUMNS, Candidates, PoolCorrupt, Visibility)
from retrieval.dataset import ROW_FEATURES, Dataset, Query
from retrieval.index import IndexHandle
from retrieval.limits import MAX_DEPTH, check_size
from retrieval.routing import JOURNAL_PREFIX, TIMELINE_DAYS, fast_path_target, route_intent, triggers_timeline
from retrieval.timewindow import parse_time_window
from retrieval.vector_store import VectorFilters, VectorStoreUnavailable

DEFAULT_POOL_DEPTH = 50
GRAPH_ANCHORS = 3
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[A-Za-z0-9_]+|[^\sA-Za-z0-9_]")


def token_count(text: str) -> int:
    """Approximate LLM tokens: one per CJK character, word or punctuation mark."""
    return len(_TOKEN.findall(text))


def _filters(query: Query, scope: str = "", group: str = "", project: str = "") -> tuple[Filters, VectorFilters]:
    scope, group = scope or query.scope, group or query.group
    return Filters(scope, project, group), VectorFilters(scope, project, group)


def _dense_lists(handle: IndexHandle, vectors: np.ndarray | None, vfilters: list[VectorFilters], depth: int,
                 degraded: list[str]) -> list[list[tuple[str, float]]]:
    if vectors is None:
        return [[] for _ in vfilters]
    out = []
    for vector, flt in zip(vectors, vfilters):
        if handle.store is not None:
            try:
                out.append(handle.store.search(vector, depth, flt))
                continue
            except VectorStoreUnavailable as error:  # this query falls back; the handle is shared, keep it
                degraded.append(f"vector store unavailable ({error}): exact in-memory search")
            except ValueError:  # a filter value that cannot be quoted matches nothing
                out.append([])
                continue
        try:
            out.append(handle.exact.search(vector, depth, flt))
        except ValueError:
            out.append([])
    return out


def _embed_queries(handle: IndexHandle, queries: Sequence[Query],
                   degraded: list[str]) -> np.ndarray | None:
    if handle.embedder is None or handle.vectors is None:
        if not any("keyword-only" in note for note in degraded):
            reason = "embedder unavailable" if handle.embedder is None else "index has no vectors"
            degraded.append(f"{reason}: keyword-only")
        return None
    try:
        by_query = getattr(handle.embedder, "encode_queries", None)  # precomputed: by query id
        texts = [q.text for q in queries]
        vectors = by_query(queries) if by_query else handle.embedder.encode(texts)
        problem = getattr(getattr(handle.embedder, "cache", None), "problem", None)
        if problem and problem not in degraded:  # the cache is optional: note it, keep the vectors
            degraded.append(problem)
        return vectors
    except Exception as error:  # a failing model degrades to keyword-only, as Lingxi G3 asks
        degraded.append(f"embedder failed ({type(error).__name__}: {error}): keyword-only")
        return None


def recent_journal(table: "DocTable", now: datetime) -> np.ndarray:
    """Per document: a journal memory created in the ``TIMELINE_DAYS`` days up to ``now`` (what
    the timeline path reads)."""
    created = table.features["created_ts"]
    since = (now - timedelta(days=TIMELINE_DAYS)).timestamp()
    return table.journal & (created >= since) & (created <= now.timestamp())


_NO_HITS: dict = {}


def query_rows(table: "DocTable", qi: int, idx: np.ndarray, now: datetime,
               via_fast: np.ndarray | None, via_timeline: np.ndarray | None, window=None,
               dense_sim: np.ndarray | None = None,
               dense: dict = _NO_HITS, sparse: dict = _NO_HITS, every: dict = _NO_HITS,
               linked: set | frozenset = frozenset(), tech: dict = _NO_HITS,
               score_dtype=np.float32) -> dict[str, np.ndarray]:
    """Every ``ROW_COLUMNS`` feature of query ``qi``'s rows, one per document of ``idx``: the
    one row builder of a candidate table. ``dense`` / ``sparse`` / ``every`` / ``tech``:
    document index → (rank, score) of the dense, BM25 ``any``, ``all`` and ``technical`` lists
    (a document a path did not return has rank -1 and score 0); ``dense_sim`` the cosines (0 without a query vector);
    ``via_fast`` / ``via_timeline`` per row (None: no row); ``window`` the time window the
    query names (None: ``in_window`` is NaN); ``linked`` the documents joined to an anchor;
    ``score_dtype`` the keyword scores' type (float64 for outside runs, whose scores may differ
    below float32's precision)."""
    n = len(idx)
    f = table.features
    created, updated = f["created_ts"][idx], f["updated_ts"][idx]
    if window:
        inside = (created >= window.start.timestamp()) & (created < window.end.timestamp())
        in_window = inside.astype(np.float32)
    else:
        in_window = np.full(n, np.nan, dtype=np.float32)
    no = np.zeros(n, dtype=bool)
    return {
        "query_idx": np.full(n, qi, dtype=np.int32), "doc_idx": idx.astype(np.int32),
        "dense_sim": dense_sim if dense_sim is not None else np.zeros(n, dtype=np.float32),
        "dense_rank": np.array([dense[i][0] if i in dense else -1 for i in idx], dtype=np.int32),
        "bm25_score": np.array([sparse[i][1] if i in sparse else 0.0 for i in idx], score_dtype),
        "bm25_rank": np.array([sparse[i][0] if i in sparse else -1 for i in idx], dtype=np.int32),
        "bm25_all_score": np.array([every[i][1] if i in every else 0.0 for i in idx], score_dtype),
        "bm25_all_rank": np.array([every[i][0] if i in every else -1 for i in idx], dtype=np.int32),
        "bm25_tech_score": np.array([tech[i][1] if i in tech else 0.0 for i in idx], score_dtype),
        "bm25_tech_rank": np.array([tech[i][0] if i in tech else -1 for i in idx], dtype=np.int32),
        "via_fast": via_fast if via_fast is not None else no,
        "via_timeline": via_timeline if via_timeline is not None else no,
        "age_days": np.maximum(0.0, (now.timestamp() - updated) / 86400.0).astype(np.float32),
        "created_age": np.maximum(0.0, (now.timestamp() - created) / 86400.0).astype(np.float32),
        "in_window": in_window,
        "graph": np.array([1.0 if i in linked else 0.0 for i in idx], dtype=np.float32),
        **{name: f[name][idx] for name in (*ROW_FEATURES, "token_count", "tie_key")},
    }


def path_lists(handle: IndexHandle, queries: Sequence[Query], qvecs: np.ndarray | None, filters: list,
               pool_depth: int, matches: Sequence[str], degraded: list[str]) -> tuple[list, list, list, list]:
    """Each query's ranked ``(doc_id, score)`` lists of the dense path and of the BM25 ``any``,
    ``all`` and ``technical`` queries (the dense path on a second thread); a list not in
    ``matches`` is empty. ``degraded`` gets what fell back. Per query, nothing here depends on
    the other queries, so a query set may be retrieved in shards (``retrieval.ray_pool``)."""

    def keyword_lists(match: str) -> list:
        if match not in matches:
            return [[] for _ in queries]
        return [handle.bm25.search(q.text, pool_depth, f[0], match=match) for q, f in zip(queries, filters)]

    with ThreadPoolExecutor(max_workers=2) as pool:
        dense_future = pool.submit(_dense_lists, handle, qvecs, [f[1] for f in filters], pool_depth, degraded)
        sparse_lists = keyword_lists("any")
        all_lists = keyword_lists("all")
        tech_lists = keyword_lists("technical")
        dense_lists = dense_future.result()
    return dense_lists, sparse_lists, all_lists, tech_lists


_RETRIEVE_WITH: ContextVar[Callable | None] = ContextVar("rwb_retrieve_with", default=None)


@contextmanager
def retrieving_with(retrieve: Callable):
    """Inside this block, ``build_candidates`` in this thread gets its path lists from
    ``retrieve`` (same arguments and result as ``path_lists``; ``retrieval.ray_pool``: shards
    of the query set on Ray workers) instead of retrieving them here. ``retrieve`` must return
    ``path_lists``'s lists exactly; the query vectors, the similarities and the table are
    computed here as always."""
    token = _RETRIEVE_WITH.set(retrieve)
    try:
        yield
    finally:
        _RETRIEVE_WITH.reset(token)


def build_candidates(handle: IndexHandle, queries: Sequence[Query], pool_depth: int = DEFAULT_POOL_DEPTH,
                     scope: str = "", group: str = "", project: str = "",
                     progress: Callable[[int, int], None] | None = None,
                     matches: Sequence[str] = MATCH_MODES) -> Candidates:
    """Retrieve the candidate pool of every query (paths concurrently) into one table.

    ``pool_depth`` must lie in ``[1, MAX_DEPTH]``. ``matches``: the keyword lists to retrieve
    (a pool holds all of them; one query answered by one pipeline needs only ``any``, which
    also anchors the graph feature, and the pipeline's own); a list not retrieved is empty."""
    pool_depth = check_size("pool_depth", pool_depth, 1, MAX_DEPTH)
    dataset = handle.dataset
    degraded = list(handle.degraded)
    filters = [_filters(q, scope, group, project) for q in queries]
    qvecs = _embed_queries(handle, queries, degraded)
    retrieve = _RETRIEVE_WITH.get() or path_lists
    dense_lists, sparse_lists, all_lists, tech_lists = retrieve(handle, queries, qvecs, filters, pool_depth,
                                                                tuple(matches), degraded)
    if qvecs is not None:
        def similarity(qi: int, idx: np.ndarray, dense: dict) -> np.ndarray:
            return (handle.vectors[idx] @ qvecs[qi]).astype(np.float32)
    else:
        def similarity(qi: int, idx: np.ndarray, dense: dict) -> np.ndarray:
            return np.zeros(len(idx), dtype=np.float32)
    return _assemble(dataset, queries, filters, dense_lists, sparse_lists, all_lists, tech_lists,
                     similarity, pool_depth=pool_depth,
                     embedder=handle.embedder.model_id if handle.embedder else "none",
                     doc_ids=tuple(handle.doc_ids), degraded=degraded, analyzer=handle.analyzer,
                     progress=progress)


def candidates_from_runs(dataset: Dataset, dense: dict[str, Sequence[tuple[str, float]]],
                         sparse: dict[str, Sequence[tuple[str, float]]],
                         pool_depth: int = DEFAULT_POOL_DEPTH,
                         label: str = "runs", analyzer: str = DEFAULT_ANALYZER,
                         progress: Callable[[int, int], None] | None = None) -> Candidates:
    """The candidate table of ``dataset``'s queries from outside runs instead of our index.

    ``dense`` / ``sparse``: per query id, the path's ranked ``(doc_id, score)`` list (best
    first); each is cut at ``pool_depth``. ``dense_sim`` is the dense run's score (0 for a row
    the dense run did not return: its similarity is unknown) and ``bm25_score`` the sparse
    run's, both float64 (a run's scores may differ below float32's precision); the keyword ``all`` and ``technical`` lists are the sparse run itself (a run file has
    one list). Every
    other feature (fast and timeline paths, dates, metadata) comes from the dataset as in
    ``build_candidates``. ``label`` is the table's ``embedder``; ``analyzer`` is recorded only
    (no BM25 index is read)."""
    pool_depth = check_size("pool_depth", pool_depth, 1, MAX_DEPTH)
    queries = dataset.queries
    filters = [_filters(q) for q in queries]
    dense_lists = [list(dense.get(q.id, ()))[:pool_depth] for q in queries]
    sparse_lists = [list(sparse.get(q.id, ()))[:pool_depth] for q in queries]

    def similarity(qi: int, idx: np.ndarray, hits: dict) -> np.ndarray:
        return np.array([hits[i][1] if i in hits else 0.0 for i in idx], dtype=np.float64)

    return _assemble(dataset, queries, filters, dense_lists, sparse_lists, sparse_lists,
                     sparse_lists, similarity, pool_depth=pool_depth, embedder=label,
                     doc_ids=tuple(d.id for d in dataset.documents),
                     degraded=[], analyzer=analyzer, progress=progress, score_dtype=np.float64)


def _assemble(dataset: Dataset, queries: Sequence[Query], filters: list, dense_lists: list,
              sparse_lists: list, all_lists: list, tech_lists: list,
              similarity: Callable[[int, np.ndarray, dict], np.ndarray], *, pool_depth: int,
              embedder: str, doc_ids: tuple[str, ...], degraded: list[str], analyzer: str,
              progress: Callable[[int, int], None] | None, score_dtype=np.float32) -> Candidates:
    """One table from each path's ranked ``(doc_id, score)`` lists: the rows of every query
    (the paths' union, plus the fast and timeline paths' memories) with their features."""
    table = doc_table(dataset)
    position = table.position
    neighbours = table.neighbours
    rows: dict[str, list] = {name: [] for name in ROW_COLUMNS}
    offsets = [0]
    fast_targets, timelines, intents, windows = [], [], [], []
    for qi, query in enumerate(queries):
        now = dataset.query_reference_time(query)
        window = parse_time_window(query.text, now)
        target = fast_path_target(query.text) or ""
        timeline = triggers_timeline(query.text)
        fast_targets.append(target)
        timelines.append(timeline)
        intents.append(route_intent(query.text))
        windows.append(window.label if window else "")
        dense = {position[d]: (r, s) for r, (d, s) in enumerate(dense_lists[qi])}
        sparse = {position[d]: (r, s) for r, (d, s) in enumerate(sparse_lists[qi])}
        every = {position[d]: (r, s) for r, (d, s) in enumerate(all_lists[qi])}
        tech = {position[d]: (r, s) for r, (d, s) in enumerate(tech_lists[qi])}
        members = dict.fromkeys([*dense, *sparse, *every, *tech])
        allowed = table.allowed(filters[qi][0])
        if target:
            members.update(dict.fromkeys(np.flatnonzero((table.path == target) & allowed).tolist()))
        recent = recent_journal(table, now) if timeline else None
        if timeline:
            members.update(dict.fromkeys(np.flatnonzero(recent & allowed).tolist()))
        anchors = [i for i, (r, _) in dense.items() if r < GRAPH_ANCHORS] + \
                  [i for i, (r, _) in sparse.items() if r < GRAPH_ANCHORS]
        linked = set().union(*(neighbours.get(a, set()) for a in anchors)) if anchors else set()
        idx = np.fromiter(members, dtype=np.int64, count=len(members))
        idx.sort()
        n = len(idx)
        sims = similarity(qi, idx, dense)
        via_fast = (table.path[idx] == target) if target else None
        built = query_rows(table, qi, idx, now, via_fast, recent[idx] if timeline else None, window,
                           sims, dense, sparse, every, linked, tech, score_dtype)
        for name in ROW_COLUMNS:
            rows[name].append(built[name])
        offsets.append(offsets[-1] + n)
        if progress:
            progress(qi + 1, len(queries))
    cols = {name: (np.concatenate(parts) if parts else np.empty(0)) for name, parts in rows.items()}
    return Candidates(
        dataset=dataset.name, fingerprint=dataset.fingerprint,
        embedder=embedder, pool_depth=pool_depth, doc_ids=doc_ids,
        query_ids=tuple(q.id for q in queries), query_texts=tuple(q.text for q in queries),
        offsets=np.asarray(offsets, dtype=np.int64), fast_target=tuple(fast_targets),
        timeline=np.asarray(timelines, dtype=bool), intent_route=tuple(intents), window=tuple(windows),
        query_kinds=tuple(q.intent or "" for q in queries),
        degraded=tuple(tuple(dict.fromkeys(degraded)) for _ in queries), cols=cols,
        analyzer=analyzer,
        doc_types=doc_types(dataset),
    )


@dataclass(frozen=True, eq=False)
class DocTable:
    """Per-document lookups and feature arrays, built once per loaded dataset."""

    position: dict[str, int]
    path: np.ndarray          # object array of paths
    journal: np.ndarray       # dated memories under journal/
    scope: np.ndarray
    project: np.ndarray
    group: np.ndarray
    neighbours: dict[int, set[int]]
    features: dict[str, np.ndarray]
    types: tuple[str, ...]    # memory_type

    def allowed(self, flt: Filters) -> np.ndarray:
        keep = np.ones(len(self.path), dtype=bool)
        for column, value in ((self.scope, flt.scope), (self.project, flt.project), (self.group, flt.group)):
            if value:
                keep &= column == value
        return keep


def doc_types(dataset: Dataset) -> tuple[str, ...]:
    """Each document's ``memory_type``, in document order (``doc_table``)."""
    return doc_table(dataset).types


def doc_table(dataset: Dataset) -> DocTable:
    """The dataset's ``DocTable``, built on first use and kept with it (``Dataset.prepared``)."""
    table = dataset.prepared.get("doc table")
    if table is None:  # two threads may both build it; both get the first one stored
        table = dataset.prepared.setdefault("doc table", _build_doc_table(dataset))
    return table


def doc_quality(dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Every document's confidence and vitality, as the candidate rows carry them (the band
    counts next to Tune's F_conf / F_vit factors)."""
    features = doc_table(dataset).features
    return features["confidence"], features["vitality"]


def _build_doc_table(dataset: Dataset) -> DocTable:
    docs = dataset.documents
    position = {d.id: i for i, d in enumerate(docs)}
    order = sorted(range(len(docs)), key=lambda i: docs[i].id)
    tie = np.empty(len(docs), dtype=np.int32)
    tie[order] = np.arange(len(docs), dtype=np.int32)

    def ts(moment: datetime | None) -> float:
        return moment.timestamp() if moment else np.nan

    features = {
        **{name: np.array([getattr(d, name) for d in docs], dtype=dtype) for name, dtype in ROW_FEATURES.items()},
        "token_count": np.array([token_count(d.text) for d in docs], dtype=np.int32),
        "tie_key": tie,
        "updated_ts": np.array([ts(d.updated_at) for d in docs], dtype=np.float64),
        "created_ts": np.array([ts(d.created_at or d.updated_at) for d in docs], dtype=np.float64),
    }
    neighbours: dict[int, set[int]] = {}
    for doc in docs:
        for other in doc.related:
            a, b = position[doc.id], position[other]
            if a != b:
                neighbours.setdefault(a, set()).add(b)
                neighbours.setdefault(b, set()).add(a)

    def column(values) -> np.ndarray:
        return np.array(list(values), dtype=object)

    return DocTable(
        position=position,
        path=column(d.path for d in docs),
        journal=np.array([d.path.startswith(JOURNAL_PREFIX) and d.created_at is not None for d in docs], dtype=bool),
        scope=column(d.scope for d in docs), project=column(d.project for d in docs),
        group=column(d.group for d in docs), neighbours=neighbours, features=features,
        types=tuple(d.memory_type for d in docs),
    )
