"""Embedders side by side: every pipeline retrieved with each embedder, tested against one baseline.

``rwb eval DATASET --embedder minilm --embedder use-multilingual --pipeline rrf`` asks what a
researcher choosing a model asks: does the other embedder help the vector baseline, and each
fusion? Each embedder has its own candidate pool (retrieved once, as always); every pipeline,
the baseline included, is run on each pool and labelled ``<pipeline>@<embedder>``. The baseline
is the baseline pipeline with the **first** embedder named, and every other run — the baseline
with the other embedders included — is paired-tested against it on the same counted queries
(``eval.statistics.significance.compare_to_baseline``, the usual test and correction: one family
per metric across all the runs), with bootstrap intervals and budget recall as ``rwb eval`` has
them. The intent router's evaluation and the judgment-bias table belong to one pool and are not
computed here (run ``rwb eval`` per embedder for them).

``rwb eval DATASET --analyzer bigram --analyzer jieba`` is the same with one pool per BM25
analyzer (``side="analyzer"``): runs ``<pipeline>@<analyzer>``, the baseline's first analyzer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

from eval.experiments.experiment import Experiment, ExperimentOptions, experiment_configs
from eval.learning.router import learned_routes
from eval.metrics.budget import budget_recall, document_tokens
from eval.metrics.ranx_eval import Evaluation, evaluate_pipelines, intent_of
from eval.statistics.bootstrap import bootstrap_intervals
from eval.statistics.significance import compare_to_baseline
from retrieval.candidate_table import Candidates
from retrieval.dataset import Dataset


def run_label(pipeline: str, embedder: str) -> str:
    """The label of ``pipeline`` retrieved with ``embedder``."""
    return f"{pipeline}@{embedder}"


def compare_embedders(pools: Mapping[str, Candidates], dataset: Dataset, pipelines: Sequence[str],
                      baseline: str = "vector", options: ExperimentOptions | None = None, *,
                      qrels: dict[str, dict[str, int]] | None = None, judgments: dict | None = None,
                      progress: Callable[[int, int], None] | None = None, side: str = "embedder") -> Experiment:
    """``pools``: embedder name (or, with ``side="analyzer"``, analyzer name) → its candidate
    pool of ``dataset``'s queries, in the order named (the first holds the baseline). Returns an
    ``Experiment`` over the ``<pipeline>@<name>`` runs (no router, no bias table; see the
    module docstring)."""
    if len(pools) < 2:
        raise ValueError(f"comparing {side}s needs at least two --{side}")
    options = options or ExperimentOptions()
    if qrels is None:
        qrels, judgments = dataset.qrels, {"label": "dataset qrels"}
    configs = experiment_configs(list(pipelines), baseline)
    base_label = next(iter(configs))
    intents = intent_of(dataset.queries)
    parts: dict[str, Evaluation] = {}
    for i, (name, pool) in enumerate(pools.items()):
        routes = learned_routes(pool, dataset.queries, configs, pool.embedder)
        parts[name] = evaluate_pipelines(pool, qrels, configs, options.metrics, intents, routes=routes)
        if progress:
            progress(i + 1, len(pools))
    evaluation = _merged(parts)
    first = next(iter(pools))
    base = run_label(base_label, first)
    significance = compare_to_baseline(evaluation, qrels, base, options.test, options.correction,
                                       options.alpha, options.permutations, options.seed)
    intervals = bootstrap_intervals(evaluation, base, options.bootstrap, options.seed)
    tokens = document_tokens(dataset.documents)
    budget = {label: budget_recall(evaluation.pool_of(label), qrels, run.ranking, options.token_budget, tokens)
              for label, run in evaluation.runs.items()}
    return Experiment(evaluation, significance, budget, None, base, options, intervals, None, judgments, ())


def _merged(parts: Mapping[str, Evaluation]) -> Evaluation:
    """One evaluation of every ``<pipeline>@<embedder>`` run, the first embedder's runs first."""
    first = next(iter(parts.values()))
    for embedder, part in parts.items():
        if part.query_ids != first.query_ids:
            raise ValueError(f"the pool of {embedder} counts other queries than the first embedder's")
    merged: dict[str, dict] = {k: {} for k in ("configs", "results", "per_query", "per_intent", "runs",
                                               "n_results", "pools")}
    for embedder, part in parts.items():
        for label in part.results:
            name = run_label(label, embedder)
            merged["configs"][name] = part.configs[label]
            merged["results"][name] = part.results[label]
            merged["per_query"][name] = part.per_query[label]
            merged["per_intent"][name] = part.per_intent[label]
            merged["runs"][name] = part.runs[label]
            merged["n_results"][name] = part.n_results.get(label, {})
            merged["pools"][name] = part.candidates
    return replace(first, embedder=", ".join(parts), missing=tuple(sorted({q for p in parts.values() for q in p.missing})),
                   **merged)
