"""Benchmark 3 — one hybrid query: our search path against LanceDB's built-in hybrid search.

Ours: ``retrieval.pipeline.search(handle, text, "rrf")`` — dense top-20 from the vector store
(below the ANN threshold its exact in-memory scan over the LanceDB table's own vectors; at
≥ 100k rows LanceDB's ANN index, ``retrieval.vector_store.ann_index``) and BM25 top-20 from Tantivy (concurrently, in
``build_candidates``), every candidate feature, RRF
(k 60) and ranking to 10 results with their texts. Peer: ``table.search(query_type="hybrid")
.vector(v).text(t).distance_type("cosine").limit(20).rerank(RRFReranker())`` (k 60) on the
*same LanceDB table* (same vectors; at ≥ 100k rows the same ANN index, searched with the same
``SEARCH_KNOBS`` — partitions probed, re-rank factor — for both) with a native FTS index on its text column. Query embedding is excluded from both
(vectors are computed first) and reported on its own.

Corpus: real texts (SciFact, CoSQA and LoCoMo documents, then sentences and windows of them);
vectors are the real MiniLM embeddings where the benchmark's embedding cache holds them and
unit-normalised random perturbations of real embeddings otherwise (see ``bench.data``).
Latency is measured per query, ours and the peer alternating, after a warm-up.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from bench.common import Section, log, median, ms, now, percentile, ratio
from bench.context import Context, fixture_path
from bench.data import load, real_queries, scaling_texts, scaling_vectors

MODEL = "minilm"
DEPTH = 20
PEER_FTS = {
    # what `create_index("text", config=FTS())` gives: simple tokenizer, English stemming and
    # stop words; the headline peer
    "default": {},
    # analysis closest to ours (no stemming, no stop words, no folding)
    "nostem": {"stem": False, "remove_stop_words": False, "ascii_folding": False},
    # LanceDB's way to find Chinese (ENV-NOTES): character bigrams
    "ngram": {"base_tokenizer": "ngram", "ngram_min_length": 2, "ngram_max_length": 2,
              "stem": False, "remove_stop_words": False},
}


class Precomputed:
    """An embedder that returns vectors computed beforehand (query embedding excluded)."""

    model_id = MODEL

    def __init__(self, vectors: dict[str, np.ndarray]):
        self._vectors = vectors
        self.dim = len(next(iter(vectors.values())))
        self.encoded = 0

    def encode(self, texts, progress=None) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]).astype(np.float32)


@dataclass
class Built:
    handle: object
    table: object
    ann: bool
    seconds: dict


def build(root: Path, texts: list[str], vectors: np.ndarray, queries: dict[str, np.ndarray]) -> Built:
    """Our index handle and the peer's table over the same rows (one LanceDB table for both)."""
    import lancedb
    import pyarrow as pa

    from retrieval.bm25 import BM25Index, IndexedDoc
    from retrieval.dataset import Dataset, Document
    from retrieval.index import IndexHandle, doc_rows
    from retrieval.vector_store import ANN_THRESHOLD, TABLE, ExactSearch, VectorStore, ann_index

    n, dim = vectors.shape
    ids = [f"s{i:07d}" for i in range(n)]
    dataset = Dataset(root=root, name=f"scale-{n}", documents=tuple(Document(id=i, text=t) for i, t in zip(ids, texts)),
                      queries=(), qrels={}, reference_time=datetime(2026, 11, 21, tzinfo=timezone.utc),
                      fingerprint=f"bench-scale-{n}")
    seconds = {}
    start = now()
    bm25 = BM25Index.build(root / "bm25", (IndexedDoc(i, t) for i, t in zip(ids, texts)))
    seconds["tantivy_build"] = now() - start
    rows = doc_rows(dataset)
    start = now()
    # VectorStore.build's table, plus the text column the peer's FTS index needs
    data = pa.table({
        "id": ids,
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.astype(np.float32).ravel()), dim),
        "scope": [r.scope for r in rows], "project": [r.project for r in rows], "grp": [r.group for r in rows],
        "created_ts": pa.array([r.created_ts for r in rows], type=pa.float64()),
        "text": texts,
    })
    table = lancedb.connect(str(root / "lance")).create_table(TABLE, data, mode="overwrite")
    seconds["lance_table"] = now() - start
    ann = n >= ANN_THRESHOLD
    if ann:  # exactly VectorStore.build's index
        start = now()
        table.create_index("vector", config=ann_index(n, dim))
        seconds["ann_build"] = now() - start
    handle = IndexHandle(dataset, MODEL, root, {"model": MODEL, "documents": n}, ids, bm25, vectors,
                         ExactSearch(ids, vectors, rows), VectorStore(table), Precomputed(queries), [])
    return Built(handle, table, ann, seconds)


def fts_index(table, variant: str) -> float:
    from lancedb.index import FTS

    start = now()
    table.create_index("text", config=FTS(**PEER_FTS[variant]), replace=True)
    return now() - start


def ann_label() -> str:
    from retrieval.vector_store import SEARCH_KNOBS, ann_index

    return f"{type(ann_index(1, 1)).__name__} {SEARCH_KNOBS}"


def with_search_knobs(query):
    """A LanceDB vector or hybrid query with the engine's ANN search settings (``SEARCH_KNOBS``:
    partitions probed, re-rank factor; ``ef`` only applies to HNSW indexes, which are not built)."""
    from retrieval.vector_store import SEARCH_KNOBS

    for knob in ("nprobes", "refine_factor"):
        if SEARCH_KNOBS.get(knob) is not None:
            query = getattr(query, knob)(SEARCH_KNOBS[knob])
    return query


def peer_query(table, vector, text: str, ann: bool):
    from lancedb.rerankers import RRFReranker

    query = (table.search(query_type="hybrid").vector(vector).text(text).distance_type("cosine")
             .limit(DEPTH).rerank(RRFReranker(K=60)).select(["id"]))
    if ann:
        query = with_search_knobs(query)
    return query.to_arrow().column("id").to_pylist()


def ours_query(handle, text: str):
    from retrieval.pipeline import search

    return [r.id for r in search(handle, text, "rrf").results]


def _latency(pairs: dict, texts: list[str], warmup: int) -> dict[str, list[float]]:
    """Per-query seconds of each contestant, alternating which goes first."""
    names = list(pairs)
    out = {name: [] for name in names}
    for i, text in enumerate(texts):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            start = now()
            pairs[name](text)
            if i >= warmup:
                out[name].append(now() - start)
    return out


def _breakdown(built: Built, texts: list[str], qvec: dict[str, np.ndarray]) -> dict[str, float]:
    """Median ms of the parts of our path and of the peer's two legs (diagnostics)."""
    from retrieval import candidates as cand
    from retrieval.pipeline import PIPELINES, response_for, run_pipeline
    from retrieval.dataset import Query

    handle, table = built.handle, built.table
    parts: dict[str, list[float]] = {k: [] for k in (
        "ours_dense_leg", "ours_exact_numpy_dense", "lancedb_flat_dense", "ours_bm25_leg", "ours_build_candidates", "ours_doc_table",
        "ours_position_dict", "ours_neighbours_scan",
        "ours_score_rank_respond", "peer_vector_leg", "peer_fts_leg")}
    config = PIPELINES["rrf"]
    for text in texts:
        v = qvec[text]
        t = now(); handle.store.search(v, DEPTH); parts["ours_dense_leg"].append(now() - t)
        t = now(); handle.exact.search(v, DEPTH); parts["ours_exact_numpy_dense"].append(now() - t)
        if not built.ann and hasattr(handle.store, "lance_search"):  # what the in-memory scan replaces
            t = now(); handle.store.lance_search(v, DEPTH); parts["lancedb_flat_dense"].append(now() - t)
        t = now(); handle.bm25.search(text, DEPTH); parts["ours_bm25_leg"].append(now() - t)
        if hasattr(cand, "doc_table"):  # per-dataset table, built once (engine ≥ 7cd7562)
            t = now(); cand.doc_table(handle.dataset); parts["ours_doc_table"].append(now() - t)
        else:  # older engines rebuilt these per query
            t = now(); position = {d: i for i, d in enumerate(handle.doc_ids)}
            parts["ours_position_dict"].append(now() - t)
            t = now(); cand._neighbours(handle.dataset, position); parts["ours_neighbours_scan"].append(now() - t)
        t = now(); c = cand.build_candidates(handle, [Query(id="q", text=text)], pool_depth=DEPTH)
        parts["ours_build_candidates"].append(now() - t)
        t = now(); response_for(c, run_pipeline(c, config), 0, handle.dataset.documents)
        parts["ours_score_rank_respond"].append(now() - t)
        vq = table.search(v).distance_type("cosine").limit(DEPTH).select(["id", "_distance"])
        if built.ann:
            vq = with_search_knobs(vq)
        t = now(); vq.to_arrow(); parts["peer_vector_leg"].append(now() - t)
        t = now(); table.search(text, query_type="fts").limit(DEPTH).select(["id", "_score"]).to_arrow()
        parts["peer_fts_leg"].append(now() - t)
    return {k: ms(median(v)) for k, v in parts.items() if v}


def _one_thread_embedding(embedder, texts: list[str]) -> dict:
    """The same single-query encodes with one torch thread: with two, a tiny forward pass
    waits at OpenMP barriers whenever the other thread is descheduled (a busy machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        embedder.encode([texts[0]])
        times = []
        for text in texts:
            start = now()
            embedder.encode([text])
            times.append(now() - start)
    finally:
        torch.set_num_threads(threads)
    return {"torch_threads": threads, "one_thread_p50": ms(median(times)), "one_thread_p95": ms(percentile(times, 95))}


def _corpus(ctx: Context, n: int) -> tuple[list[str], np.ndarray, int, int]:
    if ctx.smoke:
        docs = load(str(fixture_path())).documents
        texts = [f"{d.text} ({i})" for i in range(math.ceil(n / len(docs))) for d in docs][:n]
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((n, 384)).astype(np.float32)
        return texts, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), 0, n
    texts, parents = scaling_texts(n)
    fallback = ctx.state.get("real_vectors")
    if fallback is None:
        from bench.data import cached_embedder, real_documents

        fallback = cached_embedder(MODEL).encode([t for _, t in real_documents()[:256]])
    vectors, n_real, n_perturbed = scaling_vectors(texts, parents, MODEL, fallback)
    return texts, vectors, n_real, n_perturbed


def run(ctx: Context) -> Section:
    from retrieval.embedders import load_embedder

    section = Section("hybrid")
    sizes = ctx.pick((10_000,), (10_000, 100_000), smoke=(300,))
    n_queries = ctx.pick(100, 200, smoke=6)
    warmup = ctx.pick(5, 10, smoke=1)
    if ctx.smoke:
        query_texts = [q.text for q in load(str(fixture_path())).queries] * 2
    else:
        query_texts = list(dict.fromkeys(real_queries(n_queries + warmup)))
    embedder = load_embedder(MODEL)
    embedder.encode(["warm-up"])
    qvec, embed_s = {}, []
    timed = query_texts[:ctx.pick(20, 60, smoke=2)]
    for text in timed:  # one query at a time, as a user's search would embed it
        start = now()
        qvec[text] = embedder.encode([text])[0]
        embed_s.append(now() - start)
    rest = [t for t in query_texts if t not in qvec]
    if rest:
        qvec.update(zip(rest, embedder.encode(rest)))
    section.figures["query_embedding_ms"] = {"p50": ms(median(embed_s)), "p95": ms(percentile(embed_s, 95)),
                                             "model": MODEL, "queries": len(embed_s)}
    section.figures["query_embedding_ms"].update(_one_thread_embedding(embedder, timed))
    headline = None
    for n in sizes:
        texts, vectors, n_real, n_perturbed = _corpus(ctx, n)
        root = Path(tempfile.mkdtemp(prefix=f"rwb-bench-hybrid-{n}-"))
        try:
            log(f"hybrid {n}: building ({n_real} real vectors, {n_perturbed} perturbed copies)")
            built = build(root, texts, vectors, qvec)
            variants = ("default", "nostem", "ngram") if (ctx.full and n <= 10_000) else ("default",)
            entry = {"documents": n, "real_vectors": n_real, "perturbed_vectors": n_perturbed,
                     "ann_index": ann_label() if built.ann else "none (flat)",
                     "build_s": {k: round(v, 2) for k, v in built.seconds.items()}, "peer": {}}
            for variant in variants:
                entry["build_s"][f"lance_fts_{variant}"] = round(fts_index(built.table, variant), 2)
                lat = _latency({"ours": lambda t: ours_query(built.handle, t),
                                "lancedb": lambda t: peer_query(built.table, qvec[t], t, built.ann)},
                               query_texts, warmup)
                overlap = []
                for t in query_texts[warmup:warmup + 20]:
                    a, b = ours_query(built.handle, t), peer_query(built.table, qvec[t], t, built.ann)[:10]
                    overlap.append(len(set(a) & set(b)) / max(1, len(a)))
                row = {"ours_p50_ms": ms(median(lat["ours"])), "ours_p95_ms": ms(percentile(lat["ours"], 95)),
                       "lancedb_p50_ms": ms(median(lat["lancedb"])),
                       "lancedb_p95_ms": ms(percentile(lat["lancedb"], 95)),
                       "ratio_p50": round(ratio(median(lat["ours"]), median(lat["lancedb"])), 3),
                       "ratio_p95": round(ratio(percentile(lat["ours"], 95), percentile(lat["lancedb"], 95)), 3),
                       "top10_overlap": round(float(np.mean(overlap)), 3), "queries": len(lat["ours"])}
                entry["peer"][variant] = row
                log(f"  {n} docs, peer FTS {variant}: ours p50 {row['ours_p50_ms']} ms / p95 {row['ours_p95_ms']} ms, "
                    f"LanceDB p50 {row['lancedb_p50_ms']} ms / p95 {row['lancedb_p95_ms']} ms → {row['ratio_p50']}×")
                if variant == "default":
                    headline = row["ratio_p50"] if headline is None else max(headline, row["ratio_p50"])
                    sample = query_texts[warmup:warmup + ctx.pick(30, 50, smoke=2)]
                    entry["breakdown_ms"] = _breakdown(built, sample, qvec)
                    log(f"  breakdown {entry['breakdown_ms']}")
            section.figures[f"{n}"] = entry
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if headline is not None:
        section.ratios["hybrid_latency_ratio_vs_lancedb"] = headline
    section.notes.append("ratio = our p50 / LanceDB p50 with its default FTS index; the worst over corpus sizes")
    return section
