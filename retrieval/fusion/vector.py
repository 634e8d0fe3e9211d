"""Vector-only baseline: the dense path's cosine similarity.

``score = cos(q, d)`` for the dense path's top ``depth`` (LanceDB, cosine distance).
Source: the single-path baseline every seed compares against."""

from __future__ import annotations

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, NoParams, Scored, finish, in_path


def vector(c: Candidates, visible: np.ndarray, depth: int, params: NoParams = NoParams()) -> Scored:
    """Cosine similarity of the dense path's top ``depth``."""
    seen = visible & in_path(c.dense_rank, depth)
    sim = c.dense_sim.astype(np.float64)
    return finish(sim, seen, {"dense": sim})


FUSION = Fusion("vector", NoParams, vector, "cosine similarity, dense path only", "baseline", paths=("dense",))
