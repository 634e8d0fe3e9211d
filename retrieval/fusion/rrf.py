"""Weighted reciprocal rank fusion.

``score(d) = Σ_i w_i / (rrf_k + rank_i(d) + 1)`` over the paths that returned ``d``
(rank 0-based), ``rrf_k`` = 60 and unit weights by default.
Source: seed 000 ``_rrf_merge``; Cormack, Clarke & Büttcher, SIGIR 2009; ranx ``fusion/rrf.py``
(whose 1-based ranks give the same ``1/(k + rank)``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidates import Candidates
from retrieval.fusion._base import Fusion, Scored, finish, in_path
from retrieval.params import Params, number


@dataclass(frozen=True)
class RRFParams(Params):
    rrf_k: float = number(60.0, "rrf_k", "rank constant: larger flattens the rank curve (seed 000: 60)",
                          lo=1.0, hi=200.0, step=1.0, min=0.0, max=1e6, min_exclusive=True)
    w_dense: float = number(1.0, "vector weight", "weight of the dense path's reciprocal rank",
                            lo=0.0, hi=2.0, step=0.05, min=0.0, max=100.0)
    w_sparse: float = number(1.0, "BM25 weight", "weight of the keyword path's reciprocal rank",
                             lo=0.0, hi=2.0, step=0.05, min=0.0, max=100.0)


def rrf(c: Candidates, visible: np.ndarray, depth: int, params: RRFParams = RRFParams()) -> Scored:
    """``Σ_i w_i / (rrf_k + rank_i + 1)``, rank 0-indexed, summed over the paths that returned the row."""
    dense = np.where(in_path(c.dense_rank, depth), params.w_dense / (params.rrf_k + c.dense_rank + 1.0), 0.0)
    sparse = np.where(in_path(c.bm25_rank, depth), params.w_sparse / (params.rrf_k + c.bm25_rank + 1.0), 0.0)
    return finish(dense + sparse, visible, {"dense": dense, "sparse": sparse})


FUSION = Fusion("rrf", RRFParams, rrf, "Σ w_i / (rrf_k + rank_i + 1)", "seed 000; Cormack et al. 2009",
                variants=(RRFParams(rrf_k=10.0, w_dense=2.0, w_sparse=0.5),))
