"""OpenSearch neural-search's hybrid score processing, ported line by line as a test oracle
for ``rwb export --to opensearch`` (used by tests only; the product never imports it).

Java ``float`` arithmetic is kept as float32 where the Java code holds a ``float``. Each
function names the class and method it ports (neural-search, ``src/main/java/org/opensearch/
neuralsearch/processor/``, the snapshot read for issue 29):

- ``min_max``: ``normalization/MinMaxScoreNormalizationTechnique.java`` ``normalize`` →
  ``normalizeSingleScore`` / ``calculateNormalizedScore`` without lower/upper bounds: equal min,
  max and score give ``SINGLE_RESULT_SCORE`` 1.0, else ``(score − min) / (max − min)``, a result of
  exactly 0 becomes ``MIN_SCORE`` 0.001;
- ``l2``: ``normalization/L2ScoreNormalizationTechnique.java`` ``getL2Norm`` (a float sum of
  squares, then ``(float) Math.sqrt``) and ``normalizeSingleScore`` (``score / l2Norm``, 0 when the
  norm is 0), one shard;
- ``rrf_scores``: ``normalization/RRFNormalizationTechnique.java`` ``calculateNormalizedScore``:
  ``1 / (rank_constant + position + 1)`` rounded to 10 decimals (``BigDecimal`` HALF_UP), as float;
- ``arithmetic_mean``, ``geometric_mean``, ``harmonic_mean``, ``rrf_sum``:
  ``combination/{Arithmetic,Geometric,Harmonic}MeanScoreCombinationTechnique.java`` and
  ``RRFScoreCombinationTechnique.java`` ``combine`` (weights from ``ScoreCombinationUtil
  .getWeightForSubQuery``: 1.0 when none are given);
- ``hybrid``: ``combination/ScoreCombiner.java`` ``getNormalizedScoresPerDocument`` (a float[]
  per document, 0.0 for a sub-query that did not return it) and the combination per document.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

F = np.float32
MIN_SCORE = F(0.001)
SINGLE_RESULT_SCORE = F(1.0)


def min_max(scores: list[float]) -> list[float]:
    """One sub-query's scores normalised (``MinMaxScoreNormalizationTechnique``, no bounds)."""
    if not scores:
        return []
    values = [F(s) for s in scores]
    lo, hi = min(values), max(values)
    out = []
    for s in values:
        if hi == lo and hi == s:  # isSingleScore
            out.append(SINGLE_RESULT_SCORE)
            continue
        if hi == lo:  # calculateNormalizedScore: effective max == min
            out.append(SINGLE_RESULT_SCORE)
            continue
        n = F(F(s - lo) / F(hi - lo))
        out.append(MIN_SCORE if n == F(0.0) else n)
    return out


def l2(scores: list[float]) -> list[float]:
    """One sub-query's scores normalised (``L2ScoreNormalizationTechnique``, one shard)."""
    total = F(0.0)
    for s in scores:
        total = F(total + F(F(s) * F(s)))
    norm = F(math.sqrt(float(total)))
    return [F(0.0) if norm == 0 else F(F(s) / norm) for s in scores]


NORMALIZE = {"min_max": min_max, "l2": l2}


def rrf_scores(n: int, rank_constant: int) -> list[float]:
    """The scores of positions 0…n−1 of one sub-query (``RRFNormalizationTechnique``)."""
    return [F(float((Decimal(1) / Decimal(rank_constant + p + 1)).quantize(Decimal("1e-10"), ROUND_HALF_UP)))
            for p in range(n)]


def _weight(weights: list[float], i: int) -> np.float32:
    return F(weights[i]) if i < len(weights) else F(1.0)


def arithmetic_mean(scores: list[float], weights: list[float]) -> float:
    combined, total = F(0.0), F(0.0)
    for i, s in enumerate(scores):
        if s >= 0.0:
            w = _weight(weights, i)
            combined = F(combined + F(F(s) * w))
            total = F(total + w)
    return F(0.0) if total == 0.0 else F(combined / total)


def geometric_mean(scores: list[float], weights: list[float]) -> float:
    ln_sum, total = F(0.0), F(0.0)
    for i, s in enumerate(scores):
        if s <= 0:  # "scores 0.0 need to be skipped, ln() of 0 is not defined"
            continue
        w = _weight(weights, i)
        total = F(total + w)
        ln_sum = F(float(ln_sum) + float(w) * math.log(float(s)))
    return F(0.0) if total == 0 else F(math.exp(float(F(ln_sum / total))))


def harmonic_mean(scores: list[float], weights: list[float]) -> float:
    total, harmonics = F(0.0), F(0.0)
    for i, s in enumerate(scores):
        if s <= 0:
            continue
        w = _weight(weights, i)
        total = F(total + w)
        harmonics = F(harmonics + F(w / F(s)))
    return F(total / harmonics) if harmonics > 0 else F(0.0)


def rrf_sum(scores: list[float], weights: list[float]) -> float:
    combined, total = F(0.0), F(0.0)
    for i, s in enumerate(scores):
        if s >= 0.0:
            w = _weight(weights, i)
            combined = F(combined + F(F(s) * w))
            total = F(total + w)
    return F(0.0) if total == 0.0 else combined


COMBINE = {"arithmetic_mean": arithmetic_mean, "geometric_mean": geometric_mean,
           "harmonic_mean": harmonic_mean, "rrf": rrf_sum}


def hybrid(sub_queries: list[list[tuple[str, float]]], processor: dict) -> list[tuple[str, float]]:
    """The hybrid query's hits fused by one phase-results ``processor`` as ``rwb export`` writes
    it (``normalization-processor`` or ``score-ranker-processor``), best first; ties in id order.
    ``sub_queries``: each sub-query's ``(doc id, raw score)`` list, best first."""
    (kind, body), = processor.items()
    combination = body["combination"]
    weights = combination.get("parameters", {}).get("weights", [])
    if kind == "score-ranker-processor":
        normalised = [list(zip([d for d, _ in hits], rrf_scores(len(hits), combination["rank_constant"])))
                      for hits in sub_queries]
        technique = "rrf"
    else:
        normalize = NORMALIZE.get(body["normalization"]["technique"])
        if normalize is None:
            raise ValueError(f"not ported: {body['normalization']}")
        normalised = [list(zip([d for d, _ in hits], normalize([s for _, s in hits]))) for hits in sub_queries]
        technique = combination["technique"]
    per_doc: dict[str, list] = {}
    for j, hits in enumerate(normalised):
        for doc, score in hits:
            per_doc.setdefault(doc, [F(0.0)] * len(sub_queries))[j] = score
    combined = {doc: float(COMBINE[technique](scores, weights)) for doc, scores in per_doc.items()}
    return sorted(combined.items(), key=lambda item: (-item[1], item[0]))
