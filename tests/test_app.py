"""AppTest: every page runs; Tune's knobs change the ranking and the metrics; stores round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny"
PAGES = ["pages/tune.py", "pages/evaluate.py", "pages/sweep.py", "pages/profiles.py", "pages/data.py",
         "pages/reports.py"]
TITLES = {"pages/tune.py": "Tune", "pages/evaluate.py": "Evaluate", "pages/sweep.py": "Sweep",
          "pages/profiles.py": "Profiles", "pages/data.py": "Data", "pages/reports.py": "Reports"}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One RWB_HOME per module, so the tiny index and candidate pool are built once."""
    return tmp_path_factory.mktemp("rwb-home")


@pytest.fixture
def app(home, monkeypatch):
    monkeypatch.setenv("RWB_DATASET", str(TINY))
    monkeypatch.setenv("RWB_HOME", str(home))
    monkeypatch.setenv("LANCEDB_LOG", "error")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st.cache_data.clear()
    st.cache_resource.clear()
    for store in ("judgments", "profiles"):
        for path in (home / store).glob("*") if (home / store).is_dir() else ():
            path.unlink()
    (home / "experiments.json").unlink(missing_ok=True)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception
    yield at
    st.cache_data.clear()
    st.cache_resource.clear()


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(page).run()
    assert not at.exception
    return at


def frame_with(at: AppTest, *columns: str, without: str | None = None):
    """The first dataframe shown with these columns (plain dataframes carry no key in AppTest)."""
    for element in at.dataframe:
        value = element.value
        if all(c in value.columns for c in columns) and (without is None or without not in value.columns):
            return value
    return None


def shown_docs(at: AppTest, baseline: bool = False) -> list[str]:
    """Document ids of Tune's current ranking (it has the Δ column) or of the baseline's."""
    frame = frame_with(at, "doc", without="Δ") if baseline else frame_with(at, "doc", "Δ")
    return list(frame["doc"])


def metric_values(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.mark.parametrize("page", PAGES)
def test_each_page_runs(app, page):
    at = goto(app, page)
    assert at.title[0].value == TITLES[page]


def test_tune_shows_ranking_baseline_breakdown_and_metrics(app):
    at = app
    assert [m.label for m in at.metric] == ["nDCG@5", "Recall@5", "MRR@5", "P@5", "Hit@5"]
    assert shown_docs(at)[0] == "d03"                           # q1 ERR_CONN_REFUSED: the error-fix memory
    assert shown_docs(at, baseline=True)
    assert any("route · hybrid" in m.value for m in at.markdown)
    assert any("took" in c.value and "ms" in c.value for c in at.caption)


def test_tune_sparse_weight_changes_ranking_and_metrics(app):
    at = app
    at.selectbox(key="tune_query").set_value(3).run()           # q4 "user_id 列改名了吗"
    assert not at.exception
    before_docs, before_metrics = shown_docs(at), metric_values(at)
    assert at.slider(key="tune_k_rrf.w_sparse").value == pytest.approx(1.0)
    at.slider(key="tune_k_rrf.w_sparse").set_value(0.0).run()
    assert not at.exception
    after_docs, after_metrics = shown_docs(at), metric_values(at)
    assert after_docs != before_docs
    assert before_docs[0] == "d06" and after_docs[0] == "d01"    # the keyword hit loses its lead
    assert after_metrics != before_metrics
    assert any("(tuned)" in m.value for m in at.markdown)


def test_tune_fusion_switch_reset_and_invalid_knob(app):
    at = app
    at.selectbox(key="tune_k_fusion").set_value("adaptive").run()
    assert not at.exception
    assert at.slider(key="tune_k_adaptive.profile.w_time")       # time and graph weights appear
    at.slider(key="tune_k_adaptive.profile.quality.conf_low").set_value(1.0).run()   # above conf_high: refused
    assert not at.exception
    assert any("not applied" in w.value for w in at.warning)
    assert at.slider(key="tune_k_adaptive.profile.quality.conf_low").value == pytest.approx(0.6)
    at.selectbox(key="tune_source_pick").set_value("profile:debug").run()
    assert not at.exception
    assert at.slider(key="tune_k_adaptive.profile.w_sparse").value == pytest.approx(0.9)


def test_tune_save_profile_and_log_experiment(app, home):
    at = app
    at.slider(key="tune_k_rrf.rrf_k").set_value(10.0).run()
    at.text_input(key="tune_profile_name").set_value("rrf-k10").run()
    at.button(key="tune_save_profile").click().run()
    assert not at.exception
    assert (home / "profiles" / "rrf-k10.toml").is_file()
    assert at.selectbox(key="tune_source_pick").value == "saved:rrf-k10"
    next(b for b in at.button if b.label == "Log experiment").click().run()
    assert not at.exception
    goto(at, "pages/reports.py")
    assert any("rrf-k10" in str(v) for v in at.dataframe[0].value["name"])


def test_tune_free_text(app):
    at = app
    at.segmented_control(key="tune_mode").set_value("Free text").run()
    at.text_input(key="tune_free_text").set_value("connection refused postgres").run()
    assert not at.exception
    assert shown_docs(at)


def test_data_grade_history_undo_never_touches_dataset(app, home):
    qrels_before = (TINY / "qrels" / "test.tsv").read_bytes()
    at = goto(app, "pages/data.py")
    at.selectbox(key="data_query").set_value("q2").run()
    at.selectbox(key="data_doc").set_value("d02").run()
    at.segmented_control(key="data_grade").set_value(2).run()
    next(b for b in at.button if b.label == "Save judgment").click().run()
    assert not at.exception
    history = frame_with(at, "before", "after")
    assert list(history[["query", "doc", "after"]].iloc[0]) == ["q2", "d02", "2"]
    next(b for b in at.button if b.label == "Undo").click().run()
    assert not at.exception
    assert frame_with(at, "before", "after") is None
    assert (TINY / "qrels" / "test.tsv").read_bytes() == qrels_before


def test_grade_from_tune_changes_metrics(app):
    at = app
    before = metric_values(at)
    at.selectbox(key="tune_grade_doc").set_value("d05").run()
    at.segmented_control(key="tune_grade_value").set_value(3).run()
    next(b for b in at.button if b.label == "Save judgment").click().run()
    assert not at.exception
    assert metric_values(at) != before                           # q1 gains a relevant document at rank 2


def test_evaluate_table_and_drilldown(app):
    at = goto(app, "pages/evaluate.py")
    table = at.dataframe[0].value
    assert table["pipeline"].iloc[0] == "vector (baseline)"
    assert {"rrf", "seed-adaptive"} <= set(table["pipeline"])
    at.selectbox(key="eval_query").set_value("q3").run()
    assert not at.exception
    assert any("Candidate" in m.value for m in at.markdown)


def test_sweep_runs_and_applies_winner(app):
    at = goto(app, "pages/sweep.py")
    at.selectbox(key="sweep_base").set_value("rrf").run()
    at.number_input(key="sweep_x_steps").set_value(3).run()
    at.number_input(key="sweep_y_steps").set_value(3).run()
    next(b for b in at.button if b.label.startswith("Run sweep")).click().run()
    assert not at.exception
    assert any(m.label.startswith("best") for m in at.metric)
    next(b for b in at.button if b.label == "Apply winner to Tune").click().run()
    assert not at.exception
    assert at.session_state["tune_config"].fusion == "rrf"


def test_profiles_edit_diff_and_invalid_toml(app):
    at = goto(app, "pages/profiles.py")
    area = at.text_area(key="profiles_toml_profile:debug")
    area.set_value(area.value.replace("w_sparse = 0.9", "w_sparse = 0.5", 1)).run()
    assert not at.exception
    diff = frame_with(at, "parameter", "default", "this")
    assert list(diff["parameter"]) == ["adaptive.profile.w_sparse"]
    at.text_area(key="profiles_toml_profile:debug").set_value("fusion = 'nope'").run()
    assert not at.exception
    assert at.error


def test_reports_generate(app):
    at = goto(app, "pages/reports.py")
    next(b for b in at.button if b.label == "Generate").click().run()
    assert not at.exception
    report = at.session_state["reports_file"]
    assert report["html"].endswith("report.html") and Path(report["html"]).is_file()
    assert "Metrics" in Path(report["md"]).read_text("utf-8")


def test_data_import_beir_and_switch(app, tmp_path):
    at = goto(app, "pages/data.py")
    dest = tmp_path / "imported"
    at.selectbox(key="data_import_kind").set_value("beir").run()
    at.text_input(key="data_import_source").set_value(str(TINY)).run()
    at.text_input(key="data_import_dest").set_value(str(dest)).run()
    at.button(key="data_import").click().run()
    assert not at.exception
    assert (dest / "corpus.jsonl").is_file()
    assert at.session_state["data_imported"] == str(dest)
    at.button(key="data_use_imported").click().run()
    assert not at.exception
    assert at.session_state["rwb_dataset_typed"] == str(dest)
