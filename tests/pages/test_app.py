"""AppTest: every page runs; Tune's knobs change the ranking and the metrics; grading, snapshots,
profiles and stores round-trip; user strings never reach Markdown unescaped."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
PAGES = ["pages/tune.py", "pages/evaluate.py", "pages/sweep.py", "pages/profiles.py", "pages/data.py",
         "pages/reports.py"]
TITLES = {"pages/tune.py": "Tune", "pages/evaluate.py": "Evaluate", "pages/sweep.py": "Sweep",
          "pages/profiles.py": "Profiles", "pages/data.py": "Data", "pages/reports.py": "Reports"}


def start(home, monkeypatch, dataset: Path = TINY) -> AppTest:
    monkeypatch.setenv("RWB_DATASET", str(dataset))
    monkeypatch.setenv("RWB_HOME", str(home))
    monkeypatch.setenv("LANCEDB_LOG", "error")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st.cache_data.clear()
    st.cache_resource.clear()
    for store in ("judgments", "profiles", "tries", "snapshots"):
        for path in (home / store).glob("*") if (home / store).is_dir() else ():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (home / "experiments.json").unlink(missing_ok=True)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(page).run()
    assert not at.exception
    return at


def run(element) -> AppTest:
    at = element.run()
    assert not at.exception
    return at


def frame_with(at: AppTest, *columns: str, without: str | None = None):
    """The first dataframe shown with these columns (plain dataframes carry no key in AppTest)."""
    for element in at.dataframe:
        value = element.value
        if all(c in value.columns for c in columns) and (without is None or without not in value.columns):
            return value
    return None


def html_bodies(at: AppTest) -> list[str]:
    return [element.proto.body for element in at.get("html")]


def shown_docs(at: AppTest, baseline: bool = False) -> list[str]:
    """Document ids of Tune's current ranking (it has the Δ column) or of the baseline's."""
    for body in html_bodies(at):
        if 'class="rwb-t"' in body and "<thead>" in body and (("Δ</th>" in body) != baseline):
            return re.findall(r"<td><code>([^<]*)</code></td>", body)
    return []


def metric_values(at: AppTest) -> dict[str, str]:
    """Metric cards: label → value (first card row on the page)."""
    for body in html_bodies(at):
        if "rwb-card" in body:
            return dict(re.findall(r'<div class="l">([^<]*)</div><div class="v">([^<]*)</div>', body))
    return {}


def markdown_texts(at: AppTest) -> list[str]:
    return [e.value for e in (*at.markdown, *at.caption, *at.warning, *at.error, *at.info, *at.success)]


def texts(at: AppTest) -> list[str]:
    """Markdown texts, plus the HTML elements' text with the tags removed."""
    return markdown_texts(at) + [re.sub(r"<[^>]+>", "", body) for body in html_bodies(at)]


@pytest.mark.parametrize("page", PAGES)
def test_each_page_runs(app, page):
    at = goto(app, page)
    assert at.title[0].value == TITLES[page]


def test_tune_shows_ranking_baseline_and_metrics(app):
    at = app
    assert list(metric_values(at)) == ["nDCG@5", "Recall@5", "MRR@5", "P@5", "Hit@5", "judged@5"]
    assert shown_docs(at)[0] == "d03"                           # q1 ERR_CONN_REFUSED: the error-fix memory
    assert shown_docs(at, baseline=True)
    assert any("route · hybrid" in t for t in texts(at))
    footer = next(t for t in texts(at) if t.startswith("Server:"))
    assert "rerun took" in footer and "engine" in footer       # the whole rerun, not only the engine
    assert not at.get("plotly_chart") and not at.dataframe      # light elements only on the live path


def test_tune_full_text_reachable_in_both_rankings(app):
    at = app
    current, baseline = [b for b in html_bodies(at) if "<thead>" in b][:2]
    assert current.count("<details>") == len(shown_docs(at))
    assert baseline.count("<details>") == len(shown_docs(at, baseline=True))


def test_tune_sparse_weight_changes_ranking_and_metrics(app):
    at = run(app.selectbox(key="tune_query").set_value(3))     # q4 "user_id 列改名了吗"
    before_docs, before_metrics = shown_docs(at), metric_values(at)
    assert at.slider(key="tune_k_rrf.w_sparse").value == pytest.approx(1.0)
    at = run(at.slider(key="tune_k_rrf.w_sparse").set_value(0.0))
    after_docs, after_metrics = shown_docs(at), metric_values(at)
    assert before_docs[0] == "d06" and after_docs[0] == "d01"    # the keyword hit loses its lead
    assert after_metrics != before_metrics
    assert any("(tuned)" in t for t in texts(at))


def test_tune_knobs_come_from_the_registry(app):
    from pages._knobs import PANES, pane_of
    from retrieval.pipeline import knobs

    at = run(app.selectbox(key="tune_k_fusion").set_value("adaptive"))
    config = at.session_state["tune_state"].config
    shown = set()
    for pane in PANES:                                   # one pane of knobs at a time
        at = run(at.segmented_control(key="tune_pane").set_value(pane))
        keys = {w.key for w in (*at.slider, *at.number_input, *at.toggle, *at.selectbox)}
        expected = {f"tune_k_{r.path}" for r in knobs(config) if pane_of(r) == pane}
        assert expected <= keys, pane
        shown |= expected
    assert shown == {f"tune_k_{r.path}" for r in knobs(config)}          # every parameter has a widget
    at = run(at.selectbox(key="tune_k_fusion").set_value("weighted"))
    assert at.session_state["tune_state"].config.fusion == "weighted"
    assert "tune_k_adaptive.half_life_days" not in [w.key for w in at.slider]   # adaptive's knobs are gone


def test_tune_fusion_switch_reset_invalid_knob_and_band_counts(app):
    at = run(app.selectbox(key="tune_k_fusion").set_value("adaptive"))
    assert at.slider(key="tune_k_adaptive.profile.w_time")       # time and graph weights appear
    at = run(at.segmented_control(key="tune_pane").set_value("confidence"))
    assert any(t.startswith("Documents per confidence band: high") for t in texts(at))
    at = run(at.slider(key="tune_k_adaptive.profile.quality.conf_low").set_value(1.0))   # above conf_high: refused
    assert any("not applied" in w.value for w in at.warning)
    assert at.slider(key="tune_k_adaptive.profile.quality.conf_low").value == pytest.approx(0.6)
    at = run(at.selectbox(key="tune_query").set_value(1))         # an unrelated action clears the warning
    assert not any("not applied" in w.value for w in at.warning)
    at = run(at.selectbox(key="tune_source_pick").set_value("profile:debug"))
    at = run(at.segmented_control(key="tune_pane").set_value("fusion"))
    assert at.slider(key="tune_k_adaptive.profile.w_sparse").value == pytest.approx(0.9)


def test_tune_router_edits_one_profile(app):
    at = run(app.selectbox(key="tune_source_pick").set_value("seed-adaptive"))
    assert at.selectbox(key="tune_edit_profile").value in ("debug", "concept", "timeline", "brainstorm")
    at = run(at.selectbox(key="tune_edit_profile").set_value("timeline"))
    assert at.slider(key="tune_k_adaptive.profiles.timeline.w_time")
    assert "tune_k_adaptive.profiles.debug.w_time" not in [w.key for w in at.slider]


def test_tune_save_profile_asks_before_overwrite_and_log_experiment(app, home):
    at = run(app.slider(key="tune_k_rrf.rrf_k").set_value(10.0))
    at = run(at.text_input(key="tune_profile_name").set_value("rrf-k10"))
    at = run(at.button(key="tune_save_profile").click())
    assert (home / "profiles" / "rrf-k10.toml").is_file()
    assert at.selectbox(key="tune_source_pick").value == "saved:rrf-k10"
    at = run(at.slider(key="tune_k_rrf.rrf_k").set_value(20.0))
    at = run(at.button(key="tune_save_profile").click())
    assert any("exists" in w.value for w in at.warning)                    # asked, not overwritten
    assert "rrf_k = 10" in (home / "profiles" / "rrf-k10.toml").read_text()
    at = run(at.button(key="tune_overwrite_yes").click())
    assert "rrf_k = 20" in (home / "profiles" / "rrf-k10.toml").read_text()
    at = run(next(b for b in at.button if b.label == "Log experiment").click())
    goto(at, "pages/reports.py")
    assert any("rrf-k10" in str(v) for v in frame_with(at, "name", "source")["name"])


def test_tune_free_text(app):
    at = run(app.segmented_control(key="tune_mode").set_value("Free text"))
    at = run(at.text_input(key="tune_free_text").set_value("connection refused postgres"))
    assert shown_docs(at)


def test_grade_in_a_ranking_row_changes_metrics(app):
    at = run(app.segmented_control(key="tune_rows").set_value("Grade"))
    before = metric_values(at)
    assert "d05" in shown_docs(at) or at.get("pills")
    at = run(at.pills(key="tune_g_c_q1_d05").set_value(3))        # one click in the current ranking's row
    assert metric_values(at) != before                             # q1 gains a relevant document
    at = run(at.pills(key="tune_g_b_q1_d05").set_value(1))        # and in the baseline's row
    assert at.session_state["tune_g_c_q1_d05"] == 1               # both rows show the grade in effect


def test_grade_unjudged_in_one_pass_and_missed_relevant(app, home):
    at = run(app.segmented_control(key="tune_rows").set_value("Grade"))
    unjudged = [k for k in at.session_state if isinstance(k, str) and k.startswith("tune_ga_")] or \
        [p.key for p in at.get("pills") if p.key.startswith("tune_ga_")]
    assert len(unjudged) >= 2
    for key in unjudged[:2]:
        at.pills(key=key).set_value(1)
    at = run(next(b for b in at.button if b.label == "Save grades").click())
    history = (home / "judgments").glob("*")
    assert any(f.stat().st_size > 0 for f in history)
    at = run(at.segmented_control(key="tune_pane").set_value("ranking"))
    at = run(at.slider(key="tune_k_max_results").set_value(1))    # keep one result: q1's others are missed
    assert any(t.startswith("Judged relevant, not returned · ") for t in texts(at))


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


def test_evaluate_table_and_drilldown(app):
    at = goto(app, "pages/evaluate.py")
    means = at.dataframe[0].value                                   # a row per metric, a column per pipeline
    assert list(means.columns[:2]) == ["metric", "vector (baseline)"]
    assert {"rrf", "seed-adaptive"} <= set(means.columns)
    assert list(means["metric"]) == [f"{m}@{k}" for m in ("ndcg", "recall", "mrr", "precision", "hit_rate")
                                     for k in (1, 3, 5, 10, 20)] + ["map"]
    stats = frame_with(at, "pipeline", "95% CI", "p (raw)", "p (holm)", "W/T/L")
    assert stats["pipeline"].iloc[0] == "vector (baseline)" and len(stats) == len(means.columns) - 1
    caption = " ".join(texts(at)).replace("\\", "")                   # Markdown escapes removed
    assert "linear gain rel / log2(rank + 1)" in caption and "scores descending, then document id ascending" in caption
    assert "10,000 resamples" in caption and "correction per metric across the" in caption
    assert frame_with(at, "pipeline", "debug (2)", "timeline (1)") is not None          # per-intent table
    at = run(at.selectbox(key="eval_correction").set_value("bonferroni"))
    assert frame_with(at, "pipeline", "p (raw)", "p (bonferroni)") is not None
    at = run(at.segmented_control(key="eval_gain").set_value("exponential"))
    at = run(at.multiselect(key="eval_cutoffs").set_value([5]))
    assert list(at.dataframe[0].value["metric"]) == ["ndcg_burges@5", "recall@5", "mrr@5", "precision@5",
                                                     "hit_rate@5", "map"]
    at = run(at.selectbox(key="eval_query").set_value("q3"))
    assert any("Candidate" in m.value for m in at.markdown)


def test_sweep_runs_applies_winner_and_card_shows_winner(app):
    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("rrf"))
    at = run(at.number_input(key="sweep_x_steps").set_value(3))
    at = run(at.number_input(key="sweep_y_steps").set_value(3))
    assert at.button(key="sweep_run").label == "Run sweep"         # the label never changes with the inputs
    at = run(at.button(key="sweep_run").click())
    best = next(m for m in at.metric if m.label.startswith("best"))
    card = next(m for m in at.metric if m.label.startswith("winner vs baseline"))
    assert card.value == best.value                                # the winner's score, not the baseline's
    assert "p 0.000" not in str(card.proto)
    curve_k = at.session_state["sweep_rrfk"].best_params["rrf.rrf_k"]
    at = run(at.button(key="sweep_apply_k").click())                # the rrf_k curve's best is not ignored
    assert at.session_state["tune_state"].config.params.rrf_k == curve_k
    # … and only with the values the curve scored it at (issue 40: never the grid winner's weights)
    assert at.session_state["tune_state"].config == at.session_state["sweep_rrfk"].best_config
    assert at.title[0].value == "Tune"                              # Apply goes to Tune and says what changed
    assert any(t.value.startswith(f"rrf_k = {curve_k:g} (the curve's best) applied: ") for t in at.toast)
    assert at.session_state["tune_state"].config.fusion == "rrf"


def test_profiles_edit_diff_and_invalid_toml(app):
    at = goto(app, "pages/profiles.py")
    area = at.text_area(key="profiles_toml_profile:debug")
    at = run(area.set_value(area.value.replace('profile = "debug"', 'profile = {name = "debug", w_sparse = 0.5}', 1)))
    diff = frame_with(at, "parameter", "default", "this")
    assert list(diff["parameter"]) == ["adaptive.profile.w_sparse"]
    params = frame_with(at, "parameter", "value")
    assert not any(p.startswith("rrf.") for p in params["parameter"])  # only what this profile uses
    at = run(at.text_area(key="profiles_toml_profile:debug").set_value("fusion = 'nope'"))
    assert at.error


def test_profiles_save_diff_against_origin_rename_delete(app, home):
    at = goto(app, "pages/profiles.py")
    area = at.text_area(key="profiles_toml_profile:debug")
    at = run(area.set_value(area.value.replace('profile = "debug"', 'profile = {name = "debug", w_sparse = 0.5}', 1)))
    at = run(at.text_input(key="profiles_name").set_value("mine"))
    at = run(at.button(key="profiles_save").click())
    assert (home / "profiles" / "mine.toml").is_file()
    assert at.selectbox(key="profiles_pick").value == "saved:mine"
    diff = frame_with(at, "parameter", "default", "this")            # against debug, where it came from
    assert list(diff["parameter"]) == ["adaptive.profile.w_sparse"]
    at = run(at.text_input(key="profiles_name").set_value("mine"))
    at = run(at.button(key="profiles_save").click())
    assert at.button(key="profiles_overwrite_yes")                    # asks before overwriting
    at = run(at.text_input(key="profiles_rename_to").set_value("yours"))
    at = run(at.button(key="profiles_rename").click())
    assert (home / "profiles" / "yours.toml").is_file() and not (home / "profiles" / "mine.toml").exists()
    at = run(at.checkbox(key="profiles_delete_confirm").check())
    at = run(at.button(key="profiles_delete").click())
    assert not (home / "profiles" / "yours.toml").exists()


def test_reports_generate(app):
    at = goto(app, "pages/reports.py")
    at = run(next(b for b in at.button if b.label == "Generate").click())
    report = at.session_state["reports_file"]
    assert report["html"].endswith("report.html") and Path(report["html"]).is_file()
    text = Path(report["md"]).read_text("utf-8")
    assert "## Metrics" in text and "## Method" in text and "## Statistics against vector" in text
    assert "| metric | pipeline | mean | 95% CI |" in text and "p (holm)" in text


def test_reports_compare_two_snapshots(app):
    at = goto(app, "pages/reports.py")
    at = run(at.selectbox(key="reports_snap_a").set_value("vector"))
    at = run(at.selectbox(key="reports_snap_b").set_value("bm25"))
    assert list(metric_values(at)) == ["nDCG@5", "Recall@5", "MRR@5", "P@5", "Hit@5"]
    per_query = frame_with(at, "query", "first relevant", "Δ nDCG@5")
    assert per_query is not None and len(per_query) >= 1
    at = run(at.toggle(key="reports_snap_fisher").set_value(True))
    assert metric_values(at)


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


def test_user_strings_are_escaped_in_markdown(home, monkeypatch, tmp_path):
    evil = tmp_path / "evil"
    shutil.copytree(TINY, evil)
    card = (evil / "dataset.toml").read_text().replace('name = "tiny"',
                                                         'name = "x ![b](http://127.0.0.1:9/b.png) [l](http://e.x)"')
    (evil / "dataset.toml").write_text(card)
    at = start(home, monkeypatch, evil)
    for page in ("pages/tune.py", "pages/data.py", "pages/reports.py", "pages/sweep.py", "pages/evaluate.py"):
        at = goto(at, page)
        shown = markdown_texts(at) + [e.value for e in at.sidebar.caption]
        literal = [re.sub(r"\\(.)", r"\1", t) for t in shown]          # as the reader sees it
        assert any("![b](http://127.0.0.1:9/b.png)" in t for t in literal), page   # the name is shown…
        for t in shown:                                                # …but never as an image or a link
            assert "![b](" not in t and "[l](" not in t, (page, t)
    st.cache_resource.clear()


def test_sweep_optimise_mode_shows_the_held_out_estimate_and_offers_the_toml(app):
    at = goto(app, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Optimise"))
    at = run(at.number_input(key="opt_trials").set_value(4))
    assert at.number_input(key="opt_folds").value == 4             # min(5, the tiny set's 4 judged queries)
    at = run(at.number_input(key="opt_folds").set_value(2))
    at = run(at.button(key="opt_run").click())
    result = at.session_state["opt_result"]
    labels = [m.label for m in at.metric]
    assert labels[0] == "tuned · held-out nDCG@5"
    assert at.metric[0].value == f"{result.held_out_mean:.3f}"
    assert f"vs {result.comparisons[0].name}" in labels              # the fallback kept on all queries
    assert result.comparisons[0].name.startswith("default ")
    assert any(label.startswith("vs best single path ") for label in labels)
    assert sorted(q for f in result.outer for q in f.test_ids) == ["q1", "q2", "q3", "q4"]  # each held out once
    button = at.get("download_button")[0]
    assert button.proto.label == "Download TOML"


# ---- Tune's one source of truth (issue 25, item 1) ----------------------------------------------

def route_through_main(monkeypatch) -> None:
    """Every run goes through app.py (sidebar and navigation), as in a browser once the first page
    has loaded: AppTest otherwise re-enters the legacy pages/ mode and runs the page alone."""
    from streamlit.runtime.pages_manager import PagesManager

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


@pytest.fixture
def app_through_main(home, monkeypatch):
    route_through_main(monkeypatch)
    yield start(home, monkeypatch)
    st.cache_data.clear()
    st.cache_resource.clear()


def shown_knobs(at: AppTest) -> dict[str, object]:
    return {w.key[len("tune_k_"):]: w.value for w in (*at.slider, *at.number_input, *at.toggle, *at.selectbox)
            if w.key and w.key.startswith("tune_k_")}


def assert_knobs_rank(at: AppTest) -> None:
    """The knobs on screen show the configuration (and query) that ranked the results on screen."""
    from pages._state import get_pool
    from retrieval.pipeline import get_param, response_for, run_pipeline

    assert not at.exception
    if at.error:                                         # a dataset that cannot load: no knobs, no ranking
        assert not shown_knobs(at)
        return
    config, qi, _ = at.session_state["tune_ranked"]
    state = at.session_state["tune_state"]
    assert config == state.config
    knobs_on_screen = shown_knobs(at)
    assert knobs_on_screen
    for path, value in knobs_on_screen.items():
        expected = get_param(config, path)
        assert value == (pytest.approx(expected) if isinstance(value, float) else expected), path
    if qi is not None:
        assert at.selectbox(key="tune_query").value == qi
        pool = get_pool(str(TINY), _stamp(), "minilm")
        docs = [d for d in __import__("retrieval.dataset", fromlist=["x"]).load_dataset(TINY).documents]
        expected = [r.id for r in response_for(pool, run_pipeline(pool, config), qi, docs).results]
        assert shown_docs(at) == expected


def _stamp():
    from pages._state import dataset_stamp

    return dataset_stamp(str(TINY))


def test_tune_knobs_follow_the_state_after_a_bad_folder_and_back(app_through_main):
    at = run(app_through_main.slider(key="tune_k_rrf.rrf_k").set_value(10.0))
    at = run(at.selectbox(key="rwb_dataset").set_value("Other folder…"))
    at = run(at.text_input(key="rwb_dataset_typed").set_value("/no/such/folder"))
    assert at.error and not shown_knobs(at)
    at = run(at.selectbox(key="rwb_dataset").set_value(str(TINY)))
    assert at.slider(key="tune_k_rrf.rrf_k").value == 10.0     # the knob and the ranking agree
    assert at.session_state["tune_state"].config.params.rrf_k == 10.0
    assert_knobs_rank(at)


def test_tune_knob_left_over_from_a_preset_switch_is_refused_not_raised(app_through_main):
    """The browser sends a preset switch and a move of the old preset's rrf_k in one rerun."""
    at = app_through_main
    at.selectbox(key="tune_source_pick").set_value("seed-adaptive")
    at.slider(key="tune_k_rrf.rrf_k").set_value(10.0)
    at = run(at)
    assert at.session_state["tune_state"].config.fusion == "adaptive"
    assert_knobs_rank(at)


def test_tune_query_kept_across_free_text(app_through_main):
    at = run(app_through_main.selectbox(key="tune_query").set_value(2))
    at = run(at.segmented_control(key="tune_mode").set_value("Free text"))
    at = run(at.segmented_control(key="tune_mode").set_value("Query set"))
    assert at.selectbox(key="tune_query").value == 2
    assert at.session_state["tune_ranked"][1] == 2
    assert_knobs_rank(at)


def test_tune_state_in_the_url_restores_in_a_new_session(app_through_main, home, monkeypatch):
    at = run(app_through_main.selectbox(key="tune_source_pick").set_value("seed-adaptive"))
    at = run(at.selectbox(key="tune_query").set_value(2))
    at = run(at.slider(key="tune_k_adaptive.half_life_days").set_value(10.0))
    link = dict(at.query_params)
    assert link["from"] == "seed-adaptive" and link["q"] == "q3"
    assert link["p"] == "adaptive.half_life_days=10.0"
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update(link)
    fresh.run()
    assert fresh.selectbox(key="tune_source_pick").value == "seed-adaptive"
    assert fresh.selectbox(key="tune_query").value == 2
    assert fresh.slider(key="tune_k_adaptive.half_life_days").value == 10.0
    assert_knobs_rank(fresh)


def test_tune_bad_link_is_reported_and_the_rest_kept(app_through_main):
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update({"from": "rrf", "p": ["rrf.rrf_k=10", "rrf.nope=1"], "q": "q99"})
    fresh.run()
    assert not fresh.exception
    assert any("not applied" in w.value for w in fresh.warning)
    assert_knobs_rank(fresh)


def test_tune_link_never_reads_a_file_outside_the_learned_pipelines(app_through_main, tmp_path):
    outside = tmp_path / "elsewhere.toml"
    outside.write_text('base = "rrf"\n[rrf]\nrrf_k = 7\n')     # a valid pipeline, but not ours
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    fresh.query_params.update({"from": str(outside)})
    fresh.run()
    assert not fresh.exception
    assert any("not another file" in w.value for w in fresh.warning)
    assert fresh.session_state["tune_state"].source == "rrf"          # the default, not the file
    assert fresh.session_state["tune_state"].config.params.rrf_k == 60


PRESETS = ("rrf", "weighted", "seed-adaptive", "profile:debug")


def _act(at: AppTest, action: tuple) -> AppTest:
    """One user action on Tune or the sidebar; an action whose widget is not on screen is skipped."""
    kind = action[0]
    keys = {w.key for w in (*at.selectbox, *at.slider, *at.text_input) if w.key}
    if kind == "bad_folder" and "rwb_dataset" in keys:
        at = at.selectbox(key="rwb_dataset").set_value("Other folder…").run()
        return at.text_input(key="rwb_dataset_typed").set_value("/no/such/folder").run()
    if kind == "good_folder" and "rwb_dataset" in keys:
        return at.selectbox(key="rwb_dataset").set_value(str(TINY)).run()
    if kind == "preset" and "tune_source_pick" in keys:
        return at.selectbox(key="tune_source_pick").set_value(action[1]).run()
    if kind == "mode" and any(w.key == "tune_mode" for w in at.segmented_control):
        return at.segmented_control(key="tune_mode").set_value(action[1]).run()
    if kind == "query" and "tune_query" in keys:
        widget = at.selectbox(key="tune_query")
        return widget.set_value(widget.options and action[1] % len(widget.options)).run()
    sliders = [w for w in at.slider if w.key and w.key.startswith("tune_k_")]
    if kind in ("knob", "preset+knob") and sliders:
        widget = sliders[action[1] % len(sliders)]
        lo, hi, step = widget.min, widget.max, widget.step
        value = lo + round(action[2] * (hi - lo) / step) * step
        widget.set_value(type(lo)(min(hi, value)))
        if kind == "preset+knob" and "tune_source_pick" in keys:   # both in one rerun, as a fast user
            at.selectbox(key="tune_source_pick").set_value(action[3])
        return at.run()
    return at


def test_tune_any_action_sequence_keeps_knobs_and_ranking_together(app_through_main):
    """Random sequences of sidebar, preset, mode, query and knob actions: no exception reaches the
    page, and the knobs always show the configuration that ranked the results on screen."""
    from hypothesis import HealthCheck, given, settings, strategies as stg

    fraction = stg.floats(0, 1)
    action = stg.one_of(
        stg.tuples(stg.just("bad_folder")), stg.tuples(stg.just("good_folder")),
        stg.tuples(stg.just("preset"), stg.sampled_from(PRESETS)),
        stg.tuples(stg.just("mode"), stg.sampled_from(["Query set", "Free text"])),
        stg.tuples(stg.just("query"), stg.integers(0, 9)),
        stg.tuples(stg.just("knob"), stg.integers(0, 9), fraction),
        stg.tuples(stg.just("preset+knob"), stg.integers(0, 9), fraction, stg.sampled_from(PRESETS)))

    @settings(max_examples=12, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(stg.lists(action, min_size=1, max_size=6))
    def check(actions):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.run()
        for step in actions:
            at = _act(at, step)
            assert_knobs_rank(at)

    check()


def test_tune_shows_the_query_score_and_its_delta(app):
    from eval.experiments.live import evaluate_config
    from eval.metrics.measure import judge
    from pages._state import get_pool
    from retrieval.dataset import load_dataset

    at = run(app.selectbox(key="tune_query").set_value(1))
    pool = get_pool(str(TINY), _stamp(), "minilm")
    judged = judge(pool, load_dataset(TINY).qrels)
    mine = evaluate_config(pool, judged, at.session_state["tune_state"].config).values["ndcg@5"][1]
    base = evaluate_config(pool, judged, __import__("eval.stores.configs", fromlist=["x"]).resolve_config(
        "vector")).values["ndcg@5"][1]
    line = next(t for t in texts(at) if "This query" in t)
    assert f"nDCG@5 {mine:.4f}" in line and f"baseline {base:.4f}" in line and f"Δ {mine - base:+.4f}" in line


def test_tune_preset_switch_keeps_unsaved_edits_as_a_try_and_restores_it(app, home):
    at = run(app.slider(key="tune_k_rrf.rrf_k").set_value(10.0))
    at = run(at.selectbox(key="tune_source_pick").set_value("weighted"))
    assert any("kept as try #1" in t.value for t in at.toast)
    assert at.session_state["tune_state"].config.fusion == "weighted"
    assert "#1" in next(b for b in html_bodies(at) if "rwb-tries" in b)
    at = run(at.button(key="tune_try_restore").click())
    assert at.session_state["tune_state"].source == "rrf"
    assert at.slider(key="tune_k_rrf.rrf_k").value == 10.0
    at.text_input(key="tune_try_name").set_value("k10")
    at.text_area(key="tune_try_notes").set_value("sharper top")
    at = run(at.button(key="FormSubmitter:tune_try_form-Save name and notes").click())
    from eval.stores.tries import TryStore
    from retrieval.dataset import load_dataset

    (kept,) = TryStore(load_dataset(TINY), home).tries()
    assert (kept["name"], kept["notes"], kept["changes"]) == ("k10", "sharper top", {"rrf.rrf_k": 10.0})


def test_tune_query_note_and_sortable_query_list(app, home):
    at = run(app.text_area(key="tune_query_note").set_value("d03 is the answer"))
    from eval.stores.tries import TryStore
    from retrieval.dataset import load_dataset

    assert TryStore(load_dataset(TINY), home).query_notes() == {"q1": "d03 is the answer"}
    at = run(at.toggle(key="tune_query_list").set_value(True))
    table = frame_with(at, "query", "score", "baseline", "delta", "judged@5")
    assert list(table["query"])[:2] == ["q1", "q2"]
    assert (table["delta"] - (table["score"] - table["baseline"])).abs().max() < 1e-12
    # judged@5 is a share here as on the card: tiny's queries have one judgment each, so 1/5 where it is ranked
    assert set(table["judged@5"]) <= {0.0, 0.2} and 0.2 in set(table["judged@5"])


def test_tune_quality_knobs_one_click_away_and_band_order_warned(app):
    at = run(app.button(key="tune_quality").click())
    assert at.session_state["tune_state"].config.fusion == "adaptive"
    assert at.slider(key="tune_k_adaptive.profile.quality.conf_mid_factor")       # the F_conf pane is open
    at = run(at.slider(key="tune_k_adaptive.profile.quality.conf_mid_factor").set_value(1.5))
    assert any("F_conf mid (1.5) is above F_conf high (1)" in t.replace("\\", "") for t in texts(at))


def test_tune_shows_a_fusions_declared_warning_beside_its_knobs(app):
    """RRF declares (``RRFParams.warnings``) that both weights at 0 leave only the tie order: the
    Fusion pane shows it through the hook, and it goes when a weight is back."""
    at = run(app.slider(key="tune_k_rrf.w_dense").set_value(0.0))
    assert not any("Both weights are 0" in t for t in texts(at))
    at = run(at.slider(key="tune_k_rrf.w_sparse").set_value(0.0))
    assert any("Both weights are 0: every score is 0" in t.replace("\\", "") for t in texts(at))
    at = run(at.slider(key="tune_k_rrf.w_dense").set_value(0.5))
    assert not any("Both weights are 0" in t for t in texts(at))


def test_optimise_result_applies_to_tune_saves_as_profile_and_clears_when_the_pipeline_changes(app):
    at = goto(app, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Optimise"))
    at = run(at.number_input(key="opt_trials").set_value(3))
    at = run(at.number_input(key="opt_folds").set_value(2))
    at = run(at.button(key="opt_run").click())
    final = at.session_state["opt_result"].final_config
    at = run(at.button(key="opt_apply").click())
    assert at.session_state["tune_state"].config == final
    assert at.title[0].value == "Tune"
    at = goto(at, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Optimise"))
    at = run(at.text_input(key="opt_profile_name").set_value("opt-k"))
    at = run(at.button(key="opt_save").click())
    from eval.stores.configs import resolve_config

    saved = resolve_config("saved:opt-k")
    assert (saved.fusion, saved.params) == (final.fusion, final.params)
    at = run(at.selectbox(key="opt_base").set_value("weighted"))
    assert at.session_state["opt_result"] is None
    assert not at.metric                                            # no stale estimate on screen


def test_reports_freeze_two_snapshots_and_compare_them_per_query(app):
    at = goto(app, "pages/reports.py")
    for label, name in (("vector", "v-then"), ("rrf", "rrf-then")):
        at.selectbox(key="snap_config").set_value(label)
        at.text_input(key="snap_name").set_value(name)
        at = run(at.button(key="snap_freeze").click())
    at = run(at.selectbox(key="snap_a").set_value("v-then"))
    at = run(at.selectbox(key="snap_b").set_value("rrf-then"))
    table = frame_with(at, "query", "A", "B", "delta")
    assert sorted(table["query"]) == ["q1", "q2", "q3", "q4"]
    assert (table["delta"] - (table["B"] - table["A"])).abs().max() < 1e-5
    at.text_input(key="snap_name").set_value("v-then")            # a taken name is refused, not overwritten
    at = run(at.button(key="snap_freeze").click())
    assert any("exists" in t.value for t in at.toast)


def unescaped(at: AppTest) -> str:
    """Every Markdown text and caption shown, with ``md``'s backslash escapes removed."""
    return "\n".join(re.sub(r"\\(.)", r"\1", t) for t in markdown_texts(at))


def test_sweep_learn_mode_runs_rwb_learn_and_shows_its_grouping_kinds_guard_and_weights(app, home, tmp_path):
    """Issue 30 on the page: Learn runs what `rwb learn` runs (learn_report) and shows its
    figures — the same values `rwb learn --json` writes on the same judgments."""
    import json

    from eval.cli import main as rwb_main
    from eval.stores.judgments import JudgmentStore
    from retrieval.dataset import load_dataset

    JudgmentStore(load_dataset(TINY), home).grade("q4", "d03", 2)   # q1 and q4 now share d03
    at = goto(app, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Learn"))
    at = run(at.segmented_control(key="learn_model").set_value("linear"))
    at = run(at.number_input(key="learn_folds").set_value(2))
    at = run(at.number_input(key="learn_inner").set_value(2))
    at = run(at.button(key="learn_run").click())
    out = tmp_path / "learn.json"
    assert rwb_main(["learn", str(TINY), "--model", "linear", "--folds", "2", "--inner-folds", "2",
                     "--json", str(out), "--quiet"]) == 0
    cli = json.loads(out.read_text())
    shown = unescaped(at)
    assert at.metric[0].value == f"{cli['held_out']:.3f}"
    assert at.metric[1].value == f"{cli['held_out_default']:.3f}"
    # the grouping: by query, with what was found (two of the four queries share d03)
    assert cli["fold_groups"] == 0 and cli["fold_note"].startswith("2 of 4 judged queries share")
    assert "Folds by query: each of the 4 judged queries is held out on its own · 2 of 4" in shown
    assert cli["fold_note"][1:] in shown
    m = cli["memorisation_check"]
    assert f"held-out {m['by_query']:.4f} with folds by query, {m['by_group']:.4f}" in shown
    # per kind of query: debug ×2 (q1, q4), preference, timeline
    kinds = frame_with(at, "kind", "queries", "learned", "Δ default")
    best = cli["best_single_path"]
    assert list(kinds["kind"]) == ["debug", "preference", "timeline"] == sorted(cli["per_kind"])
    assert list(kinds["queries"]) == [2, 1, 1]
    for column, field in (("learned", "held_out"), ("seed-adaptive", "seed-adaptive"), (best, best)):
        assert list(kinds[column]) == pytest.approx([cli["per_kind"][k][field] for k in kinds["kind"]])
    loko = cli["leave_one_kind_out"]
    assert loko["kinds"] == 3
    assert (f"Leave one kind out (3 kinds, each held out whole, inner folds by kind): learned "
            f"{loko['held_out']:.4f} vs seed-adaptive {loko['default']:.4f}") in shown
    # the guard in words, fold by fold: what it applied, or every candidate it refused
    for fold in cli["outer"]:
        if fold["kind"] == "default":
            assert f"Fold {fold['fold']}: kept seed-adaptive: every candidate refused — " in shown
        else:
            assert f"Fold {fold['fold']}: applied {fold['model']}: inner Δ" in shown
    assert "in-sample" in shown and at.metric[3].label == "final · in-sample"
    # issue 40: what was kept and why, in one line; every candidate's inner-CV figure; a glossary
    kept = [f for f in cli["outer"] if f["kind"] == "default"]
    if kept:
        assert (f"The guard kept seed-adaptive in {len(kept)} of 2 folds (fallback: the best of the "
                f"named fixed pipelines on each training part). Fold {kept[0]['fold']}: kept "
                "seed-adaptive: every candidate refused") in shown
    candidates = frame_with(at, "candidate", "inner-CV nDCG@5")
    assert set(candidates["candidate"]) == {*cli["final"]["inner"], "seed-adaptive (fixed)"}
    glossary = frame_with(at, "feature", "meaning")
    assert list(glossary["feature"]) == cli["features"]
    meaning = dict(zip(glossary["feature"], glossary["meaning"]))
    assert meaning["dense_z"] == "cosine as a z-score over the query's vector hits"
    assert meaning["out_window"].startswith("1 when the query names a time window and the memory lies outside")
    # no guard: a linear model is applied, its weights shown by feature name
    at = run(at.toggle(key="learn_guard").set_value(False))
    at = run(at.button(key="learn_run").click())
    assert rwb_main(["learn", str(TINY), "--model", "linear", "--folds", "2", "--inner-folds", "2",
                     "--no-guard", "--json", str(out), "--quiet"]) == 0
    cli = json.loads(out.read_text())
    weights = frame_with(at, "feature", "weight")
    assert list(weights["feature"]) == [w["feature"] for w in cli["weights"][:12]]
    assert list(weights["weight"]) == pytest.approx([w["weight"] for w in cli["weights"][:12]])
    assert "Fold 0: no guard: applied the inner-CV winner" in unescaped(at)


# ---- issue 22 on the pages: Learn, the judging queue, judged@5 -----------------------------------

def test_sweep_learn_mode_shows_held_out_figures_applies_to_tune_and_saves_a_profile(app, home):
    at = goto(app, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Learn"))
    at = run(at.segmented_control(key="learn_model").set_value("lambdamart"))
    at = run(at.number_input(key="learn_folds").set_value(2))
    at = run(at.number_input(key="learn_inner").set_value(2))
    at = run(at.toggle(key="learn_guard").set_value(False))        # as rwb learn --no-guard
    at = run(at.button(key="learn_run").click())
    result = at.session_state["learn_result"][1].result   # a LearnReport: rwb learn's whole run
    labels = [m.label for m in at.metric]
    assert labels[:3] == ["learned · held-out nDCG@5", "vs default seed-adaptive",
                          f"vs best single path {result.best_single}"]
    assert at.metric[0].value == f"{result.held_out_mean:.3f}"
    compare = frame_with(at, "pipeline", "judged@5", "Δ learned")
    assert list(compare["judged@5"]) == pytest.approx(
        [result.judged["held_out"], result.judged["seed-adaptive"], result.judged[result.best_single]])
    folds = frame_with(at, "fold", "model chosen", "held-out")
    assert list(folds["model chosen"]) == ["lambdamart", "lambdamart"]   # each outer fold's
    assert sorted(q for f in result.outer for q in f.test_ids) == ["q1", "q2", "q3", "q4"]
    at = run(at.button(key="learn_apply").click())
    assert at.title[0].value == "Tune"
    state = at.session_state["tune_state"]
    applied = state.config
    assert (applied.fusion, applied.params.model) == ("learned", "lambdamart")
    model_file = Path(applied.params.file)                           # kept under $RWB_HOME/learned/
    assert model_file.parent == (home / "learned").resolve() and model_file.is_file()
    assert Path(state.source).parent == (home / "learned").resolve()  # the link names the kept TOML
    at = goto(at, "pages/sweep.py")
    at = run(at.segmented_control(key="sweep_page_mode").set_value("Learn"))
    at = run(at.text_input(key="learn_profile_name").set_value("learned-tiny"))
    at = run(at.button(key="learn_save").click())
    from eval.stores.configs import resolve_config
    from pages._state import get_pool
    from retrieval.pipeline import run_pipeline

    saved = resolve_config("saved:learned-tiny")
    pool = get_pool(str(TINY), _stamp(), "minilm")
    rows = run_pipeline(pool, applied).ranking.rows
    assert (run_pipeline(pool, saved).ranking.rows == rows).all()
    at = goto(at, "pages/tune.py")                          # Tune ranks with the learned model
    assert any("Current · learned" in t for t in texts(at))


def test_tune_judging_queue_lists_unjudged_pairs_by_swing_and_grades_them(app, home):
    from eval.experiments.holes import holes
    from pages._state import get_pool
    from retrieval.pipeline import run_pipeline

    at = run(app.toggle(key="tune_queue").set_value(True))
    keys = [p.key for p in at.get("pills") if p.key.startswith("tune_queue_")]
    pool = get_pool(str(TINY), _stamp(), "minilm")
    from eval.stores.configs import resolve_config
    from retrieval.dataset import load_dataset

    qrels = load_dataset(TINY).qrels
    expected = holes(pool, qrels, run_pipeline(pool, resolve_config("rrf")).ranking,
                     run_pipeline(pool, resolve_config("vector")).ranking, 5)
    assert keys == [f"tune_queue_{h.query_id}_{h.doc_id}" for h in expected[:10]]
    assert any(f"{len(expected)} unjudged pair(s)" in t for t in texts(at))
    first = expected[0]
    at = run(at.pills(key=keys[0]).set_value(2))
    from eval.stores.judgments import JudgmentStore

    assert JudgmentStore(load_dataset(TINY), home).qrels()[first.query_id][first.doc_id] == 2
    assert keys[0] not in [p.key for p in at.get("pills") if p.key.startswith("tune_queue_")]


def test_tune_names_the_run_after_its_fusion_and_shows_judged_at_5(app):
    at = run(app.selectbox(key="tune_k_fusion").set_value("wsum"))
    assert any("Current · wsum (tuned)" in t for t in texts(at))
    assert not any("Current · rrf" in t for t in texts(at))
    cards = metric_values(at)
    # tiny: each query has one judged document, so judged@5 is 0.2 × the share of the four queries
    # whose judged document is in the top 5
    assert cards["judged@5"] in {f"{0.2 * n / 4:.3f}" for n in range(5)}


def test_evaluate_shows_judged_at_5_beside_every_pipeline(app):
    at = goto(app, "pages/evaluate.py")
    bias = frame_with(at, "pipeline", "judged@5", "nDCG'@5", "bpref")
    means = at.dataframe[0].value
    assert list(bias["pipeline"]) == [c.removesuffix(" (baseline)") for c in means.columns
                                      if c != "metric"]
    assert set(bias["judged@5"]) <= {f"{0.2 * n / 4:.3f}" for n in range(5)}


# ---- issue 24 on the pages: the judgments every figure uses --------------------------------------

def with_implicit(tmp_path) -> Path:
    """tiny with click-derived judgments that grade only q1: d05 (so one query counts)."""
    folder = tmp_path / "tiny-clicks"
    shutil.copytree(TINY, folder)
    (folder / "qrels" / "implicit.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td05\t3\n")
    return folder


def test_judgment_source_in_the_sidebar_drives_every_figure_and_is_named(home, monkeypatch,
                                                                         tmp_path):
    route_through_main(monkeypatch)
    at = start(home, monkeypatch, with_implicit(tmp_path))
    choice = at.sidebar.selectbox(key="rwb_judgments")
    assert choice.options == ["explicit (qrels + edits)", "implicit (clicks)",
                              "both (explicit first)"]
    assert any("over 4 judged queries" in t and "judgments: dataset qrels" in t for t in texts(at))

    def sidebar_count():  # the sidebar names how many judgments the chosen source holds
        return next(c.value for c in at.sidebar.caption if "judgments" in c.value).split(" · ")[-1]

    assert sidebar_count() == "4 judgments (explicit)"    # tiny's qrels: 4 lines
    at = run(choice.set_value("implicit"))
    implicit = "implicit judgments (qrels/implicit.tsv)"
    assert any("over 1 judged queries" in t and f"judgments: {implicit}" in t for t in texts(at))
    assert sidebar_count() == "1 judgments (implicit)"    # implicit.tsv: q1 d05
    at = goto(at, "pages/evaluate.py")
    caption = " ".join(texts(at)).replace("\\", "")
    assert "1 judged queries" in caption and f"Judgments: {implicit}" in caption
    at = run(at.sidebar.selectbox(key="rwb_judgments").set_value("both"))
    caption = " ".join(texts(at)).replace("\\", "")
    assert "4 judged queries" in caption and "+ implicit judgments" in caption
    assert sidebar_count() == "5 judgments (both)"        # the 4, and q1 d05 nobody judged
    st.cache_resource.clear()


def test_judgment_source_offers_implicit_only_where_the_dataset_has_it(app_through_main):
    choice = app_through_main.sidebar.selectbox(key="rwb_judgments")
    assert choice.options == ["explicit (qrels + edits)"] and choice.disabled


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
