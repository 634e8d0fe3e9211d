"""The guard of ``rwb learn``: whether a model's inner held-out values beat the fallback's.

A model replaces the fallback fixed pipeline only when its per-query inner held-out differences
pass ``guard_verdict`` (or ``guard_passes`` once the fold seeds are spent): a gain above a
corrected standard error and no kind of query clearly worse (``guard_detail``).
"""

from __future__ import annotations

import math

import numpy as np

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
