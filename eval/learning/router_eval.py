"""How well the intent router picks a profile, and what a wrong pick costs.

The dataset labels queries with five intents; the router (``retrieval.routing.route_intent``)
has four profiles. Labels map onto profiles as ``INTENT_TO_PROFILE`` says: debug, concept,
timeline and brainstorm map to the profile of the same name, and **preference → concept**
(seed 001 has no preference profile; a preference question is answered from facts about the
user, which the concept profile's dense-heavy weights target). Unlabelled queries, or labels
outside this map, are left out of the confusion matrix and of accuracy.

Regret (per query, in ``metric``, default nDCG@5): the best value any profile reaches on the
query minus the value of the profile the router picked. Each profile's values come from the
adaptive pipeline with that profile fixed for every query (``intent_router`` off), which gives
per query exactly what the routed pipeline gives for a query routed to that profile.

``evaluate_routes`` scores any routing (one profile name per pool query) the same way:
``evaluate_router`` is it with the rules' routes; ``eval.learning.router`` passes the learned
router's cross-validated routes, so the two are compared on the same table of values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from eval.metrics.measure import judge, parse_metric, per_query
from eval.stores.configs import resolve_config
from retrieval.candidates import Candidates
from retrieval.pipeline import PipelineConfig, run_pipeline
from retrieval.routing import INTENTS

INTENT_TO_PROFILE = {"debug": "debug", "concept": "concept", "timeline": "timeline", "brainstorm": "brainstorm",
                     "preference": "concept"}
MAPPING_NOTE = ("labels map to router profiles by name, except preference → concept "
                "(seed 001 has no preference profile)")
PROFILE_ORDER = ("debug", "concept", "timeline", "brainstorm")


@dataclass(frozen=True)
class RouterEvaluation:
    profiles: tuple[str, ...]
    confusion: dict[str, dict[str, int]]     # expected profile → routed profile → count
    by_label: dict[str, dict[str, int]]      # raw label → routed profile → count
    accuracy: float
    n_labelled: int
    metric: str
    pipeline: str
    routed_mean: float                       # metric of the router's choices
    label_mean: float                        # metric when the label's profile is used
    oracle_mean: float                       # best profile per query
    fixed_means: dict[str, float]            # one profile for every query
    regret_mean: float
    regret: dict[str, float]                 # query id → regret
    n_queries: int
    mapping_note: str = MAPPING_NOTE
    router: str = "rules"                    # which router's routes were scored
    note: str = ""                           # how those routes were made (learned: model, features, folds)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def adaptive_base(config: PipelineConfig | str = "seed-adaptive") -> PipelineConfig:
    config = resolve_config(config)
    if config.fusion != "adaptive":
        raise ValueError(f"router evaluation needs an adaptive pipeline, got {config.name!r} ({config.fusion})")
    return config


def evaluate_router(c: Candidates, qrels: dict[str, dict[str, int]], labels: Mapping[str, str],
                    pipeline: PipelineConfig | str = "seed-adaptive", metric: str = "ndcg@5") -> RouterEvaluation:
    """Confusion matrix of the rule router against ``labels`` (query id → intent) and regret."""
    return evaluate_routes(c, qrels, labels, c.intent_route, pipeline, metric)


def evaluate_routes(c: Candidates, qrels: dict[str, dict[str, int]], labels: Mapping[str, str],
                    routes: tuple[str, ...], pipeline: PipelineConfig | str = "seed-adaptive",
                    metric: str = "ndcg@5", router: str = "rules", note: str = "") -> RouterEvaluation:
    """Confusion matrix and regret of ``routes`` (a profile name per pool query)."""
    parse_metric(metric)
    base = adaptive_base(pipeline)
    profiles = tuple(p for p in PROFILE_ORDER if p in INTENTS)
    if len(routes) != c.n_queries:
        raise ValueError(f"{len(routes)} routes for {c.n_queries} queries")
    routed = {q: base.params.profile_named(r).name for q, r in zip(c.query_ids, routes)}
    routed = {q: r if r in profiles else "concept" for q, r in routed.items()}
    confusion = {e: {p: 0 for p in profiles} for e in profiles}
    by_label: dict[str, dict[str, int]] = {}
    for qid in c.query_ids:
        label = (labels.get(qid) or "").strip()
        expected = INTENT_TO_PROFILE.get(label)
        if expected is None:
            continue
        by_label.setdefault(label, {p: 0 for p in profiles})[routed[qid]] += 1
        confusion[expected][routed[qid]] += 1
    n_labelled = sum(sum(row.values()) for row in confusion.values())
    correct = sum(confusion[p][p] for p in profiles)

    judged = judge(c, qrels)
    mask = judged.judged
    if not mask.any():
        raise ValueError("no query has a relevant judgment (grade > 0): cannot compute regret")
    values = {}
    for name in profiles:
        fixed = dataclasses.replace(base, params=dataclasses.replace(
            base.params, intent_router=False, profile=base.params.profile_named(name)))
        values[name] = per_query(c, judged, run_pipeline(c, fixed).ranking, (metric,))[metric]
    table = np.vstack([values[p] for p in profiles])            # (profiles, queries)
    index = {p: i for i, p in enumerate(profiles)}
    picked = np.array([index[routed[q]] for q in c.query_ids], dtype=np.int64)
    cols = np.arange(c.n_queries)
    routed_values = table[picked, cols]
    label_pick = np.array([index.get(INTENT_TO_PROFILE.get((labels.get(q) or "").strip(), ""), -1)
                           for q in c.query_ids])
    has_label = mask & (label_pick >= 0)
    best = table.max(axis=0)
    regret = best - routed_values
    ids = [q for q, m in zip(c.query_ids, mask) if m]
    return RouterEvaluation(
        profiles=profiles, confusion=confusion, by_label=by_label,
        accuracy=correct / n_labelled if n_labelled else float("nan"), n_labelled=n_labelled,
        metric=metric, pipeline=base.name,
        routed_mean=float(routed_values[mask].mean()),
        label_mean=float(table[label_pick[has_label], cols[has_label]].mean()) if has_label.any() else float("nan"),
        oracle_mean=float(best[mask].mean()),
        fixed_means={p: float(values[p][mask].mean()) for p in profiles},
        regret_mean=float(regret[mask].mean()),
        regret={q: float(r) for q, r in zip(ids, regret[mask])},
        n_queries=int(mask.sum()), router=router, note=note,
    )


def router_lines(rules: RouterEvaluation, learned: RouterEvaluation | None = None) -> list[str]:
    """The rule router and (when fitted) the learned one side by side, as text lines: accuracy,
    the metric of the routes, the oracle and the mean regret, then both confusion matrices."""
    routers = [rules] + ([learned] if learned is not None else [])
    lines = [f"intent routers on {rules.n_labelled} labelled queries ({rules.mapping_note}); "
             f"{rules.metric} over {rules.n_queries} judged queries, oracle {rules.oracle_mean:.4f}:"]
    for r in routers:
        lines.append(f"  {r.router:<8} accuracy {r.accuracy:6.1%}  routed {r.routed_mean:.4f}  "
                     f"mean regret {r.regret_mean:.4f}" + (f"  ({r.note})" if r.note else ""))
    width = max(len(p) for p in rules.profiles)
    head = " ".join(f"{p[:5]:>5}" for p in rules.profiles)
    lines.append(f"  confusion (label → routed), {' | '.join(r.router for r in routers)}:")
    lines.append(f"  {'':<{width}}  " + " | ".join(head for _ in routers))
    for expected in rules.profiles:
        cells = " | ".join(" ".join(f"{r.confusion[expected][p]:>5}" for p in r.profiles) for r in routers)
        lines.append(f"  {expected:<{width}}  {cells}")
    return lines
