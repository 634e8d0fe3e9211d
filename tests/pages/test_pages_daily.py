"""AppTest for issue 33's daily-use fixes on the pages: snapshots on Tune (one click) and their
comparison (mean metrics, rankings with text), the notes form cleared after saving, integer knobs
drawn as integers, and no command-line flag as a form label."""

from __future__ import annotations

import re

import pytest

from eval.stores.snapshots import SnapshotStore
from retrieval.dataset import load_dataset
from tests.pages.test_app import TINY, frame_with, goto, run, start
from tests.pages.test_evaluate_query_table import click_row


def test_tune_freezes_in_one_click_and_compares_means_and_rankings_with_text(app, home):
    at = run(app.button(key="tune_freeze").click())                   # rrf, the default
    at = run(at.slider(key="tune_k_rrf.w_sparse").set_value(0.0))    # dense only
    at = run(at.button(key="tune_freeze").click())
    names = SnapshotStore(load_dataset(TINY), home).names()
    assert len(names) == 2 and all(n.startswith("rrf-") for n in names)
    at = run(at.toggle(key="tune_snapshots").set_value(True))
    at = run(at.selectbox(key="tune_snap_a").set_value(names[0]))
    at = run(at.selectbox(key="tune_snap_b").set_value(names[1]))
    a, b = (SnapshotStore(load_dataset(TINY), home).load(n) for n in names)
    means = frame_with(at, "metric", "A", "B", "delta")
    assert list(means["metric"]) == ["nDCG@5", "Recall@5", "MRR@5", "P@5", "Hit@5"]
    assert list(means["A"]) == pytest.approx([a["metrics"][m] for m in a["metrics"]])
    assert list(means["delta"]) == pytest.approx(list(means["B"] - means["A"]), abs=1e-6)
    per_query = frame_with(at, "query", "A", "B", "delta", without="metric")
    assert sorted(per_query["query"]) == ["q1", "q2", "q3", "q4"]


def test_snapshot_rankings_side_by_side_carry_the_documents_text():
    from eval.experiments.views import snapshot_rankings

    a = {"queries": {"q1": {"ranking": ["d03", "d05"]}}}
    b = {"queries": {"q1": {"ranking": ["d05"]}}}
    rows = snapshot_rankings(a, b, "q1", load_dataset(TINY).documents, width=20)
    assert rows == [
        {"rank": 1, "A": "d03", "A text": "ERR_CONN_REFUSED fro", "B": "d05",
         "B text": "The connection refus"},
        {"rank": 2, "A": "d05", "A text": "The connection refus", "B": "", "B text": ""}]


def test_reports_snapshot_form_clears_after_saving(app, home):
    at = goto(app, "pages/reports.py")
    at.selectbox(key="snap_config").set_value("vector")
    at.text_input(key="snap_name").set_value("first")
    at.text_input(key="snap_notes").set_value("before the change")
    at = run(at.button(key="snap_freeze").click())
    assert at.text_input(key="snap_notes").value == ""
    assert at.text_input(key="snap_name").value == ""
    at.text_input(key="snap_name").set_value("second")
    at = run(at.button(key="snap_freeze").click())
    store = SnapshotStore(load_dataset(TINY), home)
    assert (store.load("first")["notes"], store.load("second")["notes"]) == ("before the change", "")


def test_integer_valued_knobs_are_drawn_without_decimals(app):
    slider = app.slider(key="tune_k_rrf.rrf_k")
    assert slider.value == 60 and slider.proto.format == "%d"            # "60", not "60.00"
    assert app.slider(key="tune_k_rrf.w_sparse").proto.format != "%d"   # a weight keeps its decimals


def test_no_command_line_flag_is_a_form_label(app):
    at = goto(app, "pages/data.py")
    at = run(at.selectbox(key="data_import_kind").set_value("beir"))
    labels = [w.label for w in (*at.text_input, *at.checkbox, *at.selectbox, *at.number_input)]
    assert "Split" in labels
    assert not [label for label in labels if label.startswith("-")]


def test_a_learned_linear_model_on_tune_reads_as_features_labelled_in_sample(app):
    at = goto(app, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Learn"))
    at = run(at.segmented_control(key="learn_model").set_value("linear"))
    at = run(at.number_input(key="learn_folds").set_value(2))
    at = run(at.number_input(key="learn_inner").set_value(2))
    at = run(at.toggle(key="learn_guard").set_value(False))
    at = run(at.button(key="learn_run").click())
    at = run(at.button(key="learn_apply").click())
    assert at.title[0].value == "Tune"
    config = at.session_state["tune_state"].config
    weights = {w.name: w.weight for w in config.params.weights}
    assert not [s for s in at.slider if ".weights." in s.key]          # no 44 sliders called "weight"
    table = next(e for e in at.dataframe if "feature" in e.value.columns)
    shown = table.value
    assert list(shown["feature"]) == sorted(weights, key=lambda n: (-abs(weights[n]), n))
    assert list(shown["weight"]) == pytest.approx([weights[n] for n in shown["feature"]])
    cards = " ".join(b.proto.body for b in at.get("html") if "rwb-card" in b.proto.body)
    assert cards.count("in-sample</span>") >= 6                        # every card, judged@5 too
    assert "in-sample: " in cards                                       # and the badge says why
    start = at.selectbox(key="tune_source_pick")
    label = start.format_func(start.value)                              # not "file · c226fda5….toml"
    assert label.startswith("▸ learned linear") and ".toml" not in label   # what it is, within the box
    assert any(all(w in c.value for w in ("learned linear", "tiny", "held", "nDCG@5"))   # its whole name under it
               for c in at.caption)



def test_a_sweep_winner_carries_its_held_out_gain_and_p_and_an_edge_flag(app):
    from eval.experiments.views import on_edge

    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("rrf"))
    at = run(at.number_input(key="sweep_x_steps").set_value(3))
    at = run(at.number_input(key="sweep_y_steps").set_value(3))
    at = run(at.button(key="sweep_run").click())
    card = next(m for m in at.metric if m.label == "held-out (CV)")
    result = at.session_state["sweep_result"]
    from eval.experiments.views import sweep_held_out
    from eval.metrics.measure import judge
    from eval.statistics.significance import fmt_p
    from pages._state import get_pool
    from tests.pages.test_app import _stamp

    pool = get_pool(str(TINY), _stamp(), "minilm")
    held, gain, p = sweep_held_out(pool, judge(pool, load_dataset(TINY).qrels), result)
    assert (card.value, card.proto.delta, card.proto.delta_description) == (
        f"{held:.3f}", f"{gain:+.3f}", f"p {fmt_p(p)}")
    edges = on_edge(result.best_params, {s.name: (s.lo, s.hi) for s in result.space.specs})
    shown = [w.value for w in at.warning if w.value.startswith("Winner on the edge")]
    assert len(shown) == len(edges)
    at = run(next(b for b in at.button if b.label == "Apply winner to Tune").click())
    assert any(t.value.startswith("Winner (held-out gain ") and " applied: " in t.value for t in at.toast)


def test_the_edge_of_a_searched_range_is_named():
    from eval.experiments.views import on_edge

    ranges = {"rrf.rrf_k": (1.0, 200.0), "rrf.w_dense": (0.0, 2.0)}
    assert on_edge({"rrf.rrf_k": 1.0, "rrf.w_dense": 0.5}, ranges) == [
        "rrf.rrf_k = 1 is at the low end of 1…200"]
    assert on_edge({"rrf.rrf_k": 200.0, "rrf.w_dense": 2.0}, ranges) == [
        "rrf.rrf_k = 200 is at the high end of 1…200", "rrf.w_dense = 2 is at the high end of 0…2"]
    assert on_edge({"rrf.rrf_k": 60.0}, ranges) == []


def test_evaluate_drill_down_opens_its_query_on_tune(app):
    at = goto(app, "pages/evaluate.py")
    at = run(at.selectbox(key="eval_query").set_value("q4"))
    at = run(at.button(key="eval_open_tune").click())
    assert at.title[0].value == "Tune"
    assert at.selectbox(key="tune_query").value == 3                 # q4, the fourth query


def test_the_report_chart_menu_names_the_metric_it_plots(tiny, rwb_home):
    """report.html's per-intent chart plots the primary metric first; its menu read the first
    metric of the list (ndcg@1) while the bars were ndcg@5."""
    from eval.experiments.experiment import ExperimentOptions, run_experiment
    from eval.reports.report import _intent_figure
    from eval.stores.pool import load_pool

    options = ExperimentOptions(metrics=("ndcg",), cutoffs=(1, 5), permutations=100, bootstrap=100)
    evaluation = run_experiment(load_pool(tiny), tiny, ["rrf"], "vector", options).evaluation
    fig = _intent_figure(evaluation, "ndcg@5")
    menu = fig.layout.updatemenus[0]
    assert fig.layout.yaxis.title.text == "ndcg@5"
    assert menu.buttons[menu.active].label == "ndcg@5"


def test_reports_opens_the_report_beside_its_downloads(app):
    at = goto(app, "pages/reports.py")
    at = run(next(b for b in at.button if b.label == "Generate").click())
    at = run(at.toggle(key="reports_open").set_value(True))
    frames = at.get("iframe")
    assert len(frames) == 1


def test_apply_says_what_changed_in_words():
    from eval.experiments.views import config_changes
    from retrieval.pipeline import PIPELINES, with_params

    rrf = PIPELINES["rrf"]
    moved = with_params(rrf, {"rrf.rrf_k": 10.0, "rrf.w_sparse": 0.5})
    assert config_changes(rrf, moved) == "rrf.rrf_k 60 → 10; rrf.w_sparse 1 → 0.5"
    assert config_changes(rrf, rrf) == "no knob changed"
    assert config_changes(rrf, PIPELINES["vector"]) == "fusion rrf → vector"


def test_tune_export_opens_in_one_click_and_a_choice_inside_keeps_it_open(app):
    """Issue 33 item 9: the Export popover keeps its open state in the session — a choice inside
    it reruns the page and it stays open, showing that engine's configuration at once."""
    from eval.export import export_config

    def export_popover(at):
        return next(b for b in at.get("popover") if b.proto.popover.label == "Export…")

    at = app
    assert not export_popover(at).proto.popover.open
    assert not [s for s in at.selectbox if s.key == "tune_export_engine"]   # built when opened
    at.session_state["tune_export_open"] = True                             # one click opens it
    at = run(at)
    config = at.session_state["tune_state"].config
    assert export_popover(at).proto.popover.open
    assert [c.value.strip() for c in at.code] == [export_config(config, "lancedb").strip()]
    at = run(at.selectbox(key="tune_export_engine").set_value("qdrant"))   # a choice inside it
    assert at.session_state["tune_export_open"] and export_popover(at).proto.popover.open
    assert [c.value.strip() for c in at.code] == [export_config(config, "qdrant").strip()]
    at.session_state["tune_export_open"] = False                            # closed, reopened:
    at = run(at)
    assert not at.code and not export_popover(at).proto.popover.open
    at.session_state["tune_export_open"] = True
    at = run(at)
    assert at.selectbox(key="tune_export_engine").value == "qdrant"         # the engine kept


# ---- issue 40: a figure chosen on these queries says so, wherever it appears -------------------

def test_an_applied_sweep_winner_reads_as_in_sample_on_tune_and_evaluate_with_its_held_out_gain_first(app):
    """On main the winner landed on Tune with cards "▲ … · p …" and no word that the sweep picked
    it on these very queries, and Evaluate's "◎ Tune · current knobs" column was plain."""
    from eval.experiments.views import sweep_held_out
    from eval.metrics.measure import judge
    from eval.statistics.significance import fmt_p
    from pages._state import get_pool
    from tests.pages.test_app import _stamp

    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("rrf"))
    at = run(at.number_input(key="sweep_x_steps").set_value(3))
    at = run(at.number_input(key="sweep_y_steps").set_value(3))
    at = run(at.button(key="sweep_run").click())
    result = at.session_state["sweep_result"]
    pool = get_pool(str(TINY), _stamp(), "minilm")
    _, gain, p = sweep_held_out(pool, judge(pool, load_dataset(TINY).qrels), result)
    at = run(next(b for b in at.button if b.label == "Apply winner to Tune").click())
    assert at.title[0].value == "Tune"
    html = " ".join(b.proto.body for b in at.get("html") if "rwb-card" in b.proto.body)
    assert html.count("in-sample</span>") >= 5                          # every card
    headline = f"held-out Δ {gain:+.3f} vs rrf · p {fmt_p(p)}"
    assert f"the figure to trust: {headline}" in html                  # the held-out gain first
    assert html.index("the figure to trust") < html.index("in-sample: chosen on these queries")
    at = goto(at, "pages/tune.py")
    knob = next(s for s in at.slider if s.key.startswith("tune_k_"))  # the recommendation's first knob
    at = run(knob.set_value(knob.max if knob.value != knob.max else knob.min))  # moved by hand
    html = " ".join(b.proto.body for b in at.get("html") if "rwb-card" in b.proto.body)
    assert "the figure to trust" not in html and "then moved by hand" in html
    at = goto(at, "pages/evaluate.py")
    at = run(at.multiselect(key="eval_pipelines").set_value(["tune:current", "rrf"]))
    frame = next(e.value for e in at.dataframe if "metric" in e.value.columns)
    assert "tune (current) · in-sample" in frame.columns and "rrf" in frame.columns
    warnings = [re.sub(r"\\(.)", r"\1", w.value) for w in at.warning]
    assert any("tune (current) · in-sample" in w and "in-sample: chosen on these queries by a sweep" in w
               and "then moved by hand" in w for w in warnings)


def test_the_curve_offers_only_the_setting_it_scored(app):
    """On main "Apply the winner with the curve's rrf_k" put the curve's k on the grid winner's
    weights, a setting no figure was computed for."""
    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("rrf"))
    at = run(at.number_input(key="sweep_x_steps").set_value(3))
    at = run(at.number_input(key="sweep_y_steps").set_value(3))
    at = run(at.button(key="sweep_run").click())
    curve = at.session_state["sweep_rrfk"]
    button = at.button(key="sweep_apply_k")
    assert button.label.startswith("Apply the curve's best")
    at = run(button.click())
    assert at.session_state["tune_state"].config == curve.best_config


def test_tune_says_whether_its_verdict_survives_the_unjudged_documents(app):
    """On main the cards gave ▲/▼ and a p with no word on the documents nobody judged."""
    from eval.metrics.measure import judge
    from eval.statistics.unjudged import verdict_bounds
    from pages._state import get_pool
    from retrieval.pipeline import get_pipeline, run_pipeline
    from tests.pages.test_app import _stamp

    html = " ".join(b.proto.body for b in app.get("html") if "rwb-card" in b.proto.body)
    pool = get_pool(str(TINY), _stamp(), "minilm")
    qrels = load_dataset(TINY).qrels
    base = app.session_state["tune_state"]  # Tune starts at rrf against the sidebar's baseline
    baseline = run_pipeline(pool, get_pipeline("vector")).ranking
    current = run_pipeline(pool, base.config).ranking
    bounds = verdict_bounds(pool, qrels, baseline, current, "ndcg@5", judge(pool, qrels))
    assert bounds.text().replace("…", "&hellip;") in html or bounds.text() in html


def test_tune_freezes_under_a_name_with_notes_and_compares_it_with_the_current_knobs(app, home):
    """Issue 42 item 5: Freeze takes a name and notes; the current knobs compare with a snapshot
    without a second freeze; the knobs that differ are named; per-query deltas largest first."""
    at = run(app.text_input(key="tune_freeze_name").set_value("before-dense-only"))
    at = run(at.text_input(key="tune_freeze_notes").set_value("rrf as shipped"))
    at = run(at.button(key="tune_freeze").click())
    store = SnapshotStore(load_dataset(TINY), home)
    assert store.names() == ["before-dense-only"]
    assert store.load("before-dense-only")["notes"] == "rrf as shipped"
    assert at.text_input(key="tune_freeze_name").value == ""           # the form starts empty again
    at = run(at.slider(key="tune_k_rrf.w_sparse").set_value(0.0))    # dense only, not frozen
    at = run(at.toggle(key="tune_snapshots").set_value(True))
    assert at.selectbox(key="tune_snap_a").value == "before-dense-only"
    assert at.selectbox(key="tune_snap_b").value == "tune:current"     # the knobs on Tune now
    assert store.names() == ["before-dense-only"]                      # nothing frozen twice
    changed = [w.value for w in at.warning if "differ in their inputs" in w.value]
    assert changed and "rrf.w_sparse 1 → 0" in changed[0].replace("\\", "")
    per_query = frame_with(at, "query", "A", "B", "delta", without="metric")
    deltas = list(per_query["delta"])
    assert deltas == pytest.approx(list(per_query["B"] - per_query["A"]), abs=1e-6)
    assert [abs(d) for d in deltas] == sorted((abs(d) for d in deltas), reverse=True)
    assert list(per_query["query"]) == ["q4", "q1", "q2", "q3"]      # q4 moved (1 → 0.631); ties by id
    at = click_row(at, "tune_snap_table", 0)                          # q4: both rankings, with grades
    rankings = frame_with(at, "rank", "A grade", "B grade")
    for side in "AB":                                                 # q4's one judgment: d06 = 3
        assert {doc: grade for doc, grade in zip(rankings[side], rankings[f"{side} grade"]) if doc} == {
            doc: "3" if doc == "d06" else "—" for doc in rankings[side] if doc}
    assert (rankings["A"][0], rankings["A grade"][0]) == ("d06", "3")   # A's nDCG@5 1.0: d06 first


def test_snapshot_rankings_carry_each_sides_grades():
    """Issue 42 item 5: grades beside both rankings — each snapshot's own judgments where it
    kept them, else today's; "—" for an unjudged document, never a raw None."""
    from eval.experiments.views import snapshot_rankings

    a = {"queries": {"q1": {"ranking": ["d03", "d05"]}}, "qrels": {"q1": {"d03": 3}}}
    b = {"queries": {"q1": {"ranking": ["d05"]}}}                      # frozen before qrels were kept
    rows = snapshot_rankings(a, b, "q1", load_dataset(TINY).documents, width=10, qrels={"q1": {"d05": 0}})
    assert [(r["A"], r["A grade"], r["B"], r["B grade"]) for r in rows] == [
        ("d03", "3", "d05", "0"), ("d05", "—", "", "")]
