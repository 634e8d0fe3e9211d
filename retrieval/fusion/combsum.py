"""CombSUM: the sum of the per-path normalised scores (ranx ``sum``).

``score(d) = norm(cos(q, d)) + norm(BM25(q, d))``, each path normalised per query over the
documents it returned (``norm``: min-max by default; edge cases in
``retrieval.fusion._base.normalise``); a path that missed the document adds its norm's floor
(0; z-score: the path's lowest z). With ``norm = "dbsf"`` this is Qdrant's
distribution-based score fusion (DBSF: mean ± 3σ per list, then the sum).
Source: Fox & Shaw, "Combination of multiple searches", TREC-2 1994; ranx
``fusion/comb_sum.py``; Qdrant ``lib/segment/src/common/score_fusion.rs`` (``ScoreFusion::dbsf``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import NORMS, Fusion, Scored, finish, normalise, norm_help
from retrieval.params import Params, choice


@dataclass(frozen=True)
class CombSumParams(Params):
    norm: str = choice("minmax", NORMS, "normalisation", norm_help())


def combsum(c: Candidates, visible: np.ndarray, depth: int, params: CombSumParams = CombSumParams()) -> Scored:
    """``norm(cos) + norm(BM25)``, per query."""
    dense = normalise(c, visible, depth, "dense", params.norm)[0]
    sparse = normalise(c, visible, depth, "sparse", params.norm)[0]
    return finish(dense + sparse, visible, {"dense": dense, "sparse": sparse})


FUSION = Fusion("combsum", CombSumParams, combsum, "norm(cos) + norm(BM25)", "Fox & Shaw 1994; ranx sum; Qdrant DBSF",
                variants=tuple(CombSumParams(norm=n) for n in NORMS if n != "minmax"))
