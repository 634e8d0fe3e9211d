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
below the baseline). p-values are corrected PER METRIC across the pipelines compared with the
baseline, as PyTerrier's ``Experiment(baseline=…, correction=…)`` does (statsmodels'
``multipletests`` over one measure's p-value column, the baseline left out): Holm–Bonferroni
(default), Bonferroni, or none. So a pipeline's significance on a metric depends on how many
pipelines were compared, never on how many metrics were shown. A cell is significant when its
corrected p-value is ≤ ``alpha``; both the raw and the corrected p-value are kept.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from eval.metrics.ranx_eval import Evaluation
from eval.metrics.ranx_io import RANX_LOCK, to_qrels, to_run

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


def uncorrected(p_values: Sequence[float]) -> list[float]:
    """No correction: the p-values as they are."""
    return [float(p) for p in p_values]


CORRECTIONS: dict[str, Callable[[Sequence[float]], list[float]]] = {"holm": holm, "bonferroni": bonferroni,
                                                                     "none": uncorrected}
CORRECTION_NAMES = {"holm": "Holm–Bonferroni", "bonferroni": "Bonferroni", "none": "no"}


def paired_t(baseline: np.ndarray, treatment: np.ndarray) -> float:
    """Two-sided paired t-test p, as scipy's ``ttest_rel``: with ``d = treatment − baseline``,
    ``t = mean(d) / (sd(d)/√n)`` and ``p = 2·P(T_{n−1} ≤ −|t|)``; 1 when the runs do not differ,
    NaN under two queries (cheap enough for every knob move on Tune)."""
    from scipy.special import stdtr

    n = len(baseline)
    if n < 2:
        return float("nan")
    diff = np.asarray(treatment, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    if not np.any(np.abs(diff) > 1e-12):
        return 1.0
    sd = float(diff.std(ddof=1))
    if sd == 0.0:
        return 0.0
    t = float(diff.mean()) / (sd / math.sqrt(n))
    return float(2.0 * stdtr(n - 1, -abs(t)))


def compare_pair(baseline: dict[str, np.ndarray], treatment: dict[str, np.ndarray], test: str = "t",
                 n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = 42) -> dict[str, float]:
    """p per metric for ONE configuration against the baseline, from per-query values over the
    same counted queries: the paired t-test (``"t"``) or the randomization test (``"fisher"``).

    Correction is across systems per metric (as ``compare_to_baseline``, PyTerrier and
    ``ranx.compare`` do); with one system compared there is nothing to correct, so these are the
    raw p-values — the same a one-pipeline ``rwb eval`` prints."""
    if test not in ("t", "fisher"):
        raise ValueError(f"test must be 't' or 'fisher', got {test!r}")
    out = {}
    for name, a in baseline.items():
        b = treatment[name]
        if test == "t":
            out[name] = paired_t(a, b)
        else:
            out[name] = randomization_test(a, b, n_permutations, seed=seed) if len(a) else float("nan")
    return out


def randomization_test(baseline: np.ndarray, treatment: np.ndarray, n_permutations: int = DEFAULT_PERMUTATIONS,
                       seed: int = 42) -> float:
    """Two-sided paired randomization (sign-flip) test; see the module docstring."""
    a, b = np.asarray(baseline, dtype=np.float64), np.asarray(treatment, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired samples must be 1-d and of equal length, got {a.shape} and {b.shape}")
    return float(randomization_tests((b - a).reshape(-1, 1), n_permutations, seed)[0])


def randomization_tests(differences: np.ndarray, n_permutations: int = DEFAULT_PERMUTATIONS,
                        seed: int = 42) -> np.ndarray:
    """``randomization_test`` of every column of ``differences`` (queries × columns, each a
    pipeline's per-query values minus the baseline's), with the same sign patterns for every
    column: each column's p-value equals ``randomization_test`` of that column alone."""
    diff = np.asarray(differences, dtype=np.float64)
    if diff.ndim != 2:
        raise ValueError(f"differences must be 2-d (queries × columns), got shape {diff.shape}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be ≥ 1, got {n_permutations}")
    n, k = diff.shape
    if n == 0:
        return np.ones(k)
    observed = np.abs(diff.mean(axis=0))
    tolerance = 1e-12 * np.maximum(1.0, observed)  # equal means must count as "as extreme" despite rounding
    rng = np.random.default_rng(seed)
    extreme = np.zeros(k, dtype=np.int64)
    chunk = max(1, 2_000_000 // n)
    for start in range(0, n_permutations, chunk):
        size = min(chunk, n_permutations - start)
        signs = (rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1).astype(np.float64)
        extreme += np.sum(np.abs(signs @ diff) / n >= observed - tolerance, axis=0)
    return (extreme + 1) / (n_permutations + 1)


@dataclass(frozen=True)
class Cell:
    """One pipeline × metric against the baseline."""

    p_value: float        # primary test, uncorrected
    p_adjusted: float     # primary test, corrected across the pipelines on this metric
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
    family_size: int                    # comparisons per metric: the pipelines other than the baseline
    cells: dict[str, dict[str, Cell]]   # pipeline (baseline excluded) → metric → cell

    def describe(self) -> str:
        test = f"{TEST_NAMES[self.test]} vs {self.baseline}" + (
            f" ({self.n_permutations:,} permutations, seed {self.seed})" if self.test == "fisher" else "")
        if self.correction == "none":
            scope = "no multiple-comparison correction"
        else:
            scope = (f"{CORRECTION_NAMES[self.correction]} correction per metric across the {self.family_size} "
                     f"pipeline{'s' if self.family_size != 1 else ''} compared with {self.baseline}")
        return (f"{test}; {scope}; {UP}/{DOWN} = significantly better/worse at "
                f"α = {self.alpha:g} after correction")

    def to_json(self) -> dict:
        return {
            "baseline": self.baseline, "test": self.test, "test_name": TEST_NAMES[self.test],
            "correction": self.correction, "correction_name": CORRECTION_NAMES[self.correction],
            "correction_scope": "per metric, across the pipelines compared with the baseline",
            "alpha": self.alpha, "n_permutations": self.n_permutations, "seed": self.seed,
            "family_size": self.family_size, "description": self.describe(),
        }


def _student_and_wtl(qrels, runs, metrics):
    from ranx import compare as ranx_compare

    with RANX_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy warns on zero-variance differences
        return ranx_compare(qrels, runs, list(metrics), stat_test="student", max_p=1.0)


def check_settings(test: str, correction: str, alpha: float, flag: str = "") -> None:
    """Refuse a paired test, a multiple-comparison correction or a significance level out of
    range: the one check of these settings, wherever they are given (``flag`` ``"--"``: named as
    the command line's options)."""
    if test not in TESTS:
        raise ValueError(f"{flag}test must be one of {list(TESTS)}, got {test!r}")
    if correction not in CORRECTIONS:
        raise ValueError(f"{flag}correction must be one of {sorted(CORRECTIONS)}, got {correction!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"{flag}alpha must lie in (0, 1), got {alpha!r}")


def compare_to_baseline(evaluation: Evaluation, qrels: dict[str, dict[str, int]], baseline: str,
                        test: str = "fisher", correction: str = "holm", alpha: float = 0.05,
                        n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = 42) -> Significance:
    """Test every pipeline of ``evaluation`` against ``baseline`` on each of its metrics."""
    check_settings(test, correction, alpha)
    if baseline not in evaluation.results:
        raise ValueError(f"baseline {baseline!r} was not evaluated; have {list(evaluation.results)}")
    metrics = list(evaluation.metrics)
    counted = {q: qrels[q] for q in evaluation.query_ids}
    ranx_qrels = to_qrels(counted)
    raw: dict[str, dict[str, dict]] = {}
    for label in evaluation.results:
        if label == baseline:
            continue
        diffs = np.column_stack([evaluation.values(label, m) - evaluation.values(baseline, m) for m in metrics])
        fisher = randomization_tests(diffs, n_permutations, seed)
        raw[label] = {m: {"fisher": float(fisher[j]),
                          "delta": float(evaluation.values(label, m).mean() - evaluation.values(baseline, m).mean())}
                      for j, m in enumerate(metrics)}
    for label in raw:
        # fresh Run objects for every call: ranx.compare writes its scores into the runs it is given
        runs = [to_run(evaluation.pool_of(name), evaluation.runs[name].ranking, counted, name)
                for name in (baseline, label)]
        report = _student_and_wtl(ranx_qrels, runs, metrics)
        pair = report.comparisons[frozenset([baseline, label])]
        for m in metrics:
            p = pair[m]["p_value"]
            raw[label][m]["student"] = 1.0 if p is None or not math.isfinite(p) else float(p)
            raw[label][m]["wtl"] = report.win_tie_loss[(label, baseline)][m]
    keys = [(label, m) for label in raw for m in metrics]
    adjusted: dict[str, dict[tuple[str, str], float]] = {t: {} for t in TESTS}
    for m in metrics:  # one family per metric: the pipelines compared with the baseline
        family = [(label, m) for label in raw]
        for t in TESTS:
            adjusted[t].update(zip(family, CORRECTIONS[correction]([raw[l][m][t] for l, _ in family])))
    cells: dict[str, dict[str, Cell]] = {}
    for label, m in keys:
        r = raw[label][m]
        cells.setdefault(label, {})[m] = Cell(
            p_value=r[test], p_adjusted=adjusted[test][(label, m)],
            significant=adjusted[test][(label, m)] <= alpha,
            wins=int(r["wtl"]["W"]), ties=int(r["wtl"]["T"]), losses=int(r["wtl"]["L"]), delta=r["delta"],
            p_values={t: r[t] for t in TESTS}, p_adjusted_by_test={t: adjusted[t][(label, m)] for t in TESTS},
        )
    return Significance(baseline, test, correction, alpha, n_permutations, seed, len(raw), cells)


def fmt_p(p: float | None) -> str:
    """A p-value: ``<0.001``, else three decimals; ``–`` when there is none (NaN, None)."""
    if p is None or not math.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"
