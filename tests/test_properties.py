"""Invariants checked with Hypothesis (derandomized: every run checks the same examples):
RRF ignores the order of its paths, adaptive scores never fall when a component rises,
min-max text scores stay in [0, 1], the token budget is never exceeded, and no query
string makes BM25 or search raise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.dataset import scrub_text
from retrieval.pipeline import PIPELINES, search
from retrieval.profiles import PRESETS
from retrieval.ranking import rank_rows
from retrieval.fusion.adaptive import AdaptiveParams, adaptive
from retrieval.fusion.rrf import RRFParams, rrf
from retrieval.fusion.weighted import text_scores
from tests.conftest import make_candidates

FAST = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
DEPTH = 20


@st.composite
def candidate_tables(draw, max_queries: int = 3, max_docs: int = 8):
    """Random candidate tables: per query, distinct ranks on each path (or a miss)."""
    queries = []
    for _ in range(draw(st.integers(1, max_queries))):
        n = draw(st.integers(1, max_docs))
        dense_order = draw(st.permutations(range(n)))
        sparse_order = draw(st.permutations(range(n)))
        rows = []
        for i in range(n):
            rows.append({
                "id": f"d{i}",
                "dense_rank": dense_order[i] if draw(st.booleans()) else -1,
                "dense_sim": draw(st.floats(-1, 1, width=32)),
                "bm25_rank": sparse_order[i] if draw(st.booleans()) else -1,
                "bm25_score": draw(st.floats(0, 50, width=32)),
                "confidence": draw(st.floats(0, 1, width=32)),
                "vitality": draw(st.floats(0, 100, width=32)),
                "age_days": draw(st.floats(0, 400, width=32)),
                "in_window": draw(st.sampled_from([float("nan"), 0.0, 1.0])),
                "graph": draw(st.sampled_from([0.0, 1.0])),
                "token_count": draw(st.integers(1, 300)),
            })
        queries.append(rows)
    routes = [draw(st.sampled_from(["debug", "concept", "timeline", "brainstorm"])) for _ in queries]
    return make_candidates(queries, intent_route=routes)


def visible(c):
    return np.ones(c.n_rows, dtype=bool)


def with_cols(c, **cols):
    return dataclasses.replace(c, cols=c.cols | cols)


@FAST
@given(c=candidate_tables(), rrf_k=st.floats(1, 200), w_dense=st.floats(0, 5), w_sparse=st.floats(0, 5))
def test_rrf_is_invariant_to_the_order_of_its_paths(c, rrf_k, w_dense, w_sparse):
    forward = rrf(c, visible(c), DEPTH, RRFParams(rrf_k, w_dense, w_sparse)).score
    swapped = with_cols(c, dense_rank=c.bm25_rank, bm25_rank=c.dense_rank)
    backward = rrf(swapped, visible(c), DEPTH, RRFParams(rrf_k, w_sparse, w_dense)).score
    np.testing.assert_allclose(forward, backward, rtol=1e-12)


ADAPTIVE_PARAMS = [AdaptiveParams(profile=p) for p in PRESETS] + [AdaptiveParams(intent_router=True)]


@FAST
@given(c=candidate_tables(), data=st.data(),
       column=st.sampled_from(["dense_sim", "bm25_score", "confidence", "vitality"]),
       params=st.sampled_from(ADAPTIVE_PARAMS))
def test_adaptive_score_never_falls_when_a_component_rises(c, data, column, params):
    row = data.draw(st.integers(0, c.n_rows - 1))
    upper = {"dense_sim": 1.0, "bm25_score": 100.0, "confidence": 1.0, "vitality": 100.0}[column]
    current = float(c.cols[column][row])
    raised_to = data.draw(st.floats(current, upper, width=32))
    values = c.cols[column].copy()
    values[row] = raised_to
    before = adaptive(c, visible(c), DEPTH, params).score[row]
    after = adaptive(with_cols(c, **{column: values}), visible(c), DEPTH, params).score[row]
    assert after >= before - 1e-12


@FAST
@given(c=candidate_tables())
def test_minmax_text_scores_lie_in_0_1(c):
    scores = text_scores(c, visible(c), DEPTH, "minmax")
    assert np.all((scores >= 0) & (scores <= 1))


@FAST
@given(c=candidate_tables(max_docs=12), budget=st.integers(1, 1500), max_results=st.integers(1, 12),
       data=st.data())
def test_token_budget_is_never_exceeded(c, budget, max_results, data):
    score = np.array(data.draw(st.lists(st.floats(-10, 10), min_size=c.n_rows, max_size=c.n_rows)))
    ranking = rank_rows(c, score, max_results, token_budget=budget)
    assert np.all(ranking.total_tokens <= budget)
    for qi in range(c.n_queries):
        rows = ranking.for_query(qi)
        assert c.token_count[rows].sum() == ranking.total_tokens[qi]
        # stop, never skip: what is kept is a prefix of the ranking without a budget
        unbounded = rank_rows(c, score, max_results).for_query(qi)
        assert rows.tolist() == unbounded[:len(rows)].tolist()


HOSTILE = [
    "", " ", "\x00", "\x00\x01\x02\x1f\x7f", "\u200b\u200d\ufeff", "😀🔥👩‍👩‍👧", "مرحبا بالعالم", "\u202eevil\u202c",
    "שלום", "!!!???...", "。，、！？", "KeyError: 'user_id'", "f(x", "a AND", '"unbalanced', "title:foo",
    "NOT OR AND", "+-&&||!(){}[]^\"~*?:\\/", "'; DROP TABLE memories; --", "' OR '1'='1", "%_%", "\\", "*",
    "\ud800", "a\udfffb", "\n\t\r", "utils/retry.py::f()", "1" * 300 + "天前",
]
# long queries: checked one by one below (each costs a model call of up to a second)
LONG = ["x" * 10_000, "用户" * 5_000, "a " * 5_000, "ERR_CONN_REFUSED" * 100, "9" * 10_000 + "天前",
        "past " + "9" * 5_000 + " days"]


def queries(max_size: int):
    return st.one_of(st.sampled_from(HOSTILE), st.text(max_size=max_size),
                     st.text(alphabet=st.characters(codec="utf-8"), max_size=max_size),
                     st.lists(st.sampled_from(HOSTILE), min_size=2, max_size=4).map(" ".join))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(max_size=300))
def test_any_query_never_raises_in_bm25(tiny_index, query):
    hits = tiny_index.bm25.search(query, 10)
    assert len(hits) <= 10
    assert all(doc_id in tiny_index.doc_ids for doc_id, _ in hits)


# each new query costs one MiniLM call (up to a second on a busy 2-core machine)
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(query=queries(max_size=60), pipeline=st.sampled_from(sorted(PIPELINES)))
def test_any_query_never_raises_in_search(tiny_index, query, pipeline):
    response = search(tiny_index, query, pipeline)
    assert response.query == scrub_text(query)  # lone surrogates become U+FFFD
    assert len(response.results) <= PIPELINES[pipeline].max_results
    scores = [r.score for r in response.results]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("query", HOSTILE + LONG, ids=lambda q: ascii(q[:24]) + (f"…{len(q)}" if len(q) > 24 else ""))
def test_each_hostile_query_is_answered_by_every_pipeline(tiny_index, query):
    for name in PIPELINES:
        assert search(tiny_index, query, name).query == scrub_text(query)
    assert len(tiny_index.bm25.search(query, 10)) <= 10
