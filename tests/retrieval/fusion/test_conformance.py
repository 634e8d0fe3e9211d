"""One conformance harness for every fusion strategy and every named pipeline
(the shape of LanceDB's shared reranker tests, which would have caught its inverted
linear reranker, #3154):

- output is in descending score order and each document appears once per query;
- the document that is best on every path ranks first;
- a document missing from one path is not scored above an otherwise equal document
  present on both;
- top-k is a prefix of top-(k+1).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from retrieval.pipeline import PIPELINES, fixed_pipeline_features, run_pipeline
from retrieval.ranking import rank_rows
from retrieval.fusion import FUSIONS
from tests.conftest import make_candidates, ranked_ids, score_of

# every registered fusion with its default parameters and each variant it declares: a module
# added to retrieval/fusion/ is picked up here without editing this file
FUSER_CASES = {f"{name}-{i}" if i else name: (fusion, params)
               for name, fusion in sorted(FUSIONS.items())
               for i, params in enumerate((fusion.params(), *fusion.variants))}
DEPTH = 20
SAME = {"confidence": 0.95, "vitality": 50, "age_days": 5.0, "reinforcement": 1, "access_count": 1,
        "token_count": 10}

# Pairs (missing, present): identical rows except that `present` was also returned by the
# other path. Ids sort so that a tie would put the missing document first.
PAIRS = [("a-miss-sparse", "b-both-dense"), ("c-miss-dense", "d-both-sparse")]


def conformance_table():
    """Two queries; in each, `zz-best` is first on both paths."""
    q0 = [
        {"id": "zz-best", "dense_rank": 0, "dense_sim": 0.95, "bm25_rank": 0, "bm25_score": 12.0},
        {"id": "p1", "dense_rank": 1, "dense_sim": 0.9, "bm25_rank": 1, "bm25_score": 8.0},
        {"id": "p2", "dense_rank": 2, "dense_sim": 0.88, "bm25_rank": 3, "bm25_score": 5.0},
        {"id": "a-miss-sparse", "dense_rank": 3, "dense_sim": 0.86},
        {"id": "b-both-dense", "dense_rank": 3, "dense_sim": 0.86, "bm25_rank": 4, "bm25_score": 3.0},
        {"id": "s1", "dense_sim": 0.3, "bm25_rank": 2, "bm25_score": 6.0},
        {"id": "c-miss-dense", "dense_sim": 0.5, "bm25_rank": 5, "bm25_score": 2.0},
        {"id": "d-both-sparse", "dense_rank": 6, "dense_sim": 0.5, "bm25_rank": 5, "bm25_score": 2.0},
        {"id": "v1", "dense_rank": 5, "dense_sim": 0.6},
    ]
    q1 = [
        {"id": "zz-best", "dense_rank": 0, "dense_sim": 0.7, "bm25_rank": 0, "bm25_score": 30.0},
        {"id": "p1", "dense_rank": 2, "dense_sim": 0.5, "bm25_rank": 1, "bm25_score": 20.0},
        {"id": "a-miss-sparse", "dense_rank": 1, "dense_sim": 0.6},
        {"id": "b-both-dense", "dense_rank": 1, "dense_sim": 0.6, "bm25_rank": 3, "bm25_score": 4.0},
        {"id": "c-miss-dense", "dense_sim": 0.2, "bm25_rank": 2, "bm25_score": 10.0},
        {"id": "d-both-sparse", "dense_rank": 3, "dense_sim": 0.2, "bm25_rank": 2, "bm25_score": 10.0},
    ]
    return make_candidates([[row | SAME for row in q0], [row | SAME for row in q1]],
                           intent_route=["debug", "brainstorm"])


def fuse(c, name):
    fusion, params = FUSER_CASES[name]
    nested = {"fixed": fixed_pipeline_features(c)} if fusion.nested else {}  # as the pipeline passes them
    return fusion.score(c, np.ones(c.n_rows, dtype=bool), DEPTH, params, **nested).score


def check_ranking(c, score, ranking_for):
    """The four properties, given a function k -> Ranking of top-k."""
    full = ranking_for(c.n_rows)
    for qi in range(c.n_queries):
        ids = ranked_ids(c, full, qi)
        scores = full.score[full.query_idx == qi]
        assert len(ids) == len(set(ids)), f"query {qi}: duplicate ids {ids}"
        assert np.all(np.diff(scores) <= 0), f"query {qi}: scores not descending {scores}"
        if qi == 0 or ids:  # a min_score (vector-threshold: 0.85) may leave query 1 empty
            assert ids[:1] == ["zz-best"], f"query {qi}: best-on-every-path doc is not first: {ids}"
        for missing, present in PAIRS:
            assert score_of(c, score, missing, qi) <= score_of(c, score, present, qi), (
                f"query {qi}: {missing} (one path) scored above {present} (both paths)")
    for k in range(1, 8):
        shorter, longer = ranking_for(k), ranking_for(k + 1)
        for qi in range(c.n_queries):
            top_k, top_k1 = ranked_ids(c, shorter, qi), ranked_ids(c, longer, qi)
            assert top_k == top_k1[:len(top_k)], f"query {qi}: top-{k} {top_k} is not a prefix of {top_k1}"
            assert len(top_k) <= k


@pytest.mark.parametrize("name", sorted(FUSER_CASES))
def test_fusion_strategy_conformance(name):
    c = conformance_table()
    score = fuse(c, name)
    check_ranking(c, score, lambda k: rank_rows(c, score, max_results=k))


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_named_pipeline_conformance(name):
    c = conformance_table()
    config = PIPELINES[name]
    depth = config.path_depth  # fixed, so that only the cut at k changes between runs
    runs = {}

    def ranking_for(k):
        if k not in runs:
            runs[k] = run_pipeline(c, replace(config, max_results=k, depth=depth))
        return runs[k].ranking

    score = run_pipeline(c, config).scored.score
    check_ranking(c, score, ranking_for)
