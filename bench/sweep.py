"""Benchmark 2 — sweep throughput over the grid ``ranx.optimize_fusion`` searches.

The grid: wsum with weights (w, 1 − w), w = 0, 0.1, …, 1 (11 points) and RRF with
k = 10, 20, …, 100 (10 points); 21 configurations, metric nDCG@5, depth 20 per path.

Ours: ``eval.search.sweep.sweep`` (each point's configuration fused, then the whole grid's top-k and
metric in compiled batches, ``eval.metrics.measure.config_values``, plus
its judging of the pool, 5-fold cross-validation and the base pipeline's score) over
``weighted`` (BM25 min-max normalised, cosine as is) and ``rrf`` — the headline; and the bare
loop (``with_params`` + ``config_values`` + nDCG@5, judgments precomputed) for reference. Peer: ``ranx.optimize_fusion(norm="min-max")`` for
``wsum`` and ``rrf``, as a user would call it. Both best configurations are reported.

The wsum objectives differ: ranx min-max-normalises the dense scores too, the engine keeps
cosine. So the agreement check runs ranx once more (untimed) with ``norm=None`` on runs
normalised the engine's way; there both must pick the same weights. RRF is the same formula
in both (ranks from the same lists).

Ray row (full mode, only when Ray is installed — ``pip install -e '.[distributed]'``): a larger
grid (rrf_k 1…200 × w_dense 0.5, 1, 1.5: 600 configurations) swept locally and on a local Ray
cluster of 2 CPUs with 1 and 2 workers (``eval.search.executors.RayExecutor``); configurations/s of
warm sweeps (actors started and the pool shipped in an untimed first sweep, whose rate is
reported apart), whether every score and fold equals the local sweep's, and the load average.
"""

from __future__ import annotations

import math
import re

from ranx import optimize_fusion

import importlib.util

from bench.common import Section, interleaved, loadavg, log, median, ratio
from bench.context import Context, eval_datasets
from bench.data import pool
from bench.ranxio import path_runs
import numpy as np

from eval.metrics.measure import judge
from retrieval.pipeline import PIPELINES, PipelineConfig, with_params
from retrieval.fusion.weighted import WeightedParams

METRIC = "ndcg@5"
DEPTH = 20
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
RRF_KS = tuple(range(10, 101, 10))
BLOCK = 3
"""Calls in a row per contestant and round for the headline (``bench.common.interleaved``)."""


def _ours_sweeps(c, qrels, folds: int):
    """Two sweeps with eval.search.sweep; returns [(family, SweepResult)]."""
    from eval.search.space import ParamSpec, Space, SumConstraint
    from eval.search.sweep import sweep

    base_w = PipelineConfig("wsum-minmax", "weighted", depth=DEPTH,
                            params=WeightedParams(text_norm="minmax"))
    space_w = Space((ParamSpec("weighted.vector_weight", 0.0, 1.0, 0.1),
                     ParamSpec("weighted.text_weight", 0.0, 1.0, 0.1)),
                    (SumConstraint(("weighted.vector_weight", "weighted.text_weight"), 1.0),))
    space_r = Space((ParamSpec("rrf.rrf_k", 10.0, 100.0, 10.0),))
    base_r = PIPELINES["rrf"]
    # the grids alone (``fixed={}``): the same configurations ranx's optimize_fusion scores; a
    # user's sweep also scores the named fixed pipelines once (eval.search.sweep)
    return [("wsum", sweep(c, qrels, base_w, space_w, METRIC, folds=folds, fixed={})),
            ("rrf", sweep(c, qrels, base_r, space_r, METRIC, folds=folds, fixed={}))]


def _core_loop(c, judged, configs) -> list[float]:
    """The bare per-config work, judgments computed beforehand: fuse + top-k + nDCG@5 of
    every configuration (``eval.metrics.measure.config_values``), no cross-validation."""
    from eval.metrics.measure import config_values

    return [float(np.nansum(row)) / judged.n_judged
            for batch in config_values(c, judged, configs, METRIC) for row in batch]


def _grid_configs() -> list:
    base_w = PipelineConfig("wsum-minmax", "weighted", depth=DEPTH, params=WeightedParams(text_norm="minmax"))
    out = [with_params(base_w, {"weighted.vector_weight": w, "weighted.text_weight": round(1 - w, 1)})
           for w in WEIGHTS]
    return out + [with_params(PIPELINES["rrf"], {"rrf.rrf_k": float(k)}) for k in RRF_KS]


def _ranx_sweeps(qrels, runs, norm="min-max", families=("wsum", "rrf")):
    out = []
    for method in families:
        best, report = optimize_fusion(qrels, runs, norm=norm, method=method, metric=METRIC,
                                       show_progress=False, return_optimization_report=True)
        out.append((method, best, report))
    return out


def _ours_best(result) -> tuple[str, float, set[str]]:
    """Our pick (first maximum) and every configuration tied with it."""
    labels = []
    for point in result.points:
        labels.append(f"w={point[0]:.1f}" if point.shape[0] == 2 else f"k={int(round(point[0]))}")
    top = float(result.scores.max())
    tied = {label for label, s in zip(labels, result.scores) if math.isclose(s, top, abs_tol=1e-12)}
    return labels[result.best_index], top, tied


def _ranx_best(method, best, report) -> tuple[str, float, set[str], dict[str, float]]:
    """ranx's pick (last maximum: it keeps ``>=``), its score and the tied set, per label."""
    configs = list(getattr(report, "configs", []))
    results = list(getattr(report, "results", []))
    scores = {}
    for config, value in zip(configs, results):
        value = float(value[METRIC] if isinstance(value, dict) else value)
        if method == "wsum":
            w = float(re.findall(r"\d+(?:\.\d+)?", str(config).replace("np.float64", ""))[0])
            scores[f"w={w:.1f}"] = value
        else:
            scores[f"k={int(float(config))}"] = value
    label = f"w={float(best['weights'][0]):.1f}" if method == "wsum" else f"k={int(best['k'])}"
    top = max(scores.values()) if scores else float("nan")
    tied = {k for k, v in scores.items() if math.isclose(v, top, abs_tol=1e-12)}
    return label, top, tied, scores


RAY_GRID = ("rrf.rrf_k=1:200:1", "rrf.w_dense=0.5:1.5:0.5")


def _ray_row(c, qrels, repeats: int) -> dict:
    """Configurations/s of the RAY_GRID sweep: local, then Ray with 1 and 2 workers."""
    import ray

    from eval.search.executors import RayExecutor
    from eval.search.space import Space, parse_param
    from eval.search.sweep import sweep

    base = PIPELINES["rrf"]
    space = Space(tuple(parse_param(text, base) for text in RAY_GRID))
    local = sweep(c, qrels, base, space, folds=5)
    row = {"configs": len(local.scores), "cluster_cpus": 2,
           "local_configs_per_s": round(median([sweep(c, qrels, base, space, folds=5).configs_per_second
                                                for _ in range(repeats)]), 1)}
    owns = not ray.is_initialized()
    if owns:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        for workers in (1, 2):
            with RayExecutor(workers=workers) as executor:
                first = sweep(c, qrels, base, space, folds=5, executor=executor)  # starts actors, ships the pool
                runs = [sweep(c, qrels, base, space, folds=5, executor=executor) for _ in range(repeats)]
            same = all(np.array_equal(r.scores, local.scores) and r.folds == local.folds
                       and r.best_index == local.best_index for r in (first, *runs))
            row[f"ray{workers}_configs_per_s"] = round(median([r.configs_per_second for r in runs]), 1)
            row[f"ray{workers}_first_configs_per_s"] = round(first.configs_per_second, 1)
            row[f"ray{workers}_identical_to_local"] = same
    finally:
        if owns:
            ray.shutdown()
    row["loadavg"] = loadavg()
    return row


def run(ctx: Context) -> Section:
    section = Section("sweep")
    repeats = ctx.pick(5, 9, smoke=1)
    n_configs = len(WEIGHTS) + len(RRF_KS)
    speedups = []
    for name, path in eval_datasets(ctx).items():
        dataset, c = pool(path)
        qrels, dense, bm25 = path_runs(c, dataset.qrels, DEPTH)
        counted = len(qrels.keys())
        folds = max(2, min(5, counted))
        log(f"sweep {name}: {counted} counted queries, {n_configs} configs, {repeats} repeats")
        judged = judge(c, dataset.qrels)
        grid = _grid_configs()

        def core():  # with_params is part of the loop, as in a sweep
            return _core_loop(c, judged, _grid_configs())

        contestants = {"ours": lambda: _ours_sweeps(c, dataset.qrels, folds),
                       "ranx": lambda: _ranx_sweeps(qrels, [dense, bm25]), "core": core}
        times = interleaved(contestants, repeats, block=BLOCK)
        t_ours, t_ranx, t_core = median(times["ours"]), median(times["ranx"]), median(times["core"])
        single = interleaved(contestants, repeats)
        s_ours, s_ranx = median(single["ours"]), median(single["ranx"])
        assert len(grid) == n_configs
        speedup = ratio(t_ranx, t_ours)
        speedups.append((speedup, ratio(s_ranx, s_ours)))
        ours = dict(_ours_sweeps(c, dataset.qrels, folds))
        peer = {m: (b, r) for m, b, r in _ranx_sweeps(qrels, [dense, bm25])}
        # same objective for wsum: the engine's normalisation given to ranx, norm=None
        _, dense_raw, bm25_minmax = path_runs(c, dataset.qrels, DEPTH, {"bm25": "minmax"})
        same = {m: (b, r) for m, b, r in _ranx_sweeps(qrels, [dense_raw, bm25_minmax], norm=None, families=("wsum",))}
        entry = {"counted_queries": counted, "configs": n_configs,
                 "ours_s": round(t_ours, 4), "ranx_s": round(t_ranx, 4),
                 "ours_configs_per_s": round(n_configs / t_ours, 1), "ranx_configs_per_s": round(n_configs / t_ranx, 1),
                 "speedup": round(speedup, 1), "alternating_ours_s": round(s_ours, 4),
                 "alternating_ranx_s": round(s_ranx, 4), "alternating_speedup": round(ratio(s_ranx, s_ours), 1),
                 "core_loop_s": round(t_core, 4), "core_configs_per_s": round(n_configs / t_core, 1),
                 "core_speedup": round(ratio(t_ranx, t_core), 1), "ours_s_all": [round(t, 4) for t in times["ours"]],
                 "ranx_s_all": [round(t, 4) for t in times["ranx"]], "best": {}}
        for family in ("wsum", "rrf"):
            o_label, o_score, o_tied = _ours_best(ours[family])
            r_label, r_score, r_tied, r_scores = _ranx_best(family, *peer[family])
            row = {"ours": o_label, "ours_score": round(o_score, 4), "ours_tied": sorted(o_tied),
                   "ranx": r_label, "ranx_score": round(r_score, 4), "ranx_tied": sorted(r_tied),
                   "same": o_label == r_label, "same_up_to_ties": bool(o_tied & r_tied),
                   "cv_held_out": round(ours[family].held_out_mean, 4)}
            if family == "rrf":
                ours_scores = {f"k={int(round(p[0]))}": s for p, s in zip(ours[family].points, ours[family].scores)}
                row["max_score_diff"] = round(max(abs(ours_scores[k] - v) for k, v in r_scores.items()), 5)
            else:
                s_label, s_score, s_tied, s_scores = _ranx_best("wsum", *same["wsum"])
                ours_scores = {f"w={p[0]:.1f}": s for p, s in zip(ours[family].points, ours[family].scores)}
                row.update({"ranx_same_objective": s_label, "ranx_same_objective_score": round(s_score, 4),
                            "same_objective_agrees": bool(o_tied & s_tied),
                            "same_objective_max_score_diff":
                                round(max(abs(ours_scores[k] - v) for k, v in s_scores.items()), 5)})
            entry["best"][family] = row
        if ctx.full and importlib.util.find_spec("ray") is not None:
            entry["ray"] = _ray_row(c, dataset.qrels, repeats=3)
            log(f"  ray: {entry['ray']}")
        section.figures[name] = entry
        log(f"  ours {t_ours:.3f} s ({n_configs / t_ours:.0f} configs/s), ranx {t_ranx:.3f} s "
            f"({n_configs / t_ranx:.1f} configs/s) → {speedup:.1f}×; best {entry['best']}")
    if speedups:
        section.ratios["sweep_speedup_vs_ranx"] = round(min(s for s, _ in speedups), 1)
        section.ratios["sweep_speedup_alternating"] = round(min(a for _, a in speedups), 1)
        section.ratios["sweep_configs_per_s"] = round(min(e["ours_configs_per_s"] for e in section.figures.values()))
    section.notes.append("ours = eval.search.sweep (two calls: wsum grid, rrf grid), including its judging of the "
                         "pool, 5-fold CV and base-pipeline score, which ranx does not do; core = the bare "
                         "fuse + top-k + nDCG@5 of every configuration with judgments computed beforehand; "
                         f"headline: {BLOCK} calls in a row per contestant and round; alternating: one each in turn")
    return section

