"""Nested cross-validation of a procedure whose inner search is an argument — the one
implementation behind ``rwb tune`` (``eval.search.tune``: an Optuna search with its guard) and
``rwb learn`` (``eval.learning.nested``: model selection with its guard), as PyTerrier's
``KFoldGridSearch`` takes the pipeline and the grid and owns the folds.

The counted queries (positions ``0 … n − 1``) are split into ``folds`` outer folds
(``eval.search.sweep.make_folds``, seeded by the run's seed; with ``groups`` each group stays
whole). Each outer fold gives a ``Plan``: the procedure runs on the other folds (``train``) and
its choice is scored on the fold (``test``); a last plan runs it on every query (the final
choice, in-sample). A plan's inner folds (``Plan.inner_folds``) and a search's seeds
(``Plan.seed_for``) come from the run's seed and the plan's index, so every caller draws them
the same way.

The caller supplies:

- ``search(plan) -> Choice``: the inner search on ``plan.train`` — its pick, whether the
  procedure applies it or keeps the default (``kind``), and its figures;
- ``score(choice, plan) -> values``: per counted query, the value of what the choice applies
  (read on ``plan.test``; on every query for the final plan);
- ``applied(choice)``: what the choice applies, as the per-fold record shows it;
- ``run(search, plans) -> choices``: how the searches run (default: one after another; a
  caller may run them on Ray or on threads, in any order — each plan's choice is its own).

Every query is held out exactly once, so the **held-out estimate** is the mean over the counted
queries of the value each got from a procedure that never saw it. ``compare`` sets it, query
by query, against the default pipeline and the better single path (``vector`` or ``bm25``, the
higher mean on all counted queries) by Fisher's randomization test
(``eval.statistics.significance.randomization_test``) and the paired t-test, raw and
Holm-corrected over the two comparisons.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from eval.search.sweep import group_count, make_folds
from eval.statistics.significance import holm, randomization_test
from retrieval.candidate_table import Candidates

SINGLE_PATHS = ("vector", "bm25")
PERMUTATIONS = 10_000


def seed_of(*parts: int) -> int:
    """A 32-bit seed for one step of the procedure, from the run's seed and its position."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


@dataclass(frozen=True, eq=False)
class Plan:
    """One run of the procedure: outer fold ``index`` held out, or (``test`` None) every query."""

    index: int                      # the outer fold; ``folds`` for the final procedure
    train: np.ndarray               # counted positions the procedure runs on
    test: np.ndarray | None         # the held-out fold's positions (None: the final procedure)
    seed: int                       # the run's seed
    groups: np.ndarray | None       # each counted query's group (None: folds by query)

    @property
    def final(self) -> bool:
        return self.test is None

    def seed_for(self, *parts: int) -> int:
        """The seed of one step of this plan (``seed_of(run seed, index, *parts)``)."""
        return seed_of(self.seed, self.index, *parts)

    def train_groups(self) -> np.ndarray | None:
        return None if self.groups is None else self.groups[self.train]

    def inner_count(self, inner_folds: int) -> int:
        """How many inner folds the training part makes: ``inner_folds``, at most its groups."""
        return min(inner_folds, group_count(self.train_groups(), len(self.train)))

    def inner_folds(self, inner_folds: int, repeat: int = 0) -> np.ndarray | None:
        """The inner fold of each training position (groups kept whole, fold seed ``repeat``:
        0 the first); None when the training part makes fewer than two folds."""
        k = self.inner_count(inner_folds)
        if k < 2:
            return None
        return make_folds(len(self.train), k, self.seed_for(-2 - repeat), self.train_groups())


def outer_plans(n: int, folds: int, seed: int, groups: np.ndarray | None) -> list[Plan]:
    """One plan per outer fold, then the final one on every counted query."""
    fold_of = make_folds(n, folds, seed, groups)
    plans = [Plan(k, np.flatnonzero(fold_of != k), np.flatnonzero(fold_of == k), seed, groups)
             for k in range(folds)]
    return plans + [Plan(folds, np.arange(n), None, seed, groups)]


@dataclass(frozen=True)
class Choice:
    """What an inner search returns for a set of queries."""

    kind: str                 # "default" (the default kept) or the caller's word for applying the pick
    pick: Any                 # the search's winner: a parameter point (tune), a model Spec (learn)
    inner_default: float      # the default's mean on the same queries
    record: dict = field(default_factory=dict)  # the search's figures (tune: train_mean, inner_tuned; learn: inner, guard)
    model: Any = field(default=None, compare=False)  # the pick fitted on the queries (learn; None otherwise)


@dataclass(frozen=True, eq=False)
class Comparison:
    name: str                 # "default rrf", "best single path bm25"
    pipeline: str
    mean: float               # held-out queries: the same queries as the estimate
    delta: float              # estimate − mean
    p_fisher: float
    p_student: float
    p_fisher_holm: float      # Holm over the comparisons of this run
    p_student_holm: float
    wins: int
    ties: int
    losses: int


@dataclass(frozen=True)
class OuterFold:
    fold: int
    test_ids: tuple[str, ...]
    choice: Choice            # the procedure's on the other folds
    applied: Any              # what it applied on this fold, as the caller shows it
    test_mean: float          # the applied one's mean on this fold

    @property
    def kind(self) -> str:
        return self.choice.kind


@dataclass(frozen=True, eq=False)
class Nested:
    plans: tuple[Plan, ...]
    outer: tuple[OuterFold, ...]
    held_out: np.ndarray      # per counted query: the value it got while held out
    final: Choice             # the procedure on every counted query
    final_values: np.ndarray  # what the final choice applies, per counted query (in-sample)

    @property
    def final_score(self) -> float:
        return float(self.final_values.mean())


@dataclass(frozen=True, eq=False, kw_only=True)
class NestedResult:
    """What a nested-CV run reports, whichever its inner search (``rwb tune``'s ``TuneResult``
    and ``rwb learn``'s ``LearnResult`` add their own)."""

    folds: int
    inner_folds: int
    guard: bool
    seed: int
    metric: str
    dataset: str
    fingerprint: str
    embedder: str
    pool_depth: int
    query_ids: tuple[str, ...]            # counted queries, pool order then missing ones
    outer: tuple[OuterFold, ...]
    held_out: np.ndarray                  # per counted query: the value it got while held out
    default_values: np.ndarray            # the default pipeline, per counted query
    single_values: dict[str, np.ndarray]  # vector and bm25, per counted query
    best_single: str
    comparisons: tuple[Comparison, ...]   # against the default, then the best single path
    final: Choice                         # the procedure on all counted queries
    final_score: float                    # in-sample: what the final choice applies, on all of them
    seconds: float
    n_groups: int = 0                     # folds kept these groups whole (0: folds by query)
    extra: dict = field(default_factory=dict)

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    @property
    def held_out_mean(self) -> float:
        return float(self.held_out.mean())

    @property
    def default_mean(self) -> float:
        return float(self.default_values.mean())

    def per_query(self) -> dict:
        """Each counted query's held-out value, the default's and each single path's."""
        return {q: {"held_out": float(h), "default": float(d), **{
            p: float(v[i]) for p, v in self.single_values.items()}}
            for i, (q, h, d) in enumerate(zip(self.query_ids, self.held_out, self.default_values))}


def _in_order(search: Callable[[Plan], Choice], plans: Sequence[Plan]) -> list[Choice]:
    return [search(plan) for plan in plans]


def nested_cv(ids: Sequence[str], folds: int, seed: int, groups: np.ndarray | None,
              search: Callable[[Plan], Choice], score: Callable[[Choice, Plan], np.ndarray],
              applied: Callable[[Choice], Any],
              run: Callable[[Callable[[Plan], Choice], Sequence[Plan]], list] | None = None) -> Nested:
    """Nested cross-validation of ``search`` over the counted queries ``ids`` (see the module
    docstring), then the procedure on all of them."""
    plans = outer_plans(len(ids), folds, seed, groups)
    choices = (run or _in_order)(search, plans)
    held = np.empty(len(ids))
    outer = []
    for plan, choice in zip(plans[:folds], choices):
        values = score(choice, plan)
        held[plan.test] = values[plan.test]
        outer.append(OuterFold(plan.index, tuple(ids[i] for i in plan.test), choice, applied(choice),
                               float(values[plan.test].mean())))
    final = choices[folds]
    return Nested(tuple(plans), tuple(outer), held, final, score(final, plans[folds]))


# ---- the paired tests ----------------------------------------------------------------------------

def compare_procedures(name: str, pipeline: str, tuned: np.ndarray, other: np.ndarray, seed: int) -> dict:
    """A procedure's held-out per-query values against another's on the same queries: the mean
    difference, paired t and Fisher randomization p."""
    from scipy.stats import ttest_rel

    diff = tuned - other
    if np.allclose(diff, 0.0):
        p_t = 1.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            p_t = float(ttest_rel(tuned, other).pvalue)
        p_t = 1.0 if not math.isfinite(p_t) else p_t
    return dict(name=name, pipeline=pipeline, mean=float(other.mean()), delta=float(tuned.mean() - other.mean()),
                p_fisher=randomization_test(other, tuned, PERMUTATIONS, seed), p_student=p_t,
                wins=int((diff > 1e-12).sum()), ties=int((np.abs(diff) <= 1e-12).sum()),
                losses=int((diff < -1e-12).sum()))


def compare(held: np.ndarray, default: str, default_values: np.ndarray,
            singles: dict[str, np.ndarray], seed: int) -> tuple[str, tuple[Comparison, ...]]:
    """The better single path (``SINGLE_PATHS`` order on a tie) and the held-out estimate
    against the default, then against that path, Holm-corrected over the two."""
    best = max(SINGLE_PATHS, key=lambda name: (singles[name].mean(), -SINGLE_PATHS.index(name)))
    raw = [compare_procedures(f"default {default}", default, held, default_values, seed),
           compare_procedures(f"best single path {best}", best, held, singles[best], seed)]
    fisher_holm = holm([r["p_fisher"] for r in raw])
    student_holm = holm([r["p_student"] for r in raw])
    return best, tuple(Comparison(**r, p_fisher_holm=f, p_student_holm=s)
                       for r, f, s in zip(raw, fisher_holm, student_holm))


def counted_ids(c: Candidates, qrels, judged) -> tuple[str, ...]:
    """The counted queries in the order of a scorer's values: judged pool queries, then missing ones (sorted)."""
    present = set(c.query_ids)
    missing = sorted(q for q, j in qrels.items() if q not in present and any(g > 0 for g in j.values()))
    return tuple(q for q, m in zip(c.query_ids, judged.judged) if m) + tuple(missing)
