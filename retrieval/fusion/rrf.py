"""Weighted reciprocal rank fusion.

``score(d) = Σ_i t_i(rank_i(d))`` over the paths that returned ``d`` (rank 0-based), with the
path term ``t_i`` chosen by ``weighting``:

- ``multiply`` (default): ``t_i = w_i / (rrf_k + rank + 1)``, the weight multiplies the term
  (ranx ``fusion/rrf.py``' 1-based ``1/(k + rank)``, OpenSearch's score-ranker weights, Weaviate's
  ``rankedFusion``);
- ``qdrant``: ``t_i = 1 / ((rank + 1) / w_i + rrf_k)``, the weight divides the rank, as
  Qdrant's weighted RRF with ``k = rrf_k + 1`` (qdrant-client ``hybrid/fusion.py``
  ``reciprocal_rank_fusion``: ``1 / ((pos + 1) / weight + k − 1)``, a weight ≤ 0 gives 0; server
  ``lib/segment/src/common/reciprocal_rank_fusion.rs``). With both weights 1 the two agree.

``rrf_k`` = 60 and unit weights by default.
Source: seed 000 ``_rrf_merge``; Cormack, Clarke & Büttcher, SIGIR 2009; ranx ``fusion/rrf.py``
(whose 1-based ranks give the same ``1/(k + rank)``); Qdrant as above.

Each path's term depends only on its rank, so the score is read from a table of ``depth``
values (the term above, made in the same compiled call: ``_term_table``, ``depth`` divisions)
in one branch-free pass over the visible rows (``visible_index``; the rest stay −inf): no
division per row, no temporary arrays, nothing kept between calls. The per-path components a page shows
are the plain NumPy formula, computed only when a page reads them; the compiled score performs
the same floating-point operations, so it equals their sum bit for bit
(``tests/retrieval/fusion/test_fusion_rrf.py``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, LazyComponents, Scored, in_path, unseen, visible_index
from retrieval.params import Params, choice, number

WEIGHTINGS = ("multiply", "qdrant")


@dataclass(frozen=True)
class RRFParams(Params):
    rrf_k: float = number(60.0, "rrf_k", "rank constant: larger flattens the rank curve (seed 000: 60)",
                          lo=1.0, hi=200.0, step=1.0, min=0.0, max=1e6, min_exclusive=True,
                          curve=True)
    w_dense: float = number(1.0, "vector weight", "weight of the dense path's reciprocal rank",
                            lo=0.0, hi=2.0, step=0.05, min=0.0, max=100.0, group="weights")
    w_sparse: float = number(1.0, "BM25 weight", "weight of the keyword path's reciprocal rank",
                             lo=0.0, hi=2.0, step=0.05, min=0.0, max=100.0, group="weights")
    weighting: str = choice("multiply", WEIGHTINGS, "weighting",
                            "multiply: w / (rrf_k + rank + 1) · qdrant: 1 / ((rank + 1) / w + rrf_k), "
                            "Qdrant's weighted RRF (k = rrf_k + 1)")

    def warnings(self) -> tuple[tuple[str, str], ...]:
        """Both weights 0: every term is 0, so every score ties and the ranking is the tie order."""
        if self.w_dense == 0 and self.w_sparse == 0:
            return (("weights", "Both weights are 0: every score is 0, so the ranking is only the "
                                "tie order (document id)."),)
        return ()


def path_term(weight: float, rrf_k: float, rank: np.ndarray, weighting: str = "multiply") -> np.ndarray:
    """One path's term for 0-based ``rank`` (an array): ``weight / (rrf_k + rank + 1)``
    (``multiply``) or ``1 / ((rank + 1) / weight + rrf_k)`` (``qdrant``; 0 for a weight ≤ 0)."""
    rank = np.asarray(rank, dtype=np.float64)
    if weighting == "multiply":
        return weight / (rrf_k + rank + 1.0)
    if weighting == "qdrant":
        if not weight > 0:
            return np.zeros_like(rank)
        return 1.0 / ((rank + 1.0) / weight + rrf_k)
    raise ValueError(f"weighting must be one of {list(WEIGHTINGS)}, got {weighting!r}")


@njit(cache=True, nogil=True)
def _term_table(weight, rrf_k, depth, size, qdrant):
    """``table[rank + 1] = path_term(weight, rrf_k, rank, weighting)`` for ranks below ``depth``, 0
    for the rest: index 0 is the row the path did not return; ``size`` ranks are covered (the
    scoring loop clamps a larger one to the last, 0, entry). The same floating-point operations
    as ``path_term``, in the same order, so the same values bit for bit."""
    table = np.zeros(max(size, depth) + 2)
    for r in range(depth):
        rank = float(r)
        if qdrant:
            table[r + 1] = 1.0 / ((rank + 1.0) / weight + rrf_k) if weight > 0 else 0.0
        else:
            table[r + 1] = weight / (rrf_k + rank + 1.0)
    return table


@njit(cache=True, nogil=True)
def _rrf_rows(dense_rank, sparse_rank, rows, w_dense, w_sparse, rrf_k, depth, size, qdrant, score):
    """For each visible row: the sum of both paths' terms. Indexes are clamped into the tables
    rather than tested, so the loop has no data-dependent branch."""
    dense_table = _term_table(w_dense, rrf_k, depth, size, qdrant)
    sparse_table = _term_table(w_sparse, rrf_k, depth, size, qdrant)
    last_dense, last_sparse = len(dense_table) - 1, len(sparse_table) - 1
    for r in rows:
        score[r] = (dense_table[min(max(dense_rank[r] + 1, 0), last_dense)]
                    + sparse_table[min(max(sparse_rank[r] + 1, 0), last_sparse)])


def components(c: Candidates, depth: int, params: RRFParams) -> dict[str, np.ndarray]:
    """Each path's term (``path_term``) where the path returned the row, else 0."""
    return {"dense": np.where(in_path(c.dense_rank, depth), path_term(params.w_dense, params.rrf_k, c.dense_rank, params.weighting), 0.0),
            "sparse": np.where(in_path(c.bm25_rank, depth), path_term(params.w_sparse, params.rrf_k, c.bm25_rank, params.weighting), 0.0)}


def rrf(c: Candidates, visible: np.ndarray, depth: int, params: RRFParams = RRFParams()) -> Scored:
    """``Σ_i t_i(rank_i)`` (the ``weighting``'s term), rank 0-indexed, summed over the paths that returned the row."""
    score = unseen(c.n_rows)
    if params.weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {list(WEIGHTINGS)}, got {params.weighting!r}")
    _rrf_rows(c.dense_rank, c.bm25_rank, visible_index(c, visible), float(params.w_dense), float(params.w_sparse),
              float(params.rrf_k), int(depth), int(c.pool_depth), params.weighting == "qdrant", score)
    return Scored(score, LazyComponents(lambda: components(c, depth, params)))


FUSION = Fusion("rrf", RRFParams, rrf, "Σ w_i / (rrf_k + rank_i + 1); or Qdrant's 1 / ((rank_i + 1) / w_i + rrf_k)",
                "seed 000; Cormack et al. 2009; Qdrant weighted RRF",
                variants=(RRFParams(rrf_k=10.0, w_dense=2.0, w_sparse=0.5),
                          RRFParams(rrf_k=10.0, w_dense=2.0, w_sparse=0.5, weighting="qdrant")))
