"""Benchmark — ``rwb learn``'s whole nested procedure against LightGBM's own training.

Ours: ``rwb learn``'s whole run at its default settings
(``eval.learning.transfer.learn_report(model="auto")``) on a stored pool — the folds' groups
(shared relevant documents, the group field), features, the MoE grid's per-query values, (folds
+ 1) procedures of 7 candidates × 3 inner folds + 1 final fit each (more inner fold seeds where
the guard's decision is close), the memorisation check where the folds go by query, leave one
kind out where the queries carry intents, the held-out scoring, the paired tests and judged@5 — timed end to end (the pool is loaded
before the clock starts), its fits on as many threads as the process may use (``threads``;
``cpu_s`` is the process's CPU time over the run, so ``cpu_s / nested_s`` is how many cores it
kept busy). Peer: one ``lightgbm.LGBMRanker`` fit with the same settings
(``eval.learning.fit.LAMBDAMART``, one thread) on the same feature matrix (every counted query's
visible rows), the floor any learning-to-rank procedure over this matrix pays once. The ratio
says how many such fits the nested procedure costs in wall time. Quick: devmem; full: devmem and
LoCoMo (1,982 queries, retrieval within each conversation).
"""

from __future__ import annotations

import os
import time

import numpy as np

from bench.common import Section, log, median
from bench.context import Context, eval_datasets
from bench.data import pool


def _lightgbm_once(t) -> float:
    import lightgbm

    from eval.learning.fit import LAMBDAMART

    rows = t.rows_of(np.flatnonzero(t.judged.judged))
    groups = np.bincount(t.c.query_idx[rows], minlength=t.c.n_queries)
    start = time.perf_counter()
    lightgbm.LGBMRanker(random_state=0, **LAMBDAMART).fit(
        t.x[rows], t.judged.grade[rows].astype(np.int64), group=groups[groups > 0])
    return time.perf_counter() - start


def run(ctx: Context) -> Section:
    from eval.learning.fit import Training
    from eval.learning.transfer import learn_report
    from eval.metrics.measure import judge
    from retrieval.pipeline import PipelineConfig

    section = Section("learn")
    repeats = ctx.pick(3, 5, smoke=1)
    for name, path in eval_datasets(ctx).items():
        dataset, c = pool(path)
        load = os.getloadavg()[0]
        start, cpu = time.perf_counter(), time.process_time()
        report = learn_report(c, dataset.qrels, dataset.queries, "auto",
                              folds=5 if not ctx.smoke else 2,
                              inner_folds=3 if not ctx.smoke else 2, seed=0)
        nested, cpu = time.perf_counter() - start, time.process_time() - cpu
        result = report.result
        n_fits = sum(r.n_fits for r in report.runs) + (report.loko.n_fits if report.loko else 0)
        t = Training(c, judge(c, dataset.qrels), PipelineConfig("learned", "learned", depth=30), "ndcg@5")
        fits = [_lightgbm_once(t) for _ in range(repeats)]
        one_fit = median(fits)
        section.figures[name] = {
            "queries": result.n_queries, "rows": int(t.visible.sum()), "features": len(t.names),
            "nested_s": round(nested, 3), "cpu_s": round(cpu, 3),
            "load_1min": [round(load, 2), round(os.getloadavg()[0], 2)],
            "fold_note": report.folding.note,
            "threads": len(os.sched_getaffinity(0)), "fits": n_fits, "lightgbm_fit_s": round(one_fit, 4),
            "lightgbm_fits_s": [round(f, 4) for f in fits], "held_out": round(result.held_out_mean, 4),
            "fold_choices": [f.applied for f in result.outer]}
        section.ratios[f"learn_nested_vs_lightgbm_fit_{name}"] = nested / one_fit
        log(f"  {name}: nested {nested:.1f} s (CPU {cpu:.1f} s, {n_fits} fits, load {load:.1f} → "
            f"{os.getloadavg()[0]:.1f}) vs one LightGBM fit {one_fit:.3f} s")
    section.notes.append("ratio = rwb learn's whole default run (5 outer × 3 inner folds, 7 candidate models, "
                         "the guard's repeats, the memorisation check, leave one kind out) / one LGBMRanker "
                         "fit on the same matrix; goal: ≤ 30 s on LoCoMo on 2 free cores")
    section.notes.append("the memorisation check's fits run only where the folds go by query "
                         "(grouped LoCoMo: none)")
    return section
