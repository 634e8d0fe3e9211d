"""Bootstrap confidence intervals of metric means and of paired differences against a baseline.

The percentile bootstrap (Efron & Tibshirani 1993, ch. 13) over the counted queries: draw
``n_resamples`` samples of the ``n`` queries with replacement, take each sample's mean, and
report the ``(1 − level)/2`` and ``(1 + level)/2`` percentiles of those means (NumPy's default
linear interpolation). A paired difference resamples the queries once for both pipelines, so
its interval is the percentile interval of ``mean(pipeline − baseline)`` over the same samples.

Every interval of an experiment uses the SAME resamples (one seeded NumPy generator, drawn
from ``seed`` and ``n`` alone): an interval is repeatable for a seed and does not change when
another pipeline or metric is added. The samples are drawn as count vectors, ``chunk`` at a
time, and applied to each column with one matrix-vector product.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DEFAULT_RESAMPLES = 10_000
LEVEL = 0.95
METHOD = "percentile bootstrap over the queries"


def resampled_means(columns: np.ndarray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 42) -> np.ndarray:
    """``(n_resamples, K)`` bootstrap means of each column of ``columns`` (shape ``(n, K)``)."""
    data = np.asarray(columns, dtype=np.float64)
    if data.ndim != 2:
        raise ValueError(f"columns must be 2-d (queries × columns), got shape {data.shape}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap resamples must be ≥ 1, got {n_resamples}")
    n, k = data.shape
    if n == 0:
        return np.full((n_resamples, k), np.nan)
    rng = np.random.default_rng(seed)
    chunk = max(1, min(1000, 2_000_000 // n))  # a fixed function of n: the draws do not depend on K
    out = np.empty((n_resamples, k))
    for start in range(0, n_resamples, chunk):
        size = min(chunk, n_resamples - start)
        picks = rng.integers(0, n, size=(size, n))
        counts = np.bincount((np.arange(size)[:, None] * n + picks).ravel(), minlength=size * n).reshape(size, n)
        for j in range(k):  # one column at a time: a column's means do not depend on the others
            out[start:start + size, j] = counts @ data[:, j] / n
    return out


def percentile_interval(means: np.ndarray, level: float = LEVEL) -> np.ndarray:
    """``(2, K)``: the lower and upper percentiles of each column of bootstrap means."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must lie in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0 * 100.0
    return np.percentile(means, [tail, 100.0 - tail], axis=0)


def bootstrap_ci(values, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 42,
                 level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of the mean of one vector of per-query values."""
    column = np.asarray(values, dtype=np.float64).reshape(-1, 1)
    lo, hi = percentile_interval(resampled_means(column, n_resamples, seed), level)[:, 0]
    return float(lo), float(hi)


@dataclass(frozen=True)
class Intervals:
    """Bootstrap intervals of one experiment (``(low, high)`` pairs)."""

    baseline: str
    n_resamples: int
    seed: int
    level: float
    means: dict[str, dict[str, tuple[float, float]]]                        # pipeline → metric → CI of the mean
    deltas: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # vs the baseline

    def describe(self) -> str:
        return (f"{self.level:.0%} confidence intervals: {METHOD}, {self.n_resamples:,} resamples "
                f"(seed {self.seed}); a difference's interval resamples the queries once for both pipelines")

    def to_json(self) -> dict:
        pair = lambda ci: {"low": ci[0], "high": ci[1]}
        return {"method": METHOD, "level": self.level, "n_resamples": self.n_resamples, "seed": self.seed,
                "baseline": self.baseline, "description": self.describe(),
                "means": {p: {m: pair(ci) for m, ci in cells.items()} for p, cells in self.means.items()},
                "deltas": {p: {m: pair(ci) for m, ci in cells.items()} for p, cells in self.deltas.items()}}


def bootstrap_intervals(evaluation, baseline: str, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 42,
                        level: float = LEVEL) -> Intervals:
    """Intervals of every pipeline's mean and of its difference to ``baseline``, every metric
    (``evaluation``: an ``eval.metrics.ranx_eval.Evaluation``)."""
    if baseline not in evaluation.results:
        raise ValueError(f"baseline {baseline!r} was not evaluated; have {list(evaluation.results)}")
    labels, metrics = list(evaluation.results), list(evaluation.metrics)
    keys = [(p, m) for p in labels for m in metrics]
    columns = np.column_stack([evaluation.values(p, m) for p, m in keys])
    means = resampled_means(columns, n_resamples, seed)
    at = {key: i for i, key in enumerate(keys)}
    ci_means = percentile_interval(means, level)
    others = [p for p in labels if p != baseline]
    delta_keys = [(p, m) for p in others for m in metrics]
    diffs = (np.column_stack([means[:, at[(p, m)]] - means[:, at[(baseline, m)]] for p, m in delta_keys])
             if delta_keys else np.empty((n_resamples, 0)))
    ci_deltas = percentile_interval(diffs, level) if delta_keys else np.empty((2, 0))
    out_means: dict[str, dict[str, tuple[float, float]]] = {}
    for (p, m), i in at.items():
        out_means.setdefault(p, {})[m] = (float(ci_means[0, i]), float(ci_means[1, i]))
    out_deltas: dict[str, dict[str, tuple[float, float]]] = {}
    for i, (p, m) in enumerate(delta_keys):
        out_deltas.setdefault(p, {})[m] = (float(ci_deltas[0, i]), float(ci_deltas[1, i]))
    return Intervals(baseline, n_resamples, seed, level, out_means, out_deltas)
