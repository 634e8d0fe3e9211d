"""Benchmark 4 — indexing throughput against the encoder's own limit, and re-indexing.

First build: ``open_index`` on a fresh RWB_HOME (encode through the embedding cache, BM25
build, vectors.npy, LanceDB table, manifest, atomic publish), documents per second, against
a bare ``SentenceTransformer.encode`` (batch 64, the engine's batch size) of the same texts
— the limit. The corpus is split into chunks; each chunk is indexed in its own fresh home
and encoded bare, alternating which goes first, so the two are measured side by side.
Re-index: ``open_index(rebuild=True)`` on the same home (every vector cached) against the
chunk's first build. Texts: LoCoMo dialogue turns (≈ 21 words), the shortest real texts we
have — the case where the engine's own overhead weighs most.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import Section, log, median, now
from bench.context import Context, fixture_path
from bench.data import load, locomo_grouped

MODEL = "minilm"


def _write_dataset(root: Path, docs) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for d in docs:
            row = {"_id": d.id, "text": d.text, "title": d.title, "group": d.group}
            if d.created_at:
                row["created_at"] = d.created_at.isoformat()
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return root


def _source_docs(ctx: Context):
    if ctx.smoke:
        return list(load(str(fixture_path())).documents)
    path = locomo_grouped()
    if path is None:
        raise RuntimeError("the LoCoMo dataset is not in ../shared/datasets")
    return list(load(str(path)).documents)


def run(ctx: Context) -> Section:
    from retrieval.dataset import load_dataset
    from retrieval.embedders import BATCH_SIZE, load_embedder
    from retrieval.index import index_text, open_index

    section = Section("indexing")
    chunks, size = ctx.pick((2, 500), (3, 700), smoke=(2, 10))
    docs = _source_docs(ctx)
    if len(docs) < chunks * size:
        size = len(docs) // chunks
    t0 = now()
    bare = load_embedder(MODEL)
    load_s = now() - t0
    model = bare._model
    model.encode(["warm-up"] * 8, batch_size=BATCH_SIZE)  # first call: thread pools, allocator
    rows, vectors = [], []
    saved_home = os.environ.get("RWB_HOME")
    scratch = Path(tempfile.mkdtemp(prefix="rwb-bench-index-"))
    try:
        # warm-up, as for the bare encode: the first open_index in a process pays one-off
        # imports (LanceDB, Tantivy, SQLite) that a steady-state rate should not include
        os.environ["RWB_HOME"] = str(scratch / "home-warm-up")
        open_index(load_dataset(_write_dataset(scratch / "data-warm-up", docs[-20:])), MODEL)
        for k in range(chunks):
            part = docs[k * size:(k + 1) * size]
            texts = [index_text(d) for d in part]
            root = _write_dataset(scratch / f"data-{k}", part)
            dataset = load_dataset(root)
            home = scratch / f"home-{k}"
            os.environ["RWB_HOME"] = str(home)

            def encode():
                return model.encode(texts, batch_size=BATCH_SIZE, convert_to_numpy=True)

            def first_build():
                return open_index(dataset, MODEL)

            order = [("encode", encode), ("index", first_build)]
            if k % 2:
                order.reverse()
            timing, cpu = {}, {}
            for name, fn in order:
                start, start_cpu = now(), time.process_time()
                out = fn()
                timing[name] = now() - start
                cpu[name] = time.process_time() - start_cpu
                if name == "encode":
                    vectors.append(np.asarray(out, dtype=np.float32))
                else:
                    encoded = out.embedder.encoded if out.embedder else 0
            rebuilds = []
            for _ in range(ctx.pick(3, 5, smoke=1)):
                start = now()
                handle = open_index(dataset, MODEL, rebuild=True)
                rebuilds.append(now() - start)
            recoded = handle.embedder.encoded if handle.embedder else -1
            start = now()
            open_index(dataset, MODEL)  # unchanged and not forced: just open
            reopen = now() - start
            rows.append({"docs": len(part), "first": order[0][0], "encode_s": round(timing["encode"], 3),
                         "index_s": round(timing["index"], 3), "encode_cpu_s": round(cpu["encode"], 3),
                         "index_cpu_s": round(cpu["index"], 3), "texts_encoded_by_index": encoded,
                         "rebuild_s": [round(t, 3) for t in rebuilds], "texts_encoded_by_rebuild": recoded,
                         "open_s": round(reopen, 3)})
            log(f"indexing chunk {k}: {len(part)} docs, encode {timing['encode']:.2f} s, "
                f"open_index {timing['index']:.2f} s, rebuild {median(rebuilds):.3f} s, open {reopen:.3f} s")
    finally:
        if saved_home is None:
            os.environ.pop("RWB_HOME", None)
        else:
            os.environ["RWB_HOME"] = saved_home
        shutil.rmtree(scratch, ignore_errors=True)
    encode_rate = [r["docs"] / r["encode_s"] for r in rows]
    index_rate = [r["docs"] / r["index_s"] for r in rows]
    per_chunk = [r["encode_s"] / r["index_s"] for r in rows]
    per_chunk_cpu = [r["encode_cpu_s"] / r["index_cpu_s"] for r in rows]
    reindex = [r["index_s"] / median(r["rebuild_s"]) for r in rows]
    # a rebuild with nothing to encode still loads the model: measure that floor separately
    t0 = now()
    load_embedder(MODEL)
    model_load_s = now() - t0
    section.figures = {
        "texts": "LoCoMo dialogue turns" if not ctx.smoke else "tests/fixtures/tiny",
        "chunks": rows,
        "bare_encode_docs_per_s": round(median(encode_rate), 1),
        "open_index_docs_per_s": round(median(index_rate), 1),
        "throughput_ratio_per_chunk": [round(x, 3) for x in per_chunk],
        "cpu_ratio_per_chunk": [round(x, 3) for x in per_chunk_cpu],
        "reindex_speedup_per_chunk": [round(x, 1) for x in reindex],
        "rebuild_s_median": round(median([median(r["rebuild_s"]) for r in rows]), 3),
        "model_load_s_first": round(load_s, 3), "model_load_s_again": round(model_load_s, 3),
    }
    section.ratios["indexing_throughput_vs_encode"] = round(median(per_chunk), 3)
    section.ratios["indexing_cpu_ratio_vs_encode"] = round(median(per_chunk_cpu), 3)
    section.ratios["reindex_speedup_vs_first_build"] = round(median(reindex), 1)
    if vectors:  # real embeddings, for the scaling corpora (perturbed copies of these)
        real = np.concatenate(vectors)
        ctx.state["real_vectors"] = real / np.linalg.norm(real, axis=1, keepdims=True)
    section.notes.append(f"{chunks} chunks × {size} docs, each indexed in a fresh RWB_HOME; "
                         "ratio = bare encode time / open_index time per chunk, median over chunks; the CPU "
                         "ratio uses process CPU seconds instead (robust to other jobs on the machine; "
                         "it leaves out I/O waits such as fsync)")
    return section

