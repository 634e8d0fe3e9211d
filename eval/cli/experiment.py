"""``rwb eval`` and ``rwb report``: pipelines against a baseline (``eval.experiments.experiment.run_experiment``)."""

from __future__ import annotations

from pathlib import Path

from eval.statistics.bootstrap import DEFAULT_RESAMPLES
from eval.metrics.budget import DEFAULT_BUDGET
from eval.cli._common import (add_pool_options, bounded, check_depth, judgments, load_with_pool,
                              note, write_json)
from eval.statistics.judged_below import bias_lines
from eval.cli.sweep import add_sweep_options, check_sweep, run_sweep
from eval.statistics.significance import CORRECTIONS, DEFAULT_PERMUTATIONS, TESTS
from eval.metrics.ranx_eval import DEFAULT_CUTOFFS, GAINS, metric_cutoff, parse_cutoffs
from eval.experiments.experiment import DEFAULT_FAMILIES, Experiment, ExperimentOptions, experiment_configs, run_experiment
from eval.progress import Progress, step
from eval.experiments.replay import replay_metrics, replay_table
from eval.reports.report import (SHORT_NOTE, detail_header, detail_rows, intent_rows, legend, means_rows, method_lines,
                         short_notes, text_table, experiment_summary, write_experiment_report)
from eval.learning.router_eval import router_lines
from eval.cli.engine import add_context_options
from eval.stores.history import DEFAULT_WAIT, CheckHistory, dataset_lock
from retrieval.bm25 import DEFAULT_ANALYZER
from retrieval.dataset import load_dataset
from eval.search.tune import in_sample_line

MAX_PERMUTATIONS = 1_000_000
MAX_BUDGET = 10_000_000
MAX_BOOTSTRAP = 100_000


def _options(args) -> ExperimentOptions:
    """Checked before the pool is loaded, so bad input fails at once."""
    bounded("--permutations", args.permutations, 1, MAX_PERMUTATIONS)
    bounded("--bootstrap", args.bootstrap, 1, MAX_BOOTSTRAP)
    bounded("--budget", args.budget, 1, MAX_BUDGET)
    options = ExperimentOptions(metrics=args.metrics or DEFAULT_FAMILIES, cutoffs=parse_cutoffs(args.cutoffs),
                                gain=args.gain, test=args.test, correction=args.correction, alpha=args.alpha,
                                permutations=args.permutations, seed=args.seed, bootstrap=args.bootstrap,
                                token_budget=args.budget)
    _detail(args, options)
    return options


def _detail(args, options: ExperimentOptions) -> list[str]:
    """The metrics whose statistics ``rwb eval`` prints in full: ``--detail all``, a list, or
    (default) those at the primary metric's cutoff plus the uncut ones (MAP)."""
    text = (getattr(args, "detail", None) or "").strip()
    if text == "all":
        return list(options.metrics)
    if text:
        wanted = [m.strip() for m in text.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in options.metrics]
        if unknown:
            raise ValueError(f"--detail {unknown[0]!r} is not an evaluated metric; choose from "
                             f"{', '.join(options.metrics)} or 'all'")
        return wanted
    k = metric_cutoff(options.primary)
    return [m for m in options.metrics if metric_cutoff(m) in (k, 0)]


def _experiment(args, dataset, pool, options: ExperimentOptions, used) -> Experiment:
    configs = experiment_configs(args.pipeline, args.baseline)
    check_depth(configs, pool.pool_depth)
    with Progress("pipeline") as progress:
        return run_experiment(pool, dataset, args.pipeline, args.baseline, options,
                              qrels=used.qrels, judgments=used.to_json(),
                              progress=progress.stage("pipelines"), step=step)


def cmd_eval(args) -> int:
    options = _options(args)
    embedders = list(dict.fromkeys(args.embedder or [None]))
    analyzers = list(dict.fromkeys(args.analyzer or [DEFAULT_ANALYZER]))
    if len(embedders) > 1 and len(analyzers) > 1:
        raise ValueError("compare either embedders or analyzers side by side: repeat --embedder or --analyzer, not both")
    for flag, named in (("--embedder", embedders), ("--analyzer", analyzers)):
        if len(named) > 1 and (args.context or args.replay):
            raise ValueError(f"several {flag} compare pipelines side by side; --context and --replay take one")
    args.embedder, args.analyzer = embedders[0], analyzers[0]
    if args.context:
        from eval.cli.engine import _open, context_replay

        dataset, handle = _open(args.dataset, args.embedder, args.analyzer)
        return context_replay(args, dataset, handle, judgments(args, dataset, say=False))
    experiment_configs(args.pipeline, args.baseline)  # unknown pipelines fail before the pool loads
    if len(embedders) > 1:
        return _compare_side(args, embedders, options, "embedder")
    if len(analyzers) > 1:
        return _compare_side(args, analyzers, options, "analyzer")
    dataset, pool = load_with_pool(args)
    used = judgments(args, dataset, say=args.replay)  # else the method lines say it
    if args.replay:
        return _replay(args, dataset, pool, options, used)
    experiment = _experiment(args, dataset, pool, options, used)
    print(f"{dataset.name}: {experiment.evaluation.n_queries} judged queries · model {pool.embedder} · analyzer "
          f"{pool.analyzer} · pool depth {pool.pool_depth} · fingerprint {dataset.fingerprint[:12]}")
    for label, provenance in experiment.in_sample.items():  # provenance, not noise: stdout, --quiet or not
        print(in_sample_line(label, dataset.fingerprint, provenance))
    return _print_experiment(args, options, experiment)


def _compare_side(args, names: list[str], options: ExperimentOptions, side: str) -> int:
    """``rwb eval`` with several ``--embedder`` or ``--analyzer`` (``side``): each pipeline per
    embedder or per BM25 analyzer, the other held fixed, all paired-tested against the baseline
    on the first (``eval.experiments.embedders.compare_embedders``)."""
    from eval.experiments.embedders import compare_embedders

    pools = {}
    for name in names:
        setattr(args, side, name)
        dataset, pool = load_with_pool(args)
        label = getattr(pool, side)
        if label in pools:
            raise ValueError(f"--{side} {name} retrieves as {label}, named twice")
        pools[label] = pool
    used = judgments(args, dataset, say=False)
    configs = experiment_configs(args.pipeline, args.baseline)
    for pool in pools.values():
        check_depth(configs, pool.pool_depth)
    with Progress(side) as progress:
        experiment = compare_embedders(pools, dataset, args.pipeline, args.baseline, options, qrels=used.qrels,
                                       judgments=used.to_json(), progress=progress.stage(f"{side}s"), side=side)
    first = next(iter(pools.values()))
    varied, fixed = ("models", "model") if side == "embedder" else ("analyzers", "analyzer")
    held = f"analyzer {first.analyzer}" if side == "embedder" else f"model {first.embedder}"
    print(f"{dataset.name}: {experiment.evaluation.n_queries} judged queries · {varied} {', '.join(pools)} "
          f"(each pipeline as <pipeline>@<{fixed}>; baseline {experiment.baseline}) · {held} "
          f"· pool depth {first.pool_depth} · fingerprint {dataset.fingerprint[:12]}")
    return _print_experiment(args, options, experiment)


def _print_experiment(args, options: ExperimentOptions, experiment: Experiment) -> int:
    evaluation, significance, intervals = experiment.evaluation, experiment.significance, experiment.intervals
    for line in method_lines(experiment.settings(), significance, intervals):
        print(line)
    print()
    print(text_table(*means_rows(evaluation, significance, experiment.in_sample)))
    if significance:
        print(legend(significance))
    for metric in _detail(args, options):
        print(f"\n{metric}:")
        print(text_table(detail_header(significance, intervals),
                         detail_rows(evaluation, significance, intervals, metric)))
    header, rows, bias_notes = bias_lines(list(experiment.bias), options.alpha)
    if rows:
        print(f"\nJudgment bias (judged@k: share of the top k with any judgment; nDCG'@k: "
              f"unjudged removed, Sakai 2007; bpref: trec_eval; p: judged@k vs "
              f"{experiment.baseline}):")
        print(text_table(header, rows))
        for line in bias_notes:
            print(f"  note: {line}")
    if experiment.unjudged:
        print(f"\nUnjudged documents (each pipeline vs {experiment.baseline}, the unjudged documents of "
              f"the two tops graded for one side, then the other; paired t at 0.05):")
        for label, bounds in experiment.unjudged.items():
            print(f"  {label}: {bounds.text()}")
    print(f"\nPer intent ({experiment.primary}; judged queries in brackets):")
    print(text_table(*intent_rows(evaluation, experiment.primary)))
    notes = short_notes(evaluation)
    if notes:
        print("\n" + SHORT_NOTE)
        print("\n".join(f"  {line}" for line in notes))
    print()
    print(f"budget_recall@{options.token_budget}: "
          + ", ".join(f"{p} {b.mean:.4f}" for p, b in experiment.budget.items()))
    if experiment.router:
        print("\n".join(router_lines(experiment.router, experiment.learned_router)))
    if evaluation.excluded:
        note(f"{len(evaluation.excluded)} queries have no relevant judgment and do not count")
    if evaluation.missing:
        note(f"{len(evaluation.missing)} judged queries are missing from the pool and score 0")
    if args.json:
        write_json(args.json, experiment_summary(experiment))
        print(f"wrote {args.json}")
    return 0


def _replay(args, dataset, pool, options: ExperimentOptions, used) -> int:
    """``rwb eval --replay``: frozen vs replayed metrics (``eval.experiments.replay``), no significance tests."""
    configs = experiment_configs(args.pipeline, args.baseline)
    check_depth(configs, pool.pool_depth)
    metrics = _detail(args, options)
    results = replay_metrics(pool, dataset, configs, metrics, qrels=used.qrels)
    print(f"{dataset.name}: {pool.n_queries} queries replayed in reference_time order; after each, every "
          f"returned memory's access_count + 1 (seed 000). frozen → replay (Δ):")
    print(text_table(*replay_table(results, metrics)))
    if args.json:
        write_json(args.json, {"replay": results, "metrics": list(metrics),
                               "judgments": used.to_json()})
        print(f"wrote {args.json}")
    return 0


def cmd_report(args) -> int:
    """Under the dataset's run lock (``eval.stores.history.dataset_lock``: safe from cron); the
    three files are written as one (``retrieval.files.atomic_write_files``); one line on stdout."""
    if not args.out:
        raise ValueError("give the folder to write the report into with --out DIR")
    options = _options(args)
    experiment_configs(args.pipeline, args.baseline)
    if args.sweep:
        check_sweep(args, args.sweep)
    elif args.param or args.sum or args.random:
        raise ValueError("--param, --sum and --random need --sweep PIPELINE")
    if not Path(args.dataset).is_dir():  # its one-line error, and no lock file for a mistyped path
        load_dataset(args.dataset)
    with dataset_lock(args.dataset, args.lock_wait):
        dataset, pool = load_with_pool(args)
        used = judgments(args, dataset, say=False)
        experiment = _experiment(args, dataset, pool, options, used)
        result = (run_sweep(args, dataset, pool, args.sweep, args.sweep_seed, qrels=used.qrels)
                  if args.sweep else None)
        step(f"writing the report into {args.out}")
        paths = write_experiment_report(experiment, args.out, result, history=CheckHistory(dataset).entries())
    print(f"wrote {', '.join(p.name for p in paths.values())} into {args.out} "
          f"({experiment.evaluation.n_queries} judged queries; judgments: {used.label})")
    return 0


def _add_experiment_options(p) -> None:
    p.add_argument("--pipeline", action="append", default=[], metavar="LABEL|FILE",
                   help="a named pipeline, profile:<preset>, saved:<name> or a TOML file (repeat)")
    p.add_argument("--baseline", default="vector", help="pipeline the others are tested against (default vector)")
    p.add_argument("--metrics", default=None,
                   help="comma-separated ranx names (ndcg@5,recall@10) or families, each at every --cutoffs "
                        f"(ndcg,recall); map = MAP over the whole ranking (default {','.join(DEFAULT_FAMILIES)})")
    p.add_argument("--cutoffs", default=None,
                   help=f"cutoffs k of the metric families (default {','.join(map(str, DEFAULT_CUTOFFS))})")
    p.add_argument("--gain", default="linear",
                   help=f"nDCG gain: {' or '.join(GAINS)} (rel, ranx ndcg; or 2^rel-1, ranx ndcg_burges); "
                        "default linear")
    p.add_argument("--test", default="fisher", help=f"significance test: {' or '.join(TESTS)} (default fisher)")
    p.add_argument("--correction", default="holm",
                   help=f"multiple-comparison correction per metric across the pipelines: {'|'.join(CORRECTIONS)} "
                        "(default holm)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after correction (default 0.05)")
    p.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS,
                   help=f"randomization-test permutations (default {DEFAULT_PERMUTATIONS})")
    p.add_argument("--bootstrap", type=int, default=DEFAULT_RESAMPLES,
                   help=f"bootstrap resamples of the 95%% confidence intervals (default {DEFAULT_RESAMPLES})")
    p.add_argument("--seed", type=int, default=42, help="seed of the randomization test and the bootstrap (default 42)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help=f"token budget of the budget-recall metric (default {DEFAULT_BUDGET})")


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate pipelines on a dataset with significance tests")
    add_pool_options(p, several_embedders=True)
    _add_experiment_options(p)
    p.add_argument("--detail", default=None, metavar="METRICS|all",
                   help="metrics whose CIs and p-values are printed in full (default: those at the primary "
                        "metric's cutoff, and map)")
    p.add_argument("--replay", action="store_true",
                   help="answer the queries in reference_time order, adding 1 to each returned memory's "
                        "access_count before the next (seed 000's write-backs); prints frozen vs replayed metrics")
    p.add_argument("--context", action="store_true",
                   help="score seed 003's memory contexts instead (as `rwb context --replay`): "
                        "each lookup's and the merged context's nDCG / recall at its size and "
                        "within --budget")
    add_context_options(p, budget=False)
    p.add_argument("--json", metavar="OUT", help="write the results as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="write report.html / report.md / report.json")
    add_pool_options(p)
    _add_experiment_options(p)
    p.add_argument("--sweep", metavar="PIPELINE", help="also sweep this pipeline (with --param …)")
    add_sweep_options(p, seed_flag="--sweep-seed")
    p.add_argument("--out", metavar="DIR", help="folder to write the report into (required)")
    p.add_argument("--lock-wait", type=float, default=DEFAULT_WAIT,
                   help=f"seconds to wait for another check or report on the dataset (default {DEFAULT_WAIT:g})")
    p.set_defaults(func=cmd_report)
