"""Weighted arithmetic, geometric or harmonic mean of the per-path normalised scores
(OpenSearch's normalization processor).

With ``s_i`` the normalised score of path ``i`` (dense cosine, BM25) of a document the path
returned, and ``W`` the sum of the weights counted:

- arithmetic ``(w_dense·s_dense + w_sparse·s_sparse) / W``; a missed path counts 0 and its
  weight is counted (as OpenSearch);
- geometric ``exp((w_dense·ln s_dense + w_sparse·ln s_sparse) / W)``;
- harmonic ``W / (w_dense/s_dense + w_sparse/s_sparse)``.

``semantics`` decides the two places where a choice is made:

- ``rwb`` (default): every returned document's ``s_i`` is floored at 0.001 (OpenSearch's
  ``MIN_SCORE``), and in the geometric and harmonic means a missed path counts as that floor
  (its weight counted), so being found by a second path never ranks a document lower than
  being found by one (the conformance property every fusion here keeps);
- ``opensearch``: neural-search's processor exactly: a normalised score ≤ 0 becomes 0.001 and
  every other one is kept (``MinMaxScoreNormalizationTechnique.calculateNormalizedScore``
  replaces only an exact 0; ``ZScoreNormalizationTechnique`` every z ≤ 0;
  ``L2ScoreNormalizationTechnique`` none), and the geometric
  and harmonic means leave a missed path out, weight included (``combine`` skips a score ≤ 0;
  ``ScoreCombiner.getNormalizedScoresPerDocument`` gives a missed sub-query 0). A document
  found by one path can then rank above one found by both. ``rwb export --to opensearch``
  writes a mean only under these semantics.

Normalisation and its edge cases: ``retrieval.fusion._base.normalise`` (OpenSearch's z-score
uses the sample σ and returns the raw max score for a single hit; here σ is the population's
and a single hit has z = 0: the export writes ``min_max`` and ``l2`` only).
Source: OpenSearch neural-search, ``processor/combination/`` ``ArithmeticMean``, ``GeometricMean`` and
``HarmonicMeanScoreCombinationTechnique.java`` (``combine``), ``ScoreCombiner.java``;
``processor/normalization/`` ``MinMax`` and ``ZScoreNormalizationTechnique.java``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import NORMS, Fusion, Scored, finish, normalise, norm_help
from retrieval.params import Params, choice, number

MEANS = ("arithmetic", "geometric", "harmonic")
SEMANTICS = ("rwb", "opensearch")
MIN_SCORE = 0.001


@dataclass(frozen=True)
class MeanParams(Params):
    w_dense: float = number(0.5, "vector weight", "weight of the normalised cosine in the mean",
                            lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")
    w_sparse: float = number(0.5, "BM25 weight", "weight of the normalised BM25 score in the mean",
                             lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")
    norm: str = choice("minmax", NORMS, "normalisation", norm_help())
    mean: str = choice("arithmetic", MEANS, "mean", "weighted arithmetic, geometric or harmonic mean (OpenSearch)")
    semantics: str = choice("rwb", SEMANTICS, "semantics",
                            "rwb: every hit floored at 0.001, a miss counts as 0.001 in the geometric/harmonic mean · "
                            "opensearch: only a score ≤ 0 becomes 0.001, a miss is left out of the "
                            "geometric/harmonic mean (neural-search, what rwb export writes)")

    def check(self) -> None:
        if not self.w_dense + self.w_sparse > 0:
            raise ValueError(f"w_dense + w_sparse must be > 0, got {self.w_dense:g} + {self.w_sparse:g}")


def mean(c: Candidates, visible: np.ndarray, depth: int, params: MeanParams = MeanParams()) -> Scored:
    """The weighted mean above, per query. Components: the arithmetic mean's two terms; for
    the geometric and harmonic means the mean split in proportion to ``w_i · s_i``."""
    opensearch = params.semantics == "opensearch"
    missed = 0.0 if params.mean == "arithmetic" or opensearch else MIN_SCORE
    s, hits = {}, {}
    for path in ("dense", "sparse"):
        value, hit = normalise(c, visible, depth, path, params.norm)
        if opensearch:  # min_max and z-score floor a score ≤ 0 at 0.001; OpenSearch's l2 keeps it
            floored = value if params.norm == "l2" else np.where(value > 0, value, MIN_SCORE)
        else:
            floored = np.maximum(value, MIN_SCORE)
        s[path], hits[path] = np.where(hit, floored, missed), hit
    w = {"dense": params.w_dense, "sparse": params.w_sparse}
    terms = {p: w[p] * s[p] for p in s}
    linear = terms["dense"] + terms["sparse"]
    if params.mean == "arithmetic":
        total_w = params.w_dense + params.w_sparse
        return finish(linear / total_w, visible, {p: t / total_w for p, t in terms.items()})
    # the weights counted: both paths', or (opensearch) those of the paths that returned the row
    counted = {p: np.where((hits[p] & (s[p] > 0)) | (not opensearch), w[p], 0.0) for p in s}
    total_w = counted["dense"] + counted["sparse"]
    found = total_w > 0
    safe_w = np.where(found, total_w, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if params.mean == "geometric":
            logs = sum(np.where(counted[p] > 0, counted[p] * np.log(np.where(s[p] > 0, s[p], 1.0)), 0.0) for p in s)
            score = np.where(found, np.exp(logs / safe_w), 0.0)
        else:
            inverse = sum(np.where(counted[p] > 0, counted[p] / np.where(s[p] > 0, s[p], 1.0), 0.0) for p in s)
            score = np.where(inverse > 0, total_w / np.where(inverse > 0, inverse, 1.0), 0.0)
    share = score / np.where(linear > 0, linear, 1.0)
    return finish(score, visible, {p: t * share for p, t in terms.items()})


FUSION = Fusion("mean", MeanParams, mean, "weighted arithmetic / geometric / harmonic mean of norm(cos), norm(BM25)",
                "OpenSearch normalization processor",
                variants=(MeanParams(mean="geometric"), MeanParams(mean="harmonic"),
                          MeanParams(w_dense=0.7, w_sparse=0.3, norm="zscore", mean="geometric"),
                          MeanParams(w_dense=0.3, w_sparse=0.7, norm="dbsf", mean="harmonic"),
                          MeanParams(norm="rank", mean="arithmetic"),
                          MeanParams(w_dense=0.3, w_sparse=0.7, semantics="opensearch")))
