"""``rwb sweep``: grid or random search over a pipeline's numeric parameters, cross-validated."""

from __future__ import annotations

from eval.cli._common import add_pool_options, bounded, check_depth, load_with_pool, write_file, write_json
from eval.fast import parse_metric
from eval.progress import Progress
from eval.report import SWEEP_HEADER, sweep_rows, text_table
from eval.sweep import MAX_POINTS, Space, SweepResult, parse_param, parse_sum, sweep
from retrieval.pipeline import get_pipeline

MAX_FOLDS = 1_000


def check_sweep(args, pipeline: str) -> Space:
    """Everything about a sweep that can be checked before the pool is loaded; its space."""
    base = get_pipeline(pipeline)
    if not args.param:
        raise ValueError("give at least one --param name=lo:hi:step")
    specs = tuple(parse_param(text, base) for text in args.param)
    space = Space(specs, tuple(parse_sum(text, specs) for text in (args.sum or [])))
    parse_metric(args.metric)
    bounded("--folds", args.folds, 2, MAX_FOLDS)
    if args.random is not None:
        bounded("--random", args.random, 1, MAX_POINTS)
    return space


def run_sweep(args, dataset, pool, pipeline: str, seed: int) -> SweepResult:
    base = get_pipeline(pipeline)
    space = check_sweep(args, pipeline)
    check_depth({base.name: base}, pool.pool_depth)
    with Progress("config") as progress:
        return sweep(pool, dataset.qrels, base, space, args.metric, args.random, args.folds, seed,
                     progress.stage("configs"))


def cmd_sweep(args) -> int:
    if not args.pipeline:
        raise ValueError("give the pipeline to tune with --pipeline NAME (or a TOML file)")
    check_sweep(args, args.pipeline)
    dataset, pool = load_with_pool(args)
    result = run_sweep(args, dataset, pool, args.pipeline, args.seed)
    print(f"{dataset.name}: {result.mode} search, {len(result.scores)} configurations of {result.base.name} on "
          f"{result.n_queries} judged queries in {result.seconds:.2f} s ({result.configs_per_second:,.0f}/s), "
          f"objective {result.metric}")
    print(text_table(SWEEP_HEADER, sweep_rows(result)))
    print(f"cross-validated ({len(result.folds)} folds, seed {result.seed}): train {result.train_mean:.4f}, "
          f"held-out {result.held_out_mean:.4f}")
    best = ", ".join(f"{k}={v:g}" for k, v in result.best_params.items())
    print(f"as shipped: {result.base_score:.4f}; best on all queries: {best} → {result.best_score:.4f} (in-sample)")
    if args.out:
        write_file(args.out, result.best_toml(), "--out")
        print(f"wrote {args.out} (use it as --pipeline {args.out})")
    if args.json:
        write_json(args.json, result.to_json())
        print(f"wrote {args.json}")
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


def register(sub) -> None:
    p = sub.add_parser("sweep", help="grid or random search over numeric parameters, cross-validated")
    add_pool_options(p)
    p.add_argument("--pipeline", metavar="NAME|FILE", help="the pipeline to tune (required)")
    add_sweep_options(p)
    p.add_argument("--out", metavar="FILE", help="write the best configuration as TOML (usable as --pipeline)")
    p.add_argument("--json", metavar="OUT", help="write every configuration's score and the CV table as JSON")
    p.set_defaults(func=cmd_sweep)
