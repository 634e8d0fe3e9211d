"""Evaluate pipelines on a candidate pool: mean, per-intent and per-query metrics.

``evaluate_pipelines`` goes through ranx (``eval.runs`` adapters), for reports and the
``rwb eval`` command; ``fast_metrics`` uses ``eval.fast`` (equal to ranx, metric for metric)
for sweeps and the UI. Neither touches an index: both re-score the stored pool.

Which queries count is decided in ``eval.runs``: those with at least one relevant judgment;
a counted query a pipeline answers with nothing scores 0 on every metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from eval.fast import DEFAULT_METRICS, judge, mean_metrics, parse_metric
from eval.runs import judged_query_ids, ranx_per_query, to_qrels, to_run
from retrieval.candidates import Candidates
from retrieval.pipeline import PipelineConfig, PipelineRun, get_pipeline, run_pipeline

INTENT_ORDER = ("debug", "concept", "timeline", "brainstorm", "preference")
UNLABELLED = "unlabelled"


def parse_metrics(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """Metric names from ``"ndcg@5,recall@5"`` or a list; each checked (``NAME@K``)."""
    if text is None:
        return DEFAULT_METRICS
    names = [m.strip() for m in (text.split(",") if isinstance(text, str) else text)]
    names = [m for m in names if m]
    if not names:
        raise ValueError("no metric given; use e.g. --metrics ndcg@5,recall@5")
    for name in names:
        parse_metric(name)
    return tuple(dict.fromkeys(names))


def resolve_pipelines(names: Sequence[str | PipelineConfig], baseline: str | PipelineConfig | None = None
                      ) -> dict[str, PipelineConfig]:
    """Configs by label, the baseline first (added when not listed); labels must be unique."""
    configs: dict[str, PipelineConfig] = {}
    wanted = ([baseline] if baseline is not None else []) + list(names)
    for item in wanted:
        config = get_pipeline(item)
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

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def values(self, pipeline: str, metric: str) -> np.ndarray:
        """Per-query values of one metric, in ``query_ids`` order."""
        table = self.per_query[pipeline]
        return np.array([table[q][metric] for q in self.query_ids])


def evaluate_pipelines(c: Candidates, qrels: dict[str, dict[str, int]],
                       pipelines: Sequence[str | PipelineConfig] | Mapping[str, PipelineConfig],
                       metrics: Sequence[str] = DEFAULT_METRICS, intents: Mapping[str, str] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> Evaluation:
    """Run every pipeline on the pool and evaluate it with ranx.

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
    results, per_query, per_intent, runs = {}, {}, {}, {}
    for i, (label, config) in enumerate(configs.items()):
        run = run_pipeline(c, config)
        runs[label] = run
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
    )


def fast_metrics(c: Candidates, qrels: dict[str, dict[str, int]], config: str | PipelineConfig,
                 metrics: Sequence[str] = DEFAULT_METRICS) -> dict[str, float]:
    """Mean metrics of one pipeline with the vectorised evaluator (for sweeps and the UI)."""
    config = get_pipeline(config)
    return mean_metrics(c, judge(c, qrels), run_pipeline(c, config).ranking, parse_metrics(list(metrics)))
