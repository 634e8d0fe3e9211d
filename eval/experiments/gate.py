"""The regression gate behind ``rwb check``: a pipeline's results today against a frozen snapshot
of them, query by query.

For each metric the user gates on (``Threshold``: ``METRIC:DELTA``, e.g. ``ndcg@5:-0.01``), the
per-query values of the snapshot and of today's run are paired over the queries both hold a
value for; the paired test is the workbench's (``eval.statistics.significance``: Fisher's
randomization test or the paired t-test, two-sided), and the p-values are corrected across the
gated metrics (Holm by default), as a pipeline's are across pipelines in ``rwb eval``. A metric
FAILS when today's mean is lower than the snapshot's by more than the tolerated drop (``mean
delta < DELTA``, DELTA ≤ 0) AND the drop is significant (corrected p ≤ alpha). Today's values
are rounded as the snapshot's were (``eval.stores.snapshots.frozen_value``), so an unchanged
run has no difference at all.

Inputs (``eval.stores.inputs``): the ones that changed since the snapshot are named in the
result. Different query sets are refused unless asked (``allow_different_queries``): then the
queries both hold are compared; none in common is refused (a comparison of nothing passes
nothing). A snapshot query without a gated metric's value (null, where it was undefined, is a
value) is refused as damaged; non-finite values never reach here (``check_record``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from eval.experiments.live import LiveRun
from eval.metrics.measure import parse_metric
from eval.statistics.significance import (  # noqa: F401 (TESTS: the gate's tests, named here too)
    CORRECTIONS, DEFAULT_PERMUTATIONS, TESTS, check_settings, paired_t, randomization_test)
from eval.stores.inputs import NAMES, Inputs, changed
from eval.stores.snapshots import KEEP, frozen_value
from eval.statistics.unjudged import Bounds, list_bounds

WORST = 5      # regressed queries named per failed metric
_THRESHOLD = re.compile(r"^\s*([A-Za-z_]+@\d+|map)\s*:\s*([-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True)
class Threshold:
    """Fail when ``metric``'s mean drops by more than ``-delta`` and significantly."""

    metric: str
    delta: float = 0.0

    def __post_init__(self):
        if not math.isfinite(self.delta) or self.delta > 0:
            raise ValueError(f"--fail-if {self.metric}:{self.delta}: DELTA is the largest drop tolerated, "
                             "a number ≤ 0 (e.g. ndcg@5:-0.01)")

    def __str__(self) -> str:
        return f"{self.metric}:{self.delta:+g}" if self.delta else f"{self.metric}:0"


def parse_threshold(text: str) -> Threshold:
    """``METRIC:DELTA`` (``ndcg@5:-0.01``; ``ndcg@5`` alone tolerates no significant drop)."""
    match = _THRESHOLD.match(text if ":" in text else f"{text}:0")
    if not match:
        raise ValueError(f"--fail-if {text!r}: expected METRIC:DELTA, e.g. ndcg@5:-0.01")
    metric = match.group(1).lower()
    parse_metric(metric)
    return Threshold(metric, float(match.group(2)))


@dataclass(frozen=True)
class QueryChange:
    query: str
    frozen: float
    current: float

    @property
    def delta(self) -> float:
        return round(self.current - self.frozen, 6)


@dataclass(frozen=True)
class MetricCheck:
    """One gated metric: the paired comparison and the verdict."""

    threshold: Threshold
    n: int                        # queries paired
    frozen: float                 # mean over the paired queries, in the snapshot
    current: float                # … today
    p_value: float
    p_adjusted: float
    failed: bool
    worst: tuple[QueryChange, ...]   # the most regressed queries, worst first

    @property
    def metric(self) -> str:
        return self.threshold.metric

    @property
    def delta(self) -> float:
        return round(self.current - self.frozen, 6)

    def to_json(self) -> dict:
        return {"metric": self.metric, "threshold": self.threshold.delta, "n": self.n, "frozen": self.frozen,
                "current": self.current, "delta": self.delta, "p_value": self.p_value,
                "p_adjusted": self.p_adjusted, "failed": self.failed,
                "worst": [{"query": w.query, "frozen": w.frozen, "current": w.current, "delta": w.delta}
                          for w in self.worst]}


@dataclass(frozen=True)
class GateResult:
    snapshot: str                  # the snapshot's name
    pipeline: str
    checks: tuple[MetricCheck, ...]
    changed: tuple[str, ...]       # inputs that differ from the snapshot's (eval.stores.inputs.NAMES)
    inputs: Inputs
    test: str
    correction: str
    alpha: float
    compared_queries: int
    dropped_queries: tuple[str, ...] = field(default=())   # in one query set only
    unjudged: tuple[Bounds, ...] = field(default=())        # per gated metric: does the verdict survive the unjudged

    @property
    def failed(self) -> tuple[MetricCheck, ...]:
        return tuple(c for c in self.checks if c.failed)

    @property
    def passed(self) -> bool:
        return not self.failed

    def to_json(self) -> dict:
        return {"snapshot": self.snapshot, "pipeline": self.pipeline, "passed": self.passed,
                "checks": [c.to_json() for c in self.checks], "changed_inputs": list(self.changed),
                "inputs": self.inputs.to_json(), "test": self.test, "correction": self.correction,
                "alpha": self.alpha, "compared_queries": self.compared_queries,
                "dropped_queries": list(self.dropped_queries),
                "unjudged": [b.to_json() for b in self.unjudged]}


def _p(test: str, frozen: np.ndarray, current: np.ndarray, permutations: int, seed: int) -> float:
    if not np.any(np.abs(current - frozen) > 0):
        return 1.0
    p = (randomization_test(frozen, current, permutations, seed) if test == "fisher"
         else paired_t(frozen, current))
    return 1.0 if math.isnan(p) else p


def check_against(snapshot: dict, ev: LiveRun, query_ids: tuple[str, ...], inputs: Inputs,
                  thresholds: list[Threshold], test: str = "fisher", correction: str = "holm",
                  alpha: float = 0.05, permutations: int = DEFAULT_PERMUTATIONS, seed: int = 42,
                  allow_different_queries: bool = False) -> GateResult:
    """Compare ``ev`` (today's run of the pipeline over ``query_ids``, with ``inputs``) with the
    frozen ``snapshot``, metric by metric (see the module docstring)."""
    check_settings(test, correction, alpha, "--")
    if not thresholds:
        raise ValueError("nothing to check: give at least one --fail-if METRIC:DELTA")
    metrics = [t.metric for t in thresholds]
    if len(set(metrics)) != len(metrics):
        raise ValueError(f"--fail-if names a metric twice: {metrics}")
    frozen_queries = snapshot["queries"]
    held = set(snapshot.get("metrics") or {}) | {m for q in frozen_queries.values() for m in q["values"]}
    for metric in metrics:
        if metric not in held:
            raise ValueError(f"--fail-if {metric}: the snapshot holds no {metric}; it holds "
                             f"{', '.join(sorted(held)) or 'no metric'}")
        if metric not in ev.values:
            raise ValueError(f"--fail-if {metric}: not a metric of today's run ({', '.join(ev.values)})")
    names = changed(snapshot.get("inputs"), inputs)
    current_ids = set(query_ids)
    different = ("queries" in names) or set(frozen_queries) != current_ids
    dropped = tuple(sorted(set(frozen_queries) ^ current_ids))
    if different and not allow_different_queries:
        both = len(set(frozen_queries) & current_ids)
        raise ValueError(f"the snapshot {snapshot.get('name')!r} was frozen on a different query set "
                         f"({len(frozen_queries)} queries then, {len(current_ids)} now, {both} in both, "
                         "or their texts differ); rerun with --allow-different-queries to compare the "
                         "queries both hold")
    if "queries" not in names and different:
        names = sorted({*names, "queries"}, key=NAMES.index)
    position = {q: i for i, q in enumerate(query_ids)}
    pairs, p_values = [], []
    for metric in metrics:
        today = ev.values[metric]
        rows = []
        for qid, held_query in frozen_queries.items():
            if qid in position and metric not in held_query["values"]:
                raise ValueError(f"the snapshot {str(snapshot.get('name'))[:80]!r} holds no {metric} for query "
                                 f"{qid[:80]!r} (a frozen snapshot holds every metric for every query, null "
                                 "where undefined): damaged or edited")
            then = held_query["values"][metric] if qid in position else None
            if then is None:
                continue
            now = frozen_value(today[position[qid]])
            if now is not None:
                rows.append((qid, float(then), now))
        a = np.array([r[1] for r in rows], dtype=np.float64)
        b = np.array([r[2] for r in rows], dtype=np.float64)
        if not rows:
            raise ValueError(f"--fail-if {metric}: the snapshot and today's run share no query with a value of "
                             f"{metric} ({len(frozen_queries)} queries then, {len(current_ids)} now, "
                             f"{len(set(frozen_queries) & current_ids)} in both): nothing to compare")
        pairs.append((rows, a, b))
        p_values.append(_p(test, a, b, permutations, seed))
    adjusted = CORRECTIONS[correction](p_values)
    checks = []
    for threshold, (rows, a, b), p, p_adj in zip(thresholds, pairs, p_values, adjusted):
        frozen_mean = round(float(a.mean()), 6)
        current_mean = round(float(b.mean()), 6)
        delta = current_mean - frozen_mean
        failed = delta < 0 and delta < threshold.delta - 1e-12 and p_adj <= alpha
        worse = sorted((QueryChange(q, f, c) for q, f, c in rows if c < f), key=lambda w: (w.delta, w.query))
        checks.append(MetricCheck(threshold, len(rows), frozen_mean, current_mean, float(p), float(p_adj),
                                  failed, tuple(worse[:WORST])))
    return GateResult(snapshot=str(snapshot.get("name", "")), pipeline=ev.config.name, checks=tuple(checks),
                      changed=tuple(names), inputs=inputs, test=test, correction=correction, alpha=alpha,
                      compared_queries=max((c.n for c in checks), default=0), dropped_queries=dropped)


def unjudged_bounds(snapshot: dict, today: dict[str, list[str]], qrels: dict[str, dict[str, int]],
                    metrics: list[str]) -> tuple[Bounds, ...]:
    """Per gated metric with a cutoff the snapshot's kept top ids cover (``KEEP``): the snapshot's
    ranking against ``today``'s (document ids by query), re-scored with today's judgments and
    with the unjudged documents of the two tops graded for one side, then the other
    (``eval.statistics.unjudged.list_bounds``): whether the verdict survives the holes."""
    frozen = {q: list(held.get("ranking") or []) for q, held in snapshot["queries"].items()}
    out = []
    for metric in metrics:
        _, k = parse_metric(metric)
        if 0 < k <= KEEP:
            try:
                out.append(list_bounds(frozen, today, qrels, metric))
            except ValueError:          # no judged query in both: nothing to bound
                continue
    return tuple(out)
