"""Benchmark (standalone) — peak memory of ``rwb index --embedder precomputed`` at 300k / 1M memories.

    python -m bench.precomputed_rss 300000            # make the store (once), index it, print the peak
    python -m bench.precomputed_rss 300000 --stages   # the same in this process, RSS per stage

The store is synthetic and the same on every run (``make_store``): ``n`` memories of 8 words
drawn from a 14-word vocabulary plus a unique token ``n<i>`` (so BM25 sees ``n`` distinct
documents), one query, and ``vectors/corpus.npy``: ``n`` × 384 standard-normal float32 rows
(seed 0, written 50,000 rows at a time through a memory map, so making a 1M store holds no whole
copy). It is kept under ``$RWB_BENCH_STORES`` (default ``/tmp/rwb-rss-stores``) and reused.

Default mode runs ``python -m eval.cli index STORE --embedder precomputed`` in a child under
``/usr/bin/time -v`` with a fresh ``$RWB_HOME`` and prints its peak RSS ("Maximum resident set
size"), wall time, the load average before and after, and the target of issue 45: 2 × one
float32 copy of the vectors + 1 GiB. ``--stages`` runs the same steps (``eval.stores.pool.
prepare``) in this process with a thread sampling ``VmRSS`` every 20 ms, and prints for each
stage (the product's own functions, wrapped here to mark where a stage starts and ends) the
RSS on entry and exit and the highest RSS seen while it ran. The memory-mapped pages of a file
count in RSS while mapped (reclaimable page cache, but ``/usr/bin/time`` counts them).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

DIM = 384
WORDS = "alpha beta gamma delta user cache index vector token query merge commit build deploy".split()


def make_store(n: int, root: Path | None = None) -> Path:
    """The synthetic ``n``-memory store with precomputed vectors (made once, then reused)."""
    base = root or Path(os.environ.get("RWB_BENCH_STORES", "/tmp/rwb-rss-stores"))
    folder = base / f"precomputed-{n}"
    if (folder / "vectors" / "queries_ids.txt").is_file():
        return folder
    (folder / "vectors").mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for i in range(n):
            handle.write(json.dumps({"_id": f"d{i}", "text": " ".join(rng.choice(WORDS, 8)) + f" n{i}"}) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "alpha cache"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    vectors = np.random.default_rng(0)
    array = np.lib.format.open_memmap(folder / "vectors" / "corpus.npy", "w+", np.float32, (n, DIM))
    for start in range(0, n, 50_000):
        array[start:start + 50_000] = vectors.standard_normal((min(50_000, n - start), DIM), dtype=np.float32)
    array.flush()
    del array
    (folder / "vectors" / "corpus_ids.txt").write_text("".join(f"d{i}\n" for i in range(n)))
    np.save(folder / "vectors" / "queries.npy", vectors.standard_normal((1, DIM)).astype(np.float32))
    (folder / "vectors" / "queries_ids.txt").write_text("q1\n")  # written last: the store is complete
    return folder


def target_mib(n: int) -> float:
    """Issue 45's bound: 2 × one float32 copy of the vectors + 1 GiB."""
    return 2 * n * DIM * 4 / 2**20 + 1024


def _loadavg() -> float:
    return round(os.getloadavg()[0], 1)


def run_cli(store: Path, n: int) -> dict:
    """``rwb index STORE --embedder precomputed`` in a child under ``/usr/bin/time -v``."""
    home = tempfile.mkdtemp(prefix="rwb-rss-home-")
    env = dict(os.environ, RWB_HOME=home, LANCEDB_LOG="error", PYTHONPATH=os.getcwd())
    load0 = _loadavg()
    try:
        done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "eval.cli", "index", str(store),
                               "--embedder", "precomputed"], env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    fields = dict(line.strip().rsplit(": ", 1) for line in done.stderr.splitlines()
                  if ": " in line and line.startswith("\t"))
    peak = int(fields["Maximum resident set size (kbytes)"]) / 1024
    return {"n": n, "rc": done.returncode, "peak_rss_mib": round(peak), "target_mib": round(target_mib(n)),
            "one_copy_mib": round(n * DIM * 4 / 2**20), "wall": fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"],
            "loadavg": [load0, _loadavg()], "stdout": done.stdout.strip()[-300:],
            "stderr": "" if done.returncode == 0 else done.stderr[-600:]}


class _Sampler(threading.Thread):
    """``VmRSS`` of this process every 20 ms; ``peak_since(mark)`` is the highest since a mark."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[float] = []

    @staticmethod
    def rss() -> float:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def run(self) -> None:
        while True:
            self.samples.append(self.rss())
            time.sleep(0.02)


def run_stages(store: Path, n: int) -> list[dict]:
    """``prepare`` in this process, each stage's RSS on entry, at exit and its peak."""
    os.environ["RWB_HOME"] = tempfile.mkdtemp(prefix="rwb-rss-home-")
    atexit.register(shutil.rmtree, os.environ["RWB_HOME"], True)
    sampler = _Sampler()
    sampler.start()
    rows: list[dict] = []

    def wrap(owner, name, label):
        inner = getattr(owner, name)

        def staged(*args, **kwargs):
            mark, before, start = len(sampler.samples), sampler.rss(), time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                after = sampler.rss()
                peak = max(sampler.samples[mark:] + [before, after])
                rows.append({"stage": label, "rss_in": round(before), "peak": round(peak), "rss_out": round(after),
                             "seconds": round(time.perf_counter() - start, 1)})
                print(f"  {label:<44} in {before:7.0f}  peak {peak:7.0f}  out {after:7.0f} MiB "
                      f"({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
        setattr(owner, name, staged)

    import eval.stores.pool as pool
    import retrieval.index as index
    import retrieval.precomputed as precomputed
    from retrieval.bm25 import BM25Index
    from retrieval.dataset import load_dataset
    from retrieval.vector_store import VectorStore

    for owner, name, label in ((index, "_embedder", "load vectors (PrecomputedEmbedder.of)"),
                               (index, "_build_into", "build (all of it)"),
                               (BM25Index, "build", "  BM25 build"), (index.np, "save", "  np.save vectors.npy"),
                               (VectorStore, "build", "  LanceDB build (table + IVF_SQ)"),
                               (index, "_check", "check (checksums, open, search)"),
                               (index, "_open_build", "open the build (ExactSearch, LanceDB)"),
                               (precomputed, "vectors_label", "vectors_label (hash)"),
                               (pool, "open_index", "open_index (rwb index / load_pool)"),
                               (pool, "build_candidates", "candidate pool")):
        wrap(owner, name, label)
    start = sampler.rss()
    dataset = load_dataset(str(store))
    rows.append({"stage": "dataset loaded", "rss_in": round(start), "peak": round(max(sampler.samples)),
                 "rss_out": round(sampler.rss())})
    print(f"  dataset loaded: {start:.0f} -> {sampler.rss():.0f} MiB", file=sys.stderr, flush=True)
    pool.prepare(dataset, "precomputed", on_notice=None)
    rows.append({"stage": "total", "peak": round(max(sampler.samples + [sampler.rss()] + [r["peak"] for r in rows]))})
    return rows


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 300_000
    store = make_store(n)
    if "--stages" in argv:
        rows = run_stages(store, n)
        print(json.dumps({"n": n, "target_mib": round(target_mib(n)), "stages": rows}, indent=1))
        return 0
    figures = run_cli(store, n)
    print(json.dumps(figures, indent=1))
    return 0 if figures["rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
