"""Frozen snapshots keep the rankings and per-query values they were taken with, and the content
hashes of their inputs; the page's snapshots and ``rwb snapshot`` / ``rwb check`` read each other's."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.stores.configs import resolve_config
from eval.stores.pool import load_pool
from eval.stores.inputs import judgments_hash
from eval.stores.snapshots import SnapshotStore, compare
from retrieval.dataset import load_dataset
from retrieval.pipeline import response_for, run_pipeline

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(tmp_path_factory.mktemp("snap-home")))
        yield load_pool(load_dataset(TINY), "minilm")


def test_freeze_keeps_rankings_and_values_and_compare_gives_per_query_deltas(pool, tmp_path):
    dataset = load_dataset(TINY)
    judged = judge(pool, dataset.qrels)
    store = SnapshotStore(dataset, tmp_path)
    vector = evaluate_config(pool, judged, resolve_config("vector"))
    rrf = evaluate_config(pool, judged, resolve_config("rrf"))
    a = store.freeze("vector-then", vector, pool, dataset.qrels)
    store.freeze("rrf-then", rrf, pool, dataset.qrels)
    assert store.names() == ["rrf-then", "vector-then"]
    with pytest.raises(ValueError, match="exists"):
        store.freeze("vector-then", vector, pool, dataset.qrels)
    shown = [r.id for r in response_for(pool, run_pipeline(pool, resolve_config("vector")), 0,
                                        dataset.documents).results]
    assert store.load("vector-then")["queries"]["q1"]["ranking"] == shown[:10]
    assert a["judgments"] == judgments_hash(dataset.qrels) == a["inputs"]["judgments"]
    assert a["inputs"]["corpus"] and a["inputs"]["index"] and a["inputs"]["dataset_fingerprint"] == dataset.fingerprint
    rows = {r["query"]: r for r in compare(store.load("vector-then"), store.load("rrf-then"), "ndcg@5")}
    for qi, qid in enumerate(pool.query_ids):
        assert rows[qid]["A"] == pytest.approx(vector.values["ndcg@5"][qi], abs=1e-6)
        assert rows[qid]["delta"] == pytest.approx(rrf.values["ndcg@5"][qi] - vector.values["ndcg@5"][qi],
                                                   abs=2e-6)


def test_bad_names_are_refused(pool, tmp_path):
    store = SnapshotStore(load_dataset(TINY), tmp_path)
    with pytest.raises(ValueError, match="invalid name"):
        store.load("../escape")


def test_a_snapshot_frozen_on_the_page_gates_rwb_check_and_rwb_snapshot_shows_on_the_page(pool, capsys):
    """The page's ``SnapshotStore.freeze`` and ``rwb snapshot --name`` write the same record,
    found by name by ``rwb check --against`` and by the store the Reports page lists."""
    from eval.cli import main as rwb_main

    dataset = load_dataset(TINY)
    store = SnapshotStore(dataset)
    judged = judge(pool, dataset.qrels)
    store.freeze("from-page", evaluate_config(pool, judged, resolve_config("rrf")), pool, dataset.qrels)
    assert rwb_main(["--quiet", "check", str(TINY), "--pipeline", "rrf", "--against", "from-page"]) == 0
    assert capsys.readouterr().out.startswith("PASS tiny rrf vs snapshot 'from-page': ndcg@5 +0.0000 (p 1.000)")
    assert rwb_main(["--quiet", "snapshot", str(TINY), "--pipeline", "rrf", "--name", "from-cli"]) == 0
    capsys.readouterr()
    page, cli = store.load("from-page"), store.load("from-cli")
    assert {k: v for k, v in page["inputs"].items()} == cli["inputs"]
    assert {q: v["ranking"] for q, v in page["queries"].items()} == {q: v["ranking"] for q, v in cli["queries"].items()}
    assert rwb_main(["--quiet", "snapshot", str(TINY), "--pipeline", "rrf", "--name", "from-cli"]) == 2
    assert capsys.readouterr().err == "rwb: error: a snapshot named 'from-cli' exists; choose another name\n"


def test_inputs_name_what_changed(tmp_path):
    import dataclasses
    import shutil

    from eval.stores.inputs import changed, describe_changes, inputs_of, pipeline_hash

    rrf = resolve_config("rrf")
    assert pipeline_hash(dataclasses.replace(rrf, name="renamed")) == pipeline_hash(rrf)
    assert pipeline_hash(resolve_config("vector")) != pipeline_hash(rrf)
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    before = inputs_of(load_dataset(root), load_dataset(root).qrels, rrf, "minilm", "bigram")
    lines = (root / "corpus.jsonl").read_text("utf-8").splitlines(keepends=True)
    (root / "corpus.jsonl").write_text("".join(lines[:-1]) + lines[-1].replace('"text": "', '"text": "Edited. ', 1),
                                       "utf-8")
    edited = load_dataset(root)
    after = inputs_of(edited, {**edited.qrels, "q1": {}}, rrf, "minilm", "bigram")
    assert changed(before, after) == ["corpus", "judgments"]
    assert changed(before.to_json(), after.to_json()) == ["corpus", "judgments"]
    assert describe_changes(changed(before, after)) == "changed inputs: the corpus, the judgments"
    assert changed(before, None) == [] and describe_changes([]) == "same inputs"


def test_the_history_chart_marks_the_checks_whose_inputs_changed():
    from eval.reports.history_chart import history_figure, history_points

    base = {"corpus": "c1", "queries": "q", "judgments": "j", "pipeline": "p", "embedder": "e", "index": "i1"}
    entries = [{"time": "2026-11-01T03:00:00", "pipeline": "rrf", "passed": True, "metrics": {"ndcg@5": 0.5},
                "frozen": {"ndcg@5": 0.5}, "inputs": base},
               {"time": "2026-11-02T03:00:00", "pipeline": "rrf", "passed": True, "metrics": {"ndcg@5": 0.5},
                "frozen": {"ndcg@5": 0.5}, "inputs": base},
               {"time": "2026-11-03T03:00:00", "pipeline": "rrf", "passed": False, "metrics": {"ndcg@5": 0.4},
                "frozen": {"ndcg@5": 0.5}, "inputs": {**base, "corpus": "c2", "index": "i2"}}]
    points = history_points(entries, "ndcg@5")
    assert [p["changed"] for p in points] == [[], [], ["corpus", "index"]]
    fig = history_figure(entries, "ndcg@5")
    assert list(fig.data[0].y) == [0.5, 0.5, 0.4] and list(fig.data[0].marker.symbol) == ["circle", "circle", "x"]
    assert [a.text for a in fig.layout.annotations] == ["corpus, index"]
    assert [s.x0 for s in fig.layout.shapes] == ["2026-11-03T03:00:00"]


def test_reports_page_names_the_changed_input_and_plots_the_check_history(pool, monkeypatch):
    """Two snapshots frozen on the page with a grade given between them: the comparison names
    the judgments; the checks kept for the dataset are drawn with the input change marked."""
    import os

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from eval.stores.history import CheckHistory
    from eval.stores.judgments import JudgmentStore

    dataset = load_dataset(TINY)
    monkeypatch.setenv("RWB_DATASET", str(TINY))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    history = CheckHistory(dataset)
    base = {"corpus": "c", "queries": "q", "judgments": "j1", "pipeline": "p", "embedder": "e", "index": "i"}
    for day, judgments, value in ((1, "j1", 0.6), (2, "j2", 0.5)):
        explain = {"explain": {"ndcg@5": {"corpus_index": 0.0, "judgments": -0.1, "queries": 0.0, "pipeline": 0.0}}}
        history.add({"pipeline": "rrf", "snapshot": "s", "passed": day == 1, "metrics": {"ndcg@5": value},
                     "frozen": {"ndcg@5": 0.6}, "inputs": {**base, "judgments": judgments},
                     **(explain if day == 2 else {})})
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(Path(__file__).resolve().parents[3] / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("pages/reports.py").run()
    assert not at.exception
    for name in ("before-grade", "after-grade"):
        at.selectbox(key="snap_config").set_value("rrf")
        at.text_input(key="snap_name").set_value(name)
        at = at.button(key="snap_freeze").click().run()
        assert not at.exception
        if name == "before-grade":
            JudgmentStore(dataset).grade("q1", dataset.documents[-1].id, 3)
            st.cache_data.clear()
            st.cache_resource.clear()
    at = at.selectbox(key="snap_a").set_value("after-grade").run()
    at = at.selectbox(key="snap_b").set_value("before-grade").run()
    assert not at.exception
    assert any("changed inputs: the judgments" in w.value.replace("\\", "") for w in at.warning)
    assert "Checks over time" in [h.value for h in at.subheader]
    chart = [c for c in at.get("plotly_chart")]
    assert chart and "judgments" in chart[-1].proto.spec
    shares = [d.value for d in at.dataframe if "judgments" in d.value.columns]  # rwb check --explain's parts
    assert shares and shares[0]["judgments"].tolist() == [-0.1] and shares[0]["Δ"].tolist() == [-0.1]
    st.cache_data.clear()
    st.cache_resource.clear()


def test_a_kept_try_and_a_logged_experiment_record_their_inputs(pool, monkeypatch):
    """Tune keeps a try on leaving its knob edits and logs an experiment on a click: both carry
    the content hashes of their inputs, the pipeline's being the configuration's own."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from eval.stores.experiments import ExperimentStore
    from eval.stores.inputs import inputs_of, pipeline_hash
    from eval.stores.judgments import effective_qrels
    from eval.stores.tries import TryStore

    dataset = load_dataset(TINY)
    monkeypatch.setenv("RWB_DATASET", str(TINY))
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(Path(__file__).resolve().parents[3] / "app.py"), default_timeout=120)
    at.run()
    at = at.slider(key="tune_k_rrf.rrf_k").set_value(10.0).run()
    at = at.selectbox(key="tune_source_pick").set_value("weighted").run()
    at = next(b for b in at.button if b.label == "Log experiment").click().run()
    assert not at.exception
    in_effect = effective_qrels(dataset).qrels  # with the grade an earlier test gave
    expected = inputs_of(dataset, in_effect, None, pool.embedder, pool.analyzer).to_json()
    kept = TryStore(dataset).tries()[-1]
    assert kept["inputs"] == {**expected, "pipeline": pipeline_hash(TryStore(dataset).config(kept["id"]))}
    logged = ExperimentStore().list()[-1]
    assert logged["inputs"] == {**expected, "pipeline": pipeline_hash(resolve_config("weighted"))}
    st.cache_data.clear()
    st.cache_resource.clear()


def test_reordered_corpus_and_query_lines_are_not_a_change(tmp_path, monkeypatch):
    """The same documents and queries in another line order hash the same, index included (a
    check used to name "the corpus, the index" as changed)."""
    import shutil

    from eval.stores.inputs import changed, inputs_of
    from retrieval.index import open_index
    from tests.conftest import TINY

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    shutil.copytree(TINY, tmp_path / "a")
    shutil.copytree(TINY, tmp_path / "b")
    for name in ("corpus.jsonl", "queries.jsonl"):
        lines = (tmp_path / "b" / name).read_text("utf-8").splitlines(keepends=True)
        (tmp_path / "b" / name).write_text("".join(reversed(lines)), "utf-8")
    a, b = load_dataset(tmp_path / "a"), load_dataset(tmp_path / "b")
    assert [d.id for d in a.documents] == [d.id for d in reversed(b.documents)]
    for dataset in (a, b):
        open_index(dataset)
    before = inputs_of(a, a.qrels, None, "minilm", "bigram")
    after = inputs_of(b, b.qrels, None, "minilm", "bigram")
    assert before.index and changed(before, after) == []
