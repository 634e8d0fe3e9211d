"""The learned intent router (eval/learning/router.py, retrieval/learned_router.py).

A crafted set: 12 queries whose texts the rule router sends to ``concept`` ("tell me about
item N"), half labelled debug and half concept; their 2-d query vectors separate the two
labels on the first axis. Each query has two candidates: A, found by the dense path only
(cosine 0.9), and B, BM25's top hit (cosine 0.1). With confidence 1 and vitality 50 both
multipliers are 1 and S_time is 1 (undated: age 0), so

  debug   (0.3 dense / 0.9 sparse / 0.1 time): A = 0.27 + 0.1 = 0.37, B = 0.9 + 0.03 + 0.1 = 1.03 → B first
  concept (0.8 / 0.2 / 0.1):                   A = 0.72 + 0.1 = 0.82, B = 0.2 + 0.08 + 0.1 = 0.38 → A first

Debug-labelled queries judge B relevant, concept-labelled ones A; the relevant document at
rank 1 scores nDCG@5 1, at rank 2 1/log2(3) = 0.6309.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.learning.router import (cross_val_routes, evaluate_learned_router, fit_router, learned_routes,
                                 query_vectors, uses_learned_router)
from eval.learning.router_eval import evaluate_router
from retrieval.learned_router import FEATURES, apply_router
from retrieval.pipeline import PIPELINES, from_toml, fuse, run_pipeline, to_toml
from tests.conftest import make_candidates

N = 12
LABELS = {f"q{i}": ("debug" if i % 2 == 0 else "concept") for i in range(N)}
TEXTS = [f"tell me about item {i}" for i in range(N)]
VECTORS = np.array([[1.0, 0.0] if i % 2 == 0 else [-1.0, 0.0] for i in range(N)])
LEARNED = from_toml('base = "seed-adaptive"\nname = "learned"\n[adaptive]\nrouter = "learned"\n')
RULES = PIPELINES["seed-adaptive"]


def crafted():
    rows = [[{"id": f"a{i}", "dense_sim": 0.9, "dense_rank": 0},
             {"id": f"b{i}", "dense_sim": 0.1, "dense_rank": 1, "bm25_rank": 0, "bm25_score": 5.0}]
            for i in range(N)]
    c = make_candidates(rows, query_texts=TEXTS, intent_route=["concept"] * N)
    qrels = {f"q{i}": {(f"b{i}" if LABELS[f"q{i}"] == "debug" else f"a{i}"): 3} for i in range(N)}
    return c, qrels


def test_the_rules_route_every_crafted_query_to_concept():
    from retrieval.routing import route_intent

    assert {route_intent(t) for t in TEXTS} == {"concept"}


def test_a_linear_model_separates_the_intents_under_cross_validation():
    c, qrels = crafted()
    learned = cross_val_routes(c, LABELS, VECTORS, folds=3, seed=0)
    assert not learned.fallback and learned.folds == 3 and learned.n_labelled == 12
    assert learned.routes == tuple(LABELS[q] for q in c.query_ids)       # 12 of 12 right
    rules = evaluate_router(c, qrels, LABELS)
    ours = evaluate_learned_router(c, qrels, LABELS, VECTORS, folds=3, seed=0)
    assert rules.accuracy == 6 / 12                                       # every debug query sent to concept
    assert ours.accuracy == 12 / 12 and ours.router == "learned"
    assert rules.confusion["debug"]["concept"] == 6 and ours.confusion["debug"]["debug"] == 6
    wrong = 1 - 1 / math.log2(3)                                          # B at rank 2 instead of 1
    assert rules.oracle_mean == pytest.approx(1.0)
    assert rules.regret_mean == pytest.approx(6 * wrong / 12)
    assert rules.routed_mean == pytest.approx((6 * 1.0 + 6 / math.log2(3)) / 12)
    assert ours.regret_mean == pytest.approx(0.0) and ours.routed_mean == pytest.approx(1.0)


def test_each_labelled_query_is_routed_by_a_model_not_trained_on_it():
    c, _ = crafted()
    learned = cross_val_routes(c, LABELS, VECTORS, folds=4, seed=3)
    labels = [LABELS[q] for q in c.query_ids]
    for i in range(N):
        train = [j for j in range(N) if learned.fold_of[j] != learned.fold_of[i]]
        assert i not in train
        model = fit_router([TEXTS[j] for j in train], VECTORS[train], [labels[j] for j in train])
        assert apply_router(model, [TEXTS[i]], VECTORS[[i]]) == (learned.routes[i],)


def test_the_adaptive_pipeline_follows_the_learned_routes_when_chosen():
    c, qrels = crafted()
    assert uses_learned_router(LEARNED) and not uses_learned_router(RULES)
    assert from_toml(to_toml(LEARNED)).params.router == "learned"
    routes = cross_val_routes(c, LABELS, VECTORS, folds=3).routes
    assert run_pipeline(c, LEARNED, routes).profile == tuple(LABELS[q] for q in c.query_ids)
    assert run_pipeline(c, RULES, routes).profile == ("concept",) * N      # the rules ignore them
    assert run_pipeline(c, LEARNED).profile == ("concept",) * N            # no routes given: the rules
    # an argument over the one table: no second table, the table's per-depth values shared
    assert fuse(c, LEARNED, routes).table is c and fuse(c, RULES).table is c
    with pytest.raises(ValueError, match="3 learned routes for 12 queries"):
        fuse(c, LEARNED, routes[:3])


def test_without_labels_the_rules_route():
    c, qrels = crafted()
    learned = cross_val_routes(c, {}, VECTORS)
    assert learned.fallback and learned.routes == c.intent_route
    assert "rule router" in learned.note
    assert evaluate_learned_router(c, qrels, {}, VECTORS) is None
    assert learned_routes(c, [], [LEARNED]) is None                         # nothing to learn from: none
    assert learned_routes(c, [], [RULES]) is None                           # no pipeline follows them
    assert run_pipeline(c, LEARNED).profile == run_pipeline(c, RULES).profile == ("concept",) * N


def test_simple_features_alone_and_a_single_class():
    model = fit_router(TEXTS[:3], None, ["debug"] * 3)
    assert model.classes == ("debug",) and apply_router(model, ["anything"]) == ("debug",)
    model = fit_router(["ERR_CONN_REFUSED crash", "what did we do yesterday?"] * 3, None, ["debug", "timeline"] * 3)
    assert model.dim == 0 and model.coef.shape == (1, len(FEATURES))
    assert apply_router(model, ["KeyError in parser.py", "what happened yesterday?"]) == ("debug", "timeline")


def test_query_vectors_are_the_ones_retrieval_used(tiny, tiny_index, rwb_home):
    from eval.stores.pool import load_pool

    pool = load_pool(tiny)
    vectors = query_vectors(pool)
    assert vectors.shape == (pool.n_queries, 384)
    # every candidate's stored cosine is its document vector · the query vector
    doc_vectors = tiny_index.vectors[pool.doc_idx]
    expected = np.einsum("ij,ij->i", doc_vectors, vectors[pool.query_idx])
    assert np.allclose(pool.dense_sim, expected, atol=1e-5)
