"""BM25-only baseline: the keyword path's BM25 score.

``score = BM25(q, d)`` (Tantivy, k1 = 1.2, b = 0.75) for the keyword path's top ``depth``.
Source: the single-path baseline every seed compares against."""

from __future__ import annotations

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, NoParams, Scored, finish, in_path


def bm25(c: Candidates, visible: np.ndarray, depth: int, params: NoParams = NoParams()) -> Scored:
    """Tantivy's BM25 score of the keyword path's top ``depth``."""
    seen = visible & in_path(c.bm25_rank, depth)
    score = c.bm25_score.astype(np.float64)
    return finish(score, seen, {"sparse": score})


FUSION = Fusion("bm25", NoParams, bm25, "BM25 score, keyword path only", "baseline", paths=("sparse",))
