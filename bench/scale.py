"""Benchmark 5 (full mode) — a 1M-row vector store with an ANN index.

``VectorStore.build`` on 1,000,000 unit vectors (384-d): a LanceDB table plus the IVF_PQ
index it builds above ``ANN_THRESHOLD`` (√n partitions, dim/16 sub-vectors, cosine). Then
``VectorStore.search`` top-10 latency (nprobes 20, its default), recall@10 against exact
search (``ExactSearch``, numpy brute force over the same vectors) and its latency, and two
variants on the same table (nprobes 50; nprobes 20 with refine_factor 10) to show the
recall/latency trade-off. Peak memory: the child process's ``ru_maxrss`` (the build runs in
its own process so the figure is its own), next to its RSS before the build (the vectors and
row objects it is given). A calibration run applies the same index rule to the real
embeddings alone (≈ 17k rows) to read the synthetic recall against real data.

Vectors: blends of two real MiniLM embeddings of SciFact / CoSQA / LoCoMo documents plus
Gaussian noise, unit-normalised (``bench.data.blend``); queries: real MiniLM query embeddings.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Section, log

MODEL = "minilm"


def _rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _dir_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def _real_calibration(work: Path, base: np.ndarray, queries: np.ndarray) -> dict:
    """The same index rule (√n partitions, dim/16 sub-vectors, nprobes 20) on the real
    embeddings alone, so the synthetic 1M figure can be read against real data."""
    import lancedb
    import pyarrow as pa

    from retrieval.vector_store import ExactSearch, Row

    n, dim = base.shape
    ids = [f"r{i}" for i in range(n)]
    table = lancedb.connect(str(work / "calibration")).create_table("real", pa.table({
        "id": ids, "vector": pa.FixedSizeListArray.from_arrays(pa.array(base.ravel()), dim)}))
    start = time.perf_counter()
    table.create_index(metric="cosine", num_partitions=max(16, int(np.sqrt(n))), num_sub_vectors=max(1, dim // 16),
                       index_type="IVF_PQ")
    build_s = time.perf_counter() - start
    exact = ExactSearch(ids, base, [Row(i, "global", "", "", float("nan")) for i in ids])
    out = {"rows": n, "build_s": round(build_s, 2)}
    for label, refine in (("nprobes 20", None), ("nprobes 20 + refine 10", 10)):
        rec = []
        for q in queries:
            query = table.search(q).distance_type("cosine").nprobes(20).limit(10).select(["id", "_distance"])
            if refine:
                query = query.refine_factor(refine)
            got = set(query.to_arrow().column("id").to_pylist())
            rec.append(len(got & {d for d, _ in exact.search(q, 10)}) / 10)
        out[f"recall@10 {label}"] = round(float(np.mean(rec)), 4)
    return out


def child(work: Path, rows: int, seed: int = 0) -> dict:
    """Runs in its own process: build, search, measure; returns the figures."""
    from bench.data import blend
    from retrieval.vector_store import ANN_THRESHOLD, ExactSearch, Row, VectorStore

    base = np.load(work / "base.npy")
    queries = np.load(work / "queries.npy")
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    vectors = np.empty((rows, base.shape[1]), dtype=np.float32)
    for lo in range(0, rows, 100_000):
        hi = min(rows, lo + 100_000)
        vectors[lo:hi] = blend(base, hi - lo, rng)
    ids = [f"v{i:07d}" for i in range(rows)]
    meta = [Row(i, "global", "", "", float("nan")) for i in ids]
    generate_s = time.perf_counter() - start
    import lancedb  # noqa: F401  (imported here so the build time does not include the import)

    rss_before = _rss_mib()
    start = time.perf_counter()
    VectorStore.build(work / "lance", meta, vectors)
    build_s = time.perf_counter() - start
    peak_after_build = _peak_mib()
    store = VectorStore.open(work / "lance")
    exact = ExactSearch(ids, vectors, meta)
    for q in queries[:5]:  # warm-up: index pages, thread pools
        store.search(q, 10)
        exact.search(q, 10)
    # separate loops: a 1M-row brute-force scan between two ANN queries would evict the
    # index's pages from the CPU caches and inflate the ANN latency
    ann_s, exact_s, got_sets, truth_sets = [], [], [], []
    for q in queries:
        t = time.perf_counter(); got = store.search(q, 10); ann_s.append(time.perf_counter() - t)
        got_sets.append({d for d, _ in got})
    for q in queries:
        t = time.perf_counter(); truth = exact.search(q, 10); exact_s.append(time.perf_counter() - t)
        truth_sets.append({d for d, _ in truth})
    recall = [len(g & t) / 10 for g, t in zip(got_sets, truth_sets)]
    table = store._table
    variants = {}
    for label, nprobes, refine in (("nprobes 20 (table directly)", 20, None), ("nprobes 50", 50, None),
                                   ("nprobes 20 + refine 10", 20, 10)):
        times, rec = [], []
        for q, truth in zip(queries, truth_sets):
            query = table.search(q).distance_type("cosine").nprobes(nprobes).limit(10).select(["id", "_distance"])
            if refine:
                query = query.refine_factor(refine)
            t = time.perf_counter(); got = query.to_arrow().column("id").to_pylist(); times.append(time.perf_counter() - t)
            rec.append(len(set(got) & truth) / 10)
        variants[label] = {"p50_ms": round(float(np.median(times)) * 1000, 3), "recall@10": round(float(np.mean(rec)), 4)}
    calibration = _real_calibration(work, base, queries) if len(base) >= 5000 else None
    return {
        "real_vectors_calibration": calibration,
        "rows": rows, "dim": int(base.shape[1]), "ann_index": "IVF_PQ" if rows >= ANN_THRESHOLD else "none (flat)",
        "partitions": max(16, int(np.sqrt(rows))) if rows >= ANN_THRESHOLD else 0,
        "sub_vectors": max(1, base.shape[1] // 16), "base_vectors": int(len(base)), "queries": int(len(queries)),
        "generate_s": round(generate_s, 2), "build_s": round(build_s, 2),
        "ann_p50_ms": round(float(np.median(ann_s)) * 1000, 3), "ann_p95_ms": round(float(np.percentile(ann_s, 95)) * 1000, 3),
        "exact_numpy_p50_ms": round(float(np.median(exact_s)) * 1000, 3),
        "recall@10": round(float(np.mean(recall)), 4), "variants": variants,
        "rss_before_build_mib": round(rss_before, 0), "peak_rss_mib": round(peak_after_build, 0),
        "vectors_mib": round(vectors.nbytes / 2**20, 0),
        "disk_mib": round(_dir_mib(work / "lance"), 0),
    }


def _inputs(ctx) -> tuple[np.ndarray, np.ndarray]:
    from bench.data import cached_embedder, lookup_cached, real_documents, real_queries

    if ctx.smoke:
        rng = np.random.default_rng(1)
        base = rng.standard_normal((200, 384)).astype(np.float32)
        queries = rng.standard_normal((8, 384)).astype(np.float32)
    else:
        texts = [t for _, t in real_documents()]
        found = lookup_cached(MODEL, texts)
        if len(found) >= 1000:
            base = np.stack(list(found.values()))
        elif ctx.state.get("real_vectors") is not None:
            base = ctx.state["real_vectors"]
        else:
            base = cached_embedder(MODEL).encode(texts[:512])
        queries = cached_embedder(MODEL).encode(real_queries(ctx.pick(100, 100)))
    base = base / np.linalg.norm(base, axis=1, keepdims=True)
    queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    return base.astype(np.float32), queries.astype(np.float32)


def run(ctx) -> Section:
    section = Section("scale")
    rows = int(os.environ.get("RWB_BENCH_SCALE_ROWS") or ctx.pick(1_000_000, 1_000_000, smoke=1_000))
    base, queries = _inputs(ctx)
    work = Path(tempfile.mkdtemp(prefix="rwb-bench-scale-"))
    try:
        np.save(work / "base.npy", base)
        np.save(work / "queries.npy", queries)
        log(f"scale: {rows} rows from {len(base)} real base vectors, {len(queries)} queries (child process)")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bench.scale", str(work), str(rows)],
                              cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"scale child failed ({done.returncode}): {done.stderr[-2000:]}")
        figures = json.loads((work / "result.json").read_text())
        figures["child_wall_s"] = round(time.perf_counter() - started, 1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    section.figures = figures
    log(f"  build {figures['build_s']} s, ANN p50 {figures['ann_p50_ms']} ms, recall@10 {figures['recall@10']}, "
        f"peak RSS {figures['peak_rss_mib']} MiB")
    section.notes.append("synthetic rows: blends of two real MiniLM document embeddings + noise; real query embeddings")
    return section


if __name__ == "__main__":
    os.environ.setdefault("LANCEDB_LOG", "error")
    out = child(Path(sys.argv[1]), int(sys.argv[2]))
    (Path(sys.argv[1]) / "result.json").write_text(json.dumps(out))
