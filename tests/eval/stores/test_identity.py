"""One dataset, whatever folder it sits in (``eval.stores.identity``): the stores are keyed by
the dataset's identity (``dataset.toml``'s ``id``, else ``name``, else the folder's name), two
copies of devmem at two paths share grades, snapshots, tries and history; a dataset of the same
name with another corpus is refused in one line; stores of the earlier path-keyed layout move
in on first use, nothing lost.

devmem has 348 memories, fewer than a sketch holds (512), so the overlap is exact: a copy with
its corpus lines reversed shares all 348 (100 %); a "devmem" of 40 other memories shares none
(0 % < 50 %).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from eval.stores import identity
from eval.stores.access import AccessStore
from eval.stores.history import CheckHistory
from eval.stores.judgments import JudgmentStore, effective_qrels
from eval.stores.snapshots import SnapshotStore
from eval.stores.tries import TryStore
from retrieval.dataset import load_dataset
from retrieval.pipeline import PIPELINES
from tests.conftest import rwb_here

ROOT = Path(__file__).resolve().parents[3]
DEVMEM = ROOT / "datasets" / "devmem"


def _snapshot(name: str) -> dict:
    return {"name": name, "metrics": {"ndcg@5": 0.5},
            "queries": {"q001": {"values": {"ndcg@5": 0.5}, "ranking": ["m0001"]}}}


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("RWB_HOME", str(home))
    return home


@pytest.fixture
def copies(tmp_path):
    """devmem at two paths: ``a`` as bundled, ``b`` with its corpus lines reversed and one
    judgment of its qrels changed (the same dataset, edited)."""
    a, b = tmp_path / "checkout-1" / "devmem", tmp_path / "laptop" / "work" / "devmem"
    shutil.copytree(DEVMEM, a)
    shutil.copytree(DEVMEM, b)
    lines = (b / "corpus.jsonl").read_text("utf-8").splitlines()
    (b / "corpus.jsonl").write_text("\n".join(reversed(lines)) + "\n", "utf-8")
    qrels = (b / "qrels" / "test.tsv").read_text("utf-8").splitlines()
    (b / "qrels" / "test.tsv").write_text("\n".join(qrels[:-1]) + "\n", "utf-8")
    return load_dataset(a), load_dataset(b)


def test_two_copies_share_grades_snapshots_tries_and_history(home, copies):
    a, b = copies
    assert a.root != b.root and a.fingerprint != b.fingerprint and a.identity == b.identity == "devmem"
    JudgmentStore(a).grade("q001", "m0300", 3, author="ci")
    SnapshotStore(a).save(_snapshot("release 1"))
    CheckHistory(a).add({"pipeline": "rrf", "passed": True, "metrics": {"ndcg@5": 0.5}})
    TryStore(a).add(PIPELINES["rrf"], "rrf", {}, {"ndcg@5": 0.5}, "vector", {"ndcg@5": 0.4})
    AccessStore(a).write_back(["m0001"])
    assert effective_qrels(b).qrels["q001"]["m0300"] == 3
    assert SnapshotStore(b).names() == ["release 1"]
    assert [e["pipeline"] for e in CheckHistory(b).entries()] == ["rrf"]
    assert [t["id"] for t in TryStore(b).tries()] == [1]
    assert AccessStore(b).added() == {"m0001": 1}
    JudgmentStore(b).grade("q002", "m0300", 1, author="laptop")
    assert effective_qrels(a).qrels["q002"]["m0300"] == 1
    assert sorted(p.name for p in (home / "judgments").iterdir() if p.suffix == ".json") == ["devmem.json"]


def test_another_dataset_with_the_same_name_is_refused_in_one_line(home, copies, tmp_path):
    a, _ = copies
    JudgmentStore(a).grade("q001", "m0300", 3)
    other = tmp_path / "other" / "devmem"
    other.mkdir(parents=True)
    (other / "dataset.toml").write_text('name = "devmem"\n', "utf-8")
    (other / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": f"x{i}", "text": f"another memory {i}"}) + "\n" for i in range(40)), "utf-8")
    with pytest.raises(ValueError, match=r"is not the dataset 'devmem' this RWB_HOME keeps .*0% of the "
                                         r"documents in common\): give it its own `id"):
        effective_qrels(load_dataset(other))
    proc = rwb_here(home, "judge", str(other))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("rwb: error: dataset ")
    # an explicit id makes it a dataset of its own, with stores of its own
    (other / "dataset.toml").write_text('name = "devmem"\nid = "devmem-other"\n', "utf-8")
    mine = load_dataset(other)
    assert mine.identity == "devmem-other" and effective_qrels(mine).qrels == {}
    assert effective_qrels(a).qrels["q001"]["m0300"] == 3


def test_a_bad_id_is_a_dataset_problem(tmp_path):
    folder = tmp_path / "d"
    shutil.copytree(DEVMEM, folder)
    (folder / "dataset.toml").write_text('name = "devmem"\nid = 7\n', "utf-8")
    with pytest.raises(ValueError, match=r"dataset.toml:2: id: expected a string"):
        load_dataset(folder)


def _old(name: str, root: Path) -> str:
    """The earlier layout's file stem: name and the sha1 of the folder's resolved path."""
    return f"{name}-{hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:8]}"


def test_stores_of_the_path_keyed_layout_migrate_losing_nothing(home, copies):
    a, b = copies
    (home / "judgments").mkdir(parents=True)
    (home / "history").mkdir()
    (home / "tries").mkdir()
    # both checkouts graded before this version: one store each, one pair graded in both
    for dataset, grade, author, at in ((a, 2, "checkout", 10.0), (b, 1, "laptop", 20.0)):
        state = {"dataset": "devmem", "overlay": {"q001": {"m0300": grade}},
                 "history": [{"query": "q001", "doc": "m0300", "before": None, "after": grade,
                              "author": author, "time": at}]}
        if dataset is a:
            state["overlay"]["q003"] = {"m0002": 3}
            state["history"].append({"query": "q003", "doc": "m0002", "before": None, "after": 3,
                                     "author": "a", "time": 5.0})
        (home / "judgments" / f"{_old('devmem', dataset.root)}.json").write_text(json.dumps(state))
    (home / "history" / f"{_old('devmem', a.root)}.json").write_text(json.dumps(
        {"dataset": "devmem", "checks": [{"time": "2026-01-01T00:00:00", "pipeline": "old", "metrics": {}}]}))
    (home / "tries" / f"{_old('devmem', b.root)}.json").write_text(json.dumps(
        {"tries": [{"id": 1, "time": "2026-01-02T00:00:00", "config": "x", "name": "kept"}],
         "query_notes": {"q001": "hard one"}}))
    snaps = home / "snapshots" / _old("devmem", a.root)
    snaps.mkdir(parents=True)
    (snaps / "release 0.json").write_text(json.dumps(_snapshot("release 0")))

    qrels = effective_qrels(a).qrels          # a's store moves in
    assert qrels["q001"]["m0300"] == 2 and qrels["q003"]["m0002"] == 3
    qrels = effective_qrels(b).qrels          # b's moves in: its later grade of the shared pair wins
    assert qrels["q001"]["m0300"] == 1 and qrels["q003"]["m0002"] == 3
    history = JudgmentStore(a).history()
    assert [(e["author"], e["time"]) for e in history] == [("a", 5.0), ("checkout", 10.0), ("laptop", 20.0)]
    # an old store moves on first use from the folder it was keyed by; then every copy sees it
    assert CheckHistory(b).entries() == [] and [e["pipeline"] for e in CheckHistory(a).entries()] == ["old"]
    assert [e["pipeline"] for e in CheckHistory(b).entries()] == ["old"]
    assert TryStore(b).tries()[0]["name"] == "kept" and TryStore(a).query_notes() == {"q001": "hard one"}
    assert SnapshotStore(a).names() == ["release 0"] == SnapshotStore(b).names()
    left = sorted(p.relative_to(home).as_posix() for folder in ("judgments", "history", "tries", "snapshots")
                  for p in (home / folder).rglob("*.json"))
    assert left == ["history/devmem.json", "judgments/devmem.json", "snapshots/devmem/release 0.json",
                    "tries/devmem.json"]

    # a crash after the merged store was written but before the old file went: a rerun only removes
    old = home / "judgments" / f"{_old('devmem', a.root)}.json"
    old.write_text(json.dumps({"dataset": "devmem", "overlay": {"q003": {"m0002": 3}}, "history": [
        {"query": "q003", "doc": "m0002", "before": None, "after": 3, "author": "a", "time": 5.0}]}))
    identity._moved.clear()
    assert len(JudgmentStore(a).history()) == 3 and not old.exists()


def test_the_pages_refuse_another_dataset_of_a_kept_name_with_one_notice(home, copies, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    a, _ = copies
    JudgmentStore(a).grade("q001", "m0300", 3)
    other = tmp_path / "other" / "devmem"
    shutil.copytree(ROOT / "tests" / "fixtures" / "tiny", other)   # a corpus of 10 other memories
    (other / "dataset.toml").write_text('name = "devmem"\n', "utf-8")
    monkeypatch.setenv("RWB_DATASET", str(other))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/data.py").run()
    assert not at.exception
    [notice] = [e.value.replace("\\", "") for e in at.error]
    assert "is not the dataset 'devmem' this RWB_HOME keeps" in notice
