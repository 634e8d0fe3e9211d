"""Ranking, token budgets and the fast/timeline routes of a pipeline, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.dataset import Document
from retrieval.pipeline import PIPELINES, PipelineConfig, response_for, run_pipeline
from retrieval.ranking import rank_rows
from tests.conftest import make_candidates, ranked_ids


def test_equal_scores_are_ordered_by_document_id():
    c = make_candidates([[{"id": i} for i in ["d3", "d1", "d2"]]])
    ranking = rank_rows(c, np.array([0.5, 0.5, 0.5]), max_results=10)
    assert ranked_ids(c, ranking) == ["d1", "d2", "d3"]


def budget_table(tokens_per_query):
    return make_candidates([[{"id": f"d{i}", "token_count": t} for i, t in enumerate(tokens)]
                            for tokens in tokens_per_query])


def test_token_budget_accumulates_and_stops():
    c = budget_table([[40, 50, 30]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), max_results=10, token_budget=100)
    assert ranked_ids(c, ranking) == ["d0", "d1"]  # 40 + 50 = 90; + 30 = 120 > 100
    assert ranking.total_tokens.tolist() == [40 + 50]


def test_token_budget_stops_at_the_first_result_that_does_not_fit():
    """Seed 000's loop stops; it does not skip a long memory to take a shorter one after it."""
    c = budget_table([[40, 70, 10]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), max_results=10, token_budget=100)
    assert ranked_ids(c, ranking) == ["d0"]


def test_token_budget_is_per_query():
    c = budget_table([[40, 50, 30], [90, 20]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0, 2.0, 1.0]), max_results=10, token_budget=100)
    assert ranked_ids(c, ranking, 1) == ["d0"]
    assert ranking.total_tokens.tolist() == [40 + 50, 90]


def test_token_budget_in_a_pipeline_response():
    c = make_candidates([[
        {"id": "d0", "dense_rank": 0, "token_count": 40},
        {"id": "d1", "dense_rank": 1, "token_count": 50},
        {"id": "d2", "dense_rank": 2, "token_count": 30},
    ]])
    run = run_pipeline(c, PipelineConfig("rrf-100", "rrf", token_budget=100))
    response = response_for(c, run, 0, [Document(id=d, text=d) for d in c.doc_ids])
    assert [r.id for r in response.results] == ["d0", "d1"]
    assert response.total_tokens == 40 + 50
    assert response.budget_remaining == 100 - (40 + 50)


def test_min_score_and_max_results():
    c = make_candidates([[{"id": f"d{i}"} for i in range(5)]])
    score = np.array([0.9, 0.5, 0.35, 0.3, -math.inf])
    assert ranked_ids(c, rank_rows(c, score, max_results=10, min_score=0.35)) == ["d0", "d1", "d2"]
    assert ranked_ids(c, rank_rows(c, score, max_results=2)) == ["d0", "d1"]
    assert ranked_ids(c, rank_rows(c, score, max_results=10)) == ["d0", "d1", "d2", "d3"]  # −inf: not seen


# ---- routes: fast path in file order, timeline newest first --------------------------------

def test_fast_route_scores_file_order_within_the_query():
    """Query 0 asks for a memory file (lines 3 and 5); its score depends only on its own
    fast-path rows, not on line 100 of another query's file or on line 50 of a search hit."""
    c = make_candidates([
        [{"id": "pref-a", "via_fast": True, "line_start": 5}, {"id": "pref-b", "via_fast": True, "line_start": 3},
         {"id": "hit", "dense_rank": 0, "dense_sim": 0.9, "line_start": 50}],
        [{"id": "task", "via_fast": True, "line_start": 100}],
    ])
    run = run_pipeline(c, PIPELINES["seed-salience"])
    assert run.route == ("fast", "fast")
    assert ranked_ids(c, run.ranking, 0) == ["pref-b", "pref-a"]  # file order; the search hit is not used
    assert run.ranking.score[run.ranking.query_idx == 0].tolist() == pytest.approx([1 - 3 / (1 + 5), 1 - 5 / (1 + 5)])


def test_timeline_route_orders_newest_first_and_ignores_search_hits():
    c = make_candidates([[
        {"id": "old", "via_timeline": True, "created_age": 6.0, "age_days": 0.0},   # edited today, written 6 days ago
        {"id": "new", "via_timeline": True, "created_age": 1.0, "age_days": 1.0},
        {"id": "hit", "dense_rank": 0, "dense_sim": 0.99, "bm25_rank": 0, "bm25_score": 9.0},
    ]], timeline=[True])
    run = run_pipeline(c, PIPELINES["seed-salience"])
    assert run.route == ("timeline",)
    assert ranked_ids(c, run.ranking) == ["new", "old"]
    assert run.ranking.score.tolist() == pytest.approx([0.5 ** (1 / 30), 0.5 ** (6 / 30)])
    # a pipeline without the timeline path searches normally
    assert ranked_ids(c, run_pipeline(c, PIPELINES["rrf"]).ranking)[0] == "hit"
