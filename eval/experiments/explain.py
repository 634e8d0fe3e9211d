"""``rwb check --explain``: how much each changed input cost — the metric change between a
snapshot and today split into the parts the content hashes name.

Parts (``PARTS``): ``corpus_index`` (the corpus, the embedder, the analyzer, the dataset card and
the index: what the candidates and their features are made from), ``judgments``, ``queries`` (the query set) and ``pipeline``. The total is
the gate's change, per metric over the queries it pairs: the mean of (today − snapshot).

How it is split. Each paired query's change is attributed by re-scoring the cross combinations
the snapshot and the present allow — a *cell* is one state of (corpus and index, judgments,
pipeline), each then or now:

- (then, then, then): the snapshot's frozen values; (now, now, now): today's run;
- (then, now, then): the snapshot's stored ranking (its top ``KEEP``) scored with today's
  judgments — for a metric cut at ``KEEP`` or less;
- (now, ·, then): the snapshot's pipeline (its TOML) re-run on today's candidates;
- (now, then, ·): today's candidates scored with the snapshot's judgments, which a snapshot
  stores since this version (``qrels``; an older snapshot: these cells are missing);
- the snapshot's pipeline on the snapshot's corpus with anything else is what the snapshot
  holds; today's pipeline on the snapshot's corpus is never available (the old index is gone).

The parts are Shapley values restricted to the orders of the changed parts whose every step is
an available cell (asymmetric Shapley values, Frye et al., NeurIPS 2020): each order walks
from the snapshot to today one part at a time, a part's share in it is the change its step
makes, and a part's value is the mean of its shares over the allowed orders. So an interaction
between two parts is split evenly between them over the orders that allow both, and the parts
sum to the total exactly (every order telescopes to it). When no order is available the parts
that cannot be told apart are reported together (``corpus_index+judgments``). A paired query
whose text changed (a snapshot keeps each query's text hash since this version) is attributed to
``queries`` whole: its old text's results on today's index cannot be computed. Each part's
paired p-value tests its per-query shares against 0 with the gate's test (Fisher's
randomization test or the paired t-test, uncorrected); per intent where the queries carry one.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from eval.experiments.live import LiveRun, evaluate_config
from eval.metrics.measure import judge, parse_metric
from eval.statistics.significance import paired_t, randomization_tests
from eval.stores.snapshots import KEEP, frozen_value, query_text_hash
from retrieval.candidates import Candidates
from retrieval.dataset import Dataset
from retrieval.pipeline import PipelineConfig, from_toml

PARTS = ("corpus_index", "judgments", "queries", "pipeline")
WORDS = {"corpus_index": "corpus and index", "judgments": "judgments", "queries": "query set",
         "pipeline": "pipeline"}
_SWAPPABLE = ("corpus_index", "judgments", "pipeline")   # the cell's coordinates


@dataclass(frozen=True)
class MetricExplanation:
    metric: str
    n: int                                   # queries paired
    total: float                             # mean of (today − snapshot) over them
    parts: dict[str, float]                  # part (or joined parts) → Δ; sums to total
    p_values: dict[str, float]
    orders: tuple[tuple[str, ...], ...]      # the orders averaged over
    intents: dict[str, dict] = field(default_factory=dict)   # intent → {"n", "total", "parts"}

    def to_json(self) -> dict:
        return {"total": self.total, "n": self.n, "parts": dict(self.parts), "p": dict(self.p_values),
                "orders": [list(o) for o in self.orders], "intents": self.intents}


@dataclass(frozen=True)
class Explanation:
    metrics: tuple[MetricExplanation, ...]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """``{metric: {"total", "parts": part → Δ, "p": part → p, …}, "notes": […]}``."""
        return {**{m.metric: m.to_json() for m in self.metrics}, "notes": list(self.notes)}


def _ranx_values(rankings: dict[str, list[str]], qrels: dict, metric: str, qids: list[str]) -> np.ndarray:
    """``metric`` of stored rankings (document ids, best first) under ``qrels`` (ranx)."""
    from ranx import Run

    from eval.metrics.ranx_io import ranx_per_query, to_qrels

    counted = {q: qrels[q] for q in qids if any(g > 0 for g in qrels.get(q, {}).values())}
    if not counted:
        return np.full(len(qids), np.nan)
    run = Run({q: ({d: float(len(rankings[q]) - r) for r, d in enumerate(rankings[q])} or {"": 0.0})
               for q in counted}, name="snapshot")
    values = ranx_per_query(to_qrels(counted), run, [metric])[metric]
    return np.array([values.get(q, np.nan) for q in qids])


def _pool_values(pool: Candidates, config: PipelineConfig, qrels: dict, metric: str, routes,
                 qids: list[str]) -> np.ndarray:
    run = evaluate_config(pool, judge(pool, qrels), config, (metric,), routes)
    at = {q: i for i, q in enumerate(pool.query_ids)}
    return np.array([run.values[metric][at[q]] for q in qids])


def _orders(changed: list[str], available) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The finest grouping of ``changed`` with at least one allowed order, and those orders (each
    a sequence of groups, a group a tuple of parts)."""
    groupings = [[(p,) for p in changed]]
    if len(changed) == 3:
        groupings += [[tuple(sorted(pair, key=changed.index)), (rest,)]
                      for pair, rest in (((changed[0], changed[1]), changed[2]), ((changed[0], changed[2]), changed[1]),
                                         ((changed[1], changed[2]), changed[0]))]
    if len(changed) >= 2:
        groupings.append([tuple(changed)])
    for groups in groupings:
        allowed = []
        for order in itertools.permutations(groups):
            state: set[str] = set()
            ok = True
            for group in order[:-1]:
                state |= set(group)
                if not available(frozenset(state)):
                    ok = False
                    break
            if ok:
                allowed.append(order)
        if allowed:
            return groups, allowed
    return [tuple(changed)], [(tuple(changed),)]


def _p_values(shares: dict[str, np.ndarray], test: str, permutations: int, seed: int) -> dict[str, float]:
    out = {}
    names = [n for n, s in shares.items() if np.any(np.abs(s) > 1e-12)]
    if names and test == "fisher":
        ps = randomization_tests(np.column_stack([shares[n] for n in names]), permutations, seed)
        out.update(zip(names, (float(p) for p in ps)))
    else:
        out.update({n: paired_t(np.zeros(len(shares[n])), shares[n]) for n in names})
    return {n: (1.0 if n not in out or math.isnan(out[n]) else out[n]) for n in shares}


def explain_check(snapshot: dict, changed: tuple[str, ...], metrics: list[str], dataset: Dataset,
                  pool: Candidates, qrels: dict, ev: LiveRun, routes_for=lambda config: None,
                  test: str = "fisher", permutations: int = 10_000, seed: int = 42) -> Explanation:
    """Split each metric's change between ``snapshot`` and today (``ev`` on ``pool``, scored with
    ``qrels``; ``changed``: the inputs that differ, ``eval.stores.inputs.NAMES``) into ``PARTS``
    (see the module docstring). ``routes_for(config)``: a learned router's routes, if any."""
    notes = []
    moved = {"corpus_index": bool({"corpus", "embedder", "analyzer", "card", "index"} & set(changed)),
             "judgments": "judgments" in changed, "pipeline": "pipeline" in changed}
    old_qrels = snapshot.get("qrels") if isinstance(snapshot.get("qrels"), dict) else None
    if old_qrels is None and moved["judgments"]:
        notes.append("the snapshot keeps no judgments (frozen before rwb kept them): cells with its judgments "
                     "on today's candidates are missing")
    try:
        old_config = from_toml(snapshot["config"], "the snapshot's pipeline") if moved["pipeline"] else ev.config
    except (KeyError, TypeError, ValueError) as error:
        old_config = None
        notes.append(f"the snapshot's pipeline cannot be re-run ({str(error)[:120]})")
    texts = snapshot.get("query_texts") if isinstance(snapshot.get("query_texts"), dict) else None
    now_texts = {q.id: query_text_hash(q.text) for q in dataset.queries}
    if "queries" in changed and texts is None:
        notes.append("the snapshot keeps no query texts: a query is taken as unchanged when its id is")
    intent_of = {q.id: q.intent for q in dataset.queries}
    at = {q: i for i, q in enumerate(pool.query_ids)}
    out = []
    for metric in metrics:
        _, k = parse_metric(metric)
        rows = [(q, float(held["values"][metric]), frozen_value(ev.values[metric][at[q]]))
                for q, held in snapshot["queries"].items()
                if held["values"].get(metric) is not None and q in at]
        rows = [r for r in rows if r[2] is not None]
        qids = [r[0] for r in rows]
        then, now = np.array([r[1] for r in rows]), np.array([r[2] for r in rows], dtype=np.float64)
        retext = np.array([texts is not None and texts.get(q) != now_texts.get(q) for q in qids], dtype=bool)
        swappable = [p for p in _SWAPPABLE if moved[p]]
        cells: dict[frozenset, np.ndarray | None] = {frozenset(): then, frozenset(swappable): now}

        def cell(state: frozenset) -> np.ndarray | None:
            if state not in cells:
                cells[state] = _cell(state, snapshot, metric, k, qids, pool, qrels, old_qrels, old_config,
                                     ev.config, routes_for, moved)
            return cells[state]

        groups, orders = _orders(swappable, lambda s: cell(s) is not None) if swappable else ([], [])
        shares = {"+".join(g): np.zeros(len(qids)) for g in groups}
        for order in orders:
            state: frozenset = frozenset()
            for group in order:
                after = state | set(group)
                shares["+".join(group)] += (cell(after) - cell(state)) / len(orders)
                state = after
        diff = now - then
        shares = {n: np.where(retext, 0.0, s) for n, s in shares.items()}
        shares["queries"] = np.where(retext, diff, 0.0)
        if not swappable:  # no other part changed: what moved is the query set's (or nothing)
            shares["queries"] = diff.copy()
        joined = {p for n in shares for p in n.split("+")}
        ordered = {**{p: np.zeros(len(qids)) for p in PARTS if p not in joined}, **shares}
        ordered = {n: ordered[n] for n in sorted(ordered, key=lambda n: PARTS.index(n.split("+")[0]))}
        n = len(qids)
        parts = {name: (float(s.mean()) if n else 0.0) for name, s in ordered.items()}
        total = float(diff.mean()) if n else 0.0
        intents = {}
        if any(intent_of.get(q) for q in qids):
            for intent in sorted({intent_of.get(q) or "—" for q in qids}):
                mask = np.array([(intent_of.get(q) or "—") == intent for q in qids])
                intents[intent] = {"n": int(mask.sum()), "total": float(diff[mask].mean()),
                                   "parts": {name: float(s[mask].mean()) for name, s in ordered.items()}}
        out.append(MetricExplanation(metric, n, total, parts, _p_values(ordered, test, permutations, seed),
                                     tuple(tuple("+".join(g) for g in o) for o in orders), intents))
    return Explanation(tuple(out), tuple(notes))


def _cell(state: frozenset, snapshot: dict, metric: str, k: int, qids: list[str], pool: Candidates,
          qrels: dict, old_qrels: dict | None, old_config: PipelineConfig | None, config: PipelineConfig,
          routes_for, moved: dict) -> np.ndarray | None:
    """Per-query values of ``metric`` in the cell whose parts in ``state`` are today's; None
    where the snapshot and the present do not allow it (see the module docstring)."""
    judgments = qrels if ("judgments" in state or not moved["judgments"]) else old_qrels
    if judgments is None:
        return None
    if "corpus_index" not in state and moved["corpus_index"]:
        if "pipeline" in state:
            return None          # today's pipeline on the snapshot's corpus: the old index is gone
        if not 0 < k <= KEEP:
            return None          # the snapshot keeps its top KEEP only
        return _ranx_values({q: snapshot["queries"][q]["ranking"] for q in qids}, judgments, metric, qids)
    if "pipeline" not in state and moved["pipeline"]:
        if old_config is None:
            return None
        return _pool_values(pool, old_config, judgments, metric, routes_for(old_config), qids)
    return _pool_values(pool, config, judgments, metric, routes_for(config), qids)


def explain_rows(entries: list[dict], metric: str) -> list[dict]:
    """Check-history entries (``eval.stores.history.CheckHistory``) that hold an explanation as
    table rows: when, against which snapshot, the change and each part's share of it."""
    rows = []
    for entry in entries:
        parts = (entry.get("explain") or {}).get(metric) or {}
        row = {"time": entry.get("time", ""), "snapshot": entry.get("snapshot", ""),
               "Δ": round(sum(parts.values()), 4)}
        row.update({" + ".join(WORDS.get(x, x) for x in n.split("+")): round(v, 4) for n, v in parts.items()})
        rows.append(row)
    return rows


def explain_line(explanation: Explanation) -> str:
    """``explain ndcg@5 -0.0210: judgments -0.0150, pipeline -0.0060`` (the parts that moved)."""
    return "; ".join(f"explain {m.metric} {m.total:+.4f}: " + (", ".join(
        f"{' + '.join(WORDS.get(x, x) for x in n.split('+'))} {v:+.4f}" for n, v in m.parts.items() if abs(v) > 5e-7)
        or "nothing moved") for m in explanation.metrics)


def markdown(explanation: Explanation) -> str:
    """The explanation as a Markdown section (for ``rwb check --summary``)."""
    lines = ["", "### Where the change comes from (`--explain`)", "",
             "Each changed input's share of the metric change (asymmetric Shapley values over the orders "
             "the snapshot allows; the parts sum to the total).", ""]
    for m in explanation.metrics:
        names = list(m.parts)
        lines += [f"**{m.metric}**: total {m.total:+.4f} over {m.n} queries", "",
                  "| part | Δ | p |", "|---|---:|---:|"]
        lines += [f"| {' + '.join(WORDS.get(x, x) for x in name.split('+'))} | {m.parts[name]:+.4f} | "
                  f"{m.p_values[name]:.3f} |" for name in names]
        if m.intents:
            lines += ["", "| intent | n | total | " + " | ".join(names) + " |",
                      "|---|---:|---:|" + "---:|" * len(names)]
            lines += [f"| {intent} | {row['n']} | {row['total']:+.4f} | "
                      + " | ".join(f"{row['parts'][name]:+.4f}" for name in names) + " |"
                      for intent, row in m.intents.items()]
        lines.append("")
    lines += [f"Note: {note}." for note in explanation.notes]
    return "\n".join(lines) + "\n"
