"""Benchmark 7 (full mode) — how re-scoring and sweeps scale.

Three tables, on each evaluation set of ``eval_datasets`` (devmem and LoCoMo in full mode):

- **Queries.** Re-score time (``eval.experiments.live.evaluate_config``: fuse, top-k and the five @5
  metrics, judgments made beforehand; RRF k=30, 20 per path, on the stored depth-50 pool: the
  work of ``bench/rescore.py``'s headline) against the number of queries, 100 → 100,000. The
  queries are synthetic: real queries drawn with replacement (seeded) with their candidate
  rows and judgments, each copy its own query (``resample``). Reported: the median time, µs
  per query and ns per candidate row.
- **Pool depth.** The same re-score on the real query set with pools of depth 10, 20, 50 and
  100 per path: the depth-100 pool cut to its top d per path (``cut``: the rows some path ranks
  within d, plus the fast-path and timeline rows; ranks beyond d become −1, as a depth-d pool
  stores them), re-scored with a per-path depth of d. Two checks are recorded: a cut pool
  scores as the depth-100 pool re-scored at depth d (``same_as_uncut``), and the cut to 50
  holds the stored depth-50 pool's rows (``cut_vs_stored_pool``).
- **Ray workers.** Sweep configurations/s of ``eval.search.sweep.sweep`` over rrf_k 1…200 × w_dense
  0.5, 1, 1.5 (600 configurations) on the real query set, and rrf_k 10…200 step 10 × the same
  weights (60) on a 10× resampled one: local, then on a local Ray cluster (2 CPUs) with 1 and
  2 workers (``eval.search.executors.RayExecutor``). Warm sweeps: the actors start and receive the
  pool in a first sweep, reported apart. Skipped when Ray is not installed.

The load average is recorded with every row (this is a shared 2-core machine).
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import numpy as np

from bench.common import Section, loadavg, log, median, now
from bench.context import Context, eval_datasets
from bench.data import pool
from eval.metrics.measure import judge, mean_metrics
from eval.experiments.live import evaluate_config
from retrieval.candidate_table import Candidates
from retrieval.pipeline import PIPELINES, run_pipeline, with_params

METRICS = ("ndcg@5", "recall@5", "mrr@5", "precision@5", "hit_rate@5")
QUERY_COUNTS = (100, 1_000, 10_000, 100_000)
DEPTHS = (10, 20, 50, 100)
RAY_GRID = ("rrf.rrf_k=1:200:1", "rrf.w_dense=0.5:1.5:0.5")  # 600 configurations, on the real query set
RAY_GRID_LARGE = ("rrf.rrf_k=10:200:10", "rrf.w_dense=0.5:1.5:0.5")  # 60, on the 10× resampled set
SEED = 0

_PER_QUERY = ("query_ids", "query_texts", "fast_target", "timeline", "intent_route", "window", "degraded")


def _take(value, picks: np.ndarray):
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value[picks]
    return tuple(value[i] for i in picks.tolist())


def resample(c: Candidates, qrels: dict, n: int, seed: int = SEED) -> tuple[Candidates, dict]:
    """``n`` queries drawn with replacement from ``c``: each copy keeps its source query's rows
    (in order), per-query fields and judgments under its own id ``<id>~<copy>``."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(c.n_queries, size=n)
    offsets = np.asarray(c.offsets)
    lengths = offsets[picks + 1] - offsets[picks]
    new_offsets = np.concatenate(([0], np.cumsum(lengths))).astype(offsets.dtype)
    # row indices of every copy: its source range, concatenated
    rows = np.repeat(offsets[picks] - new_offsets[:-1], lengths) + np.arange(int(new_offsets[-1]))
    cols = {name: column[rows] for name, column in c.cols.items()}
    cols["query_idx"] = np.repeat(np.arange(n), lengths).astype(c.cols["query_idx"].dtype)
    fields = {name: _take(getattr(c, name), picks) for name in _PER_QUERY}
    ids = tuple(f"{c.query_ids[p]}~{j}" for j, p in enumerate(picks.tolist()))
    fields["query_ids"] = ids
    out = replace(c, offsets=new_offsets, cols=cols, **fields)
    judged = {new: qrels[c.query_ids[p]] for new, p in zip(ids, picks.tolist()) if c.query_ids[p] in qrels}
    return out, judged


def cut(c: Candidates, depth: int) -> Candidates:
    """The pool ``c`` as a depth-``depth`` pool: rows some path ranks within ``depth`` (and the
    fast-path and timeline rows), ranks beyond it −1 and their BM25 scores 0."""
    cols = c.cols
    ranks = ("dense_rank", "bm25_rank", "bm25_all_rank", "bm25_tech_rank")
    within = {name: (cols[name] >= 0) & (cols[name] < depth) for name in ranks}
    keep = np.logical_or.reduce([within[name] for name in ranks]) | cols["via_fast"].astype(bool) \
        | cols["via_timeline"].astype(bool)
    rows = np.flatnonzero(keep)
    new = {name: column[rows] for name, column in cols.items()}
    for name in ranks:
        new[name] = np.where(within[name][rows], new[name], -1).astype(cols[name].dtype)
    for rank, score in (("bm25_rank", "bm25_score"), ("bm25_all_rank", "bm25_all_score"),
                        ("bm25_tech_rank", "bm25_tech_score")):
        new[score] = np.where(new[rank] >= 0, new[score], 0).astype(cols[score].dtype)
    counts = np.bincount(new["query_idx"], minlength=c.n_queries)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.asarray(c.offsets).dtype)
    return replace(c, offsets=offsets, cols=new, pool_depth=depth)


def _rescore_ms(c: Candidates, qrels: dict, config, repeats: int) -> tuple[float, dict]:
    judged = judge(c, qrels)

    def once():
        return evaluate_config(c, judged, config, METRICS).means

    values = once()  # warm-up (kernels compiled, pages touched)
    times = []
    for _ in range(repeats):
        start = now()
        once()
        times.append(now() - start)
    return median(times) * 1000, values


def _query_table(c: Candidates, qrels: dict, repeats: int, counts) -> list[dict]:
    config = with_params(PIPELINES["rrf"], {"rrf.rrf_k": 30})
    out = []
    for n in counts:
        synthetic, judged = resample(c, qrels, n)
        ms, values = _rescore_ms(synthetic, judged, config, repeats if n < 100_000 else max(3, repeats // 2))
        out.append({"queries": n, "rows": synthetic.n_rows, "ms": round(ms, 3),
                    "us_per_query": round(ms * 1000 / n, 2), "ns_per_row": round(ms * 1e6 / max(synthetic.n_rows, 1), 1),
                    "ndcg@5": round(values["ndcg@5"], 4), "loadavg": loadavg()})
        log(f"  queries {n}: {out[-1]}")
        del synthetic
    return out


def _depth_table(c100: Candidates, qrels: dict, repeats: int) -> list[dict]:
    out = []
    for depth in DEPTHS:
        c = cut(c100, depth) if depth < c100.pool_depth else c100
        config = replace(with_params(PIPELINES["rrf"], {"rrf.rrf_k": 30}), depth=depth)
        ms, values = _rescore_ms(c, qrels, config, repeats)
        uncut = mean_metrics(c100, judge(c100, qrels), run_pipeline(c100, config).ranking, METRICS)
        out.append({"depth": depth, "queries": c.n_queries, "rows": c.n_rows, "ms": round(ms, 3),
                    "us_per_query": round(ms * 1000 / c.n_queries, 2), "ns_per_row": round(ms * 1e6 / c.n_rows, 1),
                    "ndcg@5": round(values["ndcg@5"], 4), "same_as_uncut": values == uncut, "loadavg": loadavg()})
        log(f"  depth {depth}: {out[-1]}")
    return out


def _ray_table(c: Candidates, qrels: dict, repeats: int) -> list[dict]:
    """Configurations/s of the RAY_GRID sweep: local, Ray with 1 and 2 workers (warm)."""
    import ray

    from eval.search.executors import RayExecutor
    from eval.search.space import Space, parse_param
    from eval.search.sweep import sweep

    base = PIPELINES["rrf"]
    sets = [("real", c, qrels, RAY_GRID), ("10x resampled", *resample(c, qrels, 10 * c.n_queries), RAY_GRID_LARGE)]
    out = []
    owns = not ray.is_initialized()
    if owns:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        for label, table, judgments, grid in sets:
            space = Space(tuple(parse_param(text, base) for text in grid))
            local = sweep(table, judgments, base, space, folds=5)
            rates = [sweep(table, judgments, base, space, folds=5).configs_per_second for _ in range(repeats)]
            row = {"query_set": label, "queries": table.n_queries, "rows": table.n_rows, "configs": len(local.scores),
                   "local_configs_per_s": round(median(rates), 1), "local_loadavg": loadavg()}
            for workers in (1, 2):
                with RayExecutor(workers=workers) as executor:
                    first = sweep(table, judgments, base, space, folds=5, executor=executor)  # actors start, pool shipped
                    runs = [sweep(table, judgments, base, space, folds=5, executor=executor) for _ in range(repeats)]
                row[f"ray{workers}_configs_per_s"] = round(median([r.configs_per_second for r in runs]), 1)
                row[f"ray{workers}_first_configs_per_s"] = round(first.configs_per_second, 1)
                row[f"ray{workers}_identical_to_local"] = all(
                    np.array_equal(r.scores, local.scores) and r.best_index == local.best_index for r in (first, *runs))
                row[f"ray{workers}_loadavg"] = loadavg()
            out.append(row)
            log(f"  ray {label}: {row}")
    finally:
        if owns:
            ray.shutdown()
    return out


def run(ctx: Context) -> Section:
    section = Section("scaling")
    repeats = ctx.pick(5, 7)
    for name, path in eval_datasets(ctx).items():
        dataset, c = pool(path)
        entry = {"pool_depth": c.pool_depth, "real_queries": c.n_queries, "real_rows": c.n_rows}
        log(f"scaling {name}: {c.n_queries} queries, {c.n_rows} rows (depth {c.pool_depth})")
        entry["by_queries"] = _query_table(c, dataset.qrels, repeats, QUERY_COUNTS)
        _, deepest = pool(path, pool_depth=max(DEPTHS))
        entry["by_depth"] = _depth_table(deepest, dataset.qrels, repeats)
        # the cut is what retrieval at that depth stores: the depth-100 pool cut to 50 holds the
        # stored pool's (query, document) rows, in another order (a pool stored before the exact
        # scan ordered ties at the cut by table position can differ there), and scores the same
        same = cut(deepest, c.pool_depth)
        config = replace(with_params(PIPELINES["rrf"], {"rrf.rrf_k": 30}), depth=c.pool_depth)
        pairs = [set((t.query_idx.astype(np.int64) * len(t.doc_ids) + t.doc_idx).tolist()) for t in (same, c)]
        entry["cut_vs_stored_pool"] = {
            "rows_differing": len(pairs[0] ^ pairs[1]),
            "same_metrics": mean_metrics(same, judge(same, dataset.qrels), run_pipeline(same, config).ranking, METRICS)
            == mean_metrics(c, judge(c, dataset.qrels), run_pipeline(c, config).ranking, METRICS)}
        if importlib.util.find_spec("ray") is not None:
            entry["by_ray_workers"] = _ray_table(c, dataset.qrels, max(1, repeats // 2))
        section.figures[name] = entry
    section.notes.append("re-score = eval.experiments.live.evaluate_config (5 metrics @5), RRF k=30; synthetic "
                         "queries resample real ones with their candidate rows and judgments")
    return section
