"""Seed 000's fast and timeline paths as the seed describes them (issue 12, items 2 and 3),
on the crafted ``tests/fixtures/seedpaths`` dataset (reference time 2026-11-20 18:00 UTC):

- journal ``j01``…``j12``: twelve entries of exactly 10 tokens each, created 2026-11-20 10:00
  (j01) back to 2026-11-14 08:00 (j12), newest first in id order; ``j12`` was edited on
  2026-11-20 17:30, so by edit time it would be the newest; ``j13`` was created 2026-11-10
  (outside the 7 days) and edited today;
- ``user/preferences.md``: p01 (line 3, 8 tokens), p02 (line 5, 6 tokens), p03 (line 7, 5 tokens).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from retrieval.candidates import build_candidates
from retrieval.dataset import Query, load_dataset
from retrieval.pipeline import PIPELINES, response_for, run_pipeline, search, with_params

SEEDPATHS = Path(__file__).resolve().parents[2] / "fixtures" / "seedpaths"
JOURNAL_NEWEST_FIRST = [f"j{i:02d}" for i in range(1, 13)]


@pytest.fixture(scope="module")
def seedpaths(rwb_home):
    return load_dataset(SEEDPATHS)


@pytest.fixture(scope="module")
def seedpaths_index(seedpaths):
    from retrieval.index import open_index

    return open_index(seedpaths)


def no_search(handle):
    """The handle without any search machinery: a query that reached the embedder, LanceDB or
    Tantivy would fail on ``None``."""
    return dataclasses.replace(handle, bm25=None, store=None, exact=None, embedder=None, vectors=None)


# ---- item 2: the timeline path ------------------------------------------------------------

def test_timeline_reads_every_journal_entry_of_the_week_newest_date_first(seedpaths_index):
    response = search(seedpaths_index, "what did we do recently", "seed-salience")
    assert response.route == "timeline"
    # all 12 entries of the last 7 days (not capped at max_results = 10), by creation date:
    # j12 (created the 14th, edited today) is last, j13 (created the 10th) is out of the window
    assert [r.id for r in response.results] == JOURNAL_NEWEST_FIRST
    assert response.total_tokens == 12 * 10
    assert response.budget_remaining == 1500 - 120


def test_timeline_fills_the_token_budget_and_stops_at_the_first_entry_that_does_not_fit(seedpaths_index):
    config = with_params(PIPELINES["seed-salience"], {"token_budget": 55})
    response = search(seedpaths_index, "what did we do recently", config)
    # 10 + 10 + 10 + 10 + 10 = 50 ≤ 55; the sixth would make 60 > 55
    assert [r.id for r in response.results] == JOURNAL_NEWEST_FIRST[:5]
    assert (response.total_tokens, response.budget_remaining) == (50, 5)


def test_timeline_runs_no_search(seedpaths_index):
    response = search(no_search(seedpaths_index), "what did we do recently", "seed-salience")
    assert [r.id for r in response.results] == JOURNAL_NEWEST_FIRST


def test_timeline_route_in_evaluation_fills_the_budget_too(seedpaths, seedpaths_index):
    config = PIPELINES["seed-salience"]
    query = next(q for q in seedpaths.queries if q.id == "r6")
    c = build_candidates(seedpaths_index, [query], pool_depth=config.path_depth)
    response = response_for(c, run_pipeline(c, config), 0, seedpaths.documents)
    assert response.route == "timeline"
    assert sorted(r.id for r in response.results) == JOURNAL_NEWEST_FIRST  # 12, not 10


def test_timeline_route_in_evaluation_orders_by_creation_date(seedpaths, seedpaths_index):
    config = PIPELINES["seed-salience"]
    query = next(q for q in seedpaths.queries if q.id == "r6")
    c = build_candidates(seedpaths_index, [query], pool_depth=config.path_depth)
    response = response_for(c, run_pipeline(c, config), 0, seedpaths.documents)
    assert [r.id for r in response.results] == JOURNAL_NEWEST_FIRST


# ---- item 3: the fast path ----------------------------------------------------------------

def test_fast_path_returns_one_result_the_whole_file_with_its_token_count(seedpaths_index):
    response = search(seedpaths_index, "what are my preferences", "seed-salience")
    assert response.route == "fast"
    assert len(response.results) == 1
    file = response.results[0]
    assert (file.id, file.path) == ("user/preferences.md", "user/preferences.md")
    assert file.members == ("p01", "p02", "p03")  # lines 3, 5, 7
    assert file.text == ("Mina prefers tabs over spaces in Python files\n"
                         "Mina likes a dark editor theme\n"
                         "Mina wants short commit messages")
    assert file.token_count == response.total_tokens == 8 + 6 + 5


def test_fast_path_returns_the_whole_file_whatever_max_results_and_budget_say(seedpaths_index):
    config = with_params(PIPELINES["seed-salience"], {"max_results": 2, "token_budget": 10})
    file = search(no_search(seedpaths_index), "what are my preferences", config).results
    assert [r.members for r in file] == [("p01", "p02", "p03")]  # 19 tokens > 10, 3 memories > 2


def test_fast_path_in_evaluation_counts_every_memory_of_the_file_in_line_order(seedpaths, seedpaths_index):
    config = with_params(PIPELINES["seed-salience"], {"max_results": 2})
    c = build_candidates(seedpaths_index, [Query("q", "what are my preferences")], pool_depth=config.path_depth)
    response = response_for(c, run_pipeline(c, config), 0, seedpaths.documents)
    assert response.route == "fast"
    assert [r.id for r in response.results] == ["p01", "p02", "p03"]


# ---- item 4: Lingxi returns 0–3 -----------------------------------------------------------

def cosine(handle, text: str, doc_id: str) -> float:
    vector = handle.embedder.encode([text])[0]
    return float(handle.vectors[handle.doc_ids.index(doc_id)] @ vector)


def test_lingxi_gives_an_unrelated_query_an_empty_answer(seedpaths_index):
    text = "recipe for the lemon tart"
    unfloored = search(seedpaths_index, text, with_params(PIPELINES["lingxi"], {"min_similarity": None}))
    # without the floor, stop-word matches ("for", "the") still fill the three places …
    assert len(unfloored.results) == 3
    assert all(cosine(seedpaths_index, text, r.id) < 0.3 for r in unfloored.results)
    # … with it, none of them is relevant enough: nothing is injected
    assert search(seedpaths_index, text, "lingxi").results == []
    assert search(seedpaths_index, "ERR_ZZQ_4410", "lingxi").results == []  # a made-up error code


def test_lingxi_still_answers_a_related_query(seedpaths_index):
    response = search(seedpaths_index, "flaky login test", "lingxi")
    assert [r.id for r in response.results][:2] == ["j02", "j03"]
    assert 1 <= len(response.results) <= 3
    assert all(cosine(seedpaths_index, "flaky login test", r.id) >= 0.3 for r in response.results)


def test_lingxi_keyword_only_reports_its_route_and_keeps_keyword_hits(seedpaths_index):
    """No vectors (seed 004 G3): the keyword path alone, reported as such; the cosine floor
    cannot apply, and each hit scores 1/(1+rank) with both weights (0.7 + 0.3)."""
    blind = dataclasses.replace(seedpaths_index, embedder=None)
    every_word = with_params(PIPELINES["lingxi"], {"keyword_match": "any"})
    response = search(blind, "flaky login test", every_word)
    assert response.route == "keyword-only"
    assert [(r.id, r.score) for r in response.results] == [
        ("j02", pytest.approx(1.0)), ("j03", pytest.approx(1 / 2)), ("s03", pytest.approx(1 / 3))]
    # Lingxi's own keyword path greps technical terms only: plain words find nothing, silently
    assert search(blind, "flaky login test", "lingxi").results == []
    empty = search(dataclasses.replace(seedpaths_index, embedder=None), "ERR_ZZQ_4410", "lingxi")
    assert (empty.route, empty.results) == ("keyword-only", [])  # no match → silent
