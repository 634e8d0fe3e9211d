"""AppTest of the Data page: imports (BEIR, runs, UBI logs, a failure) and the grade history."""

from __future__ import annotations

from tests.pages.test_app import ROOT, TINY, frame_with, goto, run


def test_data_grade_history_undo_never_touches_dataset(app, home):
    qrels_before = (TINY / "qrels" / "test.tsv").read_bytes()
    at = goto(app, "pages/data.py")
    at = run(at.selectbox(key="data_query").set_value("q2"))
    at = run(at.selectbox(key="data_doc").set_value("d02"))
    at = run(at.segmented_control(key="data_grade").set_value(2))
    at = run(next(b for b in at.button if b.label == "Save judgment").click())
    history = frame_with(at, "before", "after")
    assert list(history[["query", "doc", "after"]].iloc[0]) == ["q2", "d02", "2"]
    at = run(next(b for b in at.button if b.label == "Undo").click())
    assert frame_with(at, "before", "after") is None
    assert (TINY / "qrels" / "test.tsv").read_bytes() == qrels_before


def test_data_import_beir_and_switch(app, tmp_path):
    at = goto(app, "pages/data.py")
    dest = tmp_path / "imported"
    at = run(at.selectbox(key="data_import_kind").set_value("beir"))
    at = run(at.text_input(key="data_import_source").set_value(str(TINY)))
    at = run(at.text_input(key="data_import_dest").set_value(str(dest)))
    at = run(at.button(key="data_import").click())
    assert (dest / "corpus.jsonl").is_file()
    assert at.session_state["data_imported"] == str(dest)
    at = run(at.button(key="data_use_imported").click())
    assert at.session_state["rwb_dataset_typed"] == str(dest)


def test_data_import_failure_shows_its_reason(app, tmp_path):
    at = goto(app, "pages/data.py")
    at = run(at.selectbox(key="data_import_kind").set_value("beir"))
    at = run(at.text_input(key="data_import_source").set_value(str(tmp_path / "missing")))
    at = run(at.text_input(key="data_import_dest").set_value(str(tmp_path / "out")))
    at = run(at.button(key="data_import").click())
    assert any("Import failed" in e.value and "missing" in e.value for e in at.error)


def test_data_import_runs_builds_the_pool_from_the_runs_without_an_index(app, home, tmp_path):
    runs = ROOT / "tests" / "fixtures" / "runs"
    at = goto(app, "pages/data.py")
    at = run(at.selectbox(key="data_import_kind").set_value("runs"))
    dest = tmp_path / "mine"
    at = run(at.text_input(key="data_import_dest").set_value(str(dest)))
    for key, value in (("corpus", runs / "corpus.jsonl"), ("queries", runs / "queries.jsonl"),
                       ("qrels", runs / "qrels.tsv"),
                       ("run", f"dense={runs / 'dense.run'} sparse={runs / 'sparse.run'}")):
        at = run(at.text_input(key=f"data_import_{key}").set_value(str(value)))
    indexes = set((home / "indexes").glob("*")) if (home / "indexes").is_dir() else set()
    at = run(at.button(key="data_import").click())
    assert not at.error, [e.value for e in at.error]
    assert sorted(p.name for p in (dest / "runs").glob("*.run")) == ["dense.run", "sparse.run"]
    after = set((home / "indexes").glob("*")) if (home / "indexes").is_dir() else set()
    assert after == indexes                              # no index built, no model loaded
    assert at.session_state["data_imported"] == str(dest)


def test_data_import_ubi_adds_implicit_judgments_to_a_dataset(app, tmp_path):
    from tests.eval.importers.test_runs import import_fixture
    from tests.eval.importers.test_ubi import logs as make_logs

    dest = import_fixture(tmp_path / "mine").dest
    queries, events = make_logs.__wrapped__(tmp_path)
    at = goto(app, "pages/data.py")
    at = run(at.selectbox(key="data_import_kind").set_value("ubi"))
    field = at.text_input(key="data_import_dest_existing")           # a dataset to add to, not new
    assert field.label == "Dataset folder"
    at = run(field.set_value(str(dest)))
    at = run(at.text_input(key="data_import_queries").set_value(str(queries)))
    at = run(at.text_input(key="data_import_events").set_value(str(events)))
    at = run(at.button(key="data_import").click())
    assert not at.error, [e.value for e in at.error]
    assert (dest / "qrels" / "implicit.tsv").is_file()
