"""``rwb eval`` and ``rwb report``: pipelines against a baseline (``eval.experiment.run_experiment``)."""

from __future__ import annotations

from eval.budget import DEFAULT_BUDGET
from eval.cli._common import add_pool_options, bounded, check_depth, load_with_pool, note, write_json
from eval.cli.sweep import add_sweep_options, check_sweep, run_sweep
from eval.compare import DEFAULT_PERMUTATIONS, TESTS
from eval.evaluate import parse_metrics
from eval.experiment import Experiment, ExperimentOptions, experiment_configs, run_experiment
from eval.progress import Progress
from eval.report import legend, metric_rows, text_table

MAX_PERMUTATIONS = 1_000_000
MAX_BUDGET = 10_000_000


def _options(args) -> ExperimentOptions:
    """Checked before the pool is loaded, so bad input fails at once."""
    bounded("--permutations", args.permutations, 1, MAX_PERMUTATIONS)
    bounded("--budget", args.budget, 1, MAX_BUDGET)
    return ExperimentOptions(metrics=parse_metrics(args.metrics), test=args.test, correction=args.correction,
                             alpha=args.alpha, permutations=args.permutations, seed=args.seed,
                             token_budget=args.budget)


def _experiment(args, dataset, pool, options: ExperimentOptions) -> Experiment:
    configs = experiment_configs(args.pipeline, args.baseline)
    check_depth(configs, pool.pool_depth)
    with Progress("pipeline") as progress:
        return run_experiment(pool, dataset, args.pipeline, args.baseline, options,
                              progress=progress.stage("pipelines"))


def cmd_eval(args) -> int:
    options = _options(args)
    experiment_configs(args.pipeline, args.baseline)  # unknown pipelines fail before the pool loads
    dataset, pool = load_with_pool(args)
    experiment = _experiment(args, dataset, pool, options)
    evaluation, significance = experiment.evaluation, experiment.significance
    print(f"{dataset.name}: {evaluation.n_queries} judged queries · model {pool.embedder} · pool depth "
          f"{pool.pool_depth} · fingerprint {dataset.fingerprint[:12]}")
    print(text_table(["pipeline", *evaluation.metrics], metric_rows(evaluation, significance)))
    if significance:
        print(legend(significance))
    print(f"budget_recall@{options.token_budget}: "
          + ", ".join(f"{p} {b.mean:.4f}" for p, b in experiment.budget.items()))
    router = experiment.router
    if router:
        print(f"intent router: accuracy {router.accuracy:.1%} on {router.n_labelled} labelled queries "
              f"(preference → concept); {router.metric} routed {router.routed_mean:.4f}, oracle "
              f"{router.oracle_mean:.4f}, mean regret {router.regret_mean:.4f}")
    if evaluation.excluded:
        note(f"{len(evaluation.excluded)} queries have no relevant judgment and do not count")
    if evaluation.missing:
        note(f"{len(evaluation.missing)} judged queries are missing from the pool and score 0")
    if args.json:
        write_json(args.json, experiment.summary())
        print(f"wrote {args.json}")
    return 0


def cmd_report(args) -> int:
    if not args.out:
        raise ValueError("give the folder to write the report into with --out DIR")
    options = _options(args)
    experiment_configs(args.pipeline, args.baseline)
    if args.sweep:
        check_sweep(args, args.sweep)
    elif args.param or args.sum or args.random:
        raise ValueError("--param, --sum and --random need --sweep PIPELINE")
    dataset, pool = load_with_pool(args)
    experiment = _experiment(args, dataset, pool, options)
    result = run_sweep(args, dataset, pool, args.sweep, args.sweep_seed) if args.sweep else None
    for path in experiment.write_report(args.out, result).values():
        print(f"wrote {path}")
    return 0


def _add_experiment_options(p) -> None:
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


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate pipelines on a dataset with significance tests")
    add_pool_options(p)
    _add_experiment_options(p)
    p.add_argument("--json", metavar="OUT", help="write the results as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="write report.html / report.md / report.json")
    add_pool_options(p)
    _add_experiment_options(p)
    p.add_argument("--sweep", metavar="PIPELINE", help="also sweep this pipeline (with --param …)")
    add_sweep_options(p, seed_flag="--sweep-seed")
    p.add_argument("--out", metavar="DIR", help="folder to write the report into (required)")
    p.set_defaults(func=cmd_report)
