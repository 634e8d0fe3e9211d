"""``rwb snapshot`` and ``rwb check``: freeze a pipeline's results, and gate a later run on them.

``rwb snapshot`` writes the frozen snapshot the Reports page keeps (``eval.stores.snapshots``:
the same record) to a file (``--out``) or into the dataset's snapshot store (``--name``), where
the page shows it. Both commands retrieve the candidates afresh from the index (never from the
stored pool, which is keyed by the dataset, not by the index's content). ``rwb check`` re-runs the pipeline (the candidates retrieved afresh from the
index, so a changed index shows), compares it query by query with a snapshot
(``eval.experiments.gate``) and exits 1 when a gated metric is significantly worse, 0 otherwise,
2 on bad input; it prints one line, writes a Markdown summary and a JUnit XML report when asked
(``eval.reports.gate``), and appends the check to the dataset's history
(``eval.stores.history.CheckHistory``), all under the dataset's run lock (safe from cron).

The gate fails closed: it never creates its baseline (a missing snapshot is exit 2); an exit 2
still writes the JUnit report (one ``error`` test case) and the summary, unless the output's own
path is the problem (a folder, or the path of an input: ``--json snap.json --against
snap.json`` is refused before anything is read); nothing is written before the check knows it
can finish (the history is read first); a reader of stdout that has gone (``| true``) changes
no exit status: the status is the verdict.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

from eval.cli._common import add_pool_options, check_depth, judgments, load_with_pool, write_file, write_json
from eval.cli._errors import error_line
from eval.experiments.explain import explain_check, explain_line
from eval.experiments.explain import markdown as explain_markdown
from eval.experiments.gate import TESTS, check_against, parse_threshold, unjudged_bounds
from eval.metrics.ranx_io import ranked_lists
from eval.experiments.live import evaluate_config
from eval.learning.router import learned_routes
from eval.metrics.measure import DEFAULT_METRICS, judge, parse_metric
from eval.progress import step
from eval.reports.gate import error_junit_xml, error_summary, junit_xml, markdown_summary, one_line, shown
from eval.reports.markup import printable
from eval.statistics.significance import CORRECTIONS, DEFAULT_PERMUTATIONS, check_settings
from eval.stores.configs import resolve_config
from eval.stores.files import check_name
from eval.stores.history import DEFAULT_WAIT, CheckHistory, dataset_lock
from eval.stores.inputs import inputs_of
from eval.stores.snapshots import MAX_NAME, SnapshotStore, read_snapshot, snapshot_record, write_snapshot
from retrieval.dataset import load_dataset

MAX_PERMUTATIONS = 1_000_000


def _metrics(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT_METRICS
    names = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    for name in names:
        parse_metric(name)
    return names or DEFAULT_METRICS


def _run(args, metrics: tuple[str, ...], refresh: bool):
    """The dataset, its pool, the judgments in effect and the pipeline's ``LiveRun``."""
    config = resolve_config(args.pipeline)  # an unknown pipeline fails before the pool loads
    if len(config.name) > MAX_NAME:
        raise ValueError(f"--pipeline {args.pipeline[:80]}: its name has {len(config.name):,} characters; "
                         f"at most {MAX_NAME}")
    dataset, pool = load_with_pool(args, refresh=refresh)
    check_depth({config.name: config}, pool.pool_depth)
    used = judgments(args, dataset, say=False)
    routes = learned_routes(pool, dataset.queries, [config])
    step(f"scoring {config.name} on {pool.n_queries:,} queries")
    ev = evaluate_config(pool, judge(pool, used.qrels), config, metrics, routes)
    return dataset, pool, used, ev


def cmd_snapshot(args) -> int:
    if bool(args.out) == bool(args.name):
        raise ValueError("give --out FILE (a snapshot file) or --name NAME (kept where the Reports page "
                         "shows it), one of the two")
    if args.name:
        check_name(args.name)
    name = args.name or Path(args.out).stem
    if args.out:
        _apart({"--out": args.out}, args)
    dataset, pool, used, ev = _run(args, _metrics(args.metrics), refresh=True)
    inputs = inputs_of(dataset, used.qrels, ev.config, pool.embedder, pool.analyzer)
    record = snapshot_record(name, ev, pool, used.qrels, inputs, args.notes, dataset.queries)
    if args.out:
        write_snapshot(args.out, record)
        where = args.out
    else:
        SnapshotStore(dataset).save(record)
        where = f"snapshot {args.name!r} of {dataset.name}"
    means = ", ".join(f"{m} {v:.4f}" for m, v in record["metrics"].items())
    print(f"froze {shown(ev.config.name)} on {shown(dataset.name)} ({len(record['queries'])} queries; {means}) "
          f"into {printable(where)}")
    return 0


def _snapshot(root: str, against: str) -> dict:
    """``--against``: a snapshot file, or the name of one the dataset's store keeps."""
    path = Path(against)
    if path.exists():
        return read_snapshot(path)
    store = SnapshotStore(load_dataset(root))
    try:
        check_name(against)
    except ValueError:
        raise ValueError(f"--against {against}: no such file") from None
    if against not in store.names():
        raise ValueError(f"--against {against}: no such file, and no saved snapshot of that name "
                         f"(saved: {', '.join(store.names()) or 'none'})")
    return store.load(against)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except (OSError, RuntimeError):
        return False


def _apart(outputs: dict[str, str | None], args) -> None:
    """Refuse an output that is a folder, the path of an input (the snapshot, the pipeline's
    file, a file of the dataset) or the path of another output: writing it would destroy what
    the command reads, or one report the other."""
    given = [(flag, Path(value)) for flag, value in outputs.items() if value]
    inputs = [(f"--{k.replace('_', '-')}", Path(v)) for k, v in (("against", getattr(args, "against", None)),
                                                                  ("pipeline", args.pipeline))
              if v and Path(v).is_file()]
    root = Path(args.dataset)
    for i, (flag, path) in enumerate(given):
        if path.is_dir():
            raise ValueError(f"{flag} {path} is a folder; give a file name")
        for other, source in inputs + given[:i]:
            if _same(path, source):
                raise ValueError(f"{flag} {path} is the file {other} names; give another file name")
        try:
            inside = root.is_dir() and path.resolve().is_relative_to(root.resolve()) and path.exists()
        except (OSError, RuntimeError):
            inside = False
        if inside:
            raise ValueError(f"{flag} {path} is a file of the dataset {root}; give a file outside it")


def _error_reports(args, error: Exception, start: float) -> None:
    """The JUnit report and the summary of a check that ends in exit 2, with the error line the
    command prints (best effort: an unwritable target leaves that file out)."""
    message = error_line(error)
    dataset, seconds = Path(args.dataset).resolve().name, time.perf_counter() - start
    reports = ((args.junit, lambda: error_junit_xml(message, dataset, args.pipeline, seconds), "--junit"),
               (args.summary, lambda: error_summary(message, dataset, args.pipeline), "--summary"))
    for value, text, flag in reports:
        if value:
            try:
                write_file(value, text(), flag)
            except (OSError, ValueError):
                pass


def _check_flags(args) -> list:
    thresholds = [parse_threshold(t) for t in (args.fail_if or ["ndcg@5:0"])]
    check_settings(args.test, args.correction, args.alpha, "--")
    if not 1 <= args.permutations <= MAX_PERMUTATIONS:
        raise ValueError(f"--permutations must be 1…{MAX_PERMUTATIONS:,}, got {args.permutations}")
    return thresholds


def cmd_check(args) -> int:
    start = time.perf_counter()
    _apart({"--junit": args.junit, "--summary": args.summary, "--json": args.json}, args)
    try:
        return _check(args, start)
    except (ValueError, OSError) as error:  # exit 2: the CI still sees a (broken) test result
        _error_reports(args, error, start)
        raise


def _check(args, start: float) -> int:
    thresholds = _check_flags(args)
    if not Path(args.dataset).is_dir():  # its one-line error, and no lock file for a mistyped path
        load_dataset(args.dataset)
    with dataset_lock(args.dataset, args.lock_wait):
        snapshot = _snapshot(args.dataset, args.against)
        metrics = tuple(dict.fromkeys([*DEFAULT_METRICS, *(t.metric for t in thresholds)]))
        dataset, pool, used, ev = _run(args, metrics, refresh=True)
        history = None if args.no_history else CheckHistory(dataset)
        if history is not None:
            history.entries()  # a damaged history fails the check before any report is written
        inputs = inputs_of(dataset, used.qrels, ev.config, pool.embedder, pool.analyzer)
        result = check_against(snapshot, ev, pool.query_ids, inputs, thresholds, args.test, args.correction,
                               args.alpha, args.permutations, args.seed, args.allow_different_queries)
        result = dataclasses.replace(result, unjudged=unjudged_bounds(
            snapshot, ranked_lists(pool, ev.run.ranking), used.qrels, [c.metric for c in result.checks]))
        explained = (explain_check(snapshot, result.changed, [c.metric for c in result.checks], dataset, pool,
                                   used.qrels, ev, lambda c: learned_routes(pool, dataset.queries, [c]), args.test,
                                   args.permutations, args.seed) if args.explain else None)
        seconds = time.perf_counter() - start
        if args.junit:
            write_file(args.junit, junit_xml(result, dataset.name, seconds), "--junit")
        if args.summary:
            write_file(args.summary, markdown_summary(result, dataset.name)
                       + (explain_markdown(explained) if explained else ""), "--summary")
        if args.json:
            write_json(args.json, {**result.to_json(), **({"explain": explained.to_json()} if explained else {})})
        if history is not None:
            history.add({
                "pipeline": result.pipeline, "snapshot": result.snapshot, "passed": result.passed,
                "metrics": {c.metric: c.current for c in result.checks},
                "frozen": {c.metric: c.frozen for c in result.checks},
                "failed": [c.metric for c in result.failed], "changed_inputs": list(result.changed),
                "inputs": inputs.to_json(), "queries": result.compared_queries,
                **({"explain": {m.metric: m.parts for m in explained.metrics}} if explained else {})})
    status = 1 if result.failed else 0
    try:
        print(one_line(result, dataset.name))
        if explained:
            print(explain_line(explained))
        sys.stdout.flush()
    except BrokenPipeError:  # `rwb check … | true`: the reader left; the status is still the verdict
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
    return status


def _add_common(p) -> None:
    add_pool_options(p)
    p.add_argument("--pipeline", required=True, metavar="LABEL|FILE",
                   help="a named pipeline, profile:<preset>, saved:<name> or a TOML file")


def register(sub) -> None:
    p = sub.add_parser("snapshot", help="freeze a pipeline's per-query results (for rwb check and the Reports page)",
                       description="Freeze a pipeline's results: per query its metric values and top 10, with "
                                   "the content hashes of its inputs (corpus, queries, the dataset card, judgments, "
                                   "pipeline and its model files, embedder, analyzer, index). The same snapshot the "
                                   "Reports page freezes.")
    _add_common(p)
    p.add_argument("--out", metavar="FILE", help="write the snapshot to this JSON file")
    p.add_argument("--name", help="keep it in the dataset's snapshot store (shown on the Reports page)")
    p.add_argument("--notes", default="", help="a note kept with the snapshot")
    p.add_argument("--metrics", default=None,
                   help=f"comma-separated metrics to keep per query (default {','.join(DEFAULT_METRICS)})")
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("check", help="re-run a pipeline and fail (exit 1) on a significant regression "
                                     "against a frozen snapshot",
                       description="Exit 1 when a --fail-if metric is significantly worse than in the snapshot "
                                   "by more than its tolerated drop (paired test per query, corrected across "
                                   "the metrics), 0 otherwise, 2 on bad input. One line on stdout; holds the "
                                   "dataset's run lock; appends to the dataset's check history.")
    _add_common(p)
    p.add_argument("--against", required=True, metavar="SNAPSHOT",
                   help="a snapshot file (rwb snapshot --out) or the name of a snapshot kept for the dataset")
    p.add_argument("--fail-if", action="append", metavar="METRIC:DELTA",
                   help="fail when METRIC drops by more than -DELTA and significantly, e.g. ndcg@5:-0.01 "
                        "(repeat; default ndcg@5:0)")
    p.add_argument("--junit", metavar="FILE", help="write a JUnit XML report (one test case per metric)")
    p.add_argument("--summary", metavar="FILE", help="write a Markdown summary (e.g. for a CI job summary)")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON")
    p.add_argument("--test", default="fisher", help=f"paired test: {' or '.join(TESTS)} (default fisher)")
    p.add_argument("--correction", default="holm",
                   help=f"correction across the --fail-if metrics: {'|'.join(CORRECTIONS)} (default holm)")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level after correction (default 0.05)")
    p.add_argument("--permutations", type=int, default=DEFAULT_PERMUTATIONS,
                   help=f"randomization-test permutations (default {DEFAULT_PERMUTATIONS})")
    p.add_argument("--seed", type=int, default=42, help="seed of the randomization test (default 42)")
    p.add_argument("--allow-different-queries", action="store_true",
                   help="compare the queries both hold when the query set changed (refused otherwise)")
    p.add_argument("--lock-wait", type=float, default=DEFAULT_WAIT,
                   help=f"seconds to wait for another check or report on the dataset (default {DEFAULT_WAIT:g})")
    p.add_argument("--no-history", action="store_true", help="do not append this check to the dataset's history")
    p.add_argument("--explain", action="store_true",
                   help="split each metric's change into the parts of the changed inputs (corpus and index, "
                        "judgments, query set, pipeline) by re-scoring the snapshot's and today's cross combinations")
    p.set_defaults(func=cmd_check)
