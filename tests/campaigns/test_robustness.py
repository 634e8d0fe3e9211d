"""Faults, hostile paths and filters, concurrency and durability (see RELIABILITY.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eval.stores.experiments import ExperimentStore
from eval.stores.judgments import JudgmentStore
from retrieval.dataset import load_dataset
from retrieval.files import read_memory_file, resolve_inside
from retrieval.index import _check, index_dir, open_index, read_manifest
from retrieval.pipeline import search

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
RWB = [sys.executable, "-m", "eval.cli"]


def _env(home: Path) -> dict:
    return {**os.environ, "RWB_HOME": str(home), "PYTHONPATH": str(ROOT), "LANCEDB_LOG": "error"}


def _grow_corpus(data: Path, n: int) -> None:
    topics = ["retry budget", "pool sizing", "cache eviction", "schema migration", "flaky test", "deploy window"]
    with open(data / "corpus.jsonl", "a", encoding="utf-8") as handle:
        for i in range(n):
            text = f"Note {i}: we looked at {topics[i % len(topics)]} for service {i * 7 % 101} and wrote down step {i}."
            handle.write(json.dumps({"_id": f"extra{i:04d}", "text": text}) + "\n")


# ---- 3. paths ---------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["../../etc/passwd", "/etc/passwd", "qrels/../../corpus.jsonl", "~/x", "", "a\x00b"])
def test_paths_outside_the_dataset_are_refused(bad):
    with pytest.raises(ValueError):
        resolve_inside(TINY, bad)


def test_symlink_pointing_out_is_refused(tmp_path):
    data = tmp_path / "ds"
    shutil.copytree(TINY, data)
    (data / "leak.md").symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="outside"):
        read_memory_file(data, "leak.md")
    assert read_memory_file(data, "dataset.toml", 1, 1) == 'name = "tiny"'


def test_cli_show_refuses_traversal_with_one_line_error():
    proc = subprocess.run([*RWB, "show", str(TINY), "../../etc/passwd"], capture_output=True, text=True,
                          env=_env(Path("/tmp/unused-rwb-home")), cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.startswith("rwb: error:") and "Traceback" not in proc.stderr
    assert proc.stdout == ""


# ---- 2. hostile filters -----------------------------------------------------------------

def test_injection_in_filters_matches_nothing(workspace):
    data, _ = workspace
    handle = open_index(load_dataset(data))
    for hostile in ["' OR '1'='1", "x' OR 1=1 --", "global' OR scope != '"]:
        for field in ("scope", "group", "project"):
            response = search(handle, "ERR_CONN_REFUSED pool", "rrf", **{field: hostile})
            assert response.results == [], (field, hostile)
    assert [r.id for r in search(handle, "ERR_CONN_REFUSED", "rrf", scope="project").results][:1] == ["d03"]


# ---- 4. faults --------------------------------------------------------------------------

def test_sigkill_mid_build_leaves_previous_index_usable_and_next_run_rebuilds(workspace):
    data, home = workspace
    subprocess.run([*RWB, "index", str(data), "--quiet"], check=True, env=_env(home), cwd=ROOT,
                   capture_output=True)
    directory = index_dir(load_dataset(data), "minilm")
    before = read_manifest(directory)
    _grow_corpus(data, 600)  # new texts: the next build has to encode for a few seconds
    proc = subprocess.Popen([*RWB, "index", str(data), "--quiet"], env=_env(home), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not list((directory / "builds").glob("tmp-*")):
        time.sleep(0.05)
    assert list((directory / "builds").glob("tmp-*")), "the build never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the published index is still the old, complete one
    assert read_manifest(directory) == before
    _check((directory / "current").resolve(), before)
    # the next run notices the stale index and rebuilds it fully
    done = subprocess.run([*RWB, "index", str(data), "--quiet"], env=_env(home), cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    after = read_manifest(directory)
    assert after["documents"] == 610 and after["dataset_fingerprint"] == load_dataset(data).fingerprint
    assert not list((directory / "builds").glob("tmp-*"))


def test_corrupt_vectors_are_detected_and_rebuilt(workspace):
    data, _ = workspace
    dataset = load_dataset(data)
    first = open_index(dataset)
    (first.path / "vectors.npy").write_bytes(b"not a numpy file")
    notices = []
    second = open_index(dataset, on_notice=notices.append)
    assert second.path != first.path
    assert notices and "damaged" in notices[0]
    assert second.vectors.shape == (10, 384)


def test_unavailable_embedder_gives_keyword_only_results_flagged_degraded(workspace):
    data, _ = workspace
    handle = open_index(load_dataset(data), "/nonexistent/model-path")
    response = search(handle, "ERR_CONN_REFUSED", "rrf")
    assert response.degraded and "keyword-only" in response.degraded[0]
    assert [r.id for r in response.results][:1] == ["d03"]
    assert all(set(r.components) <= {"sparse"} for r in response.results)


def test_unavailable_vector_store_falls_back_to_exact_search(workspace):
    data, _ = workspace
    warm = open_index(load_dataset(data))
    expected = [r.id for r in search(warm, "database connection refused", "vector").results]  # table read once
    cold = open_index(load_dataset(data))         # a second handle that has not read the table yet
    assert cold is not warm
    shutil.rmtree(warm.path / "lance")  # the LanceDB files vanish under a running process
    response = search(warm, "database connection refused", "vector")
    assert [r.id for r in response.results] == expected and not response.degraded   # its in-memory copy answers
    response = search(cold, "database connection refused", "vector")
    assert [r.id for r in response.results] == expected
    assert any("exact in-memory search" in note for note in response.degraded)


# ---- 5. concurrency ---------------------------------------------------------------------

def test_searches_stay_consistent_while_a_rebuild_swaps_in(workspace):
    data, _ = workspace
    dataset = load_dataset(data)
    handle = open_index(dataset)
    expected = [r.id for r in search(handle, "ERR_CONN_REFUSED pool", "rrf").results]
    errors, seen = [], []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.append([r.id for r in search(handle, "ERR_CONN_REFUSED pool", "rrf").results])
            except Exception as error:  # noqa: BLE001 - any failure is the finding
                errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    rebuilt = open_index(dataset, rebuild=True)
    fresh = [r.id for r in search(rebuilt, "ERR_CONN_REFUSED pool", "rrf").results]
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert seen and all(ids == expected for ids in seen)
    assert fresh == expected and rebuilt.path != handle.path


_GRADER = """
import sys
from retrieval.dataset import load_dataset
from eval.stores.judgments import JudgmentStore
store = JudgmentStore(load_dataset(sys.argv[1]))
docs = [d.id for d in store.dataset.documents]
for i in range(int(sys.argv[3])):
    store.grade(sys.argv[2], docs[i % len(docs)], 1 + i % 3, author=sys.argv[2])
"""


def test_two_sessions_grading_at_once_lose_no_update(workspace):
    data, home = workspace
    procs = [subprocess.Popen([sys.executable, "-c", _GRADER, str(data), q, "30"], env=_env(home), cwd=ROOT)
             for q in ("q1", "q2")]
    assert all(p.wait() == 0 for p in procs)
    store = JudgmentStore(load_dataset(data))
    history = store.history()
    assert len(history) == 60
    assert sum(1 for h in history if h["query"] == "q1") == 30
    qrels = store.qrels()
    assert len(qrels["q1"]) == 10 and len(qrels["q2"]) == 10  # every doc graded, last grade wins
    undone = store.undo()
    assert undone is not None and len(store.history()) == 59


def test_undo_restores_the_dataset_grade(workspace):
    data, _ = workspace
    store = JudgmentStore(load_dataset(data))
    assert store.qrels()["q1"] == {"d03": 3}
    store.grade("q1", "d03", 0)
    store.grade("q1", "d05", 2)
    assert store.qrels()["q1"] == {"d03": 0, "d05": 2}   # a 0 is a judgment (judged, not relevant)
    store.undo()
    store.undo()
    assert store.qrels()["q1"] == {"d03": 3}
    with pytest.raises(ValueError):
        store.grade("q1", "nope", 2)
    with pytest.raises(ValueError):
        store.grade("q1", "d03", 7)


# ---- 6. durability ----------------------------------------------------------------------

_WRITER = """
import sys
from eval.stores.experiments import ExperimentStore
store = ExperimentStore()
i = 0
while True:
    store.add({"pipeline": "rrf", "i": i, "metrics": {"ndcg@5": i / 1000}})
    print(i, flush=True)
    i += 1
"""


@pytest.mark.parametrize("delay", [0.3, 0.45, 0.6, 0.8])
def test_experiment_store_survives_sigkill_at_any_point(workspace, delay):
    _, home = workspace
    proc = subprocess.Popen([sys.executable, "-c", _WRITER], env=_env(home), cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    acknowledged = []
    start = time.time()
    while time.time() - start < delay + 5:
        line = proc.stdout.readline()
        if line:
            acknowledged.append(int(line))
        if acknowledged and time.time() - start > delay:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    records = ExperimentStore(home).list()
    assert acknowledged, "the writer never wrote"
    assert len(records) >= len(acknowledged)
    assert [r["i"] for r in records] == list(range(len(records)))


# ---- 1. bad datasets --------------------------------------------------------------------

def test_one_megabyte_document_and_lone_surrogates_are_named_by_file_line_field(workspace):
    data, home = workspace
    with open(data / "corpus.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "huge", "text": "x" * 1_000_000}) + "\n")
        handle.write('{"_id": "bad", "text": "broken \\ud800 escape"}\n')
    proc = subprocess.run([*RWB, "index", str(data)], capture_output=True, text=True, env=_env(home), cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0].startswith("rwb: error: invalid dataset: corpus.jsonl:11: text: 1000000 characters exceeds")
    # the second problem is listed on the next line, or counted on the one line ("and 1 more")
    assert (len(lines) > 1 and lines[1].strip().startswith("corpus.jsonl:12: text: contains a lone surrogate")
            ) or "and 1 more" in lines[0]
    assert not (home / "indexes").exists()  # nothing was built from a bad dataset


def test_ranx_from_several_threads_at_once_does_not_abort_the_process():
    """numba's workqueue layer kills the process on concurrent entry; two app sessions
    evaluating at once must not take the server down."""
    from ranx import Qrels, Run

    from eval.metrics.ranx_io import ranx_per_query, warm_up

    qrels = Qrels({f"q{i}": {"a": 1, "b": 2} for i in range(50)})
    run = Run({f"q{i}": {"a": 1.0, "c": 0.5, "b": 0.25} for i in range(50)})
    errors, results = [], []

    def work():
        try:
            warm_up()
            results.append(ranx_per_query(qrels, run, ["ndcg@5", "mrr@5"])["mrr@5"]["q0"])
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [1.0] * 4  # "a" (relevant) is ranked first
