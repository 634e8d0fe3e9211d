"""Issue 42 item 8: Sweep varies one knob alone (rrf_k), without a second axis required."""

from __future__ import annotations

from tests.pages.test_app import frame_with, goto, run


def test_sweep_varies_rrf_k_alone(app):
    at = goto(app, "pages/sweep.py")
    at = run(at.selectbox(key="sweep_base").set_value("rrf"))
    at = run(at.toggle(key="sweep_rrfk_on").set_value(False))
    at = run(at.selectbox(key="sweep_x").set_value("rrf.rrf_k"))
    at = run(at.selectbox(key="sweep_y").set_value(""))                 # Y: none
    assert not at.number_input(key="sweep_x_steps").disabled and not at.button(key="sweep_run").disabled
    at = run(at.number_input(key="sweep_x_lo_rrf.rrf_k").set_value(1.0))
    at = run(at.number_input(key="sweep_x_hi_rrf.rrf_k").set_value(101.0))
    at = run(at.number_input(key="sweep_x_steps").set_value(5))
    assert any(c.value.startswith("5 settings × ") for c in at.caption)
    at = run(at.button(key="sweep_run").click())
    result = at.session_state["sweep_result"]
    assert result.space.names == ("rrf.rrf_k",)
    table = frame_with(at, "rrf.rrf_k", "ndcg@5")
    assert sorted(table["rrf.rrf_k"]) == [1.0, 26.0, 51.0, 76.0, 101.0]   # the grid over rrf_k, nothing else
    assert result.best_config.params.rrf_k in set(table["rrf.rrf_k"])
