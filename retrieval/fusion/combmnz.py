"""CombMNZ: the sum of the per-path normalised scores times the number of paths that
returned the document (ranx ``mnz``).

``score(d) = (norm(cos(q, d)) + norm(BM25(q, d))) × |{paths that returned d}|``, each path
normalised per query over the documents it returned (edge cases in
``retrieval.fusion._base.normalise``); a path that missed the document adds 0. Only the
norms whose values are never below 0 are offered (min-max, OpenSearch's l2, rank,
rank_linear): with a negative sum the overlap multiplier would push a document further down,
so being found by both paths would hurt. z-scores and DBSF are refused with that reason: DBSF
is not clipped (a hit more than 3σ under its list's mean scores below 0, as in Qdrant), and
neither Qdrant (fusion ``rrf`` / ``dbsf``) nor OpenSearch (arithmetic / geometric / harmonic
mean, ``rrf``) defines a CombMNZ whose choice could be followed.
Source: Fox & Shaw, "Combination of multiple searches", TREC-2 1994; ranx
``fusion/comb_mnz.py``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import NORMS, Fusion, Scored, finish, normalise, norm_help
from retrieval.params import Params, choice

SIGNED_NORMS = ("zscore", "dbsf")  # can go below 0
MNZ_NORMS = tuple(n for n in NORMS if n not in SIGNED_NORMS)


@dataclass(frozen=True)
class CombMnzParams(Params):
    norm: str = choice("minmax", MNZ_NORMS, "normalisation", norm_help(MNZ_NORMS))

    def __post_init__(self):
        if self.norm in SIGNED_NORMS:  # the reason, before the choice's plain "must be one of"
            raise ValueError(f"combmnz refuses norm = {self.norm!r}: its values go below 0, where × paths "
                             "would rank a document both paths found lower (neither Qdrant nor OpenSearch "
                             "defines CombMNZ); use combsum for it, or combmnz with "
                             + ", ".join(MNZ_NORMS))
        super().__post_init__()


def combmnz(c: Candidates, visible: np.ndarray, depth: int, params: CombMnzParams = CombMnzParams()) -> Scored:
    """``(norm(cos) + norm(BM25)) × paths``; the components carry the multiplier, so they
    still add up to the score, and ``paths`` is reported as a multiplier."""
    dense, dense_hit = normalise(c, visible, depth, "dense", params.norm)
    sparse, sparse_hit = normalise(c, visible, depth, "sparse", params.norm)
    paths = dense_hit.astype(np.float64) + sparse_hit
    dense, sparse = dense * paths, sparse * paths
    return finish(dense + sparse, visible, {"dense": dense, "sparse": sparse}, {"paths": paths})


FUSION = Fusion("combmnz", CombMnzParams, combmnz, "(norm(cos) + norm(BM25)) × paths found",
                "Fox & Shaw 1994; ranx mnz",
                variants=tuple(CombMnzParams(norm=n) for n in MNZ_NORMS if n != "minmax"))
