"""``rwb sweep``: grid or random search over a pipeline's numeric parameters, cross-validated;
``rwb tune``: Optuna search over many parameters at once, scored by nested cross-validation."""

from __future__ import annotations

import eval.search.tune as tune_mod

import math
from typing import Callable

from eval.cli._common import (add_pool_options, bounded, check_depth, judgments, load_with_pool,
                              write_file, write_json)
from eval.search.executors import EXECUTORS, MAX_WORKERS, check_reachable, cluster_address, import_ray, make_executor
from eval.metrics.measure import parse_metric
from eval.learning.router import learned_routes
from eval.progress import Progress, step
from eval.reports.report import SWEEP_HEADER, fixed_note, sweep_rows, text_table
from eval.search.space import Space, parse_param, parse_sum
from eval.search.sweep import MAX_POINTS, SweepResult, sweep
from eval.search.tune import (DEFAULT_INNER_FOLDS, DEFAULT_TRIALS, SAMPLERS, TuneResult, check_sizes, check_space,
                       default_space, parse_tune_param, tune)
from eval.stores.configs import resolve_config

MAX_FOLDS = 1_000


def check_sweep(args, pipeline: str) -> Space:
    """Everything about a sweep that can be checked before the pool is loaded; its space."""
    base = resolve_config(pipeline)
    if not args.param:
        raise ValueError("give at least one --param name=lo:hi:step")
    specs = tuple(parse_param(text, base) for text in args.param)
    space = Space(specs, tuple(parse_sum(text, specs) for text in (args.sum or [])))
    parse_metric(args.metric)
    bounded("--folds", args.folds, 2, MAX_FOLDS)
    if args.random is not None:
        bounded("--random", args.random, 1, MAX_POINTS)
    return space


def run_sweep(args, dataset, pool, pipeline: str, seed: int, executor=None,
              qrels=None) -> SweepResult:
    """``qrels``: the judgments to score with (default: the dataset's own)."""
    base = resolve_config(pipeline)
    space = check_sweep(args, pipeline)
    check_depth({base.name: base}, pool.pool_depth)
    routes = learned_routes(pool, dataset.queries, [base], args.embedder)  # if it follows them
    step(f"sweeping {base.name} ({args.random or 'every'} grid points, {args.folds}-fold CV)")
    with Progress("config") as progress:
        return sweep(pool, dataset.qrels if qrels is None else qrels, base, space, args.metric,
                     args.random, args.folds, seed, progress.stage("configs"), executor=executor,
                     routes=routes)


def check_executor(args) -> None:
    """``--executor`` / ``--address`` / ``--workers``, checked before the pool is loaded."""
    if args.workers is not None:
        bounded("--workers", args.workers, 1, MAX_WORKERS)
    if args.executor == "local" and (args.address or args.workers is not None):
        raise ValueError("--address and --workers need --executor ray")
    if args.executor == "ray":
        import_ray()
        address = cluster_address(args.address)
        if address:
            check_reachable(address)


def write_outputs(args, toml: Callable[[], str], data: Callable[[], dict]) -> None:
    """``--out`` (the winning configuration as TOML) and ``--json``, where asked for."""
    if args.out:
        write_file(args.out, toml(), "--out")
        print(f"wrote {args.out} (use it as --pipeline {args.out})")
    if args.json:
        write_json(args.json, data())
        print(f"wrote {args.json}")


def cmd_sweep(args) -> int:
    if not args.pipeline:
        raise ValueError("give the pipeline to tune with --pipeline NAME (or a TOML file)")
    check_sweep(args, args.pipeline)
    check_executor(args)
    dataset, pool = load_with_pool(args)
    used = judgments(args, dataset)
    with make_executor(args.executor, args.address, args.workers) as executor:
        result = run_sweep(args, dataset, pool, args.pipeline, args.seed, executor,
                           qrels=used.qrels)
    where = "" if args.executor == "local" else f" on Ray ({executor.workers} workers)"
    print(f"{dataset.name}: {result.mode} search, {len(result.scores)} configurations of {result.base.name} on "
          f"{result.n_queries} judged queries in {result.seconds:.2f} s ({result.configs_per_second:,.0f}/s){where}, "
          f"objective {result.metric}")
    print(text_table(SWEEP_HEADER, sweep_rows(result)))
    print(f"cross-validated ({len(result.folds)} folds, seed {result.seed}): train {result.train_mean:.4f}, "
          f"held-out {result.held_out_mean:.4f}")
    best = ", ".join(f"{k}={v:g}" for k, v in result.best_params.items())
    print(f"as shipped: {result.base_score:.4f}; best on all queries: {best} → {result.best_score:.4f} (in-sample)")
    print(fixed_note(result))
    write_outputs(args, result.best_toml, lambda: {**result.to_json(), "judgments": used.to_json()})
    return 0


def add_sweep_options(p, seed_flag: str = "--seed") -> None:
    p.add_argument("--param", action="append", default=[], metavar="NAME=LO:HI:STEP",
                   help="a numeric dotted parameter to sweep (repeat)")
    p.add_argument("--sum", action="append", default=[], metavar="A+B[+C]=TOTAL",
                   help="keep only grid points whose swept values sum to TOTAL (math.isclose)")
    p.add_argument("--random", type=int, default=None, metavar="N", help="random search: N distinct grid points")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds by query (default 5)")
    p.add_argument(seed_flag, dest=seed_flag.lstrip("-").replace("-", "_"), type=int, default=0,
                   help="seed of the fold split and random search (default 0)")
    p.add_argument("--metric", default="ndcg@5", help="objective metric (default ndcg@5)")


def check_tune(args) -> tuple:
    """The base pipeline and the search space, checked before the pool is loaded."""
    if not args.pipeline:
        raise ValueError("give the pipeline to tune with --pipeline NAME (or a TOML file)")
    base = resolve_config(args.pipeline)
    check_sizes(args.trials, args.folds, args.inner_folds)
    parse_metric(args.metric)
    space = tuple(parse_tune_param(text, base) for text in args.param) or default_space(base)
    check_space(base, space, args.sampler)
    return base, space


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in params.items())


def print_tune(result: TuneResult) -> None:
    r = result
    searches = 1 + (r.inner_folds if r.guard else 0)
    print(f"{r.dataset}: rwb tune {r.base.name} · {r.sampler}, {r.trials} trials per search · nested CV "
          f"{r.folds} outer folds × {r.inner_folds} inner ({searches} searches per outer fold) · {r.n_queries} "
          f"judged queries · objective {r.metric} · {r.n_configs} configurations in {r.seconds:.1f} s")
    print("space: " + " ".join(str(p) for p in r.space))
    rows = [[str(f.fold), str(len(f.test_ids)), tune_mod.chosen_text(f), _fmt_params(f.applied), f"{f.choice.record['train_mean']:.4f}",
             "—" if math.isnan(f.choice.record["inner_tuned"]) else f"{f.choice.record['inner_tuned']:.4f}",
             f"{f.choice.inner_default:.4f}", f"{f.test_mean:.4f}"] for f in r.outer]
    print(text_table(["fold", "held out", "chosen", "search winner or default", "train", "inner CV",
                      "default", "held-out"], rows))
    if r.n_groups:
        print(f"folds keep each of {r.n_groups} query groups whole (--fold-by)")
    print(f"held-out {r.metric} (each query held out once, {r.n_queries} queries): tuned procedure "
          f"{r.held_out_mean:.4f}")
    for c in r.comparisons:
        print(f"  vs {c.name}: {c.mean:.4f}, Δ {c.delta:+.4f} (W/T/L {c.wins}/{c.ties}/{c.losses}); "
              f"p Fisher {c.p_fisher:.4f} (Holm {c.p_fisher_holm:.4f}), paired t {c.p_student:.4f} "
              f"(Holm {c.p_student_holm:.4f})")
    what = _fmt_params(r.final.pick) if r.final.kind == "tuned" else f"default {r.base.name} kept (the search did " \
        f"not beat it in inner CV: {r.final.record['inner_tuned']:.4f} ≤ {r.final.inner_default:.4f})"
    print(f"final, tuned on all {r.n_queries} queries: {what} → {r.final_score:.4f} (in-sample)")


def cmd_tune(args) -> int:
    base, space = check_tune(args)
    check_executor(args)
    dataset, pool = load_with_pool(args)
    used = judgments(args, dataset)
    routes = learned_routes(pool, dataset.queries, [base], args.embedder)  # if it follows them
    check_space(base, space, args.sampler, pool.pool_depth)
    check_depth({base.name: base}, pool.pool_depth)
    step(f"tuning {base.name}: {args.trials} trials per search, nested CV {args.folds} × "
         f"{args.inner_folds} folds")
    from eval.learning.leakage import fold_groups  # shared with rwb learn: one default

    folding = fold_groups(dataset.queries, used.qrels, args.folds, args.fold_by)
    if folding.note:
        print(f"rwb: note: {folding.note}")
    with make_executor(args.executor, args.address, args.workers) as executor, Progress("trial") as progress:
        result = tune(pool, used.qrels, base, space, trials=args.trials, folds=args.folds,
                      seed=args.seed, sampler=args.sampler, metric=args.metric,
                      inner_folds=args.inner_folds, guard=not args.no_guard,
                      progress=progress.stage("trials"), executor=executor,
                      fold_by=folding.fold_by, routes=routes)
    print_tune(result)
    write_outputs(args, result.to_toml, lambda: {**result.to_json(), "judgments": used.to_json()})
    return 0


def add_fold_by(p) -> None:
    p.add_argument("--fold-by", metavar="FIELD",
                   help="keep the queries that share this field's value in one fold, outer and inner "
                        "(group, scope, intent, lang or a key of queries.jsonl, e.g. sample_id: one "
                        "LoCoMo conversation); none: folds by query; default: the queries' group "
                        "field, or the groups of queries that share a relevant document, where "
                        "they are clear (the command says so), else folds by query")


def add_executor_options(p, what: str) -> None:
    p.add_argument("--executor", choices=EXECUTORS, default="local", help=what)
    p.add_argument("--address", metavar="ADDR", help="with --executor ray: an existing Ray cluster (ray.init(address=…)); "
                                                     "default: $RAY_ADDRESS if set, else start a local one")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="with --executor ray: Ray workers (default: the cluster's CPUs)")


def register(sub) -> None:
    p = sub.add_parser("sweep", help="grid or random search over numeric parameters, cross-validated")
    add_pool_options(p)
    p.add_argument("--pipeline", metavar="LABEL|FILE",
                   help="the pipeline to tune: a name, profile:<preset>, saved:<name> or a TOML file (required)")
    add_sweep_options(p)
    p.add_argument("--out", metavar="FILE", help="write the best configuration as TOML (usable as --pipeline)")
    p.add_argument("--json", metavar="OUT", help="write every configuration's score and the CV table as JSON")
    add_executor_options(p, "score configurations here (local, default) or over Ray workers (ray: configurations × "
                            "query shards; needs pip install -e '.[distributed]'); the results are identical")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("tune", help="Optuna search over many parameters, scored by nested cross-validation")
    add_pool_options(p)
    p.add_argument("--pipeline", metavar="LABEL|FILE",
                   help="the pipeline to tune: a name, profile:<preset>, saved:<name> or a TOML file (required)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=LO:HI[:STEP]",
                   help="a parameter to search (repeat); default: every numeric parameter of the pipeline's fusion")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help=f"trials per search (default {DEFAULT_TRIALS})")
    p.add_argument("--folds", type=int, default=5, help="outer cross-validation folds by query (default 5)")
    p.add_argument("--inner-folds", type=int, default=DEFAULT_INNER_FOLDS,
                   help=f"inner folds of the guard against the default (default {DEFAULT_INNER_FOLDS})")
    add_fold_by(p)
    p.add_argument("--no-guard", action="store_true", help="always take the search winner (no inner CV guard)")
    p.add_argument("--sampler", choices=SAMPLERS, default="tpe", help="tpe (default), grid or random")
    p.add_argument("--seed", type=int, default=0, help="seed of the folds and the samplers (default 0)")
    p.add_argument("--metric", default="ndcg@5", help="objective metric (default ndcg@5)")
    p.add_argument("--out", metavar="FILE", help="write the configuration tuned on all queries as TOML")
    p.add_argument("--json", metavar="OUT", help="write folds, per-query held-out values and tests as JSON")
    add_executor_options(p, "run the searches (one per outer fold, plus the final one) here (local, default) or as "
                            "Ray tasks (ray; needs pip install -e '.[distributed]'); the results are identical")
    p.set_defaults(func=cmd_tune)
