"""The pages on damaged or foreign stored data: one notice and the rest of the page, never a
traceback; Tune's one-click Freeze for every pipeline name the workbench accepts.

Was (issue 46, class 8): a check history whose entries had empty ``metrics`` put a traceback
on Reports (``IndexError``); a stored snapshot without ``config_name`` replaced the whole
Reports page with "This page cannot be shown: 'config_name'"; Tune's Freeze refused its own
generated name for pipelines named with parentheses, non-ASCII letters or 56+ characters.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.campaigns.conftest import TINY
from tests.pages.test_pages_guards import clean, start


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("rwb-home")


def _reports(home: Path, monkeypatch):
    at = start(home, monkeypatch)
    at.switch_page("pages/reports.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _shown(at) -> str:
    return " ".join(e.value for e in (*at.info, *at.error, *at.warning, *at.markdown, *at.caption))


def test_a_history_of_entries_without_metrics_is_one_notice(home, monkeypatch):
    from eval.stores.history import CheckHistory
    from retrieval.dataset import load_dataset

    clean(home)
    path = CheckHistory(load_dataset(TINY), home).path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"dataset": "tiny", "checks": [{"time": "t1", "metrics": {}}, {"metrics": {}}]}))
    try:
        at = _reports(home, monkeypatch)
    finally:
        path.unlink()
    notices = [e.value for e in at.info if "none with a metric value" in e.value]
    assert len(notices) == 1, _shown(at)
    assert any("Frozen snapshots" in h.value for h in at.subheader)  # the rest of the page is there


@pytest.mark.parametrize("damage", [
    lambda r: r.pop("config_name"),
    lambda r: [r.pop(k) for k in ("config_name", "time", "judgments", "fingerprint")],
])
def test_a_stored_snapshot_missing_its_fields_leaves_the_page(home, monkeypatch, damage):
    from eval.stores.snapshots import SnapshotStore
    from retrieval.dataset import load_dataset

    clean(home)
    store = SnapshotStore(load_dataset(TINY), home)
    store.folder.mkdir(parents=True, exist_ok=True)
    base = {"name": "a", "time": "2026-11-20T10:00:00", "config_name": "rrf", "judgments": "j", "fingerprint": "f",
            "metrics": {"ndcg@5": 0.5}, "queries": {"q1": {"values": {"ndcg@5": 0.5}, "ranking": ["d01"]}}}
    foreign = json.loads(json.dumps({**base, "name": "b"}))
    damage(foreign)
    (store.folder / "a.json").write_text(json.dumps(base))
    (store.folder / "b.json").write_text(json.dumps(foreign))
    try:
        at = _reports(home, monkeypatch)
    finally:
        for name in ("a", "b"):
            (store.folder / f"{name}.json").unlink()
    assert any("Mean metrics" in m.value for m in at.markdown), _shown(at)
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("name", ["rrf (tuned)", "向量检索", "Ünïcödé rrf", "r" * 56, "p" * 300, "(((", "a/b\\c"])
def test_freezes_generated_name_is_one_the_store_accepts(name):
    from eval.stores.files import check_name
    from pages._snapshots import auto_name

    config = SimpleNamespace(name=name)
    first = auto_name(config, [])
    assert check_name(first) == first
    second = auto_name(config, [first])
    assert check_name(second) == second and second != first
