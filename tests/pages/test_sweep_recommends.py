"""Issue 40: the Sweep page recommends what its folds chose from — its settings and the fixed
pipelines the user already has — and "Apply winner" applies the recommendation."""

from __future__ import annotations

from retrieval.pipeline import PIPELINES
from tests.pages.test_app import goto, run


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
