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
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from eval.cli._common import add_pool_options, check_depth, judgments, load_with_pool, write_file, write_json
from eval.experiments.gate import TESTS, check_against, parse_threshold
from eval.experiments.live import evaluate_config
from eval.learning.router import learned_routes
from eval.metrics.measure import DEFAULT_METRICS, judge, parse_metric
from eval.progress import step
from eval.reports.gate import junit_xml, markdown_summary, one_line
from eval.statistics.significance import CORRECTIONS, DEFAULT_PERMUTATIONS, check_settings
from eval.stores.configs import resolve_config
from eval.stores.files import check_name
from eval.stores.history import DEFAULT_WAIT, CheckHistory, dataset_lock
from eval.stores.inputs import inputs_of
from eval.stores.snapshots import SnapshotStore, read_snapshot, snapshot_record, write_snapshot
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
    dataset, pool, used, ev = _run(args, _metrics(args.metrics), refresh=True)
    inputs = inputs_of(dataset, used.qrels, ev.config, pool.embedder, pool.analyzer)
    record = snapshot_record(name, ev, pool, used.qrels, inputs, args.notes)
    if args.out:
        write_snapshot(args.out, record)
        where = args.out
    else:
        SnapshotStore(dataset).save(record)
        where = f"snapshot {args.name!r} of {dataset.name}"
    means = ", ".join(f"{m} {v:.4f}" for m, v in record["metrics"].items())
    print(f"froze {ev.config.name} on {dataset.name} ({len(record['queries'])} queries; {means}) into {where}")
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


def cmd_check(args) -> int:
    thresholds = [parse_threshold(t) for t in (args.fail_if or ["ndcg@5:0"])]
    check_settings(args.test, args.correction, args.alpha, "--")
    if not 1 <= args.permutations <= MAX_PERMUTATIONS:
        raise ValueError(f"--permutations must be 1…{MAX_PERMUTATIONS:,}, got {args.permutations}")
    for flag, value in (("--junit", args.junit), ("--summary", args.summary), ("--json", args.json)):
        if value and Path(value).is_dir():
            raise ValueError(f"{flag} {value} is a folder; give a file name")
    start = time.perf_counter()
    if not Path(args.dataset).is_dir():  # its one-line error, and no lock file for a mistyped path
        load_dataset(args.dataset)
    with dataset_lock(args.dataset, args.lock_wait):
        snapshot = _snapshot(args.dataset, args.against)
        metrics = tuple(dict.fromkeys([*DEFAULT_METRICS, *(t.metric for t in thresholds)]))
        dataset, pool, used, ev = _run(args, metrics, refresh=True)
        inputs = inputs_of(dataset, used.qrels, ev.config, pool.embedder, pool.analyzer)
        result = check_against(snapshot, ev, pool.query_ids, inputs, thresholds, args.test, args.correction,
                               args.alpha, args.permutations, args.seed, args.allow_different_queries)
        seconds = time.perf_counter() - start
        if args.junit:
            write_file(args.junit, junit_xml(result, dataset.name, seconds), "--junit")
        if args.summary:
            write_file(args.summary, markdown_summary(result, dataset.name), "--summary")
        if args.json:
            write_json(args.json, result.to_json())
        if not args.no_history:
            CheckHistory(dataset).add({
                "pipeline": result.pipeline, "snapshot": result.snapshot, "passed": result.passed,
                "metrics": {c.metric: c.current for c in result.checks},
                "frozen": {c.metric: c.frozen for c in result.checks},
                "failed": [c.metric for c in result.failed], "changed_inputs": list(result.changed),
                "inputs": inputs.to_json(), "queries": result.compared_queries})
    print(one_line(result, dataset.name))
    sys.stdout.flush()
    return 1 if result.failed else 0


def _add_common(p) -> None:
    add_pool_options(p)
    p.add_argument("--pipeline", required=True, metavar="LABEL|FILE",
                   help="a named pipeline, profile:<preset>, saved:<name> or a TOML file")


def register(sub) -> None:
    p = sub.add_parser("snapshot", help="freeze a pipeline's per-query results (for rwb check and the Reports page)",
                       description="Freeze a pipeline's results: per query its metric values and top 10, with "
                                   "the content hashes of its inputs (corpus, queries, judgments, pipeline, "
                                   "embedder, index). The same snapshot the Reports page freezes.")
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
    p.set_defaults(func=cmd_check)
