"""Weaviate's hybrid search fusion, ported line by line as a test oracle for
``rwb export --to weaviate`` (used by tests only; the product never imports it).

Go ``float32`` arithmetic is kept as float32. Sources (weaviate/weaviate, the snapshot read for
issue 29):

- ``leg_depth``: ``usecases/traverser/explorer_hybrid.go`` ``Hybrid``: both legs' ``Pagination
  .Limit = max(QueryHybridMaximumResults, subSearchLimit)`` (the query's limit);
  ``QUERY_HYBRID_MAXIMUM_RESULTS`` read in ``usecases/config/environment.go``, default
  ``DefaultQueryHybridMaximumResults = 100``;
- ``legs``: ``usecases/traverser/hybrid/searcher.go`` ``Search``: the keyword leg (weight
  ``1 − alpha``) when ``alpha < 1``, then the vector leg (weight ``alpha``) when ``alpha > 0``;
  the vector leg's ``SecondarySortValue`` is ``1 − distance``, the keyword leg's its BM25 score;
- ``ranked``: ``usecases/traverser/hybrid/hybrid_fusion.go`` ``FusionRanked``:
  ``float32(weight / float64(i + 60))`` per leg position ``i`` (0-based), summed in float32;
- ``relative_score``: ``hybrid_fusion.go`` ``FusionRelativeScore``: per leg ``weight ·
  (v − min) / (max − min)`` in float32, the full weight when min == max, summed;
- ``ordered``: both functions' ``sort.Slice``: score descending, scores whose squared
  difference is below 1e-14 tie and are ordered by ``SecondarySortValue`` descending, then id.
"""

from __future__ import annotations

from functools import cmp_to_key

import numpy as np

F = np.float32
DEFAULT_QUERY_HYBRID_MAXIMUM_RESULTS = 100


def leg_depth(limit: int, query_hybrid_maximum_results: int = DEFAULT_QUERY_HYBRID_MAXIMUM_RESULTS) -> int:
    return max(query_hybrid_maximum_results, limit)


def legs(alpha: float, keyword: list, vector: list) -> tuple[list[float], list[list]]:
    """``(weights, result sets)`` in ``searcher.go``'s order."""
    weights, sets = [], []
    if alpha < 1:
        weights.append(1 - alpha)
        sets.append(keyword)
    if alpha > 0:
        weights.append(alpha)
        sets.append(vector)
    return weights, sets


def _ordered(results: dict[str, list]) -> list[tuple[str, float]]:
    """``[id, score, secondary]`` entries sorted as ``FusionRanked`` / ``FusionRelativeScore``."""
    def before(a, b) -> int:
        diff = float(F(b[1] - a[1]))
        if diff * diff < 1e-14:
            diff2 = float(F(b[2] - a[2]))
            if diff2 * diff2 < 1e-14:
                return -1 if a[0] < b[0] else (1 if a[0] > b[0] else 0)
            return -1 if a[2] > b[2] else 1
        return -1 if float(a[1]) > float(b[1]) else 1
    entries = [[doc, *value] for doc, value in results.items()]
    return [(doc, float(score)) for doc, score, _ in sorted(entries, key=cmp_to_key(before))]


def ranked(weights: list[float], sets: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """``FusionRanked``; each set's ``(id, SecondarySortValue)`` best first."""
    combined: dict[str, list] = {}
    for weight, results in zip(weights, sets):
        for i, (doc, secondary) in enumerate(results):
            score = F(weight / float(i + 60))
            if doc in combined:
                score = F(score + combined[doc][0])
            combined[doc] = [score, F(secondary)]  # the later leg's result object is kept
    return _ordered(combined)


def relative_score(weights: list[float], sets: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """``FusionRelativeScore`` (descending)."""
    if not sets or all(not s for s in sets):
        return []
    combined: dict[str, list] = {}
    for weight, results in zip(weights, sets):
        values = [F(v) for _, v in results]
        if not values:
            continue
        hi, lo = max(values), min(values)
        w = F(weight)
        for (doc, _), v in zip(results, values):
            score = w
            if hi != lo:
                score = F(score * F(F(v - lo) / F(hi - lo)))
            if doc in combined:
                score = F(score + combined[doc][0])
            combined[doc] = [score, v]
    return _ordered(combined)


def hybrid(export: dict, keyword: list, vector: list) -> list[tuple[str, float]]:
    """The exported hybrid query (``alpha``, ``fusionType``, ``limit``) on the legs ``keyword``
    (``(id, BM25)``) and ``vector`` (``(id, 1 − distance)``), each already cut at
    ``leg_depth``; the first ``limit`` results."""
    args = export["hybrid"]
    weights, sets = legs(args["alpha"], keyword, vector)
    fuse = ranked if args["fusionType"] == "rankedFusion" else relative_score
    return fuse(weights, sets)[:export["limit"]]
