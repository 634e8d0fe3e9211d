"""Evaluate pipelines on a candidate pool: mean, per-intent and per-query metrics.

``evaluate_pipelines`` goes through ranx (``eval.metrics.ranx_io`` adapters); ``eval.experiments.experiment``
composes it with significance, budget and router for ``rwb eval``, ``rwb report`` and the
workbench. ``fast_metrics`` uses ``eval.metrics.measure`` (equal to ranx, metric for metric), as sweeps
and the Tune page do. Neither touches an index: both re-score the stored pool.

Which queries count is decided in ``eval.metrics.ranx_io``: those with at least one relevant judgment;
a counted query a pipeline answers with nothing scores 0 on every metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from eval.metrics.measure import (
    DEFAULT_METRICS, MAX_CUTOFF, METRICS, UNCUT, judge, mean_metrics, parse_metric,
)
from eval.metrics.ranx_io import judged_query_ids, ranx_per_query, to_qrels, to_run
from retrieval.candidate_table import Candidates
from retrieval.pipeline import PipelineConfig, PipelineRun, get_pipeline, run_pipeline

INTENT_ORDER = ("debug", "concept", "timeline", "brainstorm", "preference")
UNLABELLED = "unlabelled"
DEFAULT_CUTOFFS = (1, 3, 5, 10, 20)


def parse_cutoffs(text: str | Sequence[int] | None) -> tuple[int, ...]:
    """Cutoffs from ``"1,3,5,10,20"`` or a list: whole numbers in 1…10,000, sorted, unique."""
    if text is None:
        return DEFAULT_CUTOFFS
    items = [x.strip() for x in text.split(",")] if isinstance(text, str) else list(text)
    items = [x for x in items if x != ""]
    if not items:
        raise ValueError("no cutoff given; use e.g. --cutoffs 1,3,5,10,20")
    cutoffs = []
    for item in items:
        if isinstance(item, bool) or not str(item).isdigit() or not 1 <= int(item) <= MAX_CUTOFF:
            raise ValueError(f"bad cutoff {item!r}: a whole number from 1 to {MAX_CUTOFF:,}")
        cutoffs.append(int(item))
    return tuple(sorted(set(cutoffs)))


def parse_metrics(text: str | Sequence[str] | None, cutoffs: Sequence[int] | None = None) -> tuple[str, ...]:
    """Metric names from ``"ndcg@5,recall@5"`` or a list; each checked (``NAME@K``).

    A bare family name (``ndcg``, ``recall``, ``precision``, ``mrr``, ``hit_rate``,
    ``ndcg_burges``) stands for that family at every one of ``cutoffs`` (default 1, 3, 5, 10,
    20), in ascending order; bare ``map`` is MAP over the whole ranking."""
    if text is None:
        return DEFAULT_METRICS
    names = [m.strip() for m in (text.split(",") if isinstance(text, str) else text)]
    names = [m for m in names if m]
    if not names:
        raise ValueError("no metric given; use e.g. --metrics ndcg@5,recall@5")
    ks = parse_cutoffs(cutoffs)
    expanded: list[str] = []
    for name in names:
        if name in METRICS and name not in UNCUT:
            expanded += [f"{name}@{k}" for k in ks]
        else:
            parse_metric(name)
            expanded.append(name)
    return tuple(dict.fromkeys(expanded))


def with_gain(metrics: Sequence[str], gain: str) -> tuple[str, ...]:
    """nDCG names for a gain: ``linear`` keeps ``ndcg@k`` (rel), ``exponential`` makes them
    ``ndcg_burges@k`` (2^rel − 1), as ranx names them; other metrics are unchanged."""
    if gain not in GAINS:
        raise ValueError(f"unknown gain {gain!r}; choose from {list(GAINS)}")
    family = "ndcg" if gain == "linear" else "ndcg_burges"
    out = []
    for name in metrics:
        metric, k = parse_metric(name)
        out.append(f"{family}@{k}" if metric in ("ndcg", "ndcg_burges") else name)
    return tuple(dict.fromkeys(out))


GAINS = {"linear": "linear gain rel / log2(rank + 1) (Järvelin & Kekäläinen 2002; ranx ndcg)",
         "exponential": "exponential gain (2^rel − 1) / log2(rank + 1) (Burges et al. 2005; ranx ndcg_burges)"}
TIE_BREAK = "scores descending, then document id ascending"


def metric_cutoff(name: str) -> int:
    """A metric's cutoff k (0 for one over the whole ranking)."""
    return parse_metric(name)[1]


def resolve_pipelines(names: Sequence[str | PipelineConfig], baseline: str | PipelineConfig | None = None,
                      resolve: Callable[[str | PipelineConfig], PipelineConfig] = get_pipeline
                      ) -> dict[str, PipelineConfig]:
    """Configs by label, the baseline first (added when not listed); labels must be unique.
    ``resolve`` turns a label into a config: a named pipeline or a TOML file here; the commands
    and pages pass ``eval.stores.configs.resolve_config``, which also reads the workbench's
    ``profile:`` and ``saved:`` labels."""
    configs: dict[str, PipelineConfig] = {}
    wanted = ([baseline] if baseline is not None else []) + list(names)
    for item in wanted:
        config = resolve(item)
        label = str(config)
        if label in configs:
            if configs[label] == config:
                continue
            raise ValueError(f"two different pipelines are named {label!r}; give one of them another name")
        configs[label] = config
    if not configs:
        raise ValueError("no pipeline given; use --pipeline NAME (or a TOML file)")
    return configs


def intent_of(queries) -> dict[str, str]:
    """Query id → labelled intent ("unlabelled" when the dataset gives none)."""
    return {q.id: (q.intent or UNLABELLED) for q in queries}


def intent_order(intents: Mapping[str, str]) -> list[str]:
    present = set(intents.values())
    return [i for i in INTENT_ORDER if i in present] + sorted(present - set(INTENT_ORDER))


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Metrics of several pipelines on one pool (computed through ranx)."""

    dataset: str
    fingerprint: str
    embedder: str
    pool_depth: int
    metrics: tuple[str, ...]
    query_ids: tuple[str, ...]                               # counted queries, pool order
    intents: dict[str, str]                                  # counted query id → intent
    configs: dict[str, PipelineConfig]
    results: dict[str, dict[str, float]]                     # pipeline → metric → mean
    per_query: dict[str, dict[str, dict[str, float]]]        # pipeline → query → metric → value
    per_intent: dict[str, dict[str, dict[str, float]]]       # pipeline → intent → metric → mean
    runs: dict[str, PipelineRun] = field(repr=False)
    candidates: Candidates = field(repr=False, default=None)
    excluded: tuple[str, ...] = ()                           # pool queries without a relevant judgment
    missing: tuple[str, ...] = ()                            # counted queries the pool lacks (score 0)
    n_results: dict[str, dict[str, int]] = field(default_factory=dict)  # pipeline → counted query → results
    pools: dict[str, Candidates] = field(default_factory=dict, repr=False)  # pipeline → its own pool, when
    # pipelines were retrieved apart (embedders compared: eval.experiments.embedders)

    def pool_of(self, pipeline: str) -> Candidates:
        """The candidate table ``pipeline``'s run ranks rows of."""
        return self.pools.get(pipeline, self.candidates)

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def short_of(self) -> dict[str, dict[int, int]]:
        """Pipeline → cutoff k → how many counted queries it answers with fewer than k results
        (only the cutoffs of ``metrics`` where that happens). Such a query is still scored: the
        missing ranks count as non-relevant (precision@k divides by k all the same)."""
        ks = sorted({k for k in (metric_cutoff(m) for m in self.metrics) if k > 0})
        out: dict[str, dict[int, int]] = {}
        for label, counts in self.n_results.items():
            short = {k: sum(1 for q in self.query_ids if counts.get(q, 0) < k) for k in ks}
            short = {k: n for k, n in short.items() if n}
            if short:
                out[label] = short
        return out

    def values(self, pipeline: str, metric: str) -> np.ndarray:
        """Per-query values of one metric, in ``query_ids`` order."""
        table = self.per_query[pipeline]
        return np.array([table[q][metric] for q in self.query_ids])


def evaluate_pipelines(c: Candidates, qrels: dict[str, dict[str, int]],
                       pipelines: Sequence[str | PipelineConfig] | Mapping[str, PipelineConfig],
                       metrics: Sequence[str] = DEFAULT_METRICS, intents: Mapping[str, str] | None = None,
                       progress: Callable[[int, int], None] | None = None,
                       routes: tuple[str, ...] | None = None) -> Evaluation:
    """Run every pipeline on the pool and evaluate it with ranx (``routes``: the learned
    routes, for a pipeline that follows them; ``retrieval.pipeline.fuse``).

    ``intents`` maps query ids to labelled intents (for ``per_intent``); queries without
    one are "unlabelled". A counted qrels query the pool lacks still counts, with 0 on every
    metric (listed in ``missing``), as it would in ranx."""
    metrics = parse_metrics(list(metrics))
    configs = dict(pipelines) if isinstance(pipelines, Mapping) else resolve_pipelines(pipelines)
    in_pool = judged_query_ids(qrels, c.query_ids)
    missing = tuple(sorted(set(judged_query_ids(qrels)) - set(in_pool)))
    counted = in_pool + list(missing)
    if not counted:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to evaluate")
    excluded = tuple(q for q in c.query_ids if q not in set(counted))
    labels = {q: (intents or {}).get(q) or UNLABELLED for q in counted}
    ranx_qrels = to_qrels({q: qrels[q] for q in counted})
    results, per_query, per_intent, runs, n_results = {}, {}, {}, {}, {}
    for i, (label, config) in enumerate(configs.items()):
        run = run_pipeline(c, config, routes)
        runs[label] = run
        returned = dict(zip(c.query_ids, np.bincount(run.ranking.query_idx, minlength=c.n_queries).tolist()))
        n_results[label] = {q: returned.get(q, 0) for q in counted}
        scores = ranx_per_query(ranx_qrels, to_run(c, run.ranking, qrels, label), metrics)
        per_query[label] = {q: {m: scores[m][q] for m in metrics} for q in counted}
        results[label] = {m: float(np.mean([scores[m][q] for q in counted])) for m in metrics}
        per_intent[label] = {
            intent: {m: float(np.mean([scores[m][q] for q in counted if labels[q] == intent])) for m in metrics}
            for intent in intent_order(labels)
        }
        if progress:
            progress(i + 1, len(configs))
    return Evaluation(
        dataset=c.dataset, fingerprint=c.fingerprint, embedder=c.embedder, pool_depth=c.pool_depth,
        metrics=metrics, query_ids=tuple(counted), intents=labels, configs=configs, results=results,
        per_query=per_query, per_intent=per_intent, runs=runs, excluded=excluded, missing=missing, candidates=c,
        n_results=n_results,
    )


def fast_metrics(c: Candidates, qrels: dict[str, dict[str, int]], config: str | PipelineConfig,
                 metrics: Sequence[str] = DEFAULT_METRICS) -> dict[str, float]:
    """Mean metrics of one pipeline (a config, a named pipeline or a TOML file) with the
    vectorised evaluator (for sweeps and the UI)."""
    config = get_pipeline(config)
    return mean_metrics(c, judge(c, qrels), run_pipeline(c, config).ranking, parse_metrics(list(metrics)))
