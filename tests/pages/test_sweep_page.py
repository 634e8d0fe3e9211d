"""AppTest of the Sweep page: a sweep and its winner, the Optimise mode's held-out estimate, the
Learn mode (rwb learn on the page), and their results applied to Tune or saved."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.pipeline import PIPELINES
from tests.pages.test_app import TINY, _stamp, frame_with, goto, markdown_texts, run, texts


def unescaped(at: AppTest) -> str:
    """Every Markdown text and caption shown, with ``md``'s backslash escapes removed."""
    return "\n".join(re.sub(r"\\(.)", r"\1", t) for t in markdown_texts(at))


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


# ---- issue 40: the recommendation is chosen among the settings and the fixed pipelines ----------

def test_a_fixed_pipeline_above_every_setting_is_what_the_sweep_recommends_and_applies(app):
    # tiny: bm25 scores nDCG@5 0.5 at every min_score in 0…0.5, the adaptive preset 0.9077
    # (tests/eval/search/test_sweep.py computes both by hand)
    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("bm25"))
    at = run(at.selectbox(key="sweep_x").set_value("min_score"))
    at = run(at.selectbox(key="sweep_y").set_value(""))
    at = run(at.number_input(key="sweep_x_lo_min_score").set_value(0.0))
    at = run(at.number_input(key="sweep_x_hi_min_score").set_value(0.5))
    at = run(at.number_input(key="sweep_x_steps").set_value(2))
    at = run(at.button(key="sweep_run").click())
    result = at.session_state["sweep_result"]
    assert result.chosen_fixed == "adaptive" and result.fixed_folds == len(result.folds)
    shown = " ".join(m.value for m in at.markdown)
    assert "**Recommended** the fixed pipeline `adaptive`, above every setting" in shown
    captions = [c.value.replace("\\", "") for c in at.caption]          # as rendered: escapes gone
    assert any("folds kept a fixed pipeline over every setting" in c and
               "Recommended: the fixed pipeline adaptive" in c for c in captions)
    at = run(next(b for b in at.button if b.label == "Apply winner to Tune").click())
    assert at.title[0].value == "Tune"
    assert at.session_state["tune_state"].config == PIPELINES["adaptive"]
