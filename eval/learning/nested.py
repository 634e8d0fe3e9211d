"""``rwb learn``: a fusion learned from the judgments, its held-out quality by nested CV.

The learning procedure on a set of queries T — the inner search of the nested-CV procedure
``eval.search.nested.nested_cv``, which ``rwb tune`` shares with its own search:

1. **choose** (inner cross-validation, ``inner_folds`` folds of T): every candidate model
   (``eval.learning.fit.specs``: the ``--model`` and its hyper-parameters; ``auto``: the linear
   models, LambdaMART and the MoEs) is fitted on each inner training part and scored on the
   inner held-out part. The simplest candidate is the default pipeline alone (nothing fitted);
   the features include every fixed pipeline's score and rank (``retrieval.fusion.learned.features``), so a
   model can reproduce it and learn a correction on top of it;
2. **guard** (``guard_rule="strict"``): the candidates are taken in order of their pooled inner
   held-out mean (the first in ``specs`` order on a tie); the first one whose per-query inner
   differences to the default pass ``guard_verdict`` is fitted on all of T and returned — it
   must beat the default by more than ``GUARD_Z`` standard errors of those differences (a
   one-sided paired test at 5 %; the standard error corrected for the overlap of the inner
   folds' training parts and for repeated fold seeds, ``guard_detail``) and be clearly worse
   on no kind of query (``guard_detail``: each
   ``kinds`` value on its own). Where the decision is close the candidate's inner folds are
   rerun with further fold seeds (at most ``inner_repeats`` in all) and its per-query values
   averaged over them. When no candidate passes, the procedure returns the default.
   ``guard_rule="mean"`` is the earlier guard: the best inner mean above the default's.

With ``fold_by`` the folds, outer and inner, hold out whole groups; with folds by kind the
inner folds score each model on kinds it was not fitted on, so the per-kind check refuses a
model that collapses on a kind it never saw. The **memorisation check**
(``memorisation_check``) scores the most flexible candidate (LambdaMART when searched) once
more on all queries with the other folding and warns when the by-query figure is clearly above
the by-group one. By default (``check_memorisation=None``) it runs where the folds go by query
and ``leak_groups`` (``eval.learning.leakage``) say which queries belong together: there the
held-out figure may be inflated by memorisation, and the check says so. Where the folds already
hold the groups whole the held-out figure is the by-group one and the check's by-query fits
would only say how much a by-query figure would have been inflated; ``check_memorisation=True``
runs them (folds by query), ``False`` never runs the check.

**Nested cross-validation** (``eval.search.nested``): the counted queries (those with a relevant
judgment) are split into ``folds`` outer folds; for each, the procedure runs on the other folds
and its result (refitted there) is scored on the held-out fold, so no model is ever fitted,
chosen or guarded on a query it is scored on. The **held-out estimate** is the mean over all
counted queries of the value each got while held out. It is compared, query by query, with the
default pipeline and with the better single path (``vector`` or ``bm25``) by Fisher's
randomization test and the paired t-test, raw and Holm-corrected over the two comparisons
(``eval.search.nested.compare``).

The model exported is the procedure run on **all** counted queries; its score there is
in-sample. Labels are the judgments every other command uses (``rwb learn --judgments``:
``eval.stores.judgments.effective_qrels``), through ``eval.metrics.measure.judge``. Rankings are scored at the learned pipeline's own settings
(``max_results``, per-path ``depth``).

**Running it**: once the folds are drawn, the procedures (one per outer fold and the final one)
and their fits are independent, so every procedure runs at once on a thread of its own
(``_Fits.run``, the ``run`` of ``nested_cv``) and queues its fits on one pool of ``threads``
threads, its choice and refit coming as soon as its own inner folds are in. A fit is
single-threaded and deterministic (LightGBM on one thread, BLAS held to one) and each result is
stored by its procedure, candidate and fold, so the result is the plain loop's whatever the
number of threads or the order the fits finish in; finished fits are counted (progress) in the
calling thread. A held-out part scores only its own queries' rows (a row's score depends on
that row alone).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
from threadpoolctl import threadpool_limits

from eval.learning.fit import Spec, Training, fit, quiet, scores, specs
from eval.learning.fits import Fits
from eval.learning.guard import (DEFAULT_INNER_REPEATS, GUARD_RULES, GUARD_Z, KIND_MARGIN,  # noqa: F401
                                 MIN_KIND_QUERIES, guard_detail, guard_passes, guard_verdict)
from eval.learning.memorisation import LEAK_MARGIN, memorisation_check  # noqa: F401
from eval.learning.result import LearnResult
from eval.metrics.judgment_bias import judged_at
from eval.metrics.measure import Judged, config_values, judge, parse_metric
from eval.search.fallback import choose_fixed, fixed_candidates
from eval.search.nested import SINGLE_PATHS, Choice, Nested, Plan, compare, counted_ids, nested_cv, seed_of
from eval.search.sweep import group_count, group_labels, make_folds
from eval.stores.configs import resolve_config
from retrieval.candidates import Candidates
from retrieval.fusion.learned.features import FIXED_PIPELINES
from retrieval.pipeline import PipelineConfig, fuse, get_pipeline, run_pipeline
from retrieval.ranking import rank_rows

DEFAULT_PIPELINE = "seed-adaptive"
DEFAULT_DEPTH = 30
DEFAULT_INNER_FOLDS = 3
MAX_FOLDS = 100

def check_learn(model: str, folds: int, inner_folds: int) -> tuple[Spec, ...]:
    """The candidates of ``model``; ``ValueError`` for a bad model or fold count."""
    for name, value in (("--folds", folds), ("--inner-folds", inner_folds)):
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_FOLDS:
            raise ValueError(f"{name} must be an integer from 2 to {MAX_FOLDS}, got {value!r}")
    return specs(model)


@dataclass(frozen=True)
class Options:
    """How a learning procedure runs (``learn``'s keyword arguments, checked)."""

    model: str = "auto"
    folds: int = 5
    seed: int = 0
    inner_folds: int = DEFAULT_INNER_FOLDS
    guard: bool = True
    depth: int = DEFAULT_DEPTH
    max_results: int = 10
    metric: str = "ndcg@5"
    inner_repeats: int = DEFAULT_INNER_REPEATS
    guard_rule: str = "strict"
    kind_field: str = "intent"

    def check(self) -> tuple[Spec, ...]:
        """The candidates of ``model``; ``ValueError`` for any bad option."""
        candidates = check_learn(self.model, self.folds, self.inner_folds)
        if self.guard_rule not in GUARD_RULES:
            raise ValueError(f"guard rule must be one of {list(GUARD_RULES)}, got {self.guard_rule!r}")
        r = self.inner_repeats
        if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r <= 20:
            raise ValueError(f"--inner-repeats must be an integer from 1 to 20, got {r!r}")
        parse_metric(self.metric)
        return candidates


@dataclass(eq=False)
class Procedure:
    """The learning procedure (module docstring) over one candidate table and its judgments:
    ``search(plan)`` chooses on ``plan.train`` and ``score(choice, plan)`` gives what the choice
    applies per counted query — the two arguments of ``eval.search.nested.nested_cv``. Every
    value it uses is computed in ``__post_init__`` from the table alone; the fits run on
    ``fits``, and ``score`` keeps, per plan, each row's score (``rows``) and what each counted
    query was given (``given``), for the held-out ranking and the per-kind report."""

    c: Candidates
    judged: Judged
    o: Options
    specs: tuple[Spec, ...]
    fixed: dict[str, PipelineConfig]          # the fixed pipelines a fallback is chosen from
    base: str                                 # the fixed pipeline the correction model boosts
    fits: Fits
    kinds: Mapping[str, str] | None = None
    routes: tuple[str, ...] | None = None
    ids: tuple[str, ...] = ()
    rows: dict = field(default_factory=dict)   # plan index → each row's score under its choice
    given: dict = field(default_factory=dict)  # plan index → per counted query, what it was given

    def __post_init__(self) -> None:
        c, judged, o = self.c, self.judged, self.o
        self.n = judged.n_judged
        self.pool_q = np.flatnonzero(judged.judged)  # counted position p < len(pool_q) → pool query
        self.config = PipelineConfig("learned", "learned", max_results=o.max_results, depth=o.depth)
        self.t = Training(c, judged, self.config, o.metric, o.seed, base=f"fixed:{self.base}")
        self.kind_of = (None if self.kinds is None
                        else np.array([self.kinds.get(q, "") for q in self.ids], dtype=object))
        self.values = {name: self.of_config(cfg) for name, cfg in self.fixed.items()}
        self._fixed_rows: dict = {}

    # ---- per counted query ----------------------------------------------------------------------

    def counted(self, values: np.ndarray) -> np.ndarray:
        """Per-pool-query ``values`` over the counted queries (0 for a missing one)."""
        out = np.nan_to_num(values[self.pool_q])
        missing = self.n - len(self.pool_q)
        return np.concatenate([out, np.zeros(missing)]) if missing else out

    def of_config(self, cfg: PipelineConfig) -> np.ndarray:
        return self.counted(next(config_values(self.c, self.judged, [cfg], self.o.metric, self.routes))[0])

    def pool_queries(self, positions: np.ndarray) -> np.ndarray:
        return self.pool_q[positions[positions < len(self.pool_q)]]

    def fixed_rows(self, name: str) -> np.ndarray:
        """A fixed pipeline's score of every row (made when first needed)."""
        if name not in self._fixed_rows:
            self._fixed_rows[name] = fuse(self.c, self.fixed[name], self.routes).scored.score
        return self._fixed_rows[name]

    def unseen(self, train: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Which ``positions`` hold a labelled kind no query of ``train`` has: a model fitted on
        ``train`` is never applied to them (they get the fallback)."""
        if self.kind_of is None:
            return np.zeros(len(positions), dtype=bool)
        seen = set(self.kind_of[train])
        return np.array([bool(k) and k not in seen for k in self.kind_of[positions]], dtype=bool)

    def held_out_values(self, spec: Spec, train: np.ndarray, test: np.ndarray,
                        fallback: np.ndarray | None = None) -> np.ndarray:
        """``spec`` fitted on counted positions ``train``, its values on positions ``test``
        (``fallback``'s on a test query of a kind ``train`` lacks)."""
        model = fit(spec, self.t, self.pool_queries(train), {"spec": str(spec)})
        values = self.counted(self.t.values(scores(model, self.t, self.pool_queries(test))))[test]
        return values if fallback is None else np.where(self.unseen(train, test), fallback[test], values)

    # ---- the search (inner) -------------------------------------------------------------------

    def inner_run(self, plan: Plan, specs_: list, repeat: int, held: dict, fallback: np.ndarray) -> None:
        """Every spec of ``specs_`` fitted on each inner training part (fold seed ``repeat``)
        and scored on its inner held-out part, into ``held[spec, repeat]``."""
        inner = plan.inner_folds(self.o.inner_folds, repeat)
        jobs = {(spec, j): self.fits.submit(self.held_out_values, spec, plan.train[inner != j],
                                            plan.train[inner == j], fallback)
                for spec in specs_ for j in range(plan.inner_count(self.o.inner_folds))}
        for spec in specs_:
            held[spec, repeat] = np.empty(len(plan.train))
        for (spec, j), job in jobs.items():
            held[spec, repeat][inner == j] = job.result()

    def search(self, plan: Plan) -> Choice:
        """The learning procedure on ``plan.train``: the fallback (the best fixed pipeline
        there), every candidate's inner held-out values, then the guard. Its ``Choice``: kind
        "learned" or "default", the inner-CV winner as the pick (fitted on all of
        ``plan.train`` as ``model`` when applied), and ``record`` each candidate's pooled inner
        held-out mean (``inner``), the guard's figures (``guard``), the ``fallback`` and the
        ``kinds`` the training part holds."""
        o, positions = self.o, plan.train
        fallback = choose_fixed(self.values, positions)
        base_values = self.values[fallback]
        default_mean = float(base_values[positions].mean())
        kinds = sorted({str(k) for k in self.kind_of[positions] if k}) if self.kind_of is not None else []
        if plan.inner_folds(o.inner_folds) is None:
            means = {str(spec): math.nan for spec in self.specs}
            return Choice("default", self.specs[0], default_mean, {"inner": means, "guard": {}, "fallback": fallback})
        held: dict = {}  # (spec, fold seed) → each position's inner held-out value
        slow_first = sorted(self.specs, key=lambda s: (s.model != "lambdamart", s.model != "linear"))
        self.inner_run(plan, slow_first, 0, held, base_values)
        plan_record = {"inner": {str(spec): float(held[spec, 0].mean()) for spec in self.specs},
                       "fallback": fallback, "first_inner": {spec: held[spec, 0] for spec in self.specs}}
        means = plan_record["inner"]
        order = sorted(self.specs, key=lambda s: (-means[str(s)], self.specs.index(s)))

        def learned(spec: Spec, detail: dict) -> Choice:
            model = self.fits.submit(fit, spec, self.t, self.pool_queries(positions), {"spec": str(spec)}).result()
            return Choice("learned", spec, default_mean,
                          {**plan_record, "guard": detail, "kinds": kinds}, model)

        kept = Choice("default", order[0], default_mean, {**plan_record, "guard": {}})
        if not o.guard:
            return learned(order[0], {})
        if o.guard_rule == "mean":  # the inner mean alone (the guard before the per-kind check)
            return learned(order[0], {}) if means[str(order[0])] > default_mean + 1e-12 else kept
        refused: dict = {}
        for spec in order:
            detail = self.guarded(plan, spec, held, base_values)
            if detail["verdict"] == "pass":
                return learned(spec, {**detail, "refused": refused})
            refused[str(spec)] = detail
        return Choice("default", order[0], default_mean, {**plan_record, "guard": {"refused": refused}})

    def guarded(self, plan: Plan, spec: Spec, held: dict, base_values: np.ndarray) -> dict:
        """The guard on ``spec``'s inner differences to the fallback, its inner folds repeated
        with further fold seeds while the verdict is unsure; ``verdict``: pass or fail."""
        repeats = 1
        while True:
            delta = np.stack([held[spec, r] for r in range(repeats)]) - base_values[plan.train]
            detail = guard_detail(delta, None if self.kind_of is None else self.kind_of[plan.train],
                                  plan.inner_count(self.o.inner_folds))
            detail["repeats"] = repeats
            verdict = guard_verdict(detail)
            if verdict != "unsure" or repeats >= self.o.inner_repeats:
                break
            self.inner_run(plan, [spec], repeats, held, base_values)
            repeats += 1
        passed = verdict == "pass" or (verdict == "unsure" and guard_passes(detail))
        return {**detail, "verdict": "pass" if passed else "fail"}

    # ---- the score (outer) ------------------------------------------------------------------------

    def score(self, choice: Choice, plan: Plan) -> np.ndarray:
        """What ``choice`` applies, per counted query: the fitted model's values (scoring only
        the held-out fold's rows) — its fallback's on a query of a kind it was not fitted on —
        or the fallback fixed pipeline's."""
        fallback = choice.record["fallback"]
        if choice.kind != "learned":
            self.rows[plan.index] = self.fixed_rows(fallback)
            self.given[plan.index] = np.full(self.n, fallback, dtype=object)
            return self.values[fallback]
        rows = scores(choice.model, self.t, None if plan.final else self.pool_queries(plan.test))
        values = self.counted(self.t.values(rows))
        other = self.unseen(plan.train, np.arange(self.n))
        self.given[plan.index] = np.where(other, fallback, str(choice.pick)).astype(object)
        if other.any():
            query_other = np.zeros(self.c.n_queries, dtype=bool)
            query_other[self.pool_queries(np.flatnonzero(other))] = True
            rows = np.where(query_other[self.c.query_idx], self.fixed_rows(fallback), rows)
            values = np.where(other, self.values[fallback], values)
        self.rows[plan.index] = rows
        return values

    def applied(self, choice: Choice) -> str:
        return str(choice.pick) if choice.kind == "learned" else f"kept {choice.record['fallback']}"


def learn(
    c: Candidates,
    qrels: dict,
    model: str = "auto",
    *,
    folds: int = 5,
    seed: int = 0,
    inner_folds: int = DEFAULT_INNER_FOLDS,
    guard: bool = True,
    default: PipelineConfig | str | None = None,
    depth: int = DEFAULT_DEPTH,
    max_results: int = 10,
    metric: str = "ndcg@5",
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    fold_by: Mapping[str, str] | None = None,
    kinds: Mapping[str, str] | None = None,
    inner_repeats: int = DEFAULT_INNER_REPEATS,
    guard_rule: str = "strict",
    leak_groups: Mapping[str, str] | None = None,
    routes: tuple[str, ...] | None = None,
    check_memorisation: bool | None = None,
    kind_field: str = "intent",
) -> LearnResult:
    """Nested cross-validation of the learning procedure (``Procedure``), then the procedure on
    all queries; the fits run on ``threads`` threads (default: the CPUs this process may use),
    which changes how long it takes, never the result. ``default``: the one fixed pipeline a
    model must beat (None: the best named fixed pipeline of each training part). ``fold_by``
    (query id → group, ``eval.search.sweep.query_groups``): folds, outer and inner, keep each
    group whole. ``kinds``: each query's kind (a model meets only kinds it was fitted on).
    ``routes``: the learned routes a fixed pipeline follows (``retrieval.pipeline.fuse``)."""
    o = Options(model, folds, seed, inner_folds, guard, depth, max_results, metric, inner_repeats,
                guard_rule, kind_field)
    candidates = o.check()
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    fixed = ({(d := resolve_config(default)).name: d} if default is not None
             else fixed_candidates(c, routes, get_pipeline(DEFAULT_PIPELINE)))
    base = next(iter(fixed)) if default is not None else DEFAULT_PIPELINE
    if any(spec.model == "correction" for spec in candidates) and base not in FIXED_PIPELINES:
        raise ValueError(f"--model correction boosts on top of the default's score, a feature only "
                         f"for {list(FIXED_PIPELINES)}; the default is {base!r}")
    learned_config = PipelineConfig("learned", "learned", max_results=max_results, depth=depth)
    for name, cfg in (*fixed.items(), ("learned", learned_config), *((n, get_pipeline(n)) for n in SINGLE_PATHS)):
        if cfg.path_depth > c.pool_depth:
            raise ValueError(f"pipeline {name!r} takes {cfg.path_depth} candidates per path but the pool holds "
                             f"{c.pool_depth}; rerun with --pool-depth {cfg.path_depth}")
    start = time.perf_counter()
    judged = judge(c, qrels)
    n = judged.n_judged
    if n == 0:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to learn from")
    if folds > n:
        raise ValueError(f"--folds {folds} exceeds the number of judged queries ({n})")
    ids = counted_ids(c, qrels, judged)
    total = (folds + 1) * (len(candidates) * inner_folds + 1)
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(min(done[0], total), total)

    with Fits(threads or len(os.sched_getaffinity(0))) as fits:
        proc = Procedure(c, judged, o, candidates, fixed, base, fits, kinds, routes, tuple(ids))
        groups = group_labels(ids, fold_by)
        check = Memorisation.plan(proc, groups, leak_groups, check_memorisation)
        # BLAS (the linear models' solver) on one thread: the fit threads are the parallelism,
        # and a fit's sums never depend on how many threads BLAS would take.
        with threadpool_limits(limits=1, user_api="blas"), quiet():
            if any(spec.model == "moe" for spec in candidates):
                fits.submit(proc.t.moe_values, count=False)  # every MoE fit's targets, computed once
            check.submit()
            run = nested_cv(ids, folds, seed, groups, proc.search, proc.score, applied=proc.applied,
                            run=lambda search_, plans: fits.run(search_, plans, tick))
            leak = check.result(run)
            fits.drain(tick)
    return _result(proc, run, groups, leak, qrels, routes, time.perf_counter() - start, done[0],
                   "chosen" if default is None else "explicit")


@dataclass(eq=False)
class Memorisation:
    """The memorisation check's fits (``memorisation_check``): the most flexible candidate
    folded the other way — by query when the folds go by group, by ``leak_groups`` when they go
    by query — run beside the nested CV on the same fit threads."""

    proc: Procedure
    spec: Spec | None
    fold_of: np.ndarray | None
    by_group_folds: bool
    n_groups: int
    jobs: list = field(default_factory=list)

    @classmethod
    def plan(cls, proc: Procedure, groups, leak_groups, check_memorisation) -> "Memorisation":
        n, o = proc.n, proc.o
        if groups is not None:
            other, check_other = None, bool(check_memorisation)  # by query
        else:
            other = group_labels(proc.ids, leak_groups) if leak_groups else None
            check_other = check_memorisation is not False and other is not None and group_count(other, n) >= 2
        spec = next((s for s in proc.specs if s.model == "lambdamart"), None) or next(
            (s for s in reversed(proc.specs) if s.model == "linear"), proc.specs[0])
        k = min(o.inner_folds, group_count(other, n)) if check_other else 0
        fold_of = make_folds(n, k, seed_of(o.seed, o.folds, -9), other) if k >= 2 else None
        n_groups = group_count(groups if groups is not None else other, n) if fold_of is not None else 0
        return cls(proc, spec if fold_of is not None else None, fold_of, groups is not None, n_groups)

    def submit(self) -> None:
        if self.fold_of is None:
            return
        for j in range(int(self.fold_of.max()) + 1):
            self.jobs.append(self.proc.fits.submit(self.proc.held_out_values, self.spec,
                                                   np.flatnonzero(self.fold_of != j), np.flatnonzero(self.fold_of == j)))

    def result(self, run: Nested) -> dict | None:
        """The check's figures: the same spec's values with the nested CV's own first inner
        folds of the final procedure (one way of folding) against these (the other)."""
        if self.fold_of is None:
            return None
        values = np.empty(self.proc.n)
        for j, job in enumerate(self.jobs):
            values[self.fold_of == j] = job.result()
        same = run.final.record.get("first_inner", {}).get(self.spec)
        if same is None:
            return None
        by_query, by_group = (values, same) if self.by_group_folds else (same, values)
        return memorisation_check(str(self.spec), by_query, by_group, self.n_groups)


def _result(proc: Procedure, run: Nested, groups, leak, qrels, routes, seconds: float, n_fits: int,
            fallback_rule: str) -> LearnResult:
    """The ``LearnResult`` of a finished run: the held-out values, the comparisons with the
    fallback on all queries and the better single path, judged@5 of the held-out ranking."""
    c, o, folds, n = proc.c, proc.o, proc.o.folds, proc.n
    held = run.held_out
    held_score = np.full(c.n_rows, -np.inf)  # each query's rows scored by what it was given
    given = np.empty(n, dtype=object)
    for plan in run.plans[:folds]:
        test_queries = np.zeros(c.n_queries, dtype=bool)
        test_queries[proc.pool_queries(plan.test)] = True
        rows = test_queries[c.query_idx]
        held_score[rows] = proc.rows[plan.index][rows]
        given[plan.test] = proc.given[plan.index][plan.test]
    final = run.final
    default = proc.fixed[final.record["fallback"]]  # the fallback on all queries: the comparison's
    default_values = proc.values[default.name]
    singles = {name: proc.of_config(get_pipeline(name)) for name in SINGLE_PATHS}
    best_single, comparisons = compare(held, default.name, default_values, singles, o.seed)
    pool_q = proc.pool_q
    held_ranking = rank_rows(c, held_score, o.max_results)
    judged_5 = {
        "held_out": judged_at(c, qrels, held_ranking, 5, pool_q),
        default.name: judged_at(c, qrels, run_pipeline(c, default, routes).ranking, 5, pool_q),
        best_single: judged_at(c, qrels, run_pipeline(c, get_pipeline(best_single)).ranking, 5, pool_q),
    }
    for choice in (final, *(f.choice for f in run.outer)):
        choice.record.pop("first_inner", None)   # the memorisation check's, not the result's
    return LearnResult(
        model=o.model, folds=folds, inner_folds=o.inner_folds, guard=o.guard, seed=o.seed, metric=o.metric,
        dataset=c.dataset, fingerprint=c.fingerprint, embedder=c.embedder, pool_depth=c.pool_depth,
        depth=proc.config.path_depth, default=default, feature_names=proc.t.names, query_ids=proc.ids,
        outer=run.outer, held_out=held, default_values=default_values, single_values=singles,
        best_single=best_single, comparisons=comparisons, judged=judged_5,
        fallback_rule=fallback_rule,
        applied=tuple(str(a) for a in given), final=final, final_score=run.final_score, seconds=seconds,
        n_fits=n_fits, n_groups=0 if groups is None else group_count(groups, n),
        extra={"max_results": o.max_results},
        kinds=None if proc.kind_of is None else tuple(str(k) for k in proc.kind_of),
        memorisation=leak, fixed_values=dict(proc.values), inner_repeats=o.inner_repeats,
        guard_rule=o.guard_rule if o.guard else "none", kind_field=o.kind_field,
    )
