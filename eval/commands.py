"""Harness commands of ``rwb``: eval, sweep, report.

Every bad input raises ``ValueError`` with a one-line reason (``eval/cli.py`` prints it as
``rwb: error: …`` and exits 2). Long work shows a tqdm bar on stderr when it is a terminal.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from eval.budget import DEFAULT_BUDGET, budget_recall, document_tokens
from eval.compare import CORRECTIONS, DEFAULT_PERMUTATIONS, TESTS, compare_to_baseline
from eval.evaluate import evaluate_pipelines, intent_of, parse_metrics, resolve_pipelines
from eval.fast import parse_metric
from eval.pool import load_pool
from eval.report import SWEEP_HEADER, eval_summary, legend, metric_rows, sweep_rows, text_table, write_report
from eval.router_eval import INTENT_TO_PROFILE, evaluate_router
from eval.sweep import Space, parse_param, parse_sum, sweep
from retrieval.candidates import DEFAULT_POOL_DEPTH
from retrieval.cli import ProgressBar
from retrieval.dataset import load_dataset
from retrieval.embedders import DEFAULT_EMBEDDER
from retrieval.pipeline import get_pipeline


@contextmanager
def progress_bar(desc: str, enabled: bool = True):
    """A ``progress(done, total)`` callable drawing a tqdm bar on stderr (only on a terminal)."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from tqdm import tqdm

    bar = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=desc, file=sys.stderr, leave=False, mininterval=0.2)
        bar.n = done
        bar.refresh() if done == total else bar.update(0)

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()


def _note(text: str) -> None:
    print(f"rwb: {text}", file=sys.stderr)


def _positive_int(name: str, value: int) -> int:
    if value < 1:
        raise ValueError(f"{name} must be ≥ 1, got {value}")
    return value


def _load(args):
    """Dataset and its candidate pool (retrieved once, then read from the store)."""
    _positive_int("--pool-depth", args.pool_depth)
    dataset = load_dataset(args.dataset)
    if not dataset.qrels:
        raise ValueError(f"dataset {dataset.name!r} has no qrels (qrels/test.tsv): nothing to evaluate")
    bar = ProgressBar(not args.quiet)
    try:
        pool = load_pool(dataset, args.embedder, args.pool_depth, progress=bar)
    finally:
        bar.close()
    for note in dict.fromkeys(n for notes in pool.degraded for n in notes):
        _note(f"degraded: {note}")
    return dataset, pool


def _check_depth(configs, pool_depth: int) -> None:
    for label, config in configs.items():
        if config.path_depth > pool_depth:
            raise ValueError(f"pipeline {label!r} takes {config.path_depth} candidates per path but the pool holds "
                             f"{pool_depth}; rerun with --pool-depth {config.path_depth}")


def _write_json(path: str, data: dict) -> None:
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"--json {path} is a folder; give a file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", "utf-8")


def _validate_eval_args(args) -> tuple:
    metrics = parse_metrics(args.metrics)
    if args.test not in TESTS:
        raise ValueError(f"unknown --test {args.test!r}; choose from {list(TESTS)}")
    if args.correction not in CORRECTIONS:
        raise ValueError(f"unknown --correction {args.correction!r}; choose from {sorted(CORRECTIONS)}")
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must lie in (0, 1), got {args.alpha}")
    _positive_int("--permutations", args.permutations)
    _positive_int("--budget", args.budget)
    configs = resolve_pipelines(args.pipeline or [], baseline=args.baseline)
    return metrics, configs


def _evaluate(args, dataset, pool, metrics, configs):
    _check_depth(configs, pool.pool_depth)
    baseline = str(get_pipeline(args.baseline))
    with progress_bar("pipelines", not args.quiet) as progress:
        evaluation = evaluate_pipelines(pool, dataset.qrels, configs, metrics, intent_of(dataset.queries), progress)
    significance = None
    if len(configs) > 1:
        significance = compare_to_baseline(evaluation, dataset.qrels, baseline, args.test, args.correction,
                                           args.alpha, args.permutations, args.seed)
    tokens = document_tokens(dataset.documents)
    budget = {label: budget_recall(pool, dataset.qrels, run.ranking, args.budget, tokens)
              for label, run in evaluation.runs.items()}
    router = None
    labels = {q.id: q.intent for q in dataset.queries}
    if any(i in INTENT_TO_PROFILE for i in labels.values()):
        router = evaluate_router(pool, dataset.qrels, labels, "seed-adaptive", "ndcg@5")
    return evaluation, significance, budget, router


def cmd_eval(args) -> int:
    metrics, configs = _validate_eval_args(args)
    dataset, pool = _load(args)
    evaluation, significance, budget, router = _evaluate(args, dataset, pool, metrics, configs)
    print(f"{dataset.name}: {evaluation.n_queries} judged queries · model {pool.embedder} · pool depth "
          f"{pool.pool_depth} · fingerprint {dataset.fingerprint[:12]}")
    print(text_table(["pipeline", *metrics], metric_rows(evaluation, significance)))
    if significance:
        print(legend(significance))
    print(f"budget_recall@{args.budget}: " + ", ".join(f"{p} {b.mean:.4f}" for p, b in budget.items()))
    if router:
        print(f"intent router: accuracy {router.accuracy:.1%} on {router.n_labelled} labelled queries "
              f"(preference → concept); {router.metric} routed {router.routed_mean:.4f}, oracle "
              f"{router.oracle_mean:.4f}, mean regret {router.regret_mean:.4f}")
    if evaluation.excluded:
        _note(f"{len(evaluation.excluded)} queries have no relevant judgment and do not count")
    if evaluation.missing:
        _note(f"{len(evaluation.missing)} judged queries are missing from the pool and score 0")
    if args.json:
        _write_json(args.json, eval_summary(evaluation, significance, budget, router))
        print(f"wrote {args.json}")
    return 0


def _sweep_space(args, base):
    if not args.param:
        raise ValueError("give at least one --param name=lo:hi:step")
    specs = tuple(parse_param(text, base) for text in args.param)
    constraints = tuple(parse_sum(text, specs) for text in (args.sum or []))
    return Space(specs, constraints)


def _run_sweep(args, dataset, pool, pipeline: str, seed: int):
    base = get_pipeline(pipeline)
    space = _sweep_space(args, base)
    parse_metric(args.metric)
    _check_depth({base.name: base}, pool.pool_depth)
    if args.random is not None:
        _positive_int("--random", args.random)
    with progress_bar("configs", not args.quiet) as progress:
        return sweep(pool, dataset.qrels, base, space, args.metric, args.random, args.folds, seed, progress)


def _check_sweep_args(args, pipeline: str) -> None:
    """Everything that can be checked before the pool is loaded."""
    base = get_pipeline(pipeline)
    _sweep_space(args, base)
    parse_metric(args.metric)
    if args.folds < 2:
        raise ValueError(f"--folds must be ≥ 2, got {args.folds}")
    if args.random is not None:
        _positive_int("--random", args.random)


def cmd_sweep(args) -> int:
    if not args.pipeline:
        raise ValueError("give the pipeline to tune with --pipeline NAME (or a TOML file)")
    _check_sweep_args(args, args.pipeline)
    dataset, pool = _load(args)
    result = _run_sweep(args, dataset, pool, args.pipeline, args.seed)
    print(f"{dataset.name}: {result.mode} search, {len(result.scores)} configurations of {result.base.name} on "
          f"{result.n_queries} judged queries in {result.seconds:.2f} s ({result.configs_per_second:,.0f}/s), "
          f"objective {result.metric}")
    print(text_table(SWEEP_HEADER, sweep_rows(result)))
    print(f"cross-validated ({len(result.folds)} folds, seed {result.seed}): train {result.train_mean:.4f}, "
          f"held-out {result.held_out_mean:.4f}")
    best = ", ".join(f"{k}={v:g}" for k, v in result.best_params.items())
    print(f"as shipped: {result.base_score:.4f}; best on all queries: {best} → {result.best_score:.4f} (in-sample)")
    if args.out:
        target = Path(args.out)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(result.best_toml(), "utf-8")
        print(f"wrote {args.out} (use it as --pipeline {args.out})")
    if args.json:
        _write_json(args.json, result.to_json())
        print(f"wrote {args.json}")
    return 0


def cmd_report(args) -> int:
    if not args.out:
        raise ValueError("give the folder to write the report into with --out DIR")
    metrics, configs = _validate_eval_args(args)
    if args.sweep:
        _check_sweep_args(args, args.sweep)
    elif args.param or args.sum or args.random:
        raise ValueError("--param, --sum and --random need --sweep PIPELINE")
    dataset, pool = _load(args)
    evaluation, significance, budget, router = _evaluate(args, dataset, pool, metrics, configs)
    result = _run_sweep(args, dataset, pool, args.sweep, args.sweep_seed) if args.sweep else None
    paths = write_report(args.out, evaluation, significance, budget, router, result)
    for path in paths.values():
        print(f"wrote {path}")
    return 0


def _one_line_errors(parser) -> None:
    """argparse's own errors (a missing value, ``--folds abc``) as one ``rwb: error:`` line, exit 2."""
    def error(message: str):
        print(f"rwb: error: {parser.prog.removeprefix('rwb ')}: {message}", file=sys.stderr)
        sys.exit(2)

    parser.error = error


def _add_common(p) -> None:
    _one_line_errors(p)
    p.add_argument("dataset", help="dataset folder")
    p.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="minilm, use-multilingual or a model path")
    p.add_argument("--pool-depth", type=int, default=DEFAULT_POOL_DEPTH,
                   help=f"candidates per path retrieved once per query (default {DEFAULT_POOL_DEPTH})")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_eval_options(p) -> None:
    p.add_argument("--pipeline", action="append", default=[], metavar="NAME|FILE",
                   help="a named pipeline or a TOML file (repeat)")
    p.add_argument("--baseline", default="vector", help="pipeline the others are tested against (default vector)")
    p.add_argument("--metrics", default=None, help="comma-separated, e.g. ndcg@5,recall@5,mrr@5 (ranx names)")
    p.add_argument("--test", default="fisher", help=f"significance test: {' or '.join(TESTS)} (default fisher)")
    p.add_argument("--correction", default="holm", help="multiple-comparison correction: holm or bonferroni")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after correction (default 0.05)")
    p.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS,
                   help=f"randomization-test permutations (default {DEFAULT_PERMUTATIONS})")
    p.add_argument("--seed", type=int, default=42, help="seed of the randomization test (default 42)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help=f"token budget of the budget-recall metric (default {DEFAULT_BUDGET})")


def _add_sweep_options(p, seed_flag: str = "--seed") -> None:
    p.add_argument("--param", action="append", default=[], metavar="NAME=LO:HI:STEP",
                   help="a numeric dotted parameter to sweep (repeat)")
    p.add_argument("--sum", action="append", default=[], metavar="A+B[+C]=TOTAL",
                   help="keep only grid points whose swept values sum to TOTAL (math.isclose)")
    p.add_argument("--random", type=int, default=None, metavar="N", help="random search: N distinct grid points")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds by query (default 5)")
    p.add_argument(seed_flag, dest=seed_flag.lstrip("-").replace("-", "_"), type=int, default=0,
                   help="seed of the fold split and random search (default 0)")
    p.add_argument("--metric", default="ndcg@5", help="objective metric (default ndcg@5)")


def add_commands(sub) -> None:
    """Register ``rwb eval``, ``rwb sweep`` and ``rwb report``."""
    p = sub.add_parser("eval", help="evaluate pipelines on a dataset with significance tests")
    _add_common(p)
    _add_eval_options(p)
    p.add_argument("--json", metavar="OUT", help="write the results as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("sweep", help="grid or random search over numeric parameters, cross-validated")
    _add_common(p)
    p.add_argument("--pipeline", metavar="NAME|FILE", help="the pipeline to tune (required)")
    _add_sweep_options(p)
    p.add_argument("--out", metavar="FILE", help="write the best configuration as TOML (usable as --pipeline)")
    p.add_argument("--json", metavar="OUT", help="write every configuration's score and the CV table as JSON")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("report", help="write report.html / report.md / report.json")
    _add_common(p)
    _add_eval_options(p)
    p.add_argument("--sweep", metavar="PIPELINE", help="also sweep this pipeline (with --param …)")
    _add_sweep_options(p, seed_flag="--sweep-seed")
    p.add_argument("--out", metavar="DIR", help="folder to write the report into (required)")
    p.set_defaults(func=cmd_report)
