"""AppTest of the Reports page: generate a report, freeze and compare snapshots."""

from __future__ import annotations

from pathlib import Path

from tests.pages.test_app import frame_with, goto, metric_values, run


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
