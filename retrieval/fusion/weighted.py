"""Weighted union of cosine similarity and a normalised BM25 score.

``score(d) = vector_weight · cos(q, d) + text_weight · text(d)``; a path that missed ``d``
adds 0. ``text`` is ``1 / (1 + rank)`` (``rank``, OpenClaw ``bm25RankToScore``), per-query
min-max (``minmax``), OpenSearch's ``l2`` (s / √Σs² per query) or Φ of the per-query z-score
(``zscore``). When the vector path
returned nothing for a query (keyword-only), the text score carries both weights. The
``lingxi`` preset is this formula as seed 004 F2 states it (0.7 × semantic + 0.3 × keyword,
the keyword rank mapped by 1/(1+rank), sorted, top 0–3).

``keyword_first`` (off by default) departs from F2: a document the keyword path found scores
``vector_weight + text_weight`` more, which puts every keyword hit above every memory only the
vector path found (whose score is at most ``vector_weight``), a two-tier sort rather than the
seed's weighted one; the order within each tier is the weighted score's. Its reason: with an
embedder that cannot read the store's language (MiniLM on Chinese notes) the weighted sort
lets notes of meaningless cosine outrank the note holding the message's error code, which US-1
wants "在其候选中被优先考虑" (prioritised among the candidates).
Source: seed 002 OpenClaw ``mergeHybridResults`` (0.7 / 0.3); seed 004 Lingxi F2."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import Fusion, LazyComponents, Scored, in_path, linear_score, normalise
from retrieval.params import Params, choice, flag, number

TEXT_NORMS = ("rank", "minmax", "l2", "zscore")


@dataclass(frozen=True)
class WeightedParams(Params):
    vector_weight: float = number(0.7, "vector weight", "weight of the cosine similarity (OpenClaw: 0.7)",
                                  lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")
    text_weight: float = number(0.3, "text weight", "weight of the normalised BM25 score (OpenClaw: 0.3)",
                                lo=0.0, hi=1.0, step=0.05, min=0.0, max=100.0, group="weights")
    text_norm: str = choice("rank", TEXT_NORMS, "BM25 normalisation",
                            "rank: 1/(1+rank) as OpenClaw · minmax: per query · l2: s/√Σs² per query as OpenSearch · "
                            "zscore: Φ(z) per query")
    keyword_first: bool = flag(False, "keyword hits first",
                               "a memory the keyword path found ranks above every memory only the "
                               "vector path found (score + vector_weight + text_weight): a departure from seed "
                               "004 F2's weighted sort, for an embedder that cannot read the store's language")


def text_scores(c: Candidates, visible: np.ndarray, depth: int, norm: str) -> np.ndarray:
    """BM25 mapped to a comparable scale, 0 where the keyword path missed the document.

    ``rank``: ``1 / (1 + rank)`` (OpenClaw ``bm25RankToScore``); ``minmax``: (s − min)/(max − min)
    per query, 1.0 when all hits tie (a hit beats a miss); ``l2``: s / √Σs² per query (OpenSearch); ``zscore``: Φ((s − mean)/std),
    the standard normal CDF of the per-query z-score, so every hit lies in (0, 1) and
    still beats a miss (Φ(0) = 0.5 when std is 0)."""
    if norm in ("rank", "minmax", "l2"):  # the shared per-path normalisations, same formulas
        return normalise(c, visible, depth, "sparse", norm)[0]
    if norm != "zscore":
        raise ValueError(f"text_norm must be one of {list(TEXT_NORMS)}, got {norm!r}")
    hit = visible & in_path(c.bm25_rank, depth)
    raw = c.bm25_score.astype(np.float64)
    n = np.bincount(c.query_idx[hit], minlength=c.n_queries).astype(np.float64)
    # .astype: with no hit at all, bincount returns int64 zeros, which the divisions below refuse
    total = np.bincount(c.query_idx[hit], weights=raw[hit], minlength=c.n_queries).astype(np.float64)
    mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)
    sq = np.bincount(c.query_idx[hit], weights=(raw[hit] - mean[c.query_idx[hit]]) ** 2,
                     minlength=c.n_queries).astype(np.float64)
    std = np.sqrt(np.divide(sq, n, out=np.zeros_like(sq), where=n > 0))[c.query_idx]
    out = ndtr(np.where(std > 0, (raw - mean[c.query_idx]) / np.where(std > 0, std, 1.0), 0.0))
    return np.where(hit, out, 0.0)


def _paths(c: Candidates, visible: np.ndarray, depth: int, norm: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(cosine where the vector path returned the row else 0, text score, whether the vector
    path found nothing for the row's query)`` — everything but the weights."""
    in_dense = in_path(c.dense_rank, depth)
    vec = np.where(in_dense, c.dense_sim.astype(np.float64), 0.0)
    dense_found = np.bincount(c.query_idx[visible & in_dense], minlength=c.n_queries) > 0
    return vec, text_scores(c, visible, depth, norm), ~dense_found[c.query_idx]


def weighted(c: Candidates, visible: np.ndarray, depth: int, params: WeightedParams = WeightedParams()) -> Scored:
    """``vector_weight · cosine + text_weight · text_score``; a path that missed the row adds 0;
    keyword-only queries give the text score both weights (OpenClaw's FTS-only mode scores by
    the text score alone; otherwise a ``min_score`` above ``text_weight`` would drop every hit)."""
    vec, text, keyword_only = c.derived(("weighted", depth, params.text_norm),
                                        lambda: _paths(c, visible, depth, params.text_norm), along=visible)
    alone = params.text_weight + params.vector_weight

    first = None
    if params.keyword_first:  # a tier, not a weight: only where the query also has vector-only rows
        first = np.where(in_path(c.bm25_rank, depth) & ~keyword_only, alone, 0.0)

    def components() -> dict[str, np.ndarray]:
        out = {"dense": params.vector_weight * vec, "sparse": np.where(keyword_only, alone, params.text_weight) * text}
        if first is not None:
            out["keyword first"] = first
        return out
    score = linear_score(c, visible, vec, params.vector_weight, text, params.text_weight, keyword_only, alone)
    if first is not None:
        score = score + first  # −inf (not visible) stays −inf
    return Scored(score, LazyComponents(components))


FUSION = Fusion("weighted", WeightedParams, weighted, "vector_weight · cos + text_weight · text(BM25)",
                "seed 002 OpenClaw; seed 004 Lingxi",
                variants=(WeightedParams(text_norm="minmax"), WeightedParams(text_norm="l2"),
                          WeightedParams(text_norm="zscore")))
