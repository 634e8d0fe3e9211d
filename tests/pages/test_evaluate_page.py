"""AppTest of the Evaluate page: the table of pipelines, the drill-down, judged@5."""

from __future__ import annotations

from tests.pages.test_app import frame_with, goto, run, texts


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


def test_evaluate_shows_judged_at_5_beside_every_pipeline(app):
    at = goto(app, "pages/evaluate.py")
    bias = frame_with(at, "pipeline", "judged@5", "nDCG'@5", "bpref")
    means = at.dataframe[0].value
    assert list(bias["pipeline"]) == [c.removesuffix(" (baseline)") for c in means.columns
                                      if c != "metric"]
    assert set(bias["judged@5"]) <= {f"{0.2 * n / 4:.3f}" for n in range(5)}
