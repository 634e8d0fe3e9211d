"""Query routing in English and Chinese: intent router, fast path, timeline trigger;
and the timeline route end to end on the tiny index."""

from __future__ import annotations

from datetime import timedelta

import pytest

from retrieval.pipeline import search
from retrieval.routing import JOURNAL_PREFIX, TIMELINE_DAYS, fast_path_target, route_intent, triggers_timeline


@pytest.mark.parametrize("query, intent", [
    ("Fix error 404", "debug"),
    ("KeyError in utils.py", "debug"),
    ("ERR_CONN_REFUSED", "debug"),
    ("user_id 列", "debug"),
    ("ECONNRESET when the job runs", "debug"),
    ("服务启动报错", "debug"),
    ("What did we discuss last Friday?", "timeline"),
    ("上周讨论了什么", "timeline"),
    ("what happened yesterday", "timeline"),
    ("Any ideas for optimization?", "brainstorm"),
    ("有什么办法提高速度", "brainstorm"),
    ("How does the auth system work?", "concept"),
    ("认证系统是怎么工作的", "concept"),
])
def test_intent_router(query, intent):
    assert route_intent(query) == intent


@pytest.mark.parametrize("query, target", [
    ("我的偏好是什么", "user/preferences.md"),
    ("what are my preferences", "user/preferences.md"),
    ("有哪些规则", "user/instructions.md"),
    ("show me the rules", "user/instructions.md"),
    ("当前任务", "TASKS.md"),
    ("open tasks", "TASKS.md"),
    ("相关人物", "user/entities.md"),
    ("which people are involved", "user/entities.md"),
    ("最近的决策", "agent/decisions.md"),
    ("list the decisions", "agent/decisions.md"),
    ("常见模式", "agent/patterns.md"),
    ("what patterns do we use", "agent/patterns.md"),
])
def test_fast_path_targets(query, target):
    assert fast_path_target(query) == target


@pytest.mark.parametrize("query", [
    "How does the auth system work?", "ERR_CONN_REFUSED", "the rulebook was updated", "taskbar colour",
])
def test_no_fast_path_for_other_queries(query):
    """Whole words only: 'rulebook' and 'taskbar' do not name a memory file."""
    assert fast_path_target(query) is None


@pytest.mark.parametrize("query", [
    "最近做了什么", "recent changes", "what did I do today", "昨天的会议", "What did we do yesterday?",
    "the past 3 days", "这几天的进展", "过去 3 天",
])
def test_timeline_trigger(query):
    assert triggers_timeline(query)


@pytest.mark.parametrize("query", ["How does the auth system work?", "ERR_CONN_REFUSED", "有什么办法提高速度"])
def test_no_timeline_trigger(query):
    assert not triggers_timeline(query)


def test_seed_salience_answers_a_yesterday_question_from_the_recent_journal(tiny, tiny_index):
    response = search(tiny_index, "What did we do yesterday?", "seed-salience")
    assert response.route == "timeline"
    docs = {d.id: d for d in tiny.documents}
    since = tiny.reference_time - timedelta(days=TIMELINE_DAYS)
    expected = sorted((d for d in tiny.documents if d.path.startswith(JOURNAL_PREFIX)
                       and since <= d.created_at <= tiny.reference_time),
                      key=lambda d: d.created_at, reverse=True)
    assert [r.id for r in response.results] == [d.id for d in expected] == ["d08"]
    for r in response.results:
        assert r.path.startswith(JOURNAL_PREFIX)
        assert since <= docs[r.id].created_at <= tiny.reference_time
    # d09 is a journal entry too, but 7 days and 3 hours old
    assert tiny.reference_time - docs["d09"].created_at > timedelta(days=TIMELINE_DAYS)


def test_timeline_route_orders_newest_first(tiny, tiny_index):
    """Without a 7-day limit in the way: both journal memories, newest first, when the
    reference time is the 19th (d08 at 16:00 that day, d09 six days earlier)."""
    from retrieval.candidates import build_candidates
    from retrieval.dataset import Query, parse_time
    from retrieval.pipeline import PIPELINES, response_for, run_pipeline

    query = Query("q", "最近做了什么", reference_time=parse_time("2026-11-19T20:00:00+00:00"))
    c = build_candidates(tiny_index, [query], pool_depth=PIPELINES["seed-salience"].path_depth)
    response = response_for(c, run_pipeline(c, PIPELINES["seed-salience"]), 0, tiny.documents)
    assert response.route == "timeline"
    assert [r.id for r in response.results] == ["d08", "d09"]
    assert response.results[0].score > response.results[1].score


def test_seed_salience_fast_path_returns_the_file_in_file_order(tiny_index):
    """One result, the whole file (seed 000 "返回单个 SearchResult，包含完整文件内容"), its
    memories in file order (lines 3, 5)."""
    response = search(tiny_index, "我的偏好是什么", "seed-salience")
    assert response.route == "fast"
    assert [(r.id, r.path, r.members) for r in response.results] == [
        ("user/preferences.md", "user/preferences.md", ("d01", "d02"))]
    english = search(tiny_index, "what are my preferences", "seed-salience")
    assert [r.members for r in english.results] == [("d01", "d02")]


def test_fast_path_without_memories_in_that_file_falls_back_to_search(tiny_index):
    """The tiny corpus has no TASKS.md: the query is searched normally."""
    response = search(tiny_index, "which tasks are open", "seed-salience")
    assert response.route == "hybrid"
    assert response.results


def test_pipelines_without_routes_never_take_the_fast_path(tiny_index):
    assert search(tiny_index, "what are my preferences", "rrf").route == "hybrid"
    assert search(tiny_index, "What did we do yesterday?", "rrf").route == "hybrid"


def test_seed_adaptive_routes_profiles_by_intent(tiny_index):
    assert search(tiny_index, "ERR_CONN_REFUSED", "seed-adaptive").profile == "debug"
    assert search(tiny_index, "What did we do yesterday?", "seed-adaptive").profile == "timeline"
    assert search(tiny_index, "Any ideas for a faster export?", "seed-adaptive").profile == "brainstorm"
    assert search(tiny_index, "Which editor color scheme does Mina like?", "seed-adaptive").profile == "concept"


@pytest.mark.parametrize("text", ["x" * 100_000, "用户" * 50_000, "1" * 100_000, "a." * 50_000])
def test_routing_a_pasted_100k_character_query_takes_linear_time(text):
    """A pasted log must not hang the search: these took 25 s and more when a pattern
    backtracked over every starting position."""
    import time

    started = time.perf_counter()
    route_intent(text), fast_path_target(text), triggers_timeline(text)
    assert time.perf_counter() - started < 2.0
