"""Weighted sum of per-path normalised scores (ranx ``wsum``).

``score(d) = w_dense · norm(cos(q, d)) + w_sparse · norm(BM25(q, d))``, each path normalised
per query over the documents it returned (``norm``: min-max by default, z-score, Qdrant's
distribution-based mean ± 3σ, OpenClaw's ``1/(1+rank)`` or ranx's ``1 − rank/n``; edge
cases in ``retrieval.fusion._base.normalise``). A path that missed the document adds its
norm's floor (0; z-score: the path's lowest z).
Source: ranx ``fusion/wsum.py`` (Bassani 2022); Fox & Shaw, TREC-2 1994 (linear combination
of normalised scores); the same form as Weaviate's and Qdrant's weighted score fusions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import NORMS, Fusion, LazyComponents, Scored, linear_score, normalise, norm_help
from retrieval.params import Params, choice, number


@dataclass(frozen=True)
class WsumParams(Params):
    w_dense: float = number(0.5, "vector weight", "weight of the normalised cosine",
                            lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")
    w_sparse: float = number(0.5, "BM25 weight", "weight of the normalised BM25 score",
                             lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")
    norm: str = choice("minmax", NORMS, "normalisation", norm_help())


def wsum(c: Candidates, visible: np.ndarray, depth: int, params: WsumParams = WsumParams()) -> Scored:
    """``w_dense · norm(cos) + w_sparse · norm(BM25)``, per query."""
    dense = normalise(c, visible, depth, "dense", params.norm)[0]
    sparse = normalise(c, visible, depth, "sparse", params.norm)[0]
    score = linear_score(c, visible, dense, params.w_dense, sparse, params.w_sparse)
    return Scored(score, LazyComponents(lambda: {"dense": params.w_dense * dense, "sparse": params.w_sparse * sparse}))


FUSION = Fusion("wsum", WsumParams, wsum, "w_dense · norm(cos) + w_sparse · norm(BM25)",
                "ranx wsum; Fox & Shaw 1994",
                variants=tuple(WsumParams(w_dense=0.7, w_sparse=0.3, norm=n) for n in NORMS if n != "minmax"))
