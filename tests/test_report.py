"""report.html / report.md / report.json on the tiny fixture's real pool."""

from __future__ import annotations

import base64
import gzip
import json
import re

import plotly.offline
import pytest

from eval.budget import budget_recall, document_tokens
from eval.compare import compare_to_baseline
from eval.evaluate import evaluate_pipelines, intent_of, resolve_pipelines
from eval.pool import load_pool
from eval.report import write_report
from eval.router_eval import evaluate_router
from eval.sweep import Space, parse_param, sweep
from retrieval.bm25 import ANALYZER_VERSION
from retrieval.pipeline import PIPELINES, from_toml


@pytest.fixture(scope="module")
def written(tiny, rwb_home, tmp_path_factory):
    pool = load_pool(tiny)
    configs = resolve_pipelines(["rrf", "seed-adaptive"], baseline="vector")
    evaluation = evaluate_pipelines(pool, tiny.qrels, configs, ["ndcg@5", "recall@5"], intent_of(tiny.queries))
    significance = compare_to_baseline(evaluation, tiny.qrels, "vector", n_permutations=500)
    tokens = document_tokens(tiny.documents)
    budget = {p: budget_recall(pool, tiny.qrels, r.ranking, 1500, tokens) for p, r in evaluation.runs.items()}
    router = evaluate_router(pool, tiny.qrels, {q.id: q.intent for q in tiny.queries})
    base = PIPELINES["rrf"]
    result = sweep(pool, tiny.qrels, base, Space((parse_param("rrf.rrf_k=10:60:10", base),
                                                  parse_param("rrf.w_dense=0:1:0.5", base))), folds=2)
    out = tmp_path_factory.mktemp("report")
    paths = write_report(out, evaluation, significance, budget, router, result)
    return paths, evaluation, tiny


def test_html_is_self_contained(written):
    paths, _, _ = written
    page = paths["html"].read_text("utf-8")
    bundle = plotly.offline.get_plotlyjs()
    packed = re.findall(r"data:application/gzip;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(packed) == 1                                        # once, not per figure
    assert gzip.decompress(base64.b64decode(packed[0])).decode("utf-8") == bundle   # the whole bundle, inline
    assert len(page.encode("utf-8")) < len(bundle) / 2             # compressed: 4.8 MB → under 2 MB
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert "<script src=\"http" not in page
    assert not re.search(r"<link[^>]*href\s*=\s*\"https?:", page, re.IGNORECASE)
    for div in ("fig-intents", "fig-wtl", "fig-delta", "fig-router", "fig-sweep"):
        assert f'id="{div}"' in page
    assert "Plotly.newPlot" in page


def test_json_holds_the_fingerprint_and_the_results(written):
    paths, evaluation, tiny = written
    data = json.loads(paths["json"].read_text("utf-8"))
    fp = data["fingerprint"]
    assert fp["dataset"] == "tiny"
    assert fp["dataset_fingerprint"] == tiny.fingerprint and len(fp["dataset_fingerprint"]) == 64
    assert fp["model"] == "minilm"
    assert fp["analyzer"] == ANALYZER_VERSION
    assert fp["pool_depth"] == 50
    assert set(fp["configs"]) == {"vector", "rrf", "seed-adaptive"}
    for name, text in fp["configs"].items():
        assert from_toml(text) == evaluation.configs[name]
    assert data["n_queries"] == 4 and data["results"] == evaluation.results
    assert data["significance"]["rrf"]["ndcg@5"]["wins"] >= 0
    assert data["significance_test"]["correction_name"] == "Holm–Bonferroni"
    sweep = data["sweep"]
    assert sweep["n_configs"] == 6 * 3 and len(sweep["cv"]["per_fold"]) == 2
    assert {"train_mean", "held_out_mean"} <= set(sweep["cv"])
    assert from_toml(sweep["best_toml"]).name == "rrf-tuned"
    assert data["router"]["mapping_note"].endswith("(seed 001 has no preference profile)")


def test_markdown_has_the_tables(written):
    paths, evaluation, _ = written
    text = paths["md"].read_text("utf-8")
    assert "| pipeline | ndcg@5 | recall@5 |" in text
    assert f"{evaluation.results['rrf']['ndcg@5']:.4f}" in text
    assert "held-out mean" in text and "Holm–Bonferroni" in text
    assert "```toml" in text
