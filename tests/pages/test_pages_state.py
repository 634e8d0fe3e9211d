"""Issue 42 item 7: state kept — Evaluate's and Sweep's choices in the URL (a reload or a
shared link opens the same view, the last sweep of those settings included), Tune's Grade mode
and toggles in its link, a learned model kept in "Start from", a tuned configuration named apart
in Past experiments.

On tiny, the sidebar's baseline is vector; Tune opens q1 under rrf."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.pages.test_app import ROOT, frame_with, goto, run


def reload(link: dict, page: str | None = None) -> AppTest:
    """A new session opened on ``link`` (a reload, or the link pasted in another browser): the
    first run opens Tune, then ``page`` with the link (AppTest switches pages after a run)."""
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update(link)
    fresh.run()
    assert not fresh.exception
    if page is not None:
        fresh.query_params.clear()
        fresh.query_params.update(link)
        fresh = goto(fresh, page)
    return fresh


def test_an_evaluate_view_is_in_its_url_and_a_reload_opens_it(app):
    at = goto(app, "pages/evaluate.py")
    at = run(at.multiselect(key="eval_pipelines").set_value(["rrf", "weighted"]))
    at = run(at.multiselect(key="eval_cutoffs").set_value([3, 5]))
    at = run(at.segmented_control(key="eval_gain").set_value("exponential"))
    at = run(at.selectbox(key="eval_correction").set_value("bonferroni"))
    at = run(at.selectbox(key="eval_candidate").set_value("weighted"))
    at = run(at.selectbox(key="eval_query").set_value("q3"))
    link = dict(at.query_params)
    assert link["pipelines"] == ["rrf", "weighted"] and link["k"] == ["3", "5"]
    assert (link["gain"], link["correction"], link["candidate"], link["q"]) == ("exponential", "bonferroni",
                                                                              "weighted", "q3")
    assert link["baseline"] == "vector" and link["dataset"].endswith("tiny")
    fresh = reload(link, "pages/evaluate.py")
    assert fresh.multiselect(key="eval_pipelines").value == ["rrf", "weighted"]
    assert fresh.multiselect(key="eval_cutoffs").value == [3, 5]
    assert fresh.segmented_control(key="eval_gain").value == "exponential"
    assert fresh.selectbox(key="eval_correction").value == "bonferroni"
    assert fresh.selectbox(key="eval_candidate").value == "weighted"
    assert fresh.selectbox(key="eval_query").value == "q3"
    assert frame_with(fresh, "metric", "weighted") is not None


def test_a_bad_evaluate_link_falls_back_to_the_defaults(app):
    fresh = reload({"pipelines": ["nope", "rrf"], "k": ["x", "5"], "gain": "cubic", "candidate": "nope",
                    "q": "q99"}, "pages/evaluate.py")
    assert fresh.multiselect(key="eval_pipelines").value == ["rrf"]
    assert fresh.segmented_control(key="eval_gain").value == "linear"
    assert fresh.selectbox(key="eval_candidate").value == "rrf"


def test_a_sweep_is_in_its_url_and_a_reload_shows_its_last_result(app):
    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("rrf"))
    at = run(at.toggle(key="sweep_rrfk_on").set_value(False))
    at = run(at.selectbox(key="sweep_x").set_value("rrf.rrf_k"))
    at = run(at.selectbox(key="sweep_y").set_value(""))                        # rrf_k alone
    at = run(at.number_input(key="sweep_x_lo_rrf.rrf_k").set_value(1.0))
    at = run(at.number_input(key="sweep_x_hi_rrf.rrf_k").set_value(101.0))
    at = run(at.number_input(key="sweep_x_steps").set_value(5))
    at = run(at.button(key="sweep_run").click())
    ran = frame_with(at, "rrf.rrf_k", "ndcg@5")
    assert sorted(ran["rrf.rrf_k"]) == [1.0, 26.0, 51.0, 76.0, 101.0]
    link = dict(at.query_params)
    assert (link["pipeline"], link["x"], link["y"], link["x_lo"], link["x_hi"], link["x_steps"]) == (
        "rrf", "rrf.rrf_k", "", "1", "101", "5")
    assert link["curve"] == "0"
    fresh = reload(link, "pages/sweep.py")
    assert fresh.number_input(key="sweep_x_steps").value == 5
    assert fresh.number_input(key="sweep_x_hi_rrf.rrf_k").value == 101.0
    shown = frame_with(fresh, "rrf.rrf_k", "ndcg@5")                 # the kept result, not "run the sweep"
    assert shown is not None and shown.sort_values("rrf.rrf_k").equals(ran.sort_values("rrf.rrf_k"))
    assert any("kept from before" in c.value for c in fresh.caption)
    changed = run(fresh.number_input(key="sweep_x_steps").set_value(3))        # other settings: nothing kept
    assert changed.session_state["sweep_result"] is not None                    # this session's result stays
    other = reload({**link, "x_steps": "3"}, "pages/sweep.py")
    assert frame_with(other, "rrf.rrf_k", "ndcg@5") is None
    assert any("run the sweep" in i.value for i in other.info)


def test_tune_grade_mode_and_toggles_survive_a_reload(app):
    at = run(app.segmented_control(key="tune_rows").set_value("Grade"))
    at = run(at.toggle(key="tune_query_list").set_value(True))
    at = run(at.toggle(key="tune_fisher").set_value(True))
    link = dict(at.query_params)
    assert (link["rows"], link["list"], link["fisher"]) == ("Grade", "1", "1") and "queue" not in link
    fresh = reload(link)
    assert fresh.segmented_control(key="tune_rows").value == "Grade"
    assert fresh.toggle(key="tune_query_list").value and fresh.toggle(key="tune_fisher").value
    assert not fresh.toggle(key="tune_queue").value


def test_a_learned_pipeline_stays_in_start_from_after_another_is_picked(app, home):
    from retrieval.pipeline import PIPELINES, to_toml

    learned = home / "learned" / "0123456789abcdef.toml"          # as the Learn mode keeps one
    learned.parent.mkdir(exist_ok=True)
    learned.write_text(to_toml(PIPELINES["weighted"]), "utf-8")
    label = str(learned.resolve())
    fresh = reload({"from": label})
    assert fresh.selectbox(key="tune_source_pick").value == label
    at = run(fresh.selectbox(key="tune_source_pick").set_value("rrf"))
    assert at.session_state["tune_state"].source == "rrf"
    assert "▸ 0123456789abcdef.toml" in at.selectbox(key="tune_source_pick").options     # its file's name
    at = run(at.selectbox(key="tune_source_pick").set_value(label))          # and it can be picked again
    assert at.session_state["tune_state"].source == label


def test_past_experiments_name_a_tuned_configuration_apart_from_its_pipeline(app):
    log = lambda at: next(b for b in at.button if b.label == "Log experiment")    # noqa: E731
    at = run(log(app).click())                                                    # plain rrf
    at = run(at.slider(key="tune_k_rrf.rrf_k").set_value(10.0))
    at = run(log(at).click())                                                     # rrf with rrf_k 10
    at = goto(at, "pages/reports.py")
    table = frame_with(at, "#", "name", "source")
    assert sorted(table["name"]) == ["rrf", "rrf · tuned: rrf_k=10"]


def test_an_import_goes_under_rwb_home_by_default_and_is_listed_at_once(app_through_main, home):
    """Issue 42 item 4: the default import folder is $RWB_HOME/imported/<format>, not inside the
    checkout, and the imported set is in the sidebar's Dataset list as soon as it is imported."""
    from tests.pages.test_app import TINY

    at = goto(app_through_main, "pages/data.py")
    at = run(at.selectbox(key="data_import_kind").set_value("beir"))
    dest = home / "imported" / "beir"
    assert at.text_input(key="data_import_dest").value == str(dest)
    at = run(at.text_input(key="data_import_source").set_value(str(TINY)))
    at = run(at.button(key="data_import").click())
    assert (dest / "corpus.jsonl").is_file()
    assert str(dest) in at.selectbox(key="rwb_dataset").options or f"…{str(dest)[-29:]}" in at.selectbox(
        key="rwb_dataset").options                                         # listed without another click
    at = run(at.button(key="data_use_imported").click())
    assert at.selectbox(key="rwb_dataset").value == str(dest)               # picked there, not typed


def test_an_evaluate_view_of_tunes_current_knobs_is_shared_with_those_knobs(app):
    """A link to an Evaluate view that shows "Tune · current knobs" carries the knobs: another
    session (with no Tune state of its own) opens the same configuration. On tiny, rrf with the
    BM25 weight at 0 ranks as vector alone, so its figures are the baseline's."""
    at = run(app.slider(key="tune_k_rrf.w_sparse").set_value(0.0))
    at = goto(at, "pages/evaluate.py")
    at = run(at.multiselect(key="eval_pipelines").set_value(["tune:current", "rrf"]))
    link = dict(at.query_params)
    assert link["from"] == "rrf" and link["p"] == "rrf.w_sparse=0.0", link
    fresh = reload(link, "pages/evaluate.py")
    assert fresh.multiselect(key="eval_pipelines").value == ["tune:current", "rrf"]
    table = frame_with(fresh, "metric", "tune (current)")
    assert list(table["tune (current)"]) == list(table["vector (baseline)"])
    assert list(table["tune (current)"]) != list(table["rrf"])
