"""Relative score fusion, as Weaviate's hybrid search does it.

``score(d) = alpha · minmax(cos(q, d)) + (1 − alpha) · minmax(BM25(q, d))``, each path
min-max normalised per query over the documents it returned; a path that missed the
document adds 0; when every hit of a path ties (a single hit included) each gets the full
weight (normalised 1.0, as Weaviate). ``alpha`` 1 is pure vector, 0 pure keyword; Weaviate's
default is 0.75.
Source: Weaviate ``usecases/traverser/hybrid/hybrid_fusion.go`` ``FusionRelativeScore``
(weights ``alpha`` and ``1 − alpha`` from ``hybrid/searcher.go``; ``DefaultAlpha = 0.75`` in
``adapters/handlers/graphql/local/common_filters/hybrid.go``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, Scored, finish, normalise
from retrieval.params import Params, number


@dataclass(frozen=True)
class RelativeScoreParams(Params):
    alpha: float = number(0.75, "alpha", "vector share: alpha · vector + (1 − alpha) · keyword (Weaviate: 0.75)",
                          lo=0.0, hi=1.0, step=0.05, min=0.0, max=1.0)


def relative_score(c: Candidates, visible: np.ndarray, depth: int,
                   params: RelativeScoreParams = RelativeScoreParams()) -> Scored:
    """``alpha · minmax(cos) + (1 − alpha) · minmax(BM25)``, per query."""
    dense = params.alpha * normalise(c, visible, depth, "dense", "minmax")[0]
    sparse = (1.0 - params.alpha) * normalise(c, visible, depth, "sparse", "minmax")[0]
    return finish(dense + sparse, visible, {"dense": dense, "sparse": sparse})


FUSION = Fusion("relative_score", RelativeScoreParams, relative_score,
                "alpha · minmax(cos) + (1 − alpha) · minmax(BM25)", "Weaviate relativeScoreFusion",
                variants=(RelativeScoreParams(alpha=0.3),))
