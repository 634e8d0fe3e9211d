"""``rwb learn``: a fusion learned from the judgments, its held-out quality by nested CV.

The learning procedure on a set of queries T (as ``rwb tune``'s, ``eval.search.tune``):

1. **choose** (inner cross-validation, ``inner_folds`` folds of T): every candidate model
   (``eval.learning.fit.specs``: the ``--model`` and its hyper-parameters; ``auto``: the linear
   models, LambdaMART and the MoEs) is fitted on each inner training part and scored on the
   inner held-out part; the candidate with the highest pooled inner held-out mean wins (the
   first in ``specs`` order on a tie);
2. **guard**: when that mean does not exceed the default pipeline's mean on T, the procedure
   returns the default (learning did not hold up inside T); else the winner **fitted on all
   of T**.

**Nested cross-validation**: the counted queries (those with a relevant judgment) are split into
``folds`` outer folds (``eval.search.sweep.make_folds``); for each, the procedure runs on the
other folds and its result is scored on the held-out fold, so no model is ever fitted, chosen or
guarded on a query it is scored on. The **held-out estimate** is the mean over all counted
queries of the value each got while held out. It is compared, query by query, with the default
pipeline and with the better single path (``vector`` or ``bm25``, the higher mean on all counted
queries) by Fisher's randomization test and the paired t-test, raw and Holm-corrected over the
two comparisons (``eval.search.tune``'s comparison, ``eval.statistics.significance``).

The model exported is the procedure run on **all** counted queries; its score there is
in-sample. Labels are the judgments every other command uses (``rwb learn --judgments``:
``eval.stores.judgments.effective_qrels``), through ``eval.metrics.measure.judge``. Rankings are scored at the learned pipeline's own settings
(``max_results``, per-path ``depth``).

**Running it**: once the folds are drawn, the procedures (one per outer fold and the final one)
and their fits are independent, so every inner fit of every procedure is queued at once and run
on ``threads`` threads, a procedure's choice and refit coming as soon as its own inner folds are
in. A fit is single-threaded and deterministic (LightGBM on one thread, BLAS held to one) and
each result is stored by its procedure, candidate and fold, so the result is the plain loop's
whatever the number of threads or the order the fits finish in. A held-out part scores only its
own queries' rows (a row's score depends on that row alone).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import tomli_w
from threadpoolctl import threadpool_limits

from eval.learning.fit import Spec, Training, fit, quiet, scores, specs
from eval.metrics.judgment_bias import judged_at
from eval.metrics.measure import config_values, judge, parse_metric
from eval.search.sweep import group_count, group_labels, make_folds
from eval.search.tune import SINGLE_PATHS, Comparison, compare_procedures, counted_ids
from eval.statistics.significance import holm
from eval.stores.configs import resolve_config
from retrieval.candidates import Candidates
from retrieval.features import feature_set_id
from retrieval.fusion.learned import LearnedParams
from retrieval.learned_model import MoEModel, TreeModel
from retrieval.pipeline import PipelineConfig, fuse, get_pipeline, run_pipeline, to_dict
from retrieval.ranking import rank_rows

DEFAULT_PIPELINE = "seed-adaptive"
DEFAULT_DEPTH = 30
DEFAULT_INNER_FOLDS = 3
MAX_FOLDS = 100


def _seed(*parts: int) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


@dataclass(frozen=True)
class Choice:
    kind: str  # "learned" or "default"
    spec: Spec  # the inner-CV winner (applied only when kind is "learned")
    inner: dict  # str(spec) -> pooled inner held-out mean
    inner_default: float  # the default's mean on the same queries
    model: object = None  # the winner fitted on all of them (None when the default is kept)


@dataclass(frozen=True)
class OuterFold:
    fold: int
    test_ids: tuple[str, ...]
    kind: str
    model: str  # the model applied to the held-out fold ("default <name>" when kept)
    inner: dict
    inner_default: float
    test_mean: float


@dataclass(frozen=True, eq=False)
class LearnResult:
    model: str  # the --model asked for
    folds: int
    inner_folds: int
    guard: bool
    seed: int
    metric: str
    dataset: str
    fingerprint: str
    embedder: str
    pool_depth: int
    depth: int
    default: PipelineConfig
    feature_names: tuple[str, ...]
    query_ids: tuple[str, ...]
    outer: tuple[OuterFold, ...]
    held_out: np.ndarray
    default_values: np.ndarray
    single_values: dict
    best_single: str
    comparisons: tuple[Comparison, ...]
    judged: dict  # judged@5 of the held-out ranking, the default and the best single path
    final: Choice
    final_score: float
    seconds: float
    n_fits: int
    n_groups: int = 0  # folds kept these groups whole (0: folds by query)
    extra: dict = field(default_factory=dict)

    @property
    def held_out_mean(self) -> float:
        return float(self.held_out.mean())

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def record(self) -> dict:
        """The ``[tuning]`` table of the exported TOML (ignored by the pipeline loader; it makes
        ``rwb eval`` warn when the file is evaluated on the data it was learned on)."""
        d, s = self.comparisons
        return {
            "tool": "rwb learn",
            "dataset": self.dataset,
            "fingerprint": self.fingerprint,
            "embedder": self.embedder,
            "pool_depth": self.pool_depth,
            "pipeline": "learned",
            "metric": self.metric,
            "model": self.model,
            "folds": self.folds,
            "inner_folds": self.inner_folds,
            "guard": self.guard,
            "seed": self.seed,
            "n_queries": self.n_queries,
            "fold_groups": self.n_groups,
            "chosen": self.final.kind if self.final.kind == "default" else str(self.final.spec),
            "fold_choices": [f.model for f in self.outer],
            "feature_set": feature_set_id(self.feature_names),
            "held_out": round(self.held_out_mean, 6),
            "default_pipeline": self.default.name,
            "held_out_default": round(d.mean, 6),
            "best_single_path": self.best_single,
            "held_out_best_single_path": round(s.mean, 6),
            "p_vs_default": round(d.p_fisher, 6),
            "p_vs_best_single_path": round(s.p_fisher, 6),
            "in_sample": round(self.final_score, 6),
        }

    def final_config(self, model_file: str = "") -> PipelineConfig:
        """The pipeline the procedure on all queries gives: the learned fusion (a linear model's
        weights inline; a stored model named by ``model_file``, relative to the TOML), or the
        default when the guard kept it."""
        if self.final.kind == "default":
            return dataclasses.replace(
                self.default,
                name=f"{self.default.name}-kept",
                description=(
                    f"rwb learn on {self.dataset} kept {self.default.name}: "
                    "no model beat it in inner CV"
                ),
            )
        model = self.final.model
        fs = feature_set_id(self.feature_names)
        if isinstance(model, tuple):
            params = LearnedParams(model="linear", feature_set=fs, weights=model)
        else:
            if not model_file:
                raise ValueError("a stored model needs a file name (--out)")
            params = LearnedParams(model=model.kind, file=model_file, feature_set=fs)
        return PipelineConfig(
            "learned",
            "learned",
            f"{self.final.spec} learned by rwb learn on {self.dataset} (nested-CV held-out "
            f"{self.metric} {self.held_out_mean:.4f})",
            max_results=self.default_max_results,
            depth=self.depth,
            params=params,
        )

    @property
    def default_max_results(self) -> int:
        return int(self.extra.get("max_results", 10))

    @property
    def stored_model(self) -> TreeModel | MoEModel | None:
        model = self.final.model
        return model if isinstance(model, (TreeModel, MoEModel)) else None

    def to_toml(self, model_file: str = "") -> str:
        data = to_dict(self.final_config(model_file))
        data["tuning"] = self.record()
        head = (
            f"# learned by rwb learn on {self.dataset} (fingerprint {self.fingerprint[:12]}, "
            f"{self.embedder}): --model {self.model}, {self.folds} outer folds × "
            f"{self.inner_folds} inner, seed {self.seed}\n"
            f"# nested-CV held-out {self.metric} {self.held_out_mean:.4f} (default "
            f"{self.default.name} {self.comparisons[0].mean:.4f}, {self.best_single} "
            f"{self.comparisons[1].mean:.4f}); on its own "
            f"training queries it is in-sample\n"
        )
        return head + tomli_w.dumps(data)

    def to_json(self, model_file: str = "") -> dict:
        return {
            **self.record(),
            "seconds": round(self.seconds, 3),
            "n_fits": self.n_fits,
            "depth": self.depth,
            "features": list(self.feature_names),
            "judged_at_5": self.judged,
            "final": {
                "kind": self.final.kind,
                "model": str(self.final.spec),
                "inner": self.final.inner,
                "inner_default": self.final.inner_default,
            },
            "outer": [{**dataclasses.asdict(f), "test_ids": list(f.test_ids)} for f in self.outer],
            "comparisons": [dataclasses.asdict(c) for c in self.comparisons],
            "per_query": {
                q: {
                    "held_out": float(h),
                    "default": float(d),
                    **{p: float(v[i]) for p, v in self.single_values.items()},
                }
                for i, (q, h, d) in enumerate(
                    zip(self.query_ids, self.held_out, self.default_values)
                )
            },
            "toml": self.to_toml(model_file) if (self.stored_model is None or model_file) else None,
        }


def check_learn(model: str, folds: int, inner_folds: int) -> tuple[Spec, ...]:
    """The candidates of ``model``; ``ValueError`` for a bad model or fold count."""
    for name, value in (("--folds", folds), ("--inner-folds", inner_folds)):
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= MAX_FOLDS:
            raise ValueError(f"{name} must be an integer from 2 to {MAX_FOLDS}, got {value!r}")
    return specs(model)


def learn(
    c: Candidates,
    qrels: dict,
    model: str = "auto",
    *,
    folds: int = 5,
    seed: int = 0,
    inner_folds: int = DEFAULT_INNER_FOLDS,
    guard: bool = True,
    default: PipelineConfig | str = DEFAULT_PIPELINE,
    depth: int = DEFAULT_DEPTH,
    max_results: int = 10,
    metric: str = "ndcg@5",
    progress: Callable[[int, int], None] | None = None,
    threads: int | None = None,
    fold_by: Mapping[str, str] | None = None,
) -> LearnResult:
    """Nested cross-validation of the learning procedure, then the procedure on all queries;
    the fits run on ``threads`` threads (default: the CPUs this process may use), which changes
    how long it takes, never the result. ``fold_by`` (query id → group,
    ``eval.search.sweep.query_groups``): folds, outer and inner, keep each group whole."""
    candidates = check_learn(model, folds, inner_folds)
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    parse_metric(metric)
    default = resolve_config(default)
    config = PipelineConfig("learned", "learned", max_results=max_results, depth=depth)
    for name, cfg in (
        (default.name, default),
        ("learned", config),
        *((n, get_pipeline(n)) for n in SINGLE_PATHS),
    ):
        if cfg.path_depth > c.pool_depth:
            raise ValueError(
                f"pipeline {name!r} takes {cfg.path_depth} candidates per path but the pool holds "
                f"{c.pool_depth}; rerun with --pool-depth {cfg.path_depth}"
            )
    start = time.perf_counter()
    judged = judge(c, qrels)
    n = judged.n_judged
    if n == 0:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to learn from")
    if folds > n:
        raise ValueError(f"--folds {folds} exceeds the number of judged queries ({n})")
    ids = counted_ids(c, qrels, judged)
    pool_q = np.flatnonzero(judged.judged)  # counted position p < len(pool_q) → pool query
    n_missing = n - len(pool_q)
    t = Training(c, judged, config, metric, seed)

    def counted(values: np.ndarray) -> np.ndarray:
        out = np.nan_to_num(values[pool_q])
        return np.concatenate([out, np.zeros(n_missing)]) if n_missing else out

    def of_config(cfg: PipelineConfig) -> np.ndarray:
        return counted(next(config_values(c, judged, [cfg], metric))[0])

    default_values = of_config(default)
    per_procedure = len(candidates) * inner_folds + 1
    total = (folds + 1) * per_procedure
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(min(done[0], total), total)

    def pool_queries(positions: np.ndarray) -> np.ndarray:
        return pool_q[positions[positions < len(pool_q)]]

    def held_out_values(spec: Spec, train: np.ndarray, test: np.ndarray) -> np.ndarray:
        """``spec`` fitted on counted positions ``train``, its values on positions ``test``."""
        model = fit(spec, t, pool_queries(train), {"spec": str(spec)})
        return counted(t.values(scores(model, t, pool_queries(test))))[test]

    def refit(spec: Spec, positions: np.ndarray, test: np.ndarray | None):
        """``spec`` fitted on ``positions``; its scores on the rows of positions ``test`` (every
        row when None) and its values there."""
        model = fit(spec, t, pool_queries(positions), {"spec": str(spec)})
        score = scores(model, t, None if test is None else pool_queries(test))
        return model, score, counted(t.values(score))

    # every procedure at once: the outer folds' and the final one on all queries, each choosing
    # its model from its own inner folds only. Their fits are independent, so they run on
    # ``threads`` threads; each fit is deterministic and single-threaded, and each result goes
    # to its own place, so the order they finish in changes nothing.
    groups = group_labels(ids, fold_by)

    def part(positions: np.ndarray):
        return None if groups is None else groups[positions]

    fold_of = make_folds(n, folds, seed, groups)
    plans = [(np.flatnonzero(fold_of != k), np.flatnonzero(fold_of == k)) for k in range(folds)]
    plans.append((np.arange(n), None))  # the final procedure: no held-out fold
    inner_k = [min(inner_folds, group_count(part(positions), len(positions)))
               for positions, _ in plans]
    inner_of = [
        make_folds(len(positions), k, _seed(seed, p, -2), part(positions)) if k >= 2 else None
        for p, ((positions, _), k) in enumerate(zip(plans, inner_k))
    ]
    held_inner: dict = {}  # (procedure, spec) → each position's inner held-out value
    pending: deque = deque()  # (procedure, spec, inner fold): the final procedure's first
    if any(spec.model == "moe" for spec in candidates):
        pending.append(("moe grid",))  # every MoE fit's targets, computed once
    slow_first = sorted(candidates, key=lambda s: (s.model != "lambdamart", s.model != "linear"))
    for p in [folds, *range(folds)]:
        if inner_of[p] is not None:
            for spec in slow_first:
                held_inner[p, spec] = np.empty(len(plans[p][0]))
                pending.extend((p, spec, j) for j in range(inner_k[p]))
    outstanding = [
        inner_k[p] * len(candidates) if inner_of[p] is not None else 0 for p in range(folds + 1)
    ]
    ready = deque(p for p in range(folds + 1) if outstanding[p] == 0)  # inner folds all run
    choices: dict = {}
    refits: dict = {}

    def choose(p: int) -> Choice:
        """Procedure ``p``'s choice from its inner held-out values (its refit comes later)."""
        default_mean = float(default_values[plans[p][0]].mean())
        means = {
            str(spec): float(held_inner[p, spec].mean()) if inner_of[p] is not None else math.nan
            for spec in candidates
        }
        best = max(
            candidates, key=lambda s: (np.nan_to_num(means[str(s)], nan=-1.0), -candidates.index(s))
        )
        if guard and not means[str(best)] > default_mean + 1e-12:
            return Choice("default", best, means, default_mean)
        return Choice("learned", best, means, default_mean)

    def next_job():
        """A chosen procedure's refit before any inner fit still waiting; None when none is."""
        while ready:
            p = ready.popleft()
            choices[p] = choose(p)
            if choices[p].kind == "learned":
                return ("refit", p, choices[p].spec)
        return pending.popleft() if pending else None

    def run(job):
        if job[0] == "moe grid":
            return t.moe_values()
        if job[0] == "refit":
            _, p, spec = job
            return refit(spec, *plans[p])
        p, spec, j = job
        positions, inner = plans[p][0], inner_of[p]
        return held_out_values(spec, positions[inner != j], positions[inner == j])

    workers = threads or len(os.sched_getaffinity(0))
    # BLAS (the linear models' solver) on one thread: the pool's threads are the
    # parallelism, and a fit's sums never depend on how many threads BLAS would take. At most
    # ``workers`` jobs are submitted at a time, so leaving the pool (an error, Ctrl-C) waits
    # only for the fits running then.
    with (
        threadpool_limits(limits=1, user_api="blas"),
        quiet(),
        ThreadPoolExecutor(max_workers=workers) as executor,
    ):
        running: dict = {}
        while True:
            while len(running) < workers and (job := next_job()) is not None:
                running[executor.submit(run, job)] = job
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                result = future.result()
                if job[0] == "moe grid":
                    continue
                tick()
                if job[0] == "refit":
                    refits[job[1]] = result
                    continue
                p, spec, j = job
                held_inner[p, spec][inner_of[p] == j] = result
                outstanding[p] -= 1
                if outstanding[p] == 0:
                    ready.append(p)

    held = np.empty(n)
    held_score = np.full(c.n_rows, -np.inf)  # each query's rows scored by what it was given
    default_score = fuse(c, default).scored.score
    outer = []
    for k in range(folds):
        test = plans[k][1]
        choice = choices[k]
        if choice.kind == "learned":
            fitted, fold_score, values = refits[k]
            choice = dataclasses.replace(choice, model=fitted)
        else:
            fold_score, values = default_score, default_values
        held[test] = values[test]
        test_queries = np.zeros(c.n_queries, dtype=bool)
        test_queries[pool_queries(test)] = True
        rows = test_queries[c.query_idx]
        held_score[rows] = fold_score[rows]
        outer.append(
            OuterFold(
                k,
                tuple(ids[i] for i in test),
                choice.kind,
                str(choice.spec) if choice.kind == "learned" else f"default {default.name}",
                choice.inner,
                choice.inner_default,
                float(values[test].mean()),
            )
        )
    final = choices[folds]
    if final.kind == "learned":
        final = dataclasses.replace(final, model=refits[folds][0])
    singles = {name: of_config(get_pipeline(name)) for name in SINGLE_PATHS}
    best_single = max(
        SINGLE_PATHS, key=lambda name: (singles[name].mean(), -SINGLE_PATHS.index(name))
    )
    raw = [
        compare_procedures(f"default {default.name}", default.name, held, default_values, seed),
        compare_procedures(f"best single path {best_single}", best_single, held, singles[best_single], seed),
    ]
    fisher_holm = holm([r["p_fisher"] for r in raw])
    student_holm = holm([r["p_student"] for r in raw])
    comparisons = tuple(
        Comparison(**r, p_fisher_holm=f, p_student_holm=s)
        for r, f, s in zip(raw, fisher_holm, student_holm)
    )
    final_score = (
        float(refits[folds][2].mean()) if final.kind == "learned" else float(default_values.mean())
    )
    held_ranking = rank_rows(c, held_score, max_results)
    judged_5 = {
        "held_out": judged_at(c, qrels, held_ranking, 5, pool_q),
        default.name: judged_at(c, qrels, run_pipeline(c, default).ranking, 5, pool_q),
        best_single: judged_at(
            c, qrels, run_pipeline(c, get_pipeline(best_single)).ranking, 5, pool_q
        ),
    }
    return LearnResult(
        model=model,
        folds=folds,
        inner_folds=inner_folds,
        guard=guard,
        seed=seed,
        metric=metric,
        dataset=c.dataset,
        fingerprint=c.fingerprint,
        embedder=c.embedder,
        pool_depth=c.pool_depth,
        depth=config.path_depth,
        default=default,
        feature_names=t.names,
        query_ids=ids,
        outer=tuple(outer),
        held_out=held,
        default_values=default_values,
        single_values=singles,
        best_single=best_single,
        comparisons=comparisons,
        judged=judged_5,
        final=final,
        final_score=final_score,
        seconds=time.perf_counter() - start,
        n_fits=done[0],
        n_groups=0 if groups is None else group_count(groups, n),
        extra={"max_results": max_results},
    )
