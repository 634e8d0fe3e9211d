"""``rwb index --executor ray``: the documents encoded on a local Ray cluster (2 CPUs, started
here) give the local index bit for bit — vectors (as bytes), BM25 scores, the candidate table
(its queries retrieved in shards on Ray) and the metrics of rrf — on devmem, with a worker killed mid-run (restarted, its tasks
retried); an interrupted run leaves the published index as it was, and the rerun gives the
local vectors of a small synthetic store; a 20,000-document store (640 distinct texts)
gives the local index and pool. Each build has its own RWB_HOME (or its cache removed), so
the Ray build really encodes. Throughput at 10k… is measured in ``bench/index_scaling.py``
(MiniLM encodes ~70 texts/s on 2 cores). Skipped when Ray is not installed."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.stores.pool import load_pool
from retrieval.dataset import load_dataset
from retrieval.index import index_dir, index_text, open_index, read_manifest
from retrieval.pipeline import PIPELINES

try:
    import ray

    HAS_RAY = True
except ImportError:
    HAS_RAY = False

needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install -e '.[distributed]')")
ROOT = Path(__file__).resolve().parents[2]
DEVMEM = ROOT / "datasets" / "devmem"
WORDS = ("ledger api deploy token cache index vector shard retry worker queue editor theme night build test "
         "merge branch commit payment refund invoice webhook timeout migration schema replica backup").split()


@pytest.fixture(scope="module")
def cluster():
    if not HAS_RAY:
        pytest.skip("Ray is not installed (pip install -e '.[distributed]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    yield ray
    ray.shutdown()


def _in_home(home: Path, build):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(home))
        return build()


def _synthetic(root: Path, n: int, distinct: int | None = None) -> Path:
    """A seeded store of ``n`` short memories (2–9 words; many share a length, so the encode
    order's ties matter; ``distinct``: drawn from that many texts, so the embedding cache
    encodes only those) with 8 queries and their judgments."""
    rng = np.random.default_rng(31)
    root.mkdir(parents=True)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 10)))) for _ in range(distinct or n)]
    picks = rng.integers(0, len(texts), size=n) if distinct else range(n)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for i, pick in enumerate(picks):
            handle.write(json.dumps({"_id": f"s{i:05d}", "text": texts[pick]}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as handle:
        for q in range(8):
            handle.write(json.dumps({"_id": f"q{q}", "text": " ".join(WORDS[q * 3:q * 3 + 3])}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{q}\ts{q * 7:05d}\t1\n" for q in range(8)))
    return root


def _build(dataset, home: Path, progress=None, rebuild=False):
    return _in_home(home, lambda: open_index(dataset, "minilm", progress=progress, rebuild=rebuild))


def _pool(dataset, home: Path):
    return _in_home(home, lambda: load_pool(dataset, "minilm", on_notice=None))


def _same_pool(a, b) -> None:
    assert (a.doc_ids, a.query_ids, a.query_texts, a.pool_depth) == (b.doc_ids, b.query_ids, b.query_texts,
                                                                      b.pool_depth)
    assert a.offsets.tobytes() == b.offsets.tobytes()
    assert sorted(a.cols) == sorted(b.cols)
    for name in a.cols:
        assert a.cols[name].dtype == b.cols[name].dtype and a.cols[name].tobytes() == b.cols[name].tobytes(), name


def _same_index(local, remote) -> None:
    keys = ("format", "dataset", "dataset_fingerprint", "model", "analyzer", "documents")
    assert {k: local.manifest[k] for k in keys} == {k: remote.manifest[k] for k in keys}
    assert local.doc_ids == remote.doc_ids
    assert local.vectors.dtype == remote.vectors.dtype == np.float32
    assert local.vectors.tobytes() == remote.vectors.tobytes()
    assert (local.path / "vectors.npy").read_bytes() == (remote.path / "vectors.npy").read_bytes()


@pytest.fixture(scope="module")
def devmem_builds(cluster, tmp_path_factory):
    """devmem indexed here and on Ray (one worker, tasks of 64 texts), the worker killed (SIGKILL
    to its process) after the first task came back; the candidate pool of each, the Ray one's
    queries encoded on Ray and retrieved there in 8 shards of 15. One worker at a time: it runs
    torch on this process's two threads, and two such workers would ask 4 threads of the test
    machine's 2 cores (the results from several workers are put together in the
    interrupted-run test's full rerun below)."""
    from retrieval.ray_index import ray_encoding
    from retrieval.ray_pool import ray_retrieval

    tmp = tmp_path_factory.mktemp("devmem")
    dataset = load_dataset(DEVMEM)
    local = _build(dataset, tmp / "local")
    local_pool = _pool(dataset, tmp / "local")
    killed: list[int] = []
    after: list[int] = []
    with ray_encoding(1, batch_size=64) as encoders, ray_retrieval(1, shard=15) as retriever:
        def kill_one(stage, done, total):
            if stage == "embed" and not killed and done < total:
                killed.append(encoders[0].pids()[0])
                os.kill(killed[0], signal.SIGKILL)
            elif stage == "embed" and killed and not after:
                after.extend(encoders[0].pids())  # the next task came back: from whom

        remote = _build(dataset, tmp / "ray", progress=kill_one)
        remote_pool = _pool(dataset, tmp / "ray")  # its 120 queries encoded and retrieved on Ray too
    return dataset, local, local_pool, remote, remote_pool, encoders[0], killed, after, retriever


@needs_ray
@pytest.mark.slow
def test_devmem_on_ray_is_the_local_index_bit_for_bit(devmem_builds):
    dataset, local, local_pool, remote, remote_pool, encoder, _, _, retriever = devmem_builds
    assert remote.embedder.encoded == len(dataset.documents)  # nothing came from a cache
    assert encoder.encoded == len(dataset.documents) + len(dataset.queries)  # all of it on Ray
    assert (retriever.retrieved, retriever.shards) == (len(dataset.queries), 8)  # 120 queries in 8 shards
    _same_index(local, remote)
    _same_pool(local_pool, remote_pool)
    for query in dataset.queries[:20]:
        assert local.bm25.search(query.text, 50) == remote.bm25.search(query.text, 50)
    a = evaluate_config(local_pool, judge(local_pool, dataset.qrels), PIPELINES["rrf"])
    b = evaluate_config(remote_pool, judge(remote_pool, dataset.qrels), PIPELINES["rrf"])
    assert a.means == b.means and a.means["ndcg@5"] > 0.3
    for name in a.values:
        assert a.values[name].tobytes() == b.values[name].tobytes()


@needs_ray
@pytest.mark.slow
def test_a_worker_killed_mid_run_was_restarted_and_its_tasks_retried(devmem_builds):
    dataset, _, _, remote, _, encoder, killed, after, _ = devmem_builds
    assert len(killed) == 1 and after[0] != killed[0]  # the first worker came back as a new process
    assert remote.manifest["documents"] == len(dataset.documents) == len(remote.vectors)
    # …and the index it helped build is the local one (the test above, on the same build)


@needs_ray
@pytest.mark.slow
def test_a_20k_document_store_on_ray_is_the_local_index_and_pool_bit_for_bit(cluster, tmp_path):
    """20,000 memories built here and on Ray (encoded in tasks of 128 texts, the 8 queries'
    candidates retrieved in 4 shards): vectors, BM25, the pool over 20,000 documents and rrf's
    metrics equal byte for byte. The memories repeat 640 distinct texts, so the encoder —
    bit-exact in its batches on devmem above — encodes at most 640 texts, not 20,000 (MiniLM:
    ~70 texts/s here); the rest of the build (BM25, the LanceDB table, vectors.npy, checksums, the
    pool's retrieval and features) runs at the full 20,000. A run with 18,173 distinct texts is
    recorded in BENCHMARKS.md ("Indexing at scale")."""
    from retrieval.ray_index import ray_encoding
    from retrieval.ray_pool import ray_retrieval

    dataset = load_dataset(_synthetic(tmp_path / "synthetic", 20_000, distinct=640))
    local = _build(dataset, tmp_path / "local")
    local_pool = _pool(dataset, tmp_path / "local")
    with ray_encoding(1, batch_size=128) as encoders, ray_retrieval(1, shard=2) as retriever:
        remote = _build(dataset, tmp_path / "ray")
        remote_pool = _pool(dataset, tmp_path / "ray")
    assert len(remote.doc_ids) == 20_000 and remote.embedder.encoded == local.embedder.encoded <= 640
    new_queries = {q.text for q in dataset.queries} - {index_text(d) for d in dataset.documents}
    assert encoders[0].encoded == remote.embedder.encoded + len(new_queries)  # all of it on Ray
    assert (retriever.retrieved, retriever.shards) == (8, 4)
    _same_index(local, remote)
    _same_pool(local_pool, remote_pool)
    for query in dataset.queries:
        assert local.bm25.search(query.text, 50) == remote.bm25.search(query.text, 50)
    a = evaluate_config(local_pool, judge(local_pool, dataset.qrels), PIPELINES["rrf"])
    b = evaluate_config(remote_pool, judge(remote_pool, dataset.qrels), PIPELINES["rrf"])
    assert a.means == b.means
    for name in a.values:
        assert a.values[name].tobytes() == b.values[name].tobytes()


@needs_ray
def test_a_small_batch_on_ray_is_the_local_vectors_bit_for_bit(cluster):
    """A query set's few short texts (one small model batch): a worker with one CPU encodes them
    on the driver's torch thread count, so its vectors are the local ones (on one thread they
    differed in the last bits: a 20k-document store's 8 queries gave 376 of 683 candidate rows
    another dense_sim)."""
    from retrieval.embedders import load_embedder
    from retrieval.ray_index import RayEncoder

    texts = [" ".join(WORDS[q * 3:q * 3 + 3]) for q in range(8)]
    model = load_embedder("minilm")
    local = np.asarray(model.encode(texts))
    encoder = RayEncoder(model, "minilm", workers=1)
    try:
        remote = encoder.encode(texts)
    finally:
        encoder.close()
    assert encoder.encoded == 8
    assert remote.dtype == local.dtype == np.float32 and remote.tobytes() == local.tobytes()


@needs_ray
@pytest.mark.slow
def test_an_interrupted_ray_run_leaves_the_published_index_unchanged(cluster, tmp_path):
    from retrieval.ray_index import ray_encoding

    dataset = load_dataset(_synthetic(tmp_path / "synthetic", 192))  # 3 tasks of 64
    home = tmp_path / "home"
    before = _build(dataset, home)  # the published index
    for part in home.glob("embeddings.sqlite*"):  # so the rebuild encodes again
        part.unlink()
    directory = _in_home(home, lambda: index_dir(dataset, "minilm"))
    published, manifest = os.readlink(directory / "current"), read_manifest(directory)

    def interrupt(stage, done, total):
        if stage == "embed" and 0 < done < total:
            raise KeyboardInterrupt

    with ray_encoding(2, batch_size=64) as encoders:
        with pytest.raises(KeyboardInterrupt):
            _build(dataset, home, progress=interrupt, rebuild=True)
        assert os.readlink(directory / "current") == published and read_manifest(directory) == manifest
        assert not list((directory / "builds").glob("tmp-*"))  # the partial build was removed
        again = _build(dataset, home)  # the published build is intact: served as it is
        assert again.path == before.path and again.embedder.encoded == 0
        assert again.vectors.tobytes() == before.vectors.tobytes()
        rerun = _build(dataset, home, rebuild=True)  # run again to the end: the local vectors
    assert encoders[0].closed and not encoders[0].actors  # no worker outlives its encode
    assert rerun.path != before.path and rerun.embedder.encoded > 64
    _same_index(before, rerun)


@needs_ray
def test_rwb_index_executor_ray_writes_the_local_vectors_and_pool(cluster, tiny_copy, tmp_path, monkeypatch,
                                                                  capsys):
    """The command, here and on Ray, each in its own home (a shared embedding cache would hand
    one run the other's vectors): its 10 documents encoded on one Ray worker, its 4 queries'
    candidates retrieved there in 4 shards (about 4 per worker), both equal to the local run's."""
    from eval.cli import main

    built = load_dataset(tiny_copy)
    runs = {}
    for name, extra in (("local", []), ("ray", ["--executor", "ray", "--workers", "1"])):
        monkeypatch.setenv("RWB_HOME", str(tmp_path / name))
        status = main(["index", str(tiny_copy), "--embedder", "minilm", *extra])
        out = capsys.readouterr().out
        assert status == 0, out
        runs[name] = (out, np.load(index_dir(built, "minilm") / "current" / "vectors.npy"),
                      load_pool(built, "minilm", on_notice=None))  # the stored pool, read back
    out = runs["ray"][0]
    assert "10 texts encoded on Ray (1 worker)" in out
    assert "candidate pool: 4 queries, depth 50 per path, retrieved on Ray in 4 shards" in out
    assert "Ray" not in runs["local"][0]
    assert runs["ray"][1].tobytes() == runs["local"][1].tobytes()
    _same_pool(runs["local"][2], runs["ray"][2])


@needs_ray
def test_a_retrieval_worker_that_cannot_see_the_build_says_so(cluster, tiny, tiny_index, tmp_path):
    """A worker on a node without the build (here: a build path that does not exist) refuses
    with the reason, raised as itself (one line for the user), and its actor is stopped."""
    import dataclasses

    from retrieval.candidates import build_candidates
    from retrieval.ray_pool import ray_retrieval

    elsewhere = dataclasses.replace(tiny_index, path=tmp_path / "not-on-this-node")
    with ray_retrieval(1) as retriever:
        with pytest.raises(FileNotFoundError, match="is not on this Ray node: use a home every node sees"):
            build_candidates(elsewhere, tiny.queries)
    assert not retriever.actors and retriever.shards == 0


def test_without_ray_executor_ray_is_one_error_line(tiny_copy, tmp_path, monkeypatch, capsys):
    from eval.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    assert main(["index", str(tiny_copy), "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rwb: error: --executor ray needs Ray: pip install -e '.[distributed]'"]
    assert not (tmp_path / "home" / "indexes").exists()


@pytest.mark.parametrize("argv, message", [
    (["--executor", "ray", "--batch-size", "100"], "--batch-size must be a positive multiple of 64"),
    (["--executor", "ray", "--batch-size", "0"], "--batch-size must be a positive multiple of 64"),
    (["--batch-size", "128"], "--batch-size needs --executor ray"),
    (["--workers", "2"], "--address and --workers need --executor ray"),
])
def test_bad_ray_options_are_one_error_line(argv, message, tiny_copy, tmp_path, monkeypatch, capsys):
    from eval.cli import main

    if "ray" in argv and not HAS_RAY:
        pytest.skip("Ray is not installed (pip install -e '.[distributed]')")
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    assert main(["index", str(tiny_copy), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rwb: error: ") and message in err[0], err


@needs_ray
def test_ray_address_from_the_environment_is_the_cluster_joined(tiny_copy, tmp_path, monkeypatch, capsys):
    import socket

    from eval.cli import main

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    assert main(["index", str(tiny_copy), "--executor", "ray"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"127.0.0.1:{port}: no Ray cluster answers there" in err[0], err
