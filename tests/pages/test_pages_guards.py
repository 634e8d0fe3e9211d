"""AppTest: what a page's inputs and stores can hold ends in ONE clear message, never a
traceback (pages/_state.py: ``workspace``, ``config_or_stop``; pages/_errors.py:
``experiments_or_stop``; the stores name a damaged file and turn a failed write into a
``ValueError``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
PAGES = ["pages/tune.py", "pages/evaluate.py", "pages/sweep.py", "pages/profiles.py",
         "pages/data.py", "pages/reports.py"]


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("rwb-home")


def start(home: Path, monkeypatch, dataset: Path = TINY) -> AppTest:
    monkeypatch.setenv("RWB_DATASET", str(dataset))
    monkeypatch.setenv("RWB_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    return at


def clean(home: Path) -> None:
    for store in ("judgments", "profiles"):
        path = home / store
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    (home / "experiments.json").unlink(missing_ok=True)


def errors(at: AppTest) -> list[str]:
    assert not at.exception, [e.value for e in at.exception]
    return [e.value.replace("\\", "") for e in at.error]


def flash(at: AppTest) -> str:
    shown = (*at.markdown, *at.caption, *at.toast)
    return " ".join(e.value.replace("\\", "") for e in shown if ":red[" in e.value)


DAMAGED = {  # a saved profile's file → what the one message says
    "loop": ('base = "saved:loop"\n', "loops"),
    "deep": ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    "path": ('base = "/etc/passwd"\n', "never a file"),
    "empty": ("", "empty"),
    "garbage": ("\x00\x01 not toml = = =\n", "invalid TOML"),
    "unknown": ('base = "nowhere"\n', "neither a pipeline"),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_a_damaged_profile_picked_anywhere_is_one_message(name, home, monkeypatch):
    clean(home)
    (home / "profiles").mkdir(parents=True)
    body, says = DAMAGED[name]
    (home / "profiles" / f"{name}.toml").write_text(body)
    label = f"saved:{name}"
    at = start(home, monkeypatch)
    at.selectbox(key="rwb_baseline").set_value(label).run()  # as Baseline, on the default page
    shown = errors(at)
    assert len(shown) == 1 and says in shown[0] and label in shown[0], shown
    at = start(home, monkeypatch)
    at.switch_page("pages/profiles.py").run()
    at.selectbox(key="profiles_pick").set_value(label).run()
    shown = errors(at)
    assert len(shown) == 1 and says in shown[0], shown
    at.switch_page("pages/evaluate.py").run()
    at.multiselect(key="eval_pipelines").set_value([label]).run()
    shown = errors(at)
    assert len(shown) == 1 and says in shown[0], shown


@pytest.mark.parametrize("grade", ['"3"', "true", "1000000000", "[3]", "null", "2.5"])
def test_a_wrong_typed_stored_grade_is_one_message_on_every_page(grade, home, monkeypatch):
    clean(home)
    (home / "judgments").mkdir(parents=True)
    at = start(home, monkeypatch)
    path = next(iter((home / "judgments").glob("*.json")), None) or _judgments_path(home)
    path.write_text('{"dataset": "tiny", "overlay": {"q1": {"d09": %s}}, "history": []}' % grade)
    for page in ("pages/tune.py", "pages/evaluate.py", "pages/data.py", "pages/reports.py"):
        at.switch_page(page).run()
        shown = errors(at)
        assert len(shown) == 1 and "damaged" in shown[0], (page, shown)


def _judgments_path(home: Path) -> Path:
    from retrieval.dataset import load_dataset
    from eval.stores.judgments import JudgmentStore

    return JudgmentStore(load_dataset(TINY), home).path


@pytest.mark.parametrize("records", [
    [{"name": "x", "metrics": [1, 2]}], [{"name": "x", "metrics": "0.5"}],
    [{"name": "x", "metrics": {}, "baseline_metrics": 3}], {"not": "a list"}, [1, 2],
])
def test_a_damaged_experiment_log_is_one_message_on_reports(records, home, monkeypatch):
    clean(home)
    (home / "experiments.json").write_text(json.dumps(records))
    at = start(home, monkeypatch)
    at.switch_page("pages/reports.py").run()
    shown = errors(at)
    assert shown and all("experiments.json" in s and "damaged" in s for s in shown), shown


def test_a_judgment_of_a_removed_document_is_listed_not_a_traceback(home, monkeypatch, tmp_path):
    from retrieval.dataset import load_dataset
    from eval.stores.judgments import JudgmentStore

    clean(home)
    dataset = tmp_path / "tiny"
    shutil.copytree(TINY, dataset)
    JudgmentStore(load_dataset(dataset), home).grade("q1", "d09", 2)
    lines = (dataset / "corpus.jsonl").read_text().splitlines()
    kept = [line + "\n" for line in lines if '"d09"' not in line]
    (dataset / "corpus.jsonl").write_text("".join(kept))
    at = start(home, monkeypatch, dataset)
    for page in PAGES:
        at.switch_page(page).run()
        assert errors(at) == [], page
    # the removed document no longer counts as relevant (it cannot be retrieved)
    assert "d09" not in JudgmentStore(load_dataset(dataset), home).qrels().get("q1", {})


@pytest.mark.parametrize("store", ["profiles", "judgments"])
def test_an_unwritable_home_when_saving_is_one_message(store, home, monkeypatch):
    # root can write anywhere, so a write is made to fail the way a full or read-only disk does
    # (an OSError inside the store's locked write): the lock file's name is taken by a folder
    clean(home)
    at = start(home, monkeypatch)
    target = home / "profiles" / "mine.toml" if store == "profiles" else _judgments_path(home)
    target.with_name(target.name + ".lock").mkdir(parents=True)
    if store == "profiles":
        at.text_input(key="tune_profile_name").set_value("mine").run()
        at.button(key="tune_save_profile").click().run()
    else:
        at.switch_page("pages/data.py").run()
        at.session_state["data_grade"] = 2  # the grade picked (a segmented control)
        next(b for b in at.button if b.label == "Save judgment").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "cannot write" in flash(at) and "nothing was changed" in flash(at)
    assert not target.exists()


@pytest.mark.parametrize("outside", ["/etc", "{tmp}", "{root}/../x"])
def test_remote_mode_refusal_of_a_dataset_outside_the_root_is_one_message(outside, home,
                                                                           monkeypatch, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setenv("RWB_ALLOW_REMOTE", "1")
    monkeypatch.setenv("RWB_DATA_ROOT", str(root))
    clean(home)
    at = start(home, monkeypatch, Path(outside.format(tmp=TINY, root=root)))
    shown = errors(at)
    assert len(shown) == 1 and "Cannot read dataset" in shown[0], shown


@pytest.mark.parametrize("lo,hi", [(-1e308, 1e308), (1e308, -1e308), (-1.7e308, 1.7e308),
                                   (0, 1e308), (1, 1e300)])
def test_sweep_axis_extremes_are_refused_in_one_line(lo, hi):
    from eval.search.space import point_values
    from pages import _harness as hx
    from retrieval.pipeline import PIPELINES, with_params

    for integer, name in ((True, "rrf.rrf_k"), (False, "rrf.w_dense")):
        with pytest.raises(ValueError):  # the axis, or its end outside the parameter's bounds
            spec = hx.param_spec(PIPELINES["rrf"], name, lo, hi, 11, integer)
            with_params(PIPELINES["rrf"], point_values((spec,), (spec.values[-1],)))


def test_an_unwritable_experiment_log_is_one_message(home, monkeypatch):
    clean(home)
    (home / "experiments.json.lock").mkdir(parents=True)  # the log's locked write fails
    try:
        at = start(home, monkeypatch)
        at.switch_page("pages/evaluate.py").run()
        next(b for b in at.button if b.label == "Log these as experiments").click().run()
        shown = errors(at)
        assert len(shown) == 1 and "Experiment not logged" in shown[0] and "cannot write" in shown[0]
        assert not (home / "experiments.json").exists()
    finally:
        (home / "experiments.json.lock").rmdir()
