"""Agreement between two raters' grades (0–3) on the (query, document) pairs both graded.

- **Krippendorff's α, ordinal** (the ``krippendorff`` package; value domain 0–3): 1 − observed /
  expected disagreement, the ordinal distance between two grades growing with how many graded
  values lie between them — as Quepid reports a judge against a reference;
- **Cohen's κ, quadratically weighted** (scikit-learn's ``cohen_kappa_score``, labels 0–3): a
  disagreement by two grades costs four times one by one;
- the **confusion matrix** (rows: the first rater's grade, columns: the second's);
- per query, the **impact** (Quepid's calibration impact): how much a metric of a ranking moves
  when the second rater's grades replace the first's (``impact``).

α and κ are undefined (NaN) with fewer than two pairs or a single grade used by both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

GRADES = (0, 1, 2, 3)


@dataclass(frozen=True)
class Agreement:
    first: str
    second: str
    pairs: int
    alpha: float
    kappa: float
    confusion: tuple[tuple[int, ...], ...]        # rows: first's grade 0–3, columns: second's
    impact: dict[str, float] = field(default_factory=dict)   # query → metric(second) − metric(first)
    metric: str = ""

    def to_json(self) -> dict:
        return {"first": self.first, "second": self.second, "pairs": self.pairs,
                "alpha": None if math.isnan(self.alpha) else self.alpha,
                "kappa": None if math.isnan(self.kappa) else self.kappa,
                "confusion": [list(r) for r in self.confusion], "metric": self.metric,
                "impact": dict(self.impact)}


def common_pairs(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> list[tuple[str, str, int, int]]:
    """(query, doc, grade by a, grade by b) for every pair both graded, sorted."""
    return [(q, d, int(a[q][d]), int(b[q][d])) for q in sorted(set(a) & set(b))
            for d in sorted(set(a[q]) & set(b[q]))]


def agreement(first: str, a: dict[str, dict[str, int]], second: str, b: dict[str, dict[str, int]]) -> Agreement:
    """α, κ and the confusion matrix of ``a`` against ``b`` on the pairs both graded."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score, confusion_matrix

    pairs = common_pairs(a, b)
    x = np.array([p[2] for p in pairs], dtype=np.int64)
    y = np.array([p[3] for p in pairs], dtype=np.int64)
    alpha = kappa = math.nan
    if len(pairs) >= 2 and len(set(x.tolist()) | set(y.tolist())) > 1:
        alpha = float(krippendorff.alpha(reliability_data=np.vstack([x, y]).astype(np.float64),
                                         value_domain=list(GRADES), level_of_measurement="ordinal"))
        kappa = float(cohen_kappa_score(x, y, labels=list(GRADES), weights="quadratic"))
    confusion = (confusion_matrix(x, y, labels=list(GRADES)) if len(pairs)
                 else np.zeros((len(GRADES), len(GRADES)), dtype=np.int64))
    return Agreement(first, second, len(pairs), alpha, kappa, tuple(tuple(int(v) for v in row) for row in confusion))


def replaced(base: dict[str, dict[str, int]], grades: dict[str, dict[str, int]],
             pairs: list[tuple[str, str, int, int]], side: int) -> dict[str, dict[str, int]]:
    """``base`` with the common ``pairs`` graded as one rater did (``side`` 2: the first, 3: the
    second)."""
    out = {q: dict(d) for q, d in base.items()}
    for pair in pairs:
        out.setdefault(pair[0], {})[pair[1]] = pair[side]
    return out


def with_impact(found: Agreement, values_of, base: dict[str, dict[str, int]], a: dict, b: dict,
                metric: str) -> Agreement:
    """``found`` with its per-query impact: ``values_of(qrels)`` (query → ``metric`` of a fixed
    ranking under ``qrels``) on ``base`` graded by the first rater and by the second, for the
    queries where they disagree on a pair; the change, second − first (undefined values left out)."""
    pairs = [p for p in common_pairs(a, b) if p[2] != p[3]]
    if not pairs:
        return Agreement(**{**found.__dict__, "impact": {}, "metric": metric})
    before, after = values_of(replaced(base, a, pairs, 2)), values_of(replaced(base, b, pairs, 3))
    impact = {}
    for query in sorted({p[0] for p in pairs}):
        x, y = before.get(query, math.nan), after.get(query, math.nan)
        if not (math.isnan(x) and math.isnan(y)):
            impact[query] = round((0.0 if math.isnan(y) else y) - (0.0 if math.isnan(x) else x), 6)
    return Agreement(**{**found.__dict__, "impact": impact, "metric": metric})
