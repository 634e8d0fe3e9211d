"""``rwb tune``: search many parameters of a pipeline at once, with nested cross-validation.

The search (Optuna, one study per run of the procedure): ``tpe`` — the Tree-structured
Parzen Estimator (``optuna.samplers.TPESampler``, seeded, multivariate); ``random`` —
``RandomSampler``; ``grid`` — ``GridSampler`` over the ``lo:hi:step`` grid (the trials are
distinct grid points in a seeded order; the study stops when the grid is exhausted). With
``tpe`` and ``random`` the pipeline's own values are trial 0 when they lie in the space, so a
search never scores below the default on the queries it is run on. A trial's score is the
mean ``metric`` on the queries the procedure is given; a configuration is scored once per
query on the stored candidate pool (``eval.metrics.measure.config_values``, ``eval.metrics.measure`` metrics) and
kept, so retrieval never reruns and a configuration met again costs nothing. Ties go to the
earlier trial.

The tuning procedure on a set of queries T:

1. **search** T with the sampler (``trials`` trials): its winner ``w(T)``;
2. **guard** (inner cross-validation, ``inner_folds`` folds of T): the search is rerun on each
   inner training part and its winner scored on the inner held-out part; when the pooled
   inner held-out mean does not exceed the default pipeline's mean on T, the procedure returns
   the default (tuning did not hold up inside T), else ``w(T)``. (Without a guard the inner
   cross-validation of a configuration would only repeat its mean on T: nothing inside a
   configuration is fitted.)

**Nested cross-validation** (``eval.search.nested.nested_cv``, shared with ``rwb learn``, this
procedure its inner search): the counted queries are split into ``folds`` outer folds; for each
fold the whole procedure runs on the other folds and its choice is scored on the held-out fold.
Every query is held out exactly once, so the **held-out estimate** is the mean over all counted
queries of the value each received from a procedure that never saw it — the figure to expect on
unseen queries. It is compared, query by query, with the fixed pipeline the procedure falls
back to on all queries (the best fixed pipeline there: an in-sample choice, so the comparison
leans against the procedure) and with the better
single path (``vector`` or ``bm25``) by Fisher's randomization test and the paired t-test, raw
and Holm-corrected over the two comparisons (``eval.search.nested.compare``).

The configuration exported is the procedure run on **all** counted queries; its TOML carries a
``[tuning]`` table (search space, sampler, trials, folds, seed, dataset fingerprint, the
held-out estimate) that the pipeline loader ignores. Its score on the same queries is
in-sample: ``in_sample_warning`` says so when such a file is evaluated on the dataset it was
tuned on.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

import numpy as np
import tomli_w

from eval.metrics.measure import judge, parse_metric
from eval.metrics.measure import config_values
from eval.search.fallback import choose_fixed, fixed_candidates
from eval.search.nested import SINGLE_PATHS, Choice, NestedResult, Plan, compare, counted_ids, nested_cv
from eval.statistics.provenance import in_sample, tuning_table  # noqa: F401  (tuning_table: re-exported)
from eval.search.space import ParamSpec, knob_space, not_valid, parse_param, point_values, tunable
from eval.search.sweep import group_count, group_labels
from eval.stores.configs import resolve_config
from retrieval.candidate_table import Candidates
from retrieval.pipeline import (ParamError, PipelineConfig, fits, get_param, get_pipeline, sweepable_params, to_dict,
                                with_params)

if TYPE_CHECKING:
    from eval.search.executors import Executor

SAMPLERS = ("tpe", "grid", "random")
MAX_TRIALS = 10_000
MAX_TUNE_FOLDS = 100
MAX_GRID = 1_000_000
MAX_WORK = 2_000_000            # trials the whole nested procedure may run
DEFAULT_TRIALS = 30
DEFAULT_INNER_FOLDS = 3


# ---- the search space (eval.search.space) ------------------------------------------------------

def parse_tune_param(text: str, config: PipelineConfig) -> ParamSpec:
    """``name=lo:hi[:step]`` for a sweepable parameter of ``config`` (no step: continuous)."""
    return parse_param(text, config, "tuned", optional_step=True)


def default_space(config: PipelineConfig) -> tuple[ParamSpec, ...]:
    """Every sweepable parameter of the pipeline's own fusion over its slider range and step."""
    out = knob_space(config, [p for p in tunable(config) if p.startswith(f"{config.fusion}.")])
    if not out:
        raise ValueError(f"{config.name!r} ({config.fusion}) has no parameter of its own to tune; "
                         f"give --param name=lo:hi[:step] (tunable: {', '.join(sweepable_params(config)) or 'none'})")
    return tuple(out)


def check_space(base: PipelineConfig, space: tuple[ParamSpec, ...], sampler: str,
                pool_depth: int | None = None) -> None:
    """Refuse, naming the parameter, a range whose ends are invalid for the pipeline or take
    more candidates than the pool holds, a repeated name, and an oversized grid."""
    names = [p.name for p in space]
    if not names:
        raise ValueError("no parameter to tune")
    if len(set(names)) != len(names):
        raise ValueError(f"a parameter is given twice: {names}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose from {list(SAMPLERS)}")
    for end in ("lo", "hi"):
        try:
            config = with_params(base, point_values(space, [getattr(p, end) for p in space]))
        except ParamError as error:
            raise not_valid(base, error) from None
        if pool_depth is not None:
            fits(config, pool_depth, f"the range's end ({end})", "narrow the range or rerun with --pool-depth {depth}")
    if sampler == "grid":
        size = math.prod(p.count() for p in space)  # counted, not listed
        if size > MAX_GRID:
            raise ValueError(f"the grid has {size:,} points (limit {MAX_GRID:,}); use coarser steps or --sampler tpe")


# ---- scoring (on the stored pool, once per configuration) ------------------------------------

class _Scorer:
    """Per-query values of configurations over every counted query, each computed once."""

    def __init__(self, c: Candidates, qrels, base: PipelineConfig, metric: str,
                 routes: tuple[str, ...] | None = None):
        self.c, self.base, self.metric, self.routes = c, base, metric, routes
        self.judged = judge(c, qrels)
        self.cache: dict[tuple, np.ndarray | None] = {}

    def values(self, params: dict) -> np.ndarray | None:
        key = tuple(sorted(params.items()))
        if key not in self.cache:
            try:
                config = with_params(self.base, params)
            except ValueError:  # a cross-field rule (e.g. conf_low ≤ conf_high) refuses the point
                self.cache[key] = None
            else:
                self.cache[key] = self.pipeline(config)
        return self.cache[key]

    def scored(self) -> set:
        """The keys of the configurations scored so far (a refused point is not one)."""
        return {key for key, values in self.cache.items() if values is not None}

    def pipeline(self, config: PipelineConfig) -> np.ndarray:
        """Per-query values over the counted queries (missing ones 0), straight from the fused
        scores (``eval.metrics.measure.config_values``)."""
        values = next(config_values(self.c, self.judged, [config], self.metric, self.routes))[0]
        return self.judged.counted(values)


def _sampler(kind: str, space: tuple[ParamSpec, ...], seed: int):
    import optuna

    if kind == "tpe":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.GridSampler({p.name: list(p.grid()) for p in space}, seed=seed)


def _suggest(trial, p: ParamSpec):
    if p.integer:
        return int(trial.suggest_int(p.name, int(p.lo), int(p.hi), step=int(p.step or 1)))
    if p.lo == p.hi:
        return float(p.lo)
    return round(float(trial.suggest_float(p.name, p.lo, p.hi, step=p.step)), 12)


@dataclass(frozen=True)
class Search:
    params: dict            # the winner's values
    score: float            # its mean on the searched queries
    n_trials: int           # trials run (a grid may end early)


def search(scorer: _Scorer, space: tuple[ParamSpec, ...], idx: np.ndarray, sampler: str,
           trials: int, seed: int, on_trial: Callable[[], None] | None = None) -> Search:
    """The sampler's best configuration on the queries ``idx`` (first of equal scores)."""
    import optuna

    # ERROR: an interrupted trial's warning and traceback would precede rwb's one line
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(direction="maximize", sampler=_sampler(sampler, space, seed))
    start = {p.name: get_param(scorer.base, p.name) for p in space}
    if sampler != "grid" and all(p.contains(start[p.name]) for p in space):
        study.enqueue_trial(start)
    if sampler == "grid":
        trials = min(trials, math.prod(p.count() for p in space))

    def objective(trial) -> float:
        params = {p.name: _suggest(trial, p) for p in space}
        values = scorer.values(params)
        if on_trial:
            on_trial()
        if values is None:
            raise optuna.TrialPruned()
        trial.set_user_attr("params", params)
        return float(values[idx].mean())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid exhaustion and experimental-feature notices
        study.optimize(objective, n_trials=trials)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not done:
        raise ValueError("no trial gave a valid configuration; check the --param ranges")
    best = max(done, key=lambda t: (t.value, -t.number))
    return Search(dict(best.user_attrs["params"]), float(best.value), len(study.trials))


def procedure(scorer: _Scorer, space: tuple[ParamSpec, ...], plan: Plan, sampler: str, trials: int,
              inner_folds: int, guard: bool, fixed: dict[str, np.ndarray],
              on_trial: Callable[[], None] | None = None) -> Choice:
    """The tuning procedure (search + guard) on the queries ``plan.train`` (the inner search of
    ``eval.search.nested.nested_cv``); see the module docstring. Its ``Choice``: kind "tuned" or
    "default", the search winner's values as the pick, and ``record`` the winner's mean on the
    queries (``train_mean``) and the pooled inner held-out mean of the search (``inner_tuned``,
    NaN without a guard). The inner folds keep each group whole, as the outer ones do."""
    idx = plan.train
    found = search(scorer, space, idx, sampler, trials, plan.seed_for(-1), on_trial)
    fallback = choose_fixed(fixed, idx)
    default_mean = float(fixed[fallback][idx].mean())
    inner = plan.inner_folds(inner_folds) if guard else None
    if inner is None:   # no inner split possible
        return Choice("tuned", found.params, default_mean,
                      {"train_mean": found.score, "inner_tuned": math.nan, "fallback": fallback})
    held = np.empty(len(idx))
    for j in range(int(inner.max()) + 1):
        train, test = idx[inner != j], inner == j
        winner = search(scorer, space, train, sampler, trials, plan.seed_for(j), on_trial)
        held[test] = scorer.values(winner.params)[idx[test]]
    inner_tuned = float(held.mean())
    kind = "tuned" if inner_tuned > default_mean + 1e-12 else "default"
    return Choice(kind, found.params, default_mean,
                  {"train_mean": found.score, "inner_tuned": inner_tuned, "fallback": fallback})


# ---- the result --------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False, kw_only=True)
class TuneResult(NestedResult):
    base: PipelineConfig
    space: tuple[ParamSpec, ...]
    sampler: str
    trials: int
    final_config: PipelineConfig
    n_configs: int                       # distinct configurations scored

    @property
    def single_mean(self) -> float:
        return float(self.single_values[self.best_single].mean())

    def tuning_table(self) -> dict:
        """The ``[tuning]`` table of the exported TOML (ignored by the pipeline loader)."""
        d, s = self.comparisons  # the default, then the best single path
        return {
            "tool": "rwb tune", "dataset": self.dataset, "fingerprint": self.fingerprint,
            "embedder": self.embedder, "pool_depth": self.pool_depth, "pipeline": self.base.name,
            "metric": self.metric, "space": [str(p) for p in self.space], "sampler": self.sampler,
            "trials": self.trials, "folds": self.folds, "inner_folds": self.inner_folds, "guard": self.guard,
            "seed": self.seed, "n_queries": self.n_queries, "fold_groups": self.n_groups,
            "chosen": self.final.kind, "fallback": self.final.record.get("fallback", self.base.name),
            "fold_fallbacks": [f.choice.record.get("fallback", "") for f in self.outer],
            "held_out": round(self.held_out_mean, 6), "held_out_default": round(d.mean, 6),
            "best_single_path": self.best_single, "held_out_best_single_path": round(s.mean, 6),
            "p_vs_default": round(d.p_fisher, 6), "p_vs_best_single_path": round(s.p_fisher, 6),
            "in_sample": round(self.final_score, 6),
        }

    def to_toml(self) -> str:
        data = to_dict(self.final_config)
        data["tuning"] = self.tuning_table()
        head = (f"# tuned by rwb tune on {self.dataset} (fingerprint {self.fingerprint[:12]}, {self.embedder}): "
                f"{self.sampler}, {self.trials} trials, {self.folds} outer folds × {self.inner_folds} inner, "
                f"seed {self.seed}\n"
                f"# nested-CV held-out {self.metric} {self.held_out_mean:.4f} ({self.comparisons[0].pipeline} "
                f"{self.default_mean:.4f}, "
                f"{self.best_single} {self.single_mean:.4f}); on its own tuning queries it is in-sample\n")
        return head + tomli_w.dumps(data)

    def to_json(self) -> dict:
        return {
            **self.tuning_table(),
            "seconds": round(self.seconds, 3), "n_configs": self.n_configs,
            "final": {"kind": self.final.kind, "params": self.final.pick, **self.final.record,
                      "inner_default": self.final.inner_default},
            "outer": [{"fold": f.fold, "test_ids": list(f.test_ids), "kind": f.kind, "params": f.applied,
                       "search_params": f.choice.pick, **f.choice.record, "inner_default": f.choice.inner_default,
                       "test_mean": f.test_mean} for f in self.outer],
            "comparisons": [dataclasses.asdict(c) for c in self.comparisons],
            "per_query": self.per_query(),
            "toml": self.to_toml(),
        }


def chosen_text(fold) -> str:
    """What an outer fold of the tuning procedure applied: "tuned", or the fixed pipeline kept."""
    return fold.kind if fold.kind == "tuned" else f"kept {fold.choice.record.get('fallback', 'default')}"


def check_sizes(trials: int, folds: int, inner_folds: int) -> None:
    for name, value, lo, hi in (("--trials", trials, 1, MAX_TRIALS), ("--folds", folds, 2, MAX_TUNE_FOLDS),
                                ("--inner-folds", inner_folds, 2, MAX_TUNE_FOLDS)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        if value < lo:
            raise ValueError(f"{name} must be ≥ {lo}, got {value}")
        if value > hi:
            raise ValueError(f"{name} must be ≤ {hi:,}, got {value:,}")
    work = (folds + 1) * (inner_folds + 1) * trials
    if work > MAX_WORK:
        raise ValueError(f"(folds + 1) × (inner folds + 1) × trials = {work:,} trials exceeds {MAX_WORK:,}; "
                         "use fewer trials or folds")


@dataclass(frozen=True)
class _Job:
    """What a search run elsewhere needs: the pool and labels, the pipeline and the search."""

    c: Candidates
    qrels: dict
    base: PipelineConfig
    metric: str
    space: tuple
    sampler: str
    trials: int
    inner_folds: int
    guard: bool
    routes: tuple[str, ...] | None = None
    fixed: tuple[str, ...] = ()  # the named pipelines the fallback is chosen from, after the base


def _run_search(job: _Job, plan: Plan) -> tuple[Choice, set]:
    """One search of the procedure (``procedure``) with a scorer of its own; also the
    configurations it scored (their keys), so the run can count the distinct ones."""
    scorer = _Scorer(job.c, job.qrels, job.base, job.metric, job.routes)
    fixed = {job.base.name: scorer.pipeline(job.base),
             **{name: scorer.pipeline(get_pipeline(name)) for name in job.fixed if name != job.base.name}}
    choice = procedure(scorer, job.space, plan, job.sampler, job.trials, job.inner_folds, job.guard,
                       fixed, lambda: None)
    return choice, scorer.scored()


def tune(c: Candidates, qrels: dict[str, dict[str, int]], base: PipelineConfig | str,
         space: tuple[ParamSpec, ...] | None = None, *, trials: int = DEFAULT_TRIALS,
         folds: int = 5, seed: int = 0, sampler: str = "tpe", metric: str = "ndcg@5",
         inner_folds: int = DEFAULT_INNER_FOLDS,
         guard: bool = True, progress: Callable[[int, int], None] | None = None,
         executor: "Executor | None" = None, fold_by: Mapping[str, str] | None = None,
         routes: tuple[str, ...] | None = None) -> TuneResult:
    """Nested cross-validation of the tuning procedure, then the procedure on all queries
    (``eval.search.nested.nested_cv`` with ``procedure`` as its inner search).
    ``executor`` (``eval.search.executors``) runs the ``folds + 1`` searches: in this process (default,
    progress per trial) or as Ray tasks (the same choices; progress when all are done).
    ``fold_by`` (query id → group, ``query_groups``): folds, outer and inner, keep each group whole.
    ``routes``: the learned routes (``retrieval.pipeline.fuse``)."""
    base = resolve_config(base)
    parse_metric(metric)
    check_sizes(trials, folds, inner_folds)
    space = tuple(space) if space else default_space(base)
    check_space(base, space, sampler, c.pool_depth)
    for name in SINGLE_PATHS:
        fits(get_pipeline(name), c.pool_depth)
    scorer = _Scorer(c, qrels, base, metric, routes)
    n = scorer.judged.n_judged
    if n == 0:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to tune on")
    if folds > n:
        raise ValueError(f"--folds {folds} exceeds the number of judged queries ({n})")
    ids = counted_ids(c, qrels, scorer.judged)
    start_time = time.perf_counter()
    candidates = fixed_candidates(c, routes, base)
    fixed = {name: scorer.pipeline(cfg) for name, cfg in candidates.items()}
    per_search = trials if sampler != "grid" else min(trials, math.prod(len(p.grid()) for p in space))
    total = (folds + 1) * (1 + (inner_folds if guard else 0)) * per_search
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(min(done[0], total), total)

    groups = group_labels(ids, fold_by)
    scored_elsewhere: set = set()

    def on_ray(search, plans) -> list[Choice]:  # each search on a worker, with its own scorer of the same pool
        job = _Job(c, qrels, base, metric, space, sampler, trials, inner_folds, guard, routes, tuple(fixed))
        results = executor.map(_run_search, job, plans)
        scored_elsewhere.update(*(keys for _, keys in results))
        if progress:
            progress(total, total)
        return [choice for choice, _ in results]

    defaults = {p.name: get_param(base, p.name) for p in space}
    run = nested_cv(
        ids, folds, seed, groups,
        search=functools.partial(procedure, scorer, space, sampler=sampler, trials=trials,
                                 inner_folds=inner_folds, guard=guard, fixed=fixed, on_trial=tick),
        score=lambda choice, plan: (scorer.values(choice.pick) if choice.kind == "tuned"
                                    else fixed[choice.record["fallback"]]),
        applied=lambda choice: choice.pick if choice.kind == "tuned" else defaults,
        run=None if executor is None or executor.name == "local" else on_ray)
    held, final = run.held_out, run.final
    singles = {name: scorer.pipeline(get_pipeline(name)) for name in SINGLE_PATHS}
    kept = final.record["fallback"]  # the fixed pipeline the procedure falls back to on all queries
    default = fixed[kept]
    best_single, comparisons = compare(held, kept, default, singles, seed)
    final_config = with_params(base, final.pick) if final.kind == "tuned" else candidates[kept]
    summary = (", ".join(f"{k}={v:g}" for k, v in final.pick.items()) if final.kind == "tuned"
               else "default kept" if kept == base.name else f"the fixed pipeline {kept} kept")
    final_config = dataclasses.replace(final_config, name=f"{base.name}-tuned", description=(
        f"{base.name} tuned by rwb tune on {c.dataset} ({sampler}, {trials} trials; nested-CV held-out {metric} "
        f"{held.mean():.4f}): {summary}"))
    return TuneResult(
        base=base, space=space, sampler=sampler, trials=trials, folds=folds, inner_folds=inner_folds, guard=guard,
        seed=seed, metric=metric, dataset=c.dataset, fingerprint=c.fingerprint, embedder=c.embedder,
        pool_depth=c.pool_depth, query_ids=ids, outer=run.outer, held_out=held, default_values=default,
        single_values=singles, best_single=best_single, comparisons=comparisons, final=final,
        final_config=final_config, final_score=run.final_score,
        n_configs=len(scorer.scored() | scored_elsewhere), seconds=time.perf_counter() - start_time,
        n_groups=0 if groups is None else group_count(groups, n),
    )


# ---- the exported file -------------------------------------------------------------------------



def in_sample_warning(pipeline: str, fingerprint: str) -> str | None:
    """One line when ``pipeline`` is a file tuned on the dataset with this fingerprint
    (``eval.statistics.provenance``, the one owner of the in-sample label)."""
    provenance = in_sample(fingerprint, source=pipeline if isinstance(pipeline, str) else None)
    if provenance is None:
        return None
    return "warning: " + in_sample_line(pipeline, fingerprint, provenance).split(": ", 1)[1]


def in_sample_line(label: str, fingerprint: str, provenance) -> str:
    """``rwb eval``'s line for a pipeline chosen or fitted on the dataset with this fingerprint."""
    return (f"in-sample: {label} was tuned on this dataset (fingerprint {fingerprint[:12]}): its scores here "
            f"are in-sample and optimistic ({provenance.note()})")
