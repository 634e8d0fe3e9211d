"""Benchmark (full mode, ``--only index_scaling``) — indexing 10k / 100k / 1M memories, here and on Ray.

Two parts, because MiniLM encodes ~70 texts/s on these 2 cores (a million would take hours):

- **Encoder.** MiniLM on ``ENCODE_SAMPLE`` real texts (``bench.data.scaling_texts``: SciFact
  abstracts, CoSQA code, LoCoMo turns, interleaved), cold (no embedding cache): in this process
  (the model's own ``encode``), then on a local Ray cluster of 2 CPUs with 1 and 2 workers
  (``retrieval.ray_index.RayEncoder``; the workers' start and model load timed apart, as a
  warm-up), then here again (the load drifts). Texts/s, peak RSS (this process; each worker's ``VmHWM``), and whether the Ray
  vectors equal the local ones byte for byte.
- **Index.** At each size a store of real texts (``scaling_texts``; past ``REAL_TEXTS`` those
  texts again, each copy tagged) with precomputed vectors
  (``--embedder precomputed``: blends of the encoder part's real MiniLM vectors, ``bench.data.
  blend``) is indexed by ``open_index`` in a child process (its own peak RSS): BM25, vectors.npy,
  the LanceDB table (with its ANN index above ``ANN_THRESHOLD``), checksums and checks. Then in
  the same child: query latency (``retrieval.pipeline.search``, rrf, p50 over the store's
  ``QUERIES`` queries, each a memory's first words with a perturbed copy of its vector), the
  candidate pool of those queries (``load_pool``) and re-scoring it (``evaluate_config``, rrf,
  p50). With precomputed vectors nothing is encoded, so the build is the same here and on Ray;
  the encoder's share at each size is computed from the measured encode rates (encode time =
  n / rate; share = encode / (encode + the measured build)) and printed as such.

The load average is recorded beside every figure (a shared 2-core machine). Sizes:
``RWB_BENCH_INDEX_SIZES`` (comma-separated), default 10k, 100k, 1M (full) or 2,000 (quick);
``none`` runs the encoder part only; ``RWB_BENCH_REUSE_ENCODE=1`` takes the encoder part from
the last run (sizes run apart).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import Section, loadavg, log, median, now

MODEL = "minilm"
ENCODE_SAMPLE = 1024
QUERIES = 50
SEED = 0


def _sizes(ctx) -> tuple[int, ...]:
    env = os.environ.get("RWB_BENCH_INDEX_SIZES")
    if env:
        return () if env.strip() == "none" else tuple(int(x) for x in env.split(",") if x.strip())
    return ctx.pick((2_000,), (10_000, 100_000, 1_000_000), smoke=(200,))


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _hwm_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


REAL_TEXTS = 100_000
"""Most distinct real texts taken from ``scaling_texts`` (past that it joins ever wider windows of
documents, and its memory grows past 15 GiB before 1M)."""


def _texts(n: int) -> list[str]:
    """``n`` texts: ``scaling_texts`` up to ``REAL_TEXTS``; beyond, those again, each copy tagged
    ``#k`` (so every text differs and BM25 sees real vocabulary and lengths)."""
    from bench.data import scaling_texts

    real = scaling_texts(min(n, REAL_TEXTS))[0]
    return real + [f"{real[i % len(real)]} #{i // len(real)}" for i in range(len(real), n)]


def encoder_part(texts: list[str]) -> tuple[dict, np.ndarray]:
    """Texts/s of MiniLM here and on Ray (1, 2 workers); the local vectors."""
    from retrieval.embedders import load_embedder

    model = load_embedder(MODEL)
    model.encode(texts[:64])  # warm-up
    out: dict = {}
    load0, start = loadavg(), now()
    local = model.encode(texts)
    seconds = now() - start
    out["local"] = {"texts_per_s": round(len(texts) / seconds, 1), "seconds": round(seconds, 2),
                    "peak_rss_mib": round(_peak_mib()), "loadavg": [load0, loadavg()]}
    log(f"  encode local: {out['local']['texts_per_s']} texts/s (load {load0})")
    try:
        import ray
    except ImportError:
        for w in (1, 2):
            out[f"ray_{w}"] = "not measured (Ray is not installed)"
        return out, local
    from retrieval.ray_index import RayEncoder

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        for workers in (1, 2):
            encoder = RayEncoder(model, MODEL, workers=workers)
            start = now()
            encoder.start()
            encoder.encode(texts[:64 * workers])  # each worker loads the model
            startup = now() - start
            load0, start = loadavg(), now()
            vectors = encoder.encode(texts)
            seconds = now() - start
            out[f"ray_{workers}"] = {
                "texts_per_s": round(len(texts) / seconds, 1), "seconds": round(seconds, 2),
                "startup_s": round(startup, 2), "identical_to_local": vectors.tobytes() == local.tobytes(),
                "worker_peak_rss_mib": [round(_hwm_mib(p)) for p in encoder.pids()],
                "loadavg": [load0, loadavg()]}
            encoder.close()
            log(f"  encode ray {workers}: {out[f'ray_{workers}']['texts_per_s']} texts/s (load {load0})")
    finally:
        ray.shutdown()
    load0, start = loadavg(), now()  # local again: the load drifts on a shared machine
    again = model.encode(texts)
    seconds = now() - start
    out["local_after"] = {"texts_per_s": round(len(texts) / seconds, 1), "seconds": round(seconds, 2),
                          "identical_to_local": again.tobytes() == local.tobytes(), "loadavg": [load0, loadavg()]}
    log(f"  encode local again: {out['local_after']['texts_per_s']} texts/s (load {load0})")
    return out, local


def write_store(folder: Path, n: int, base: np.ndarray) -> Path:
    """``n`` real texts with precomputed vectors (blends of ``base``) and ``QUERIES`` queries."""
    from bench.data import blend, perturb

    if (folder / "vectors" / "queries_ids.txt").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    texts = _texts(n)
    rng = np.random.default_rng(SEED)
    vectors = np.empty((n, base.shape[1]), dtype=np.float32)
    for lo in range(0, n, 25_000):
        vectors[lo:lo + 25_000] = blend(base, min(25_000, n - lo), rng)
    ids = [f"m{i:07d}" for i in range(n)]
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for doc_id, text in zip(ids, texts):
            handle.write(json.dumps({"_id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    picks = rng.choice(n, size=min(QUERIES, n), replace=False)
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as handle:
        for q, i in enumerate(picks):
            handle.write(json.dumps({"_id": f"q{q}", "text": " ".join(texts[i].split()[:8])}, ensure_ascii=False) + "\n")
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{q}\t{ids[i]}\t1\n" for q, i in enumerate(picks)))
    side = folder / "vectors"
    side.mkdir(exist_ok=True)
    (side / "corpus_ids.txt").write_text("\n".join(ids) + "\n")
    np.save(side / "corpus.npy", vectors)
    np.save(side / "queries.npy", perturb(vectors[picks], rng))
    (side / "model.txt").write_text("blends of MiniLM vectors (bench/index_scaling.py)\n")
    (side / "queries_ids.txt").write_text("\n".join(f"q{q}" for q in range(len(picks))) + "\n")  # last: the marker
    return folder


def child(folder: Path, home: Path) -> dict:
    """In its own process: index the store (precomputed vectors), search it, build and re-score
    its candidate pool; stage times, peak RSS and the load average."""
    os.environ["RWB_HOME"] = str(home)
    from eval.experiments.live import evaluate_config
    from eval.metrics.measure import judge
    from eval.stores.pool import load_pool
    from retrieval.dataset import load_dataset
    from retrieval.index import open_index
    from retrieval.pipeline import PIPELINES, search

    out: dict = {"loadavg_start": loadavg()}
    start = now()
    dataset = load_dataset(folder)
    out["load_dataset_s"] = round(now() - start, 2)
    out["rss_after_load_mib"] = round(_peak_mib())
    marks: dict[str, float] = {}
    start = now()
    handle = open_index(dataset, "precomputed", progress=lambda stage, done, total: marks.setdefault(stage, now())
                        if done >= total else None, rebuild=True)
    total = now() - start
    out["index_s"] = round(total, 2)
    out["index_docs_per_s"] = round(len(dataset.documents) / total, 1)
    out["bm25_s"] = round(marks.get("bm25", start) - start, 2)
    out["vectors_lance_s"] = round(marks.get("lance", start) - marks.get("bm25", start), 2)
    out["checks_publish_open_s"] = round(start + total - marks.get("lance", start), 2)
    out["peak_rss_index_mib"] = round(_peak_mib())
    out["loadavg_index"] = loadavg()
    rrf = PIPELINES["rrf"]
    texts = [q.text for q in dataset.queries]
    for text in texts[:3]:
        search(handle, text, rrf)
    latencies = []
    for text in texts:
        t = now()
        search(handle, text, rrf)
        latencies.append(now() - t)
    out["query_p50_ms"] = round(median(latencies) * 1000, 2)
    out["loadavg_query"] = loadavg()
    start = now()
    pool = load_pool(dataset, "precomputed", on_notice=None)
    out["pool_s"] = round(now() - start, 2)
    judged = judge(pool, dataset.qrels)
    evaluate_config(pool, judged, rrf)
    rescore = []
    for _ in range(20):
        t = now()
        evaluate_config(pool, judged, rrf)
        rescore.append(now() - t)
    out["rescore_p50_ms"] = round(median(rescore) * 1000, 3)
    out["pool_rows"] = int(pool.n_rows)
    out["peak_rss_mib"] = round(_peak_mib())
    out["loadavg_end"] = loadavg()
    return out


def run(ctx) -> Section:
    section = Section("index_scaling")
    work = ctx.home / "index_scaling"
    work.mkdir(parents=True, exist_ok=True)
    saved = work / "encode.json"
    if os.environ.get("RWB_BENCH_REUSE_ENCODE") and saved.is_file() and (work / "base.npy").is_file():
        encode, base = json.loads(saved.read_text()), np.load(work / "base.npy")
        section.notes.append(f"encoder figures reused from the run of {encode['date']} (RWB_BENCH_REUSE_ENCODE)")
    else:
        texts = _texts(ENCODE_SAMPLE if not ctx.smoke else 128)
        encode, base = encoder_part(texts)
        encode |= {"texts": len(texts), "model": MODEL, "date": time.strftime("%Y-%m-%d %H:%M")}
        np.save(work / "base.npy", base)
        saved.write_text(json.dumps(encode))
    section.figures["encode"] = encode
    rates = {name: encode[name]["texts_per_s"] for name in ("local", "local_after") if name in encode}
    for w in (1, 2):
        if isinstance(encode.get(f"ray_{w}"), dict):
            rates[f"ray_{w}"] = encode[f"ray_{w}"]["texts_per_s"]
    for n in _sizes(ctx):
        folder = write_store(work / f"store-{n}", n, base)
        home = work / f"home-{n}"
        log(f"  index {n:,} memories (precomputed vectors) in a child process")
        env = os.environ | {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        done = subprocess.run([sys.executable, "-m", "bench.index_scaling", str(folder), str(home)],
                              capture_output=True, text=True, env=env)
        if done.returncode != 0:
            section.figures[str(n)] = f"not measured (child failed: {done.stderr.strip().splitlines()[-1:]})"
            continue
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        build = figures["index_s"]
        figures["encoder_share_computed"] = {
            name: round((n / rate) / (n / rate + build), 4) for name, rate in rates.items()}
        figures["docs_per_s_with_encoding_computed"] = {
            name: round(n / (n / rate + build), 1) for name, rate in rates.items()}
        section.figures[str(n)] = figures
        log(f"  {n:,}: index {build} s ({figures['index_docs_per_s']} docs/s), peak RSS "
            f"{figures['peak_rss_mib']} MiB, query p50 {figures['query_p50_ms']} ms, re-score p50 "
            f"{figures['rescore_p50_ms']} ms (load {figures['loadavg_index']})")
    if "ray_2" in rates:  # against the local rate measured before and after Ray (the load drifts)
        local = [rates[name] for name in ("local", "local_after") if name in rates]
        section.ratios["index_encode_ray2_vs_local"] = rates["ray_2"] / (sum(local) / len(local))
    section.notes.append("index figures use precomputed vectors (no encoding); encoder shares and docs/s with "
                         "encoding are computed from the measured encode rates, not measured end to end")
    return section


if __name__ == "__main__":
    os.environ.setdefault("LANCEDB_LOG", "error")
    print(json.dumps(child(Path(sys.argv[1]), Path(sys.argv[2]))))
