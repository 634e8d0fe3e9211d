"""Benchmark 1 — re-scoring a whole query set with one new config, from cached candidates.

Ours: ``eval.experiments.live.evaluate_config`` — the Tune page's re-score on every knob move: route and fuse
every query (``retrieval.pipeline.fuse``), then top-k selection and the five metrics of every
query in one compiled pass (``eval.metrics.measure.fused_values``). The ranked run a page renders for one
query is not part of it (it is built when a page asks for it, as ranx's fused run is not
rendered either).
Peer: ``ranx.fuse`` of the dense and BM25 path Runs (built once from the same candidates)
+ ``ranx.evaluate``. Same queries, same depth (20 per path), same five metrics @5. The metric
values are compared twice: against ranx's own fused run (they differ only where fused scores
tie: ranx orders ties arbitrarily, we break them by document id) and against
``ranx.evaluate`` of our ranking (equal).
"""

from __future__ import annotations

import ranx

from bench.common import Section, interleaved, log, median, ms, ratio
from bench.context import Context, eval_datasets
from bench.data import pool
from bench.ranxio import path_runs
from eval.metrics.measure import judge
from eval.experiments.live import evaluate_config
from eval.metrics.ranx_io import to_run
from retrieval.pipeline import PIPELINES, PipelineConfig, run_pipeline, with_params
from retrieval.fusion.weighted import WeightedParams

METRICS = ("ndcg@5", "recall@5", "mrr@5", "precision@5", "hit_rate@5")
BLOCK = 10
"""Calls in a row per contestant and round for the headline (``bench.common.interleaved``); the
strictly alternating single calls are measured and reported beside it."""
DEPTH = 20  # the rrf pipeline's per-path depth (max_results 10 × candidate multiplier 2)


def configs():
    """(label, our config, ranx fuse kwargs) of the re-scored configs; the first is the headline."""
    rrf = with_params(PIPELINES["rrf"], {"rrf.rrf_k": 30})
    wsum = PipelineConfig("wsum-0.6", "weighted", depth=DEPTH,
                          params=WeightedParams(vector_weight=0.6, text_weight=0.4, text_norm="minmax"))
    return [
        # rrf needs no normalisation: ranx is given norm=None, its cheapest correct call
        ("rrf k=30", rrf, dict(norm=None, method="rrf", params={"k": 30})),
        # ranx min-max-normalises both runs (we normalise BM25 only): same work, other formula
        ("wsum 0.6/0.4", wsum, dict(norm="min-max", method="wsum", params={"weights": [0.6, 0.4]})),
    ]


def run(ctx: Context) -> Section:
    section = Section("rescore")
    repeats = ctx.pick(9, 21, smoke=2)
    speedups = []
    for name, path in eval_datasets(ctx).items():
        dataset, c = pool(path)
        judged = judge(c, dataset.qrels)
        qrels, dense, bm25 = path_runs(c, dataset.qrels, DEPTH)
        log(f"rescore {name}: {c.n_queries} queries, {c.n_rows} candidate rows, {repeats} repeats")
        for label, config, fuse_kwargs in configs():
            def ours():
                return evaluate_config(c, judged, config, METRICS).means

            def peer():
                fused = ranx.fuse([dense, bm25], **fuse_kwargs)
                return ranx.evaluate(qrels, fused, list(METRICS), save_results_in_run=False)

            a, b = ours(), peer()
            diff = max(abs(a[m] - float(b[m])) for m in METRICS)
            # our ranking handed to ranx.evaluate: equal metric for metric (ties then cannot differ)
            same = ranx.evaluate(qrels, to_run(c, run_pipeline(c, config).ranking, dataset.qrels, "ours"),
                                 list(METRICS), save_results_in_run=False)
            diff_same = max(abs(a[m] - float(same[m])) for m in METRICS)
            times = interleaved({"ours": ours, "ranx": peer}, repeats, block=BLOCK)
            t_ours, t_ranx = median(times["ours"]), median(times["ranx"])
            speedup = ratio(t_ranx, t_ours)
            single = interleaved({"ours": ours, "ranx": peer}, repeats)
            s_ours, s_ranx = median(single["ours"]), median(single["ranx"])
            section.figures.setdefault(name, {"queries": c.n_queries, "counted": judged.n_judged,
                                              "rows": c.n_rows, "configs": {}})
            section.figures[name]["configs"][label] = {
                "ours_ms": ms(t_ours), "ranx_ms": ms(t_ranx), "speedup": round(speedup, 1),
                "alternating_ours_ms": ms(s_ours), "alternating_ranx_ms": ms(s_ranx),
                "alternating_speedup": round(ratio(s_ranx, s_ours), 1),
                "ours_ms_all": [ms(t) for t in times["ours"]], "ranx_ms_all": [ms(t) for t in times["ranx"]],
                "ndcg@5_ours": round(a["ndcg@5"], 4), "ndcg@5_ranx": round(float(b["ndcg@5"]), 4),
                "max_metric_diff": round(diff, 5), "max_diff_ranx_on_our_ranking": round(diff_same, 9),
            }
            if label.startswith("rrf"):
                speedups.append((speedup, ratio(s_ranx, s_ours)))
            log(f"  {label}: ours {ms(t_ours)} ms, ranx {ms(t_ranx)} ms → {speedup:.1f}× "
                f"(alternating single calls: {ms(s_ours)} / {ms(s_ranx)} ms → {ratio(s_ranx, s_ours):.1f}×), "
                f"metric diff {diff:.2g}")
    if speedups:
        section.ratios["rescore_speedup_vs_ranx"] = round(min(s for s, _ in speedups), 1)
        section.ratios["rescore_speedup_alternating"] = round(min(a for _, a in speedups), 1)
    section.notes.append(f"headline: rrf k=30, the smallest speedup over the query sets measured, {BLOCK} calls in "
                         "a row per contestant and round; alternating: one call each in turn")
    return section

