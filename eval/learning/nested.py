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

import dataclasses
import math
import os
import queue
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np
import tomli_w
from threadpoolctl import threadpool_limits

from eval.learning.fit import Spec, Training, fit, quiet, scores, specs
from eval.metrics.judgment_bias import judged_at
from eval.metrics.measure import config_values, judge, parse_metric
from eval.search.nested import (SINGLE_PATHS, Choice, NestedResult, Plan, choose_fixed, compare, counted_ids,
                                fixed_candidates, nested_cv, seed_of)
from eval.search.sweep import group_count, group_labels, make_folds
from eval.stores.configs import resolve_config
from retrieval.candidates import Candidates
from retrieval.fusion.learned.features import FIXED_PIPELINES, feature_set_id
from retrieval.fusion.learned import LearnedParams, feature_weights
from retrieval.fusion.learned.model import MoEModel, TreeModel
from retrieval.pipeline import PipelineConfig, fuse, get_pipeline, run_pipeline, to_dict
from retrieval.ranking import rank_rows

DEFAULT_PIPELINE = "seed-adaptive"
DEFAULT_DEPTH = 30
DEFAULT_INNER_FOLDS = 3
MAX_FOLDS = 100


GUARD_Z = 1.645  # a model replaces the default when its inner gain exceeds this many corrected
# standard errors: the one-sided paired test at 5 % (normal quantile; the inner folds hold tens
# of queries or more)
KIND_MARGIN = 0.02  # a kind of query is "clearly worse" below the default by more than this …
MIN_KIND_QUERIES = 3  # … with at least this many queries of that kind in the inner folds
DEFAULT_INNER_REPEATS = 3
GUARD_RULES = ("strict", "mean")


def guard_detail(delta: np.ndarray, kinds: np.ndarray | None = None,
                 inner_folds: int | None = None) -> dict:
    """The guard's figures on per-query inner held-out differences (model − default), one row
    per fold seed of the inner folds (a 1-d array: one fold seed).

    ``mean`` is the mean difference (over the fold seeds and the queries) and ``se`` its
    standard error **corrected for the overlap of cross-validation** (Nadeau & Bengio 2003,
    "Inference for the generalization error", the corrected resampled t-test; Bouckaert & Frank
    2004, the corrected repeated k-fold test): with ``inner_folds`` k folds and r fold seeds,
    Var(mean) = (1/J + n_test/n_train)·σ², J = k·r splits, σ² = s²/n_test the variance of one
    split's mean, s² the per-query variance of the differences (pooled over the fold seeds) —
    i.e. se = s/√n · √(1/r + k/(k − 1)). The plain s/√n (``se_naive``) treats the n inner
    values as independent, but the models scoring them were fitted on overlapping queries and a
    further fold seed scores the same queries again, so it is too small: on it a model no
    better than the default passes a one-standard-error rule far more often than the rule
    means to allow. Without ``inner_folds`` the plain standard error is the ``se``.

    Per kind of query: the mean and the plain standard error of the differences averaged over
    the fold seeds, and the kinds on which the model is clearly worse (at least
    ``MIN_KIND_QUERIES`` queries, mean below −``KIND_MARGIN`` and more than one plain standard
    error below 0; the plain one, smaller, refuses more readily: both rules lean to the
    default)."""
    rows = np.atleast_2d(np.asarray(delta, dtype=np.float64))
    repeats, n = rows.shape
    avg = rows.mean(axis=0)

    def mean_se(d: np.ndarray) -> tuple[float, float]:
        se = float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
        return float(d.mean()) if len(d) else 0.0, se

    mean, se_naive = mean_se(avg)
    se = se_naive
    if inner_folds is not None and inner_folds >= 2 and n > 1:
        s = float(rows.std(ddof=1)) if rows.size > 1 else 0.0
        se = s / math.sqrt(n) * math.sqrt(1.0 / repeats + inner_folds / (inner_folds - 1))
    per_kind, refused = {}, []
    if kinds is not None:
        for kind in sorted({str(k) for k in kinds if k}):
            d = avg[kinds == kind]
            m, e = mean_se(d)
            per_kind[kind] = {"n": int(len(d)), "delta": round(m, 6), "se": round(e, 6)}
            if len(d) >= MIN_KIND_QUERIES and m < -KIND_MARGIN and m + e < 0:
                refused.append(kind)
    return {"mean": mean, "se": se, "se_naive": se_naive, "z": GUARD_Z, "n": int(n),
            "kinds": per_kind, "refused_kinds": refused}


def guard_verdict(detail: dict) -> str:
    """``pass`` (the model beats the default by more than three corrected standard errors and
    no kind is clearly worse), ``fail`` (a kind is clearly worse, or it is more than one
    standard error below the default) or ``unsure`` (in between: the inner folds are repeated
    with another fold seed; after the last it passes only when its mean exceeds ``GUARD_Z``
    corrected standard errors — the paired test, one-sided at 5 %, ``guard_passes``)."""
    mean, se = detail["mean"], detail["se"]
    if detail["refused_kinds"]:
        return "fail"
    if mean > 3 * se and mean > 1e-12:
        return "pass"
    return "unsure" if mean > -se else "fail"


def guard_passes(detail: dict) -> bool:
    """The guard's decision once the fold seeds are spent: the model beats the default by more
    than ``GUARD_Z`` corrected standard errors and is clearly worse on no kind of query."""
    return (not detail["refused_kinds"] and detail["mean"] > 1e-12
            and detail["mean"] > GUARD_Z * detail["se"])


@dataclass(frozen=True, eq=False, kw_only=True)
class LearnResult(NestedResult):
    model: str  # the --model asked for
    depth: int
    default: PipelineConfig
    feature_names: tuple[str, ...]
    judged: dict  # judged@5 of the held-out ranking, the default and the best single path
    n_fits: int
    kinds: tuple[str, ...] | None = None  # each counted query's kind (intent), for the guard
    memorisation: dict | None = None  # ``memorisation_check``'s figures, when it was run
    fixed_values: dict = field(default_factory=dict)  # FIXED_PIPELINES' per-query values
    inner_repeats: int = 1
    guard_rule: str = "strict"
    fallback_rule: str = "chosen"  # "chosen": the best named fixed pipeline on each training part; "explicit": --default
    applied: tuple[str, ...] = ()  # per counted query: what was applied to it while held out
    kind_field: str = "intent"  # the query field ``kinds`` came from

    def per_kind(self) -> dict:
        """Held-out figures per kind of query: the learned procedure's, the default's, the best
        single path's and every fixed pipeline's mean over that kind's queries."""
        if self.kinds is None:
            return {}
        kinds = np.array(self.kinds, dtype=object)
        out = {}
        for kind in sorted(set(self.kinds)):
            at = kinds == kind
            row = {"n": int(at.sum()), "held_out": round(float(self.held_out[at].mean()), 6),
                   self.default.name: round(float(self.default_values[at].mean()), 6)}
            if self.applied:
                what = [a for a, here in zip(self.applied, at) if here]
                row["applied"] = {name: what.count(name) for name in sorted(set(what))}
            for name, values in {**self.fixed_values, **self.single_values}.items():
                row.setdefault(name, round(float(values[at].mean()), 6))
            out[kind or "(none)"] = row
        return out

    def fixed_means(self) -> dict:
        """Every fixed pipeline's mean (the default, ``FIXED_PIPELINES``, the single paths)."""
        out = {self.default.name: float(self.default_values.mean())}
        for name, values in {**self.fixed_values, **self.single_values}.items():
            out.setdefault(name, float(values.mean()))
        return out

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
            "chosen": self.final.kind if self.final.kind == "default" else str(self.final.pick),
            "fold_choices": [f.applied for f in self.outer],
            "feature_set": feature_set_id(self.feature_names),
            "held_out": round(self.held_out_mean, 6),
            "default_pipeline": self.default.name,
            "held_out_default": round(d.mean, 6),
            "best_single_path": self.best_single,
            "held_out_best_single_path": round(s.mean, 6),
            "p_vs_default": round(d.p_fisher, 6),
            "p_vs_best_single_path": round(s.p_fisher, 6),
            "in_sample": round(self.final_score, 6),
            "guard_rule": self.guard_rule,
            "inner_repeats": self.inner_repeats,
            "fallback_rule": self.fallback_rule,
            "fallback": self.final.record.get("fallback", self.default.name),
            "fold_fallbacks": [f.choice.record.get("fallback", "") for f in self.outer],
            "model_kinds": list(self.final.record.get("kinds") or []),
        }

    def final_config(self, model_file: str = "") -> PipelineConfig:
        """The pipeline the procedure on all queries gives: the learned fusion (a linear model's
        weights inline; a stored model named by ``model_file``, relative to the TOML), or the
        default when the guard kept it."""
        if self.final.kind == "default":
            how = ("the best of the named fixed pipelines on all judged queries"
                   if self.fallback_rule == "chosen" else "the --default pipeline")
            return dataclasses.replace(
                self.default,
                name=f"{self.default.name}-kept",
                description=(
                    f"rwb learn on {self.dataset} kept {self.default.name} ({how}): "
                    "no model passed the guard in inner CV"
                ),
            )
        model = self.final.model
        fs = feature_set_id(self.feature_names)
        # kinds are routed where a pool knows each query's kind: the labelled intent
        kinds = tuple(self.final.record.get("kinds") or ()) if self.kind_field == "intent" else ()
        route = {"kinds": kinds, "fallback": self.final.record["fallback"]} if kinds else {}
        if isinstance(model, tuple):
            params = LearnedParams(model="linear", feature_set=fs, weights=model, **route)
        else:
            if not model_file:
                raise ValueError("a stored model needs a file name (--out)")
            params = LearnedParams(model=model.kind, file=model_file, feature_set=fs, **route)
        return PipelineConfig(
            "learned",
            "learned",
            f"{self.final.pick} learned by rwb learn on {self.dataset} (nested-CV held-out "
            f"{self.metric} {self.held_out_mean:.4f})",
            max_results=self.default_max_results,
            depth=self.depth,
            params=params,
        )

    @property
    def default_max_results(self) -> int:
        return int(self.extra.get("max_results", 10))

    def weights(self) -> list[tuple[str, float]]:
        """The final linear model's (feature, weight) pairs, largest |weight| first
        (``retrieval.fusion.learned.feature_weights``); empty for another model or the default."""
        model = self.final.model
        return feature_weights(model) if isinstance(model, tuple) else []

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
            "fixed_pipelines": {k: round(v, 6) for k, v in self.fixed_means().items()},
            "per_kind": self.per_kind(),
            "memorisation_check": self.memorisation,
            "weights": [{"feature": f, "weight": w} for f, w in self.weights()],
            "final": {
                "kind": self.final.kind,
                "model": str(self.final.pick),
                "inner": self.final.record["inner"],
                "inner_default": self.final.inner_default,
                "guard": _plain(self.final.record["guard"]),
            },
            "outer": [
                {"fold": f.fold, "test_ids": list(f.test_ids), "kind": f.kind, "model": f.applied,
                 "inner": f.choice.record["inner"], "inner_default": f.choice.inner_default,
                 "test_mean": f.test_mean, "guard": _plain(f.choice.record["guard"])}
                for f in self.outer
            ],
            "comparisons": [dataclasses.asdict(c) for c in self.comparisons],
            "per_query": self.per_query(),
            "toml": self.to_toml(model_file) if (self.stored_model is None or model_file) else None,
        }


LEAK_MARGIN = 0.01


def memorisation_check(spec: str, by_query: np.ndarray, by_group: np.ndarray, n_groups: int) -> dict:
    """The same model's held-out values with folds by query and by group, per query: when the
    by-query figure is above the by-group one by more than ``LEAK_MARGIN`` and by more than two
    standard errors of the paired difference, the model scores queries of a group it was
    trained on better than queries of a new group — it memorised something of the group (a
    passage, a conversation) — and ``warn`` is True."""
    delta = np.asarray(by_query, dtype=np.float64) - np.asarray(by_group, dtype=np.float64)
    se = float(delta.std(ddof=1) / math.sqrt(len(delta))) if len(delta) > 1 else 0.0
    gap = float(delta.mean()) if len(delta) else 0.0
    return {"model": spec, "by_query": round(float(np.mean(by_query)), 6),
            "by_group": round(float(np.mean(by_group)), 6), "gap": round(gap, 6),
            "se": round(se, 6), "groups": int(n_groups),
            "warn": bool(gap > LEAK_MARGIN and gap > 2 * se)}


def _plain(value):
    """``value`` with numpy numbers as Python's (for JSON)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


class _Fits:
    """Fits on ``workers`` threads, at most ``workers`` at a time; each finished fit is counted
    (``run``, ``drain``) in the thread that waits, so progress is reported there."""

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.events: queue.SimpleQueue = queue.SimpleQueue()

    def submit(self, fn, *args, count: bool = True):
        def job():
            out = fn(*args)
            if count:
                self.events.put(None)  # before the result is seen: a finished fit is counted
            return out
        return self.pool.submit(job)

    def run(self, search: Callable[[Plan], Choice], plans, tick: Callable[[], None]) -> list[Choice]:
        """``search`` on every plan at once, each on a thread of its own that submits its fits
        here; the fits are counted (``tick``) as they finish. An error in one search stops the
        rest: queued fits are dropped, running ones finish."""
        def one(k: int):
            try:
                return search(plans[k])
            finally:
                self.events.put(k)

        with ThreadPoolExecutor(max_workers=len(plans)) as searches:
            futures = [searches.submit(one, k) for k in range(len(plans))]
            try:
                left = len(plans)
                while left:
                    event = self.events.get()
                    if event is None:
                        tick()
                        continue
                    left -= 1
                    futures[event].result()  # its error, at once
            except BaseException:
                self.pool.shutdown(wait=False, cancel_futures=True)
                raise
        return [f.result() for f in futures]

    def drain(self, tick: Callable[[], None]) -> None:
        """Count the fits finished since the last ``run``."""
        while True:
            try:
                self.events.get_nowait()
            except queue.Empty:
                return
            tick()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.pool.shutdown(wait=True, cancel_futures=exc[0] is not None)


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
    """Nested cross-validation of the learning procedure, then the procedure on all queries;
    the fits run on ``threads`` threads (default: the CPUs this process may use), which changes
    how long it takes, never the result. ``fold_by`` (query id → group,
    ``eval.search.sweep.query_groups``): folds, outer and inner, keep each group whole.
    ``routes``: the learned routes the default pipeline follows (``retrieval.pipeline.fuse``)."""
    candidates = check_learn(model, folds, inner_folds)
    if guard_rule not in GUARD_RULES:
        raise ValueError(f"guard rule must be one of {list(GUARD_RULES)}, got {guard_rule!r}")
    if isinstance(inner_repeats, bool) or not isinstance(inner_repeats, int) or not 1 <= inner_repeats <= 20:
        raise ValueError(f"--inner-repeats must be an integer from 1 to 20, got {inner_repeats!r}")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    parse_metric(metric)
    explicit = default is not None
    fixed_cfgs = ({(d := resolve_config(default)).name: d} if explicit
                  else fixed_candidates(c, routes, get_pipeline(DEFAULT_PIPELINE)))
    base = next(iter(fixed_cfgs)) if explicit else DEFAULT_PIPELINE
    if any(spec.model == "correction" for spec in candidates) and base not in FIXED_PIPELINES:
        raise ValueError(f"--model correction boosts on top of the default's score, a feature only "
                         f"for {list(FIXED_PIPELINES)}; the default is {base!r}")
    config = PipelineConfig("learned", "learned", max_results=max_results, depth=depth)
    for name, cfg in (
        *fixed_cfgs.items(),
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
    t = Training(c, judged, config, metric, seed, base=f"fixed:{base}")

    def counted(values: np.ndarray) -> np.ndarray:
        out = np.nan_to_num(values[pool_q])
        return np.concatenate([out, np.zeros(n_missing)]) if n_missing else out

    def of_config(cfg: PipelineConfig) -> np.ndarray:
        return counted(next(config_values(c, judged, [cfg], metric, routes))[0])

    fixed_all = {name: of_config(cfg) for name, cfg in fixed_cfgs.items()}
    fixed_rows: dict = {}  # name → its fused scores (each row), made when first needed

    def fixed_score(name: str) -> np.ndarray:
        if name not in fixed_rows:
            fixed_rows[name] = fuse(c, fixed_cfgs[name], routes).scored.score
        return fixed_rows[name]

    per_procedure = len(candidates) * inner_folds + 1
    total = (folds + 1) * per_procedure
    done = [0]

    def tick() -> None:
        done[0] += 1
        if progress:
            progress(min(done[0], total), total)

    def pool_queries(positions: np.ndarray) -> np.ndarray:
        return pool_q[positions[positions < len(pool_q)]]

    groups = group_labels(ids, fold_by)
    kind_of = None if kinds is None else np.array([kinds.get(q, "") for q in ids], dtype=object)

    def unseen(train: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Which ``positions`` hold a labelled kind no query of ``train`` has: a model fitted on
        ``train`` is never applied to them (they get the fallback)."""
        if kind_of is None:
            return np.zeros(len(positions), dtype=bool)
        seen = set(kind_of[train])
        return np.array([bool(k) and k not in seen for k in kind_of[positions]], dtype=bool)

    def held_out_values(spec: Spec, train: np.ndarray, test: np.ndarray,
                        fallback: np.ndarray | None = None) -> np.ndarray:
        """``spec`` fitted on counted positions ``train``, its values on positions ``test``
        (``fallback``'s on a test query of a kind ``train`` lacks)."""
        model = fit(spec, t, pool_queries(train), {"spec": str(spec)})
        values = counted(t.values(scores(model, t, pool_queries(test))))[test]
        return values if fallback is None else np.where(unseen(train, test), fallback[test], values)
    # the other way to fold, for the memorisation check: by query when the folds go by group,
    # by ``leak_groups`` when they go by query
    if groups is not None:
        other, check_other = None, bool(check_memorisation)  # by query
    else:
        other = group_labels(ids, leak_groups) if leak_groups else None
        check_other = (check_memorisation is not False and other is not None
                       and group_count(other, n) >= 2)
    slow_first = sorted(candidates, key=lambda s: (s.model != "lambdamart", s.model != "linear"))
    leak_spec = next((s for s in candidates if s.model == "lambdamart"), None) or next(
        (s for s in reversed(candidates) if s.model == "linear"), candidates[0])
    leak_k = min(inner_folds, group_count(other, n)) if check_other else 0
    leak_of = make_folds(n, leak_k, seed_of(seed, folds, -9), other) if leak_k >= 2 else None
    first_inner: dict = {}  # plan index → {spec: inner held-out values, first fold seed}
    fits = _Fits(threads or len(os.sched_getaffinity(0)))

    def inner_run(plan: Plan, specs_: list, repeat: int, held: dict, fallback: np.ndarray) -> None:
        """Every spec of ``specs_`` fitted on each inner training part (fold seed ``repeat``)
        and scored on its inner held-out part, into ``held[spec, repeat]``."""
        inner = plan.inner_folds(inner_folds, repeat)
        jobs = {(spec, j): fits.submit(held_out_values, spec, plan.train[inner != j], plan.train[inner == j],
                                       fallback)
                for spec in specs_ for j in range(plan.inner_count(inner_folds))}
        for spec in specs_:
            held[spec, repeat] = np.empty(len(plan.train))
        for (spec, j), job in jobs.items():
            held[spec, repeat][inner == j] = job.result()

    def search(plan: Plan) -> Choice:
        """The learning procedure on ``plan.train`` (see the module docstring): the inner search
        of ``eval.search.nested.nested_cv``. Its ``Choice``: kind "learned" or "default", the
        inner-CV winner as the pick (fitted on all of ``plan.train`` as ``model`` when applied),
        and ``record`` each candidate's pooled inner held-out mean (``inner``) and the guard's
        figures (``guard``, ``guard_detail``)."""
        positions = plan.train
        fallback = choose_fixed(fixed_all, positions)
        base_values = fixed_all[fallback]
        default_mean = float(base_values[positions].mean())
        kinds_seen = sorted({str(k) for k in kind_of[positions] if k}) if kind_of is not None else []
        if plan.inner_folds(inner_folds) is None:
            means = {str(spec): math.nan for spec in candidates}
            return Choice("default", candidates[0], default_mean,
                          {"inner": means, "guard": {}, "fallback": fallback})
        held: dict = {}  # (spec, fold seed) → each position's inner held-out value
        inner_run(plan, slow_first, 0, held, base_values)
        first_inner[plan.index] = {spec: held[spec, 0] for spec in candidates}
        means = {str(spec): float(held[spec, 0].mean()) for spec in candidates}
        order = sorted(candidates, key=lambda s: (-means[str(s)], candidates.index(s)))
        repeats = dict.fromkeys(candidates, 1)

        def learned(spec: Spec, detail: dict) -> Choice:
            model = fits.submit(fit, spec, t, pool_queries(positions), {"spec": str(spec)}).result()
            return Choice("learned", spec, default_mean,
                          {"inner": means, "guard": detail, "fallback": fallback, "kinds": kinds_seen}, model)

        best = order[0]
        if not guard:
            return learned(best, {})
        if guard_rule == "mean":  # the inner mean alone (the guard before the per-kind check)
            if not means[str(best)] > default_mean + 1e-12:
                return Choice("default", best, default_mean, {"inner": means, "guard": {}, "fallback": fallback})
            return learned(best, {})
        refused: dict = {}
        for spec in order:
            while True:  # the guard on the inner differences to the default, its folds repeated while unsure
                delta = np.stack([held[spec, r] for r in range(repeats[spec])]) - base_values[positions]
                detail = guard_detail(delta, None if kind_of is None else kind_of[positions],
                                      plan.inner_count(inner_folds))
                detail["repeats"] = repeats[spec]
                kind = guard_verdict(detail)
                if kind != "unsure" or repeats[spec] >= inner_repeats:
                    break
                inner_run(plan, [spec], repeats[spec], held, base_values)
                repeats[spec] += 1
            if kind == "pass" or (kind == "unsure" and guard_passes(detail)):
                return learned(spec, {**detail, "refused": refused})
            refused[str(spec)] = detail
        return Choice("default", best, default_mean,
                      {"inner": means, "guard": {"refused": refused}, "fallback": fallback})

    fold_scores: dict = {}  # plan index → each row's score under what the plan's choice applies
    applied_to: dict = {}  # plan index → per counted query, what was applied to it

    def applied_values(choice: Choice, plan: Plan) -> np.ndarray:
        """What ``choice`` applies, per counted query: the fitted model's values (scoring only
        the held-out fold's rows) — its fallback's on a query of a kind it was not fitted on —
        or the fallback fixed pipeline's."""
        fallback = choice.record["fallback"]
        if choice.kind != "learned":
            fold_scores[plan.index] = fixed_score(fallback)
            applied_to[plan.index] = np.full(n, fallback, dtype=object)
            return fixed_all[fallback]
        rows = scores(choice.model, t, None if plan.final else pool_queries(plan.test))
        values = counted(t.values(rows))
        other = unseen(plan.train, np.arange(n))
        applied_to[plan.index] = np.where(other, fallback, str(choice.pick)).astype(object)
        if other.any():
            query_other = np.zeros(c.n_queries, dtype=bool)
            query_other[pool_queries(np.flatnonzero(other))] = True
            rows = np.where(query_other[c.query_idx], fixed_score(fallback), rows)
            values = np.where(other, fixed_all[fallback], values)
        fold_scores[plan.index] = rows
        return values

    scored: dict = {}  # plan index → ``applied_values``, computed on the plan's own thread

    def search_and_score(plan: Plan) -> Choice:
        """``search``, then what its choice applies, on the plan's thread: the scoring of one
        plan overlaps the other plans' fits instead of following them all (same values)."""
        choice = search(plan)
        scored[plan.index] = applied_values(choice, plan)
        return choice

    def score(choice: Choice, plan: Plan) -> np.ndarray:
        return scored[plan.index]

    # BLAS (the linear models' solver) on one thread: the fit threads are the parallelism, and
    # a fit's sums never depend on how many threads BLAS would take.
    with threadpool_limits(limits=1, user_api="blas"), quiet(), fits:
        if any(spec.model == "moe" for spec in candidates):
            fits.submit(t.moe_values, count=False)  # every MoE fit's targets, computed once
        leak_jobs = [fits.submit(held_out_values, leak_spec, np.flatnonzero(leak_of != j), np.flatnonzero(leak_of == j))
                     for j in range(leak_k)] if leak_of is not None else []
        run = nested_cv(ids, folds, seed, groups, search_and_score, score,
                        applied=lambda choice: (str(choice.pick) if choice.kind == "learned"
                                                else f"kept {choice.record['fallback']}"),
                        run=lambda search_, plans: fits.run(search_, plans, tick))
        leak_values = np.empty(n)
        for j, job in enumerate(leak_jobs):
            leak_values[leak_of == j] = job.result()
        fits.drain(tick)
    held = run.held_out
    held_score = np.full(c.n_rows, -np.inf)  # each query's rows scored by what it was given
    for plan in run.plans[:folds]:
        test_queries = np.zeros(c.n_queries, dtype=bool)
        test_queries[pool_queries(plan.test)] = True
        rows = test_queries[c.query_idx]
        held_score[rows] = fold_scores[plan.index][rows]
    final = run.final
    default = fixed_cfgs[final.record["fallback"]]  # the fallback on all queries: the comparison's
    default_values = fixed_all[default.name]
    singles = {name: of_config(get_pipeline(name)) for name in SINGLE_PATHS}
    fixed = dict(fixed_all)
    applied = np.empty(n, dtype=object)
    for plan in run.plans[:folds]:
        applied[plan.test] = applied_to[plan.index][plan.test]
    leak = None
    if leak_of is not None and folds in first_inner:
        same = first_inner[folds][leak_spec]
        by_query, by_group = (leak_values, same) if groups is not None else (same, leak_values)
        leak = memorisation_check(str(leak_spec), by_query, by_group,
                                  group_count(groups if groups is not None else other, n))
    best_single, comparisons = compare(held, default.name, default_values, singles, seed)
    final_score = run.final_score
    held_ranking = rank_rows(c, held_score, max_results)
    judged_5 = {
        "held_out": judged_at(c, qrels, held_ranking, 5, pool_q),
        default.name: judged_at(c, qrels, run_pipeline(c, default, routes).ranking, 5, pool_q),
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
        outer=run.outer,
        held_out=held,
        default_values=default_values,
        single_values=singles,
        best_single=best_single,
        comparisons=comparisons,
        judged=judged_5,
        fallback_rule="explicit" if explicit else "chosen",
        applied=tuple(str(a) for a in applied),
        final=final,
        final_score=final_score,
        seconds=time.perf_counter() - start,
        n_fits=done[0],
        n_groups=0 if groups is None else group_count(groups, n),
        extra={"max_results": max_results},
        kinds=None if kind_of is None else tuple(str(k) for k in kind_of),
        memorisation=leak,
        fixed_values=fixed,
        inner_repeats=inner_repeats,
        guard_rule=guard_rule if guard else "none",
        kind_field=kind_field,
    )
