"""A vectorised evaluator over a candidate table and a ranking, equal to ranx.

Used on every slider move and in sweeps: the grade of every candidate row is computed once
per table and qrels (``judge``), the ideal DCG of every query once per list of metrics
(``_plan``, for ``fused_matrix``, kept with the judgments); scoring a ranking is
then one compiled pass over it per cutoff (``eval.metrics.kernels``), equal bit for bit to the
``bincount`` sums it replaced. ``fused_values`` scores configurations straight from their
fused scores (``retrieval.pipeline.fuse``) — top-k selection and every cutoff's sums in one
compiled pass, no ``Ranking`` built — with the same values as ``per_query`` of the ranking.

Every metric is declared once, in ``eval.metrics.definitions.DEFINITIONS`` (name, label, the
sum it reads and the scale it divides it by, whether it is also valid without ``@K``, family,
definition); this module parses the names declared there and hands ``eval.metrics.kernels``
each one's sum and scale (``FORMULAS``). ``tests/eval/metrics/test_measure.py`` checks every declared metric against ranx
on random runs with ties.

A document is relevant when its grade is > 0. Only queries with at least one relevant
judgment count (``eval.metrics.ranx_io`` makes the same choice for ranx); a counted query with no
results scores 0, and so does a counted query the candidate table lacks (``n_missing``:
it has no row here, but it is in the mean's denominator, as ranx would count it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from eval.metrics.definitions import DEFAULT_METRICS, DEFINED, DEFINITIONS
from eval.metrics.kernels import SCALES, SUMS, batch_sums, cut_stats, finish_all, finish_many
from retrieval.candidate_table import Candidates
from retrieval.pipeline import Fused, PipelineConfig, fuse
from retrieval.limits import MAX_DEPTH
from retrieval.ranking import Ranking

METRICS = tuple(DEFINED)
UNCUT = tuple(d.name for d in DEFINITIONS if d.uncut)  # names also valid without @K (k = 0 below)
_METRIC = re.compile(r"^([a-z_]+)@(\d+)$")
MAX_CUTOFF = MAX_DEPTH  # a ranking never holds more results than a search's largest depth


def _formula(name: str) -> tuple[int, int]:
    """Metric ``name``'s sum slot and scale code in the kernels (``SUMS``, ``SCALES``)."""
    d = DEFINED[name]
    if d.sum not in SUMS or d.scale not in SCALES or (d.scale == "ideal" and d.sum not in ("dcg", "dcg_exp")):
        raise ValueError(f"metric {name}: its sum must be one of {list(SUMS)} and its scale one of "
                         f"{list(SCALES)} (the ideal ordering's sum is known for dcg and dcg_exp), "
                         f"got {d.sum!r} over {d.scale!r}")
    return SUMS.index(d.sum), SCALES.index(d.scale)


FORMULAS = {name: _formula(name) for name in METRICS}
"""Each declared metric's ``(sum slot, scale code)``, what the compiled ``finish`` reads."""


def parse_metric(name: str) -> tuple[str, int]:
    """``(name, k)``; ``k`` is 0 for an uncut metric (bare ``map``: the whole ranking)."""
    if name in UNCUT:
        return name, 0
    match = _METRIC.match(name) if isinstance(name, str) else None
    if not match or match.group(1) not in METRICS:
        shown = name if not isinstance(name, str) or len(name) <= 40 else f"{name[:40]}…"
        raise ValueError(f"unknown metric {shown!r}; use NAME@K with NAME in {list(METRICS)}, "
                         "e.g. ndcg@5, or map (over the whole ranking)")
    digits = match.group(2)
    if len(digits) > 6 or not 1 <= int(digits) <= MAX_CUTOFF:
        shown = digits if len(digits) <= 20 else f"a {len(digits)}-digit number"
        raise ValueError(f"metric {match.group(1)}@{shown}: the cutoff must be 1…{MAX_CUTOFF:,} "
                         "(no ranking holds more results)")
    return match.group(1), int(digits)


@dataclass(frozen=True, eq=False)
class Judged:
    """Qrels aligned with a candidate table."""

    grade: np.ndarray          # per candidate row (0 = not relevant / unjudged)
    ideal: np.ndarray          # (Q, m) relevant grades of each query, sorted descending, 0-padded
    n_relevant: np.ndarray     # per query
    judged: np.ndarray         # per query: has at least one relevant document
    n_missing: int = 0         # counted qrels queries absent from the candidate table (score 0)
    any_grade: np.ndarray | None = None  # per candidate row: the qrels hold a grade (0 included)
    plans: dict = field(default_factory=dict, repr=False, compare=False)
    """What scoring a list of metrics needs beyond a configuration's scores (``_plan``), made
    on first use per list and kept with the judgments (a few lists per process)."""

    @property
    def n_judged(self) -> int:
        """Queries that count in a mean: judged ones of the table plus the missing ones."""
        return int(self.judged.sum()) + self.n_missing

    def counted(self, values: np.ndarray) -> np.ndarray:
        """Per-query ``values`` (last axis: the table's queries) over the counted queries: the
        judged ones in table order, then 0 for each missing one."""
        out = values[..., self.judged]
        if not self.n_missing:
            return out
        return np.concatenate([out, np.zeros(out.shape[:-1] + (self.n_missing,))], axis=-1)


def _positions(c: Candidates) -> tuple[dict[str, int], dict[str, int]]:
    """Index of each document id and of each query id of a table."""
    return ({doc_id: i for i, doc_id in enumerate(c.doc_ids)},
            {query_id: i for i, query_id in enumerate(c.query_ids)})


DENSE_KEYS = 1 << 20
"""Query × document slots up to which ``judge`` looks grades up in a dense array (8 MB at most)."""


def judge(c: Candidates, qrels: dict[str, dict[str, int]]) -> Judged:
    """Qrels aligned with a candidate table. The last result per table is kept with the table
    (``Candidates.derived``), with a copy of the qrels it was made from, and returned again
    while the qrels are equal to that copy (one dict comparison): repeated sweeps and knob moves
    over the same labels judge once; an edited judgment is a different qrels and is judged
    afresh. The pair is replaced in one step, so a concurrent reader sees the old or the new."""
    slot = c.derived("judged", lambda: [None])  # [(qrels copy, Judged)] of the last judge
    last = slot[0]
    if last is not None and last[0] == qrels:
        return last[1]
    judged = _judge(c, qrels)
    for array in (judged.grade, judged.ideal, judged.n_relevant, judged.judged, judged.any_grade):
        array.flags.writeable = False
    slot[0] = ({query_id: dict(judgments or {}) for query_id, judgments in qrels.items()}, judged)
    return judged


def judge_afresh(c: Candidates, qrels: dict[str, dict[str, int]]) -> Judged:
    """``judge`` without keeping the result with the table: for labels asked once (a what-if
    grading), so the table keeps the judgments every other figure uses."""
    return _judge(c, qrels)


def _judge(c: Candidates, qrels: dict[str, dict[str, int]]) -> Judged:
    # every judgment as one integer key (query index × documents + document index), then one
    # sorted lookup for all candidate rows; one pass over the qrels
    n_docs = len(c.doc_ids)
    doc_at, query_at = _positions(c)
    keys: list[int] = []
    values: list = []
    lists: list[list] = [[] for _ in range(c.n_queries)]
    missing = 0
    for query_id, judgments in qrels.items():
        if not judgments:
            continue
        qi = query_at.get(query_id)
        if qi is None:
            missing += any(g > 0 for g in judgments.values())
            continue
        positive = lists[qi]
        base = qi * n_docs
        for doc_id, value in judgments.items():
            if value > 0:
                positive.append(value)
            at = doc_at.get(doc_id)
            if at is not None:
                keys.append(base + at)
                values.append(value)
    keys_arr = np.asarray(keys, dtype=np.int64)
    row_keys = c.query_idx.astype(np.int64) * n_docs + c.doc_idx
    if c.n_queries * n_docs <= DENSE_KEYS:  # a small set: one grade per (query, document) slot
        dense = np.zeros(c.n_queries * n_docs)
        dense[keys_arr] = values
        grade = dense[row_keys]
        found = np.zeros(c.n_queries * n_docs, dtype=bool)
        found[keys_arr] = True
        found = found[row_keys]
    else:
        order = np.argsort(keys_arr)
        keys_arr, values_arr = keys_arr[order], np.asarray(values, dtype=np.float64)[order]
        at = np.minimum(np.searchsorted(keys_arr, row_keys), max(len(keys_arr) - 1, 0))
        found = (keys_arr[at] == row_keys) if len(keys_arr) else np.zeros(c.n_rows, dtype=bool)
        grade = np.where(found, values_arr[at] if len(keys_arr) else 0.0, 0.0)
    width = max((len(x) for x in lists), default=0) or 1
    ideal = np.zeros((c.n_queries, width))
    for qi, grades in enumerate(lists):
        if grades:
            grades.sort(reverse=True)
            ideal[qi, :len(grades)] = grades
    n_relevant = np.array([len(x) for x in lists], dtype=np.int64)
    return Judged(grade, ideal, n_relevant, n_relevant > 0, missing, found)


_DISC = np.log2(np.arange(MAX_DEPTH + 1) + 2.0)
_DISC.flags.writeable = False


def discounts(n: int) -> np.ndarray:
    """``log2(rank + 2)`` for ranks ``0 … n − 1`` at least (the DCG discount; read-only): the
    module's one table, made at import for every rank a pipeline can return, computed afresh
    beyond it."""
    return _DISC if n <= len(_DISC) else np.log2(np.arange(n) + 2.0)


def exp_gains(judged: Judged) -> np.ndarray:
    """Each candidate row's exponential gain ``2^grade − 1`` (the linear gain is the grade)."""
    return 2.0 ** judged.grade - 1.0


def ideal_dcg(judged: Judged, metric: str, k: int) -> np.ndarray:
    """Per query: the DCG of the ideal ordering cut at ``k`` with the gain ``metric`` reads
    (0 for a metric that reads no DCG, and for a query without relevant grades)."""
    d = DEFINED[metric]
    exponential = d.sum == "dcg_exp"
    if d.scale != "ideal":
        return np.zeros(len(judged.judged))
    width = min(k, judged.ideal.shape[1])
    ideal = judged.ideal[:, :width]
    ideal = 2.0 ** ideal - 1.0 if exponential else ideal
    return (ideal / np.log2(np.arange(width) + 2.0)).sum(axis=1)


def safe_relevant(judged: Judged) -> np.ndarray:
    """Relevant documents per query as float64, 1.0 where there are none (a safe divisor)."""
    n_rel = judged.n_relevant.astype(np.float64)
    return np.where(n_rel > 0, n_rel, 1.0)


def per_query(c: Candidates, judged: Judged, ranking: Ranking, metrics=DEFAULT_METRICS) -> dict[str, np.ndarray]:
    """Each metric's value for every query (NaN for queries without relevant judgments).

    One compiled pass over the ranking per cutoff (``eval.metrics.kernels.cut_stats``)."""
    out: dict[str, np.ndarray] = {}
    n_q = c.n_queries
    safe_rel = safe_relevant(judged)
    rows = np.ascontiguousarray(ranking.rows, dtype=np.int64)
    qidx = np.ascontiguousarray(ranking.query_idx, dtype=np.int64)
    rank = np.ascontiguousarray(ranking.rank, dtype=np.int64)
    disc = discounts(int(rank.max(initial=-1)) + 1)
    gain_exp = exp_gains(judged) if any(DEFINED[parse_metric(name)[0]].sum == "dcg_exp"
                                        for name in metrics) else judged.grade
    shared: dict[int, np.ndarray] = {}  # per cutoff: the sums, computed once for all metrics
    for name in metrics:
        metric, k = parse_metric(name)
        if k not in shared:
            shared[k] = np.zeros((len(SUMS), n_q))
            cut_stats(rows, qidx, rank, judged.grade, judged.grade, gain_exp, k, disc, shared[k])
        value = np.empty(n_q)
        finish_all(*FORMULAS[metric], k, shared[k], ideal_dcg(judged, metric, k), safe_rel,
                   judged.judged, value)
        out[name] = value
    return out


def mean_metrics(c: Candidates, judged: Judged, ranking: Ranking, metrics=DEFAULT_METRICS) -> dict[str, float]:
    """Mean of each metric over the counted queries (missing ones add 0 to the sum)."""
    values = per_query(c, judged, ranking, metrics)
    if judged.n_judged == 0:
        return {name: 0.0 for name in metrics}
    return {name: float(np.nansum(v)) / judged.n_judged for name, v in values.items()}


NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True, eq=False)
class _Plan:
    """What scoring ``metrics`` needs beyond a configuration's scores, made once per judged set."""

    names: tuple[str, ...]
    cuts: np.ndarray      # distinct cutoffs, ascending (0: the whole ranking)
    slots: np.ndarray     # per metric: the sum it reads (FORMULAS)
    scales: np.ndarray    # per metric: the scale it divides that sum by (FORMULAS)
    ks: np.ndarray        # per metric: its cutoff
    cut_of: np.ndarray    # per metric: index into cuts
    exponential: bool     # some metric reads the exponential-gain DCG
    idcg: np.ndarray      # (metrics, queries)
    gain: np.ndarray      # per candidate row: 2^grade − 1 where a metric asks for it, else the grade
    safe_rel: np.ndarray  # per query: safe_relevant


def _plan(judged: Judged, metrics: tuple[str, ...]) -> _Plan:
    """``plan_of(judged, metrics)``, made once per judged set and list of metrics (``Judged.plans``)."""
    plan = judged.plans.get(metrics)
    if plan is None:  # two threads may both build it; both get the first one stored
        plan = judged.plans.setdefault(metrics, plan_of(judged, metrics))
    return plan


def plan_of(judged: Judged, metrics: tuple[str, ...]) -> _Plan:
    """What scoring ``metrics`` over ``judged`` needs beyond a configuration's scores."""
    parsed = [parse_metric(name) for name in metrics]
    cuts = np.array(sorted({k for _, k in parsed}), dtype=np.int64)
    n_q = len(judged.judged)
    idcg = np.stack([ideal_dcg(judged, metric, k) for metric, k in parsed]) if parsed else np.zeros((0, n_q))
    formulas = np.array([FORMULAS[m] for m, _ in parsed], dtype=np.int64).reshape(-1, 2)
    exponential = any(DEFINED[m].sum == "dcg_exp" for m, _ in parsed)
    return _Plan(tuple(metrics), cuts, np.ascontiguousarray(formulas[:, 0]), np.ascontiguousarray(formulas[:, 1]),
                 np.array([k for _, k in parsed], dtype=np.int64),
                 np.searchsorted(cuts, [k for _, k in parsed]).astype(np.int64),
                 exponential, idcg, exp_gains(judged) if exponential else judged.grade,
                 safe_relevant(judged))


def fused_matrix(judged: Judged, batch: Sequence[Fused], metrics=DEFAULT_METRICS) -> np.ndarray:
    """``out[m, b, q]``: metric ``metrics[m]`` of fused configuration ``b`` on query ``q`` (NaN
    where the query does not count) — equal bit for bit to ``per_query`` of ``rank_rows`` over
    the same scores. One compiled pass (``eval.metrics.kernels.batch_sums``) selects every query's top
    rows once for every cutoff and gain asked; one more turns the sums into the metrics."""
    plan = _plan(judged, tuple(metrics))
    c = batch[0].table
    order, offsets, tokens, width = c.tie_order, c.order_offsets, c.row_tokens, c.widest
    depth = batch[0].depth
    if depth is not None and all(fused.depth == depth and fused.table is c for fused in batch):
        seen = c.at_depth(depth)  # the only rows that can rank
        order, offsets = seen.order, seen.offsets
    n_q, n_rows, size = c.n_queries, c.n_rows, len(batch)
    # one configuration (a knob move): its scores as they are, no copy
    scores = (np.ascontiguousarray(batch[0].scored.score, dtype=np.float64).reshape(1, -1) if size == 1
              else np.empty((size, n_rows)))
    tops = np.zeros(size, dtype=np.int64)
    limits = np.empty((size, n_q), dtype=np.int64)
    use_min = np.zeros(size, dtype=np.bool_)
    min_scores = np.zeros(size)
    use_budget = np.zeros(size, dtype=np.bool_)
    budgets = np.zeros((size, n_q), dtype=np.int64)
    keep_of = np.full(size, -1, dtype=np.int64)
    keeps: list[np.ndarray] = []
    for b, fused in enumerate(batch):
        if fused.table.n_rows != n_rows:
            raise ValueError("configurations over different candidate tables cannot be scored in one batch")
        if size > 1:
            scores[b] = fused.scored.score
        cap = fused.max_results
        if np.ndim(cap):
            tops[b] = min(int(np.max(cap, initial=1)), width)
            limits[b] = cap
        else:
            tops[b] = min(int(cap), width)
            limits[b] = tops[b]
        if fused.min_score is not None:
            use_min[b], min_scores[b] = True, float(fused.min_score)
            keep = fused.keep
            if keep is not None and keep.any():
                same = next((i for i, kept in enumerate(keeps) if np.array_equal(kept, keep)), None)
                if same is None:
                    keeps.append(np.ascontiguousarray(keep, dtype=np.bool_))
                    same = len(keeps) - 1
                keep_of[b] = same
        budget = fused.token_budget
        if budget is not None:
            use_budget[b] = True
            budgets[b] = np.where(np.asarray(budget) < 0, NEVER, budget) if np.ndim(budget) else budget
    keep_matrix = np.stack(keeps) if keeps else np.zeros((1, 0), dtype=np.bool_)
    sums = np.zeros((len(plan.cuts), len(SUMS), size, n_q))
    batch_sums(scores, order, offsets, tops, limits, use_min, min_scores, keep_matrix, keep_of, tokens,
               use_budget, budgets, plan.cuts, judged.grade, judged.grade,
               plan.gain, discounts(int(tops.max(initial=1))), sums)
    out = np.empty((len(plan.names), size, n_q))
    finish_many(plan.slots, plan.scales, plan.ks, plan.cut_of, sums, plan.idcg, plan.safe_rel,
                judged.judged, out)
    return out


def fused_values(judged: Judged, batch: Sequence[Fused], metrics=DEFAULT_METRICS) -> dict[str, np.ndarray]:
    """``fused_matrix`` by metric name: each an array of shape (configurations, queries)."""
    out = fused_matrix(judged, batch, metrics)
    return {name: out[m] for m, name in enumerate(metrics)}


BATCH_BYTES = 48 << 20
"""Fused scores held at once while a batch of configurations is ranked and scored."""


def config_values(c: Candidates, judged, configs: Sequence[PipelineConfig], metric: str,
                  routes: tuple[str, ...] | None = None) -> Iterator[np.ndarray]:
    """Per-query ``metric`` of each configuration, in batches: arrays of shape (batch, queries),
    NaN for queries that do not count — equal to ``per_query(…, run_pipeline(c, config).ranking)``
    bit for bit. Each configuration is fused as ``run_pipeline`` fuses it (``fuse``, with the
    learned ``routes`` where given); the
    ranking and the metric of a whole batch are one compiled pass (``eval.metrics.measure.fused_values``)
    that never builds a ``Ranking``."""
    parse_metric(metric)
    per_batch = int(max(1, min(256, BATCH_BYTES // max(1, 8 * c.n_rows))))
    for start in range(0, len(configs), per_batch):
        batch = [fuse(c, config, routes) for config in configs[start:start + per_batch]]
        yield fused_values(judged, batch, (metric,))[metric]
