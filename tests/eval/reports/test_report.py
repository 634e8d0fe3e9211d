"""report.html / report.md / report.json on the tiny fixture's real pool."""

from __future__ import annotations

import base64
import gzip
import json
import re

import plotly.offline
import pytest

from eval.experiments.experiment import ExperimentOptions, run_experiment
from eval.reports.report import PLOTLY_BUNDLE, _sweep_figure, colour_range, write_experiment_report
from eval.stores.pool import load_pool
from eval.search.space import Space, parse_param
from eval.search.sweep import sweep
from retrieval.bm25 import ANALYZERS
from retrieval.pipeline import PIPELINES, from_toml


@pytest.fixture(scope="module")
def written(tiny, rwb_home, tmp_path_factory):
    pool = load_pool(tiny)
    options = ExperimentOptions(metrics=("ndcg", "recall", "map"), cutoffs=(3, 5), permutations=500, bootstrap=500)
    experiment = run_experiment(pool, tiny, ["rrf", "seed-adaptive", "openclaw"], "vector", options)
    base = PIPELINES["rrf"]
    result = sweep(pool, tiny.qrels, base, Space((parse_param("rrf.rrf_k=10:60:10", base),
                                                  parse_param("rrf.w_dense=0:1:0.5", base))), folds=2)
    out = tmp_path_factory.mktemp("report")
    paths = write_experiment_report(experiment, out, result, history=HISTORY)
    return paths, experiment.evaluation, tiny


INPUTS = {"corpus": "c1", "queries": "q1", "judgments": "j1", "pipeline": "p1", "embedder": "e1", "index": "i1"}
HISTORY = [  # two checks of rrf; the judgments changed in between, and the second failed
    {"time": "2026-01-01T10:00:00+0000", "pipeline": "rrf", "snapshot": "base", "passed": True,
     "metrics": {"ndcg@5": 0.5}, "frozen": {"ndcg@5": 0.5}, "inputs": INPUTS},
    {"time": "2026-01-02T10:00:00+0000", "pipeline": "rrf", "snapshot": "base", "passed": False,
     "metrics": {"ndcg@5": 0.45}, "frozen": {"ndcg@5": 0.5}, "inputs": {**INPUTS, "judgments": "j2"}},
]


def test_html_is_self_contained(written):
    paths, _, _ = written
    page = paths["html"].read_text("utf-8")
    bundle = PLOTLY_BUNDLE.read_text("utf-8")
    packed = re.findall(r"data:application/gzip;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(packed) == 1                                        # once, not per figure
    assert gzip.decompress(base64.b64decode(packed[0])).decode("utf-8") == bundle   # the whole bundle, inline
    assert len(page.encode("utf-8")) < 1_500_000                   # issue target: ≤ 1.5 MB
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert "<script src=\"http" not in page
    assert not re.search(r"<link[^>]*href\s*=\s*\"https?:", page, re.IGNORECASE)
    for div in ("fig-intents", "fig-wtl", "fig-delta", "fig-router", "fig-sweep"):
        assert f'id="{div}"' in page
    assert "Plotly.newPlot" in page


def test_vendored_plotly_is_the_installed_plotly_js_version_with_the_traces_drawn():
    """The cartesian bundle must match the plotly.js the ``plotly`` package writes figures for."""
    version = re.compile(r"plotly\.js (?:\(cartesian - minified\) )?v(\d+\.\d+\.\d+)")
    ours = version.search(PLOTLY_BUNDLE.read_text("utf-8")[:400]).group(1)
    installed = version.search(plotly.offline.get_plotlyjs()[:400]).group(1)
    assert ours.split(".")[0] == installed.split(".")[0], (ours, installed)
    head = PLOTLY_BUNDLE.read_text("utf-8")
    for trace in ("bar", "heatmap", "scatter"):                     # every trace type the report draws
        assert f'moduleType:"trace",name:"{trace}"' in head, trace


def test_json_holds_the_fingerprint_and_the_results(written):
    paths, evaluation, tiny = written
    data = json.loads(paths["json"].read_text("utf-8"))
    fp = data["fingerprint"]
    assert fp["dataset"] == "tiny"
    assert fp["dataset_fingerprint"] == tiny.fingerprint and len(fp["dataset_fingerprint"]) == 64
    assert fp["model"] == "minilm"
    assert fp["analyzer"] == ANALYZERS[evaluation.candidates.analyzer].version == ANALYZERS["bigram"].version
    assert fp["pool_depth"] == 50
    assert set(fp["configs"]) == {"vector", "rrf", "seed-adaptive", "openclaw"}
    for name, text in fp["configs"].items():
        assert from_toml(text) == evaluation.configs[name]
    assert data["n_queries"] == 4 and data["results"] == evaluation.results
    assert data["significance"]["rrf"]["ndcg@5"]["wins"] >= 0
    assert data["significance_test"]["correction_name"] == "Holm–Bonferroni"
    assert data["metrics"] == ["ndcg@3", "ndcg@5", "recall@3", "recall@5", "map"]
    assert data["settings"]["gain"] == "linear" and data["settings"]["tie_break"].startswith("scores descending")
    assert data["intervals"]["n_resamples"] == 500
    cell = data["significance"]["rrf"]["ndcg@5"]
    assert cell["delta_ci"][0] <= cell["delta"] <= cell["delta_ci"][1]
    assert 0 < cell["p_value"] <= cell["p_adjusted"] <= 1           # raw and corrected, both kept
    low, high = data["intervals"]["means"]["rrf"]["ndcg@5"].values()
    assert low <= data["results"]["rrf"]["ndcg@5"] <= high
    sweep = data["sweep"]
    assert sweep["n_configs"] == 6 * 3 and len(sweep["cv"]["per_fold"]) == 2
    assert {"train_mean", "held_out_mean"} <= set(sweep["cv"])
    # the best_toml is the recommendation: on tiny the adaptive preset beats every rrf setting
    assert from_toml(sweep["best_toml"]).name == sweep["recommended"]["name"] == "adaptive"
    assert sweep["best"]["name"] == "rrf-tuned" and sweep["recommended"]["fixed"] is True
    assert data["router"]["mapping_note"].endswith("(seed 001 has no preference profile)")


def test_markdown_has_the_tables(written):
    paths, evaluation, _ = written
    text = paths["md"].read_text("utf-8")
    assert "| metric | vector (baseline) | rrf | seed-adaptive | openclaw |" in text     # the means table
    assert f"| ndcg@5 | {evaluation.results['vector']['ndcg@5']:.4f} |" in text
    assert "| metric | pipeline | mean | 95% CI | Δ vs vector | 95% CI of Δ | p (raw) | p (holm) | W/T/L |" in text
    assert "## Method" in text and "linear gain rel / log2(rank + 1)" in text
    assert "scores descending, then document id ascending" in text and "500 resamples" in text
    assert "Holm–Bonferroni correction per metric across the 3 pipelines compared with vector" in text
    # openclaw keeps at most 6 results over a 0.35 score: the tiny queries get fewer than 3 or 5
    assert "Fewer than k results" in text and "- openclaw: k=" in text
    assert "## Per intent" in text and "| pipeline | debug (2) | timeline (1) | preference (1) |" in text
    assert "held-out mean" in text
    assert "```toml" in text


def test_report_shows_the_inputs_and_the_check_history(written):
    """``rwb report`` holds the inputs' content hashes and the dataset's check history: a table
    in Markdown, a chart in HTML, both from one section (issue 41 item 5)."""
    paths, evaluation, _ = written
    md, page = paths["md"].read_text("utf-8"), paths["html"].read_text("utf-8")
    data = json.loads(paths["json"].read_text("utf-8"))
    assert "## Inputs" in md and f"| corpus | `{data['inputs']['corpus']}` |" in md
    assert "| pipeline: rrf |" in md and "| pipeline: openclaw |" in md
    assert "## Check history" in md
    assert ("| 2026-01-01T10:00:00+0000 | rrf | base | 0.5000 | 0.5000 | passed | — |" in md)
    assert ("| 2026-01-02T10:00:00+0000 | rrf | base | 0.4500 | 0.5000 | FAILED | judgments |" in md)
    assert "<h2>Check history</h2>" in page and 'id="fig-history"' in page
    assert "<h2>Inputs</h2>" in page
    assert data["check_history"] == HISTORY


def test_colour_range_spans_the_values_with_a_few_low_outliers_clipped():
    # 0.0 (every weight 0) and ten values 0.40 … 0.49: numpy's 10th percentile of the 11 is 0.40
    values = [0.0] + [0.40 + 0.01 * i for i in range(10)]
    low, high, clipped = colour_range(values)
    assert (round(low, 6), round(high, 6), clipped) == (0.40, 0.49, True)
    assert colour_range([[0.3, 0.5], [float("nan"), 0.4]])[1] == 0.5      # a missing cell: ignored
    assert colour_range([0.5, 0.5]) == (None, None, False)               # flat: the library's own
    assert colour_range([float("nan")]) == (None, None, False)


def test_sweep_heatmap_colours_the_swept_range_and_writes_each_value(tiny, rwb_home):
    pool = load_pool(tiny)
    base = PIPELINES["wsum"]
    space = Space((parse_param("wsum.w_dense=0:1:0.25", base),
                   parse_param("wsum.w_sparse=0:1:0.25", base)))
    result = sweep(pool, tiny.qrels, base, space, folds=2)
    # on tiny: both weights 0 → one score, BM25 weight 0 → another (4 cells), any BM25 → the top
    low, *rest = sorted(set(result.scores.round(6)))
    assert len(result.scores) == 25 and len(rest) == 2
    heatmap = _sweep_figure(result).data[0]
    assert sorted(v for row in heatmap.z for v in row) == sorted(result.scores)  # a cell per point
    # 10th percentile of 25 cells: rank 2.4 of the sorted values, between two BM25-weight-0 cells
    assert (round(heatmap.zmin, 6), round(heatmap.zmax, 6)) == (rest[0], rest[1])
    assert f"≤ {rest[0]:.3f}" in heatmap.colorbar.title.text                    # the clip is said
    assert heatmap.colorscale[0][1] == "#440154" and heatmap.colorscale[-1][1] == "#fde725"
    cells = [t for row in heatmap.text for t in row]                   # 25 cells: values written
    assert heatmap.texttemplate == "%{text}" and min(cells) == f"{low:.3f}"
    assert [t for t in cells if t.startswith("☆")] == [f"☆ {result.best_score:.3f}"]
