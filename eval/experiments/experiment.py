"""An experiment: pipelines against a baseline on one candidate pool, with everything a report shows.

``run_experiment`` is the one composition of the harness's steps — ranx evaluation
(``eval.metrics.ranx_eval``), paired significance against the baseline with a correction per metric
(``eval.statistics.significance``), bootstrap confidence intervals of every mean and every difference
(``eval.statistics.bootstrap``), the token-budget metric (``eval.metrics.budget``) and the intent router's
accuracy and regret (``eval.learning.router_eval``). ``rwb eval``, ``rwb report`` and the workbench's Evaluate and Reports
pages all call it, so they show the same numbers; ``eval.reports.report.experiment_summary`` is its
JSON document and ``eval.reports.report.write_experiment_report`` its report files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from eval.statistics.bootstrap import DEFAULT_RESAMPLES, LEVEL, Intervals, bootstrap_intervals
from eval.metrics.budget import DEFAULT_BUDGET, BudgetScore, budget_recall, document_tokens
from eval.metrics.definitions import DEFAULT_FAMILIES
from eval.statistics.significance import DEFAULT_PERMUTATIONS, Significance, check_settings, compare_to_baseline
from eval.metrics.ranx_eval import (DEFAULT_CUTOFFS, GAINS, TIE_BREAK, Evaluation, evaluate_pipelines, intent_of,
                           parse_cutoffs, parse_metrics, resolve_pipelines, with_gain)
from eval.statistics.judged_below import BiasRow, bias_table
from eval.statistics.provenance import Provenance, in_sample
from eval.statistics.unjudged import verdict_bounds
from eval.metrics.measure import parse_metric
from eval.metrics.ranx_eval import metric_cutoff
from eval.learning.router import evaluate_learned_router, learned_routes, query_vectors
from eval.learning.router_eval import INTENT_TO_PROFILE, RouterEvaluation, evaluate_router
from eval.stores.configs import resolve_config
from eval.stores.inputs import inputs_of, pipeline_hash
from retrieval.candidate_table import Candidates
from retrieval.dataset import Dataset
from retrieval.pipeline import PipelineConfig

ROUTER_PIPELINE = "seed-adaptive"
PRIMARY = "ndcg@5"


@dataclass(frozen=True)
class ExperimentOptions:
    """How an experiment is scored; checked on construction (``ValueError`` says what is allowed).

    ``metrics``: ranx names ``NAME@K``, bare family names (every one of ``cutoffs``) or ``map``
    (the whole ranking); ``gain``: nDCG's gain, ``linear`` (ranx ``ndcg``) or ``exponential``
    (ranx ``ndcg_burges``; nDCG names become ``ndcg_burges@k``); ``test``: ``fisher`` or
    ``student``; ``correction``: ``holm``, ``bonferroni`` or ``none``, per metric across the
    pipelines; ``alpha``: significance level after correction; ``permutations`` and ``seed``:
    Fisher's randomization test (the seed also seeds the bootstrap); ``bootstrap``: resamples of
    the 95% confidence intervals; ``token_budget``: of the budget-recall metric;
    ``router_metric``: the metric of the intent router's regret (its nDCG follows ``gain``)."""

    metrics: tuple[str, ...] = DEFAULT_FAMILIES
    cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS
    gain: str = "linear"
    test: str = "fisher"
    correction: str = "holm"
    alpha: float = 0.05
    permutations: int = DEFAULT_PERMUTATIONS
    seed: int = 42
    bootstrap: int = DEFAULT_RESAMPLES
    token_budget: int = DEFAULT_BUDGET
    router_metric: str = PRIMARY

    def __post_init__(self) -> None:
        if self.gain not in GAINS:
            raise ValueError(f"unknown gain {self.gain!r}; choose from {list(GAINS)}")
        object.__setattr__(self, "cutoffs", parse_cutoffs(self.cutoffs))
        object.__setattr__(self, "metrics", with_gain(parse_metrics(self.metrics, self.cutoffs), self.gain))
        object.__setattr__(self, "router_metric", with_gain([self.router_metric], self.gain)[0])
        check_settings(self.test, self.correction, self.alpha)
        if self.permutations < 1:
            raise ValueError(f"permutations must be ≥ 1, got {self.permutations}")
        if self.bootstrap < 1:
            raise ValueError(f"bootstrap resamples must be ≥ 1, got {self.bootstrap}")
        if self.token_budget < 1:
            raise ValueError(f"token budget must be ≥ 1, got {self.token_budget}")

    @property
    def primary(self) -> str:
        """The metric of the per-intent table and the per-query figures: nDCG@5 (in the chosen
        gain) when evaluated, else the first metric."""
        wanted = with_gain([PRIMARY], self.gain)[0]
        return wanted if wanted in self.metrics else self.metrics[0]


@dataclass(frozen=True, eq=False)
class Experiment:
    """What ``run_experiment`` computed. ``evaluation.configs`` lists the baseline first."""

    evaluation: Evaluation
    significance: Significance | None        # None when only the baseline was evaluated
    budget: dict[str, BudgetScore]            # pipeline label → budget recall
    router: RouterEvaluation | None           # None when no query carries a routable intent label
    baseline: str                             # the baseline's label
    options: ExperimentOptions
    intervals: Intervals | None = None        # bootstrap CIs of every mean and every difference
    learned_router: RouterEvaluation | None = None  # the learned router, cross-validated (eval.learning.router)
    judgments: dict | None = None             # which judgments (stores.judgments.Judgments.to_json)
    bias: tuple[BiasRow, ...] = ()  # judged@k, nDCG'@k, bpref (eval.metrics.judgment_bias)
    inputs: dict | None = None      # content hashes of the inputs (eval.stores.inputs), per pipeline
    unjudged: dict = field(default_factory=dict)  # pipeline → does its verdict vs the baseline survive the unjudged (eval.statistics.unjudged)
    in_sample: dict = field(default_factory=dict)  # pipeline → its Provenance, when chosen or fitted on these queries

    @property
    def primary(self) -> str:
        return self.options.primary

    def settings(self) -> dict:
        """How the numbers were computed, in words and values (printed by every surface)."""
        o = self.options
        return {
            "judgments": (self.judgments or {}).get("label", "given qrels"),
            "primary_metric": self.primary, "cutoffs": list(o.cutoffs), "gain": o.gain, "gain_formula": GAINS[o.gain],
            "tie_break": TIE_BREAK, "test": o.test, "correction": o.correction, "alpha": o.alpha,
            "permutations": o.permutations, "seed": o.seed, "bootstrap_resamples": o.bootstrap,
            "confidence_level": LEVEL,
            "significance": self.significance.describe() if self.significance else None,
            "intervals": self.intervals.describe() if self.intervals else None,
            "fewer_than_k": {p: {str(k): n for k, n in short.items()}
                             for p, short in self.evaluation.short_of().items()},
            "inputs": self.inputs,
            "in_sample": {label: p.note() for label, p in self.in_sample.items()},
        }


def experiment_configs(pipelines: Sequence[str | PipelineConfig] | Mapping[str, PipelineConfig],
                       baseline: str | PipelineConfig = "vector") -> dict[str, PipelineConfig]:
    """Configs by label, the baseline first under its own name.

    ``pipelines`` is a list of names / TOML paths / configs (labelled by their names, which
    must be unique) or a mapping label → config (a config equal to the baseline is dropped)."""
    if not isinstance(pipelines, Mapping):
        return resolve_pipelines(list(pipelines), baseline=baseline, resolve=resolve_config)
    base = resolve_config(baseline)
    configs = {str(base): base}
    for label, config in pipelines.items():
        if config != base:
            configs.setdefault(str(label), config)
    return configs


def in_sample_configs(fingerprint: str, pipelines, baseline) -> dict[str, Provenance]:
    """Label → provenance of each pipeline given as a file tuned or learned on the dataset with
    this ``fingerprint`` (``eval.statistics.provenance``): its figures there are in-sample."""
    specs = [] if isinstance(pipelines, Mapping) else list(pipelines)
    found = {}
    for spec in [baseline, *specs]:
        provenance = in_sample(fingerprint, source=str(spec)) if isinstance(spec, (str, Path)) else None
        if provenance is not None:
            found[str(resolve_config(spec))] = provenance
    return found


def run_experiment(pool: Candidates, dataset: Dataset,
                   pipelines: Sequence[str | PipelineConfig] | Mapping[str, PipelineConfig],
                   baseline: str | PipelineConfig = "vector", options: ExperimentOptions | None = None, *,
                   qrels: dict[str, dict[str, int]] | None = None, judgments: dict | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   step: Callable[[str], None] | None = None) -> Experiment:
    """Evaluate ``pipelines`` and ``baseline`` on ``pool`` (the candidates of ``dataset``'s queries).

    ``qrels`` defaults to the dataset's own; commands and pages pass
    ``eval.stores.judgments.effective_qrels`` and its description as ``judgments``; intents,
    router labels and token counts come from ``dataset``. Significance is
    computed when there is more than the baseline; the router is evaluated when some query is
    labelled with an intent the router knows. ``progress(done, total)`` is called per pipeline,
    ``step(name)`` as each later stage starts (``eval.progress.step`` on the command line)."""
    options = options or ExperimentOptions()
    say = step or (lambda name: None)
    if qrels is None:
        qrels, judgments = dataset.qrels, {"label": "dataset qrels"}
    configs = experiment_configs(pipelines, baseline)
    base_label = next(iter(configs))
    say(f"scoring {len(configs)} pipelines on {pool.n_queries:,} queries")
    routes = learned_routes(pool, dataset.queries, configs)  # when a pipeline follows them
    evaluation = evaluate_pipelines(pool, qrels, configs, options.metrics, intent_of(dataset.queries), progress,
                                    routes)
    significance = None
    if len(configs) > 1:
        say("significance tests (" + (f"Fisher, {options.permutations:,} permutations)"
                                      if options.test == "fisher" else "paired t)"))
        significance = compare_to_baseline(evaluation, qrels, base_label, options.test, options.correction,
                                           options.alpha, options.permutations, options.seed)
    say(f"confidence intervals ({options.bootstrap:,} bootstrap resamples)")
    intervals = bootstrap_intervals(evaluation, base_label, options.bootstrap, options.seed)
    tokens = document_tokens(dataset.documents)
    budget = {label: budget_recall(pool, qrels, run.ranking, options.token_budget, tokens)
              for label, run in evaluation.runs.items()}
    labels = {q.id: q.intent for q in dataset.queries}
    router = learned = None
    if any(intent in INTENT_TO_PROFILE for intent in labels.values()):
        say("evaluating the intent router")
        router = evaluate_router(pool, qrels, labels, ROUTER_PIPELINE, options.router_metric)
        learned = evaluate_learned_router(pool, qrels, labels, query_vectors(pool), ROUTER_PIPELINE,
                                          options.router_metric)
    rankings = {label: run.ranking for label, run in evaluation.runs.items()}
    say("judgment bias (judged@k, nDCG'@k, bpref)")
    bias = bias_table(pool, qrels, rankings, base_label, metric_cutoff(options.primary) or 5,
                      options.alpha, options.permutations, options.seed)
    inputs = inputs_of(dataset, qrels, None, pool.embedder, pool.analyzer).to_json()
    inputs["pipeline"] = {label: pipeline_hash(config) for label, config in configs.items()}
    primary = options.primary if parse_metric_or_none(options.primary) else None
    unjudged = {label: verdict_bounds(pool, qrels, rankings[base_label], ranking, primary)
                for label, ranking in rankings.items() if label != base_label} if primary else {}
    return Experiment(evaluation, significance, budget, router, base_label, options, intervals,
                      learned, judgments, tuple(bias), inputs, unjudged,
                      in_sample_configs(dataset.fingerprint, pipelines, baseline))


def parse_metric_or_none(name: str):
    """``parse_metric(name)``, or None for a metric the fast kernels do not define."""
    try:
        return parse_metric(name)
    except ValueError:
        return None
