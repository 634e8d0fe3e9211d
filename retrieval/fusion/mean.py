"""Weighted arithmetic, geometric or harmonic mean of the per-path normalised scores
(OpenSearch's normalization processor).

With ``s_i`` the normalised score of path ``i`` (dense cosine, BM25), floored at 0.001 for a
document the path returned, and ``W = w_dense + w_sparse``:

- arithmetic ``(w_dense·s_dense + w_sparse·s_sparse) / W``; a missed path counts 0 (as OpenSearch);
- geometric ``exp((w_dense·ln s_dense + w_sparse·ln s_sparse) / W)``;
- harmonic ``W / (w_dense/s_dense + w_sparse/s_sparse)``.

For the geometric and harmonic means a missed path counts as the floor 0.001. OpenSearch
skips it instead (scores ≤ 0 are left out of the mean), which ranks a document found by one
path above an otherwise equal one found by both whenever the second score is lower; counting
a miss as the lowest possible hit keeps "being found never hurts". The floor is OpenSearch's
``MIN_SCORE`` (min-max gives the lowest hit 0.001, z-score every z ≤ 0). Normalisation and
its edge cases: ``retrieval.fusion._base.normalise`` (OpenSearch's z-score uses the sample
σ, and returns the raw max score for a single hit; here σ is the population's and a single
hit has z = 0, floored to 0.001).
Source: OpenSearch neural-search, ``processor/combination/`` ``ArithmeticMean``, ``GeometricMean`` and
``HarmonicMeanScoreCombinationTechnique.java``; ``processor/normalization/`` ``MinMax`` and
``ZScoreNormalizationTechnique.java``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidates import Candidates
from retrieval.fusion._base import NORMS, Fusion, Scored, finish, normalise, norm_help
from retrieval.params import Params, choice, number

MEANS = ("arithmetic", "geometric", "harmonic")
MIN_SCORE = 0.001


@dataclass(frozen=True)
class MeanParams(Params):
    w_dense: float = number(0.5, "vector weight", "weight of the normalised cosine in the mean",
                            lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0)
    w_sparse: float = number(0.5, "BM25 weight", "weight of the normalised BM25 score in the mean",
                             lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0)
    norm: str = choice("minmax", NORMS, "normalisation", norm_help())
    mean: str = choice("arithmetic", MEANS, "mean", "weighted arithmetic, geometric or harmonic mean (OpenSearch)")

    def check(self) -> None:
        if not self.w_dense + self.w_sparse > 0:
            raise ValueError(f"w_dense + w_sparse must be > 0, got {self.w_dense:g} + {self.w_sparse:g}")


def mean(c: Candidates, visible: np.ndarray, depth: int, params: MeanParams = MeanParams()) -> Scored:
    """The weighted mean above, per query. Components: the arithmetic mean's two terms; for
    the geometric and harmonic means the mean split in proportion to ``w_i · s_i``."""
    missed = 0.0 if params.mean == "arithmetic" else MIN_SCORE
    s = {}
    for path in ("dense", "sparse"):
        value, hit = normalise(c, visible, depth, path, params.norm)
        s[path] = np.where(hit, np.maximum(value, MIN_SCORE), missed)
    w = {"dense": params.w_dense, "sparse": params.w_sparse}
    total_w = params.w_dense + params.w_sparse
    terms = {p: w[p] * s[p] for p in s}
    linear = terms["dense"] + terms["sparse"]
    if params.mean == "arithmetic":
        return finish(linear / total_w, visible, {p: t / total_w for p, t in terms.items()})
    if params.mean == "geometric":
        score = np.exp((w["dense"] * np.log(s["dense"]) + w["sparse"] * np.log(s["sparse"])) / total_w)
    else:
        score = total_w / (w["dense"] / s["dense"] + w["sparse"] / s["sparse"])
    share = score / np.where(linear > 0, linear, 1.0)
    return finish(score, visible, {p: t * share for p, t in terms.items()})


FUSION = Fusion("mean", MeanParams, mean, "weighted arithmetic / geometric / harmonic mean of norm(cos), norm(BM25)",
                "OpenSearch normalization processor",
                variants=(MeanParams(mean="geometric"), MeanParams(mean="harmonic"),
                          MeanParams(w_dense=0.7, w_sparse=0.3, norm="zscore", mean="geometric"),
                          MeanParams(w_dense=0.3, w_sparse=0.7, norm="dbsf", mean="harmonic"),
                          MeanParams(norm="rank", mean="arithmetic")))
