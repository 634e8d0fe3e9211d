"""Significance of each pipeline against a baseline, per metric, over the counted queries.

Two paired tests, both two-sided, on the per-query values of a metric:

- ``student``: the paired t-test, through ``ranx.compare(stat_test="student")`` (scipy
  ``ttest_rel``). When every per-query difference is 0 scipy returns NaN; that is a p-value
  of 1 here (the runs do not differ).
- ``fisher``: Fisher's randomization test (Smucker et al., CIKM 2007): under the null the two
  values of a query are exchangeable, so each query's difference keeps or flips its sign with
  probability ½; ``p = (1 + #{|mean of flipped differences| ≥ |observed mean difference|}) /
  (1 + n_permutations)`` (never 0; Phipson & Smyth 2010). It is computed here with a seeded
  NumPy generator because ranx's ``fisher_randomization_test`` seeds NumPy inside a numba
  ``parallel=True`` function, where the permutations run on worker threads with their own
  unseeded generators: the same call gives different p-values from run to run.

Win / tie / loss counts come from ``ranx.compare`` (per query: pipeline above, equal to, or
below the baseline). p-values are corrected across the family of all pipelines × metrics
compared with the baseline, with Holm–Bonferroni (default) or Bonferroni; a cell is
significant when its corrected p-value is ≤ ``alpha``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from eval.evaluate import Evaluation
from eval.runs import RANX_LOCK, to_qrels, to_run

TESTS = ("fisher", "student")
TEST_NAMES = {"fisher": "Fisher's randomization test (paired, two-sided)",
              "student": "paired Student's t-test (two-sided)"}
DEFAULT_PERMUTATIONS = 10_000
UP, DOWN = "▲", "▼"


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni step-down adjusted p-values: with p sorted ascending,
    ``p̃_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j))``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def bonferroni(p_values: Sequence[float]) -> list[float]:
    """Bonferroni adjusted p-values: ``min(1, m · p)``."""
    m = len(p_values)
    return [min(1.0, m * p) for p in p_values]


CORRECTIONS: dict[str, Callable[[Sequence[float]], list[float]]] = {"holm": holm, "bonferroni": bonferroni}
CORRECTION_NAMES = {"holm": "Holm–Bonferroni", "bonferroni": "Bonferroni"}


def randomization_test(baseline: np.ndarray, treatment: np.ndarray, n_permutations: int = DEFAULT_PERMUTATIONS,
                       seed: int = 42) -> float:
    """Two-sided paired randomization (sign-flip) test; see the module docstring."""
    a, b = np.asarray(baseline, dtype=np.float64), np.asarray(treatment, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be 1-d and of equal length, got {a.shape} and {b.shape}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be ≥ 1, got {n_permutations}")
    diff = b - a
    if len(diff) == 0:
        return 1.0
    observed = abs(diff.mean())
    tolerance = 1e-12 * max(1.0, observed)  # equal means must count as "as extreme" despite rounding
    rng = np.random.default_rng(seed)
    extreme = 0
    chunk = max(1, 2_000_000 // len(diff))
    for start in range(0, n_permutations, chunk):
        size = min(chunk, n_permutations - start)
        signs = (rng.integers(0, 2, size=(size, len(diff)), dtype=np.int8) * 2 - 1).astype(np.float64)
        extreme += int(np.sum(np.abs(signs @ diff) / len(diff) >= observed - tolerance))
    return (extreme + 1) / (n_permutations + 1)


@dataclass(frozen=True)
class Cell:
    """One pipeline × metric against the baseline."""

    p_value: float        # primary test, uncorrected
    p_adjusted: float     # primary test, corrected across the family
    significant: bool     # p_adjusted ≤ alpha
    wins: int             # queries where the pipeline beats the baseline
    ties: int
    losses: int
    delta: float          # mean(pipeline) − mean(baseline)
    p_values: dict[str, float] = field(default_factory=dict)    # every test, uncorrected
    p_adjusted_by_test: dict[str, float] = field(default_factory=dict)

    @property
    def mark(self) -> str:
        if not self.significant:
            return ""
        return UP if self.delta > 0 else DOWN


@dataclass(frozen=True)
class Significance:
    baseline: str
    test: str
    correction: str
    alpha: float
    n_permutations: int
    seed: int
    family_size: int
    cells: dict[str, dict[str, Cell]]   # pipeline (baseline excluded) → metric → cell

    def describe(self) -> str:
        return (f"{TEST_NAMES[self.test]} vs {self.baseline}; {CORRECTION_NAMES[self.correction]} correction over "
                f"{self.family_size} comparisons (pipelines × metrics); {UP}/{DOWN} = significantly better/worse "
                f"at α = {self.alpha:g} after correction")

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline, "test": self.test, "test_name": TEST_NAMES[self.test],
            "correction": self.correction, "correction_name": CORRECTION_NAMES[self.correction],
            "alpha": self.alpha, "n_permutations": self.n_permutations, "seed": self.seed,
            "family_size": self.family_size, "description": self.describe(),
        }


def _student_and_wtl(qrels, runs, metrics):
    from ranx import compare as ranx_compare

    with RANX_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy warns on zero-variance differences
        return ranx_compare(qrels, runs, list(metrics), stat_test="student", max_p=1.0)


def compare_to_baseline(evaluation: Evaluation, qrels: dict[str, dict[str, int]], baseline: str,
                        test: str = "fisher", correction: str = "holm", alpha: float = 0.05,
                        n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = 42) -> Significance:
    """Test every pipeline of ``evaluation`` against ``baseline`` on each of its metrics."""
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose from {list(TESTS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose from {sorted(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    if baseline not in evaluation.results:
        raise ValueError(f"baseline {baseline!r} was not evaluated; have {list(evaluation.results)}")
    metrics = list(evaluation.metrics)
    counted = {q: qrels[q] for q in evaluation.query_ids}
    ranx_qrels = to_qrels(counted)
    raw: dict[str, dict[str, dict]] = {}
    for label in evaluation.results:
        if label == baseline:
            continue
        raw[label] = {}
        for m in metrics:
            base, values = evaluation.values(baseline, m), evaluation.values(label, m)
            raw[label][m] = {"fisher": randomization_test(base, values, n_permutations, seed),
                             "delta": float(values.mean() - base.mean())}
    for label in raw:
        # fresh Run objects for every call: ranx.compare writes its scores into the runs it is given
        runs = [to_run(evaluation.candidates, evaluation.runs[name].ranking, counted, name)
                for name in (baseline, label)]
        report = _student_and_wtl(ranx_qrels, runs, metrics)
        pair = report.comparisons[frozenset([baseline, label])]
        for m in metrics:
            p = pair[m]["p_value"]
            raw[label][m]["student"] = 1.0 if p is None or not math.isfinite(p) else float(p)
            raw[label][m]["wtl"] = report.win_tie_loss[(label, baseline)][m]
    keys = [(label, m) for label in raw for m in metrics]
    adjusted = {t: dict(zip(keys, CORRECTIONS[correction]([raw[l][m][t] for l, m in keys]))) for t in TESTS}
    cells: dict[str, dict[str, Cell]] = {}
    for label, m in keys:
        r = raw[label][m]
        cells.setdefault(label, {})[m] = Cell(
            p_value=r[test], p_adjusted=adjusted[test][(label, m)],
            significant=adjusted[test][(label, m)] <= alpha,
            wins=int(r["wtl"]["W"]), ties=int(r["wtl"]["T"]), losses=int(r["wtl"]["L"]), delta=r["delta"],
            p_values={t: r[t] for t in TESTS}, p_adjusted_by_test={t: adjusted[t][(label, m)] for t in TESTS},
        )
    return Significance(baseline, test, correction, alpha, n_permutations, seed, len(keys), cells)
