"""Benchmark 5 (full mode) — a 1M-row vector store with an ANN index.

``VectorStore.build`` on 1,000,000 unit vectors (384-d): a LanceDB table plus the index it
builds above ``ANN_THRESHOLD`` (``retrieval.vector_store.ann_index``). Then
``VectorStore.search`` top-10 latency (its ``SEARCH_KNOBS``), recall@10 against exact search
(``ExactSearch``, numpy brute force over the same vectors) and its latency, and variants on the
same table (each knob halved and doubled, no refine) to show the recall/latency trade-off.
Peak memory: the child process's ``ru_maxrss`` (the build runs in its own process so the
figure is its own), next to its RSS before the build (the vectors and the metadata columns it
is given: Arrow arrays, no per-row objects) and as a multiple of the vectors' size. A
calibration run applies the same index rule and knobs to the real embeddings alone to read
the synthetic recall against real data.

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


def _knobs_query(table, q: np.ndarray, knobs: dict):
    """A top-10 query on ``table`` with the given search knobs (nprobes, refine_factor, ef)."""
    query = table.search(q).distance_type("cosine").limit(10).select(["id", "_distance"])
    for name, value in knobs.items():
        if value is not None:
            query = getattr(query, name)(value)
    return query


def _real_calibration(work: Path, base: np.ndarray, queries: np.ndarray) -> dict:
    """The same index rule (``ann_index``) and search knobs on the real embeddings alone, so the
    synthetic 1M figure can be read against real data."""
    import lancedb
    import pyarrow as pa

    from retrieval.vector_store import SEARCH_KNOBS, ann_index

    n, dim = base.shape
    table = lancedb.connect(str(work / "calibration")).create_table("real", pa.table({
        "id": pa.array(np.arange(n)), "vector": pa.FixedSizeListArray.from_arrays(pa.array(base.reshape(-1)), dim)}))
    start = time.perf_counter()
    table.create_index("vector", config=ann_index(n, dim))
    build_s = time.perf_counter() - start
    truth = [set(np.argpartition(-(base @ q), 9)[:10].tolist()) for q in queries]
    out = {"rows": n, "build_s": round(build_s, 2)}
    for label, knobs in (("engine's knobs", SEARCH_KNOBS), ("without refine", SEARCH_KNOBS | {"refine_factor": None})):
        rec = [len(set(_knobs_query(table, q, knobs).to_arrow().column("id").to_pylist()) & t) / 10
               for q, t in zip(queries, truth)]
        out[f"recall@10 {label}"] = round(float(np.mean(rec)), 4)
    return out


def _variants() -> list[tuple[str, dict]]:
    """The engine's search knobs and their neighbours, on the same table: the trade-off."""
    from retrieval.vector_store import SEARCH_KNOBS

    out = [("engine's knobs (table directly)", SEARCH_KNOBS)]
    for knob, value in SEARCH_KNOBS.items():
        if value is None:
            continue
        for other in (value // 2, value * 2):
            out.append((f"{knob} {other}", SEARCH_KNOBS | {knob: other}))
        if knob == "refine_factor":
            out.append(("no refine", SEARCH_KNOBS | {knob: None}))
    return out


def _ids(rows: int):
    """``v0000000``, ``v0000001``, …: an Arrow string column built without Python strings."""
    import pyarrow as pa
    import pyarrow.compute as pc

    digits = pc.utf8_lpad(pc.cast(pa.array(np.arange(rows)), pa.string()), 7, "0")
    return pc.binary_join_element_wise("v", digits, "")


def child(work: Path, rows: int, seed: int = 0) -> dict:
    """Runs in its own process: build, search, measure; returns the figures."""
    import pyarrow as pa

    from bench.data import blend
    from retrieval.vector_store import ANN_THRESHOLD, SEARCH_KNOBS, ExactSearch, RowColumns, VectorStore, ann_index

    base = np.load(work / "base.npy")
    queries = np.load(work / "queries.npy")
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    vectors = np.empty((rows, base.shape[1]), dtype=np.float32)
    for lo in range(0, rows, 25_000):  # small chunks: the generator's temporaries stay far below the build's peak
        hi = min(rows, lo + 25_000)
        vectors[lo:hi] = blend(base, hi - lo, rng)
    # the metadata as Arrow columns: no per-row Python objects
    meta = RowColumns(_ids(rows), pa.repeat("global", rows), pa.repeat("", rows), pa.repeat("", rows),
                      np.full(rows, np.nan))
    generate_s = time.perf_counter() - start
    import lancedb  # noqa: F401  (imported here so the build time does not include the import)

    rss_before = _rss_mib()
    peak_before = _peak_mib()
    start = time.perf_counter()
    VectorStore.build(work / "lance", meta, vectors)
    build_s = time.perf_counter() - start
    peak_after_build = _peak_mib()
    store = VectorStore.open(work / "lance")
    exact = ExactSearch(meta.id.to_pylist(), vectors, meta)
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
    for label, knobs in _variants():
        times, rec = [], []
        for q, truth in zip(queries, truth_sets):
            query = _knobs_query(table, q, knobs)
            t = time.perf_counter(); got = query.to_arrow().column("id").to_pylist(); times.append(time.perf_counter() - t)
            rec.append(len(set(got) & truth) / 10)
        variants[label] = {"p50_ms": round(float(np.median(times)) * 1000, 3), "recall@10": round(float(np.mean(rec)), 4)}
    calibration = _real_calibration(work, base, queries) if len(base) >= 5000 else None
    indexed = rows >= ANN_THRESHOLD
    config = ann_index(rows, base.shape[1]) if indexed else None
    return {
        "real_vectors_calibration": calibration,
        "rows": rows, "dim": int(base.shape[1]),
        "ann_index": repr(config) if indexed else "none (in-memory exact scan)", "index_type": store.index_type,
        "search_knobs": SEARCH_KNOBS if indexed else None,
        "base_vectors": int(len(base)), "queries": int(len(queries)),
        "generate_s": round(generate_s, 2), "build_s": round(build_s, 2),
        "ann_p50_ms": round(float(np.median(ann_s)) * 1000, 3), "ann_p95_ms": round(float(np.percentile(ann_s, 95)) * 1000, 3),
        "exact_numpy_p50_ms": round(float(np.median(exact_s)) * 1000, 3),
        "recall@10": round(float(np.mean(recall)), 4), "variants": variants,
        "rss_before_build_mib": round(rss_before, 0), "peak_rss_before_build_mib": round(peak_before, 0),
        "peak_rss_mib": round(peak_after_build, 0),
        "vectors_mib": round(vectors.nbytes / 2**20, 0),
        "peak_over_vectors": round(peak_after_build / (vectors.nbytes / 2**20), 2),
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
