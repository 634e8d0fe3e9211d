"""Time windows a query names, against the tiny dataset's reference time
2026-11-20T18:00Z (a Friday). Windows are whole days, end exclusive."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from retrieval.timewindow import parse_time_window

NOW = datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)  # a Friday


def window_days(text: str) -> tuple[date, date] | None:
    """(first day, last day) inclusive."""
    window = parse_time_window(text, NOW)
    if window is None:
        return None
    return window.start.date(), date.fromordinal(window.end.date().toordinal() - 1)


@pytest.mark.parametrize("text, first, last", [
    ("what did we do yesterday", date(2026, 11, 19), date(2026, 11, 19)),
    ("昨天做了什么", date(2026, 11, 19), date(2026, 11, 19)),
    ("What did we discuss last Friday?", date(2026, 11, 13), date(2026, 11, 13)),
    ("上周五讨论了什么", date(2026, 11, 13), date(2026, 11, 13)),
    ("the past 3 days", date(2026, 11, 18), date(2026, 11, 20)),
    ("过去3天", date(2026, 11, 18), date(2026, 11, 20)),
    ("上周讨论了什么", date(2026, 11, 9), date(2026, 11, 15)),  # Monday to Sunday
    ("what happened last week", date(2026, 11, 9), date(2026, 11, 15)),
    ("最近做了什么", date(2026, 11, 14), date(2026, 11, 20)),  # last 7 days, today included
    ("这几天", date(2026, 11, 14), date(2026, 11, 20)),
    ("anything recent", date(2026, 11, 14), date(2026, 11, 20)),
    ("today", date(2026, 11, 20), date(2026, 11, 20)),
    ("前天", date(2026, 11, 18), date(2026, 11, 18)),
    ("3 days ago", date(2026, 11, 17), date(2026, 11, 17)),
    ("三天前", date(2026, 11, 17), date(2026, 11, 17)),
    ("this week", date(2026, 11, 16), date(2026, 11, 20)),
    ("last month", date(2026, 10, 1), date(2026, 10, 31)),
    ("on Monday", date(2026, 11, 16), date(2026, 11, 16)),
    ("周三", date(2026, 11, 18), date(2026, 11, 18)),
])
def test_named_windows(text, first, last):
    assert window_days(text) == (first, last)


def test_window_bounds_are_whole_days_end_exclusive():
    window = parse_time_window("yesterday", NOW)
    assert window.start == datetime(2026, 11, 19, tzinfo=timezone.utc)
    assert window.end == datetime(2026, 11, 20, tzinfo=timezone.utc)
    assert window.contains(datetime(2026, 11, 19, 23, 59, tzinfo=timezone.utc))
    assert not window.contains(datetime(2026, 11, 20, 0, 0, tzinfo=timezone.utc))


@pytest.mark.parametrize("text", ["How does the auth system work?", "ERR_CONN_REFUSED", "", "用户喜欢深色主题"])
def test_no_window(text):
    assert parse_time_window(text, NOW) is None


def test_adaptive_time_score_uses_the_named_window(tiny_index):
    """seed-adaptive on "What did we discuss last Friday?": the memory created that day
    (d09, 2026-11-13) gets the timeline profile's full time weight."""
    from retrieval.pipeline import search

    response = search(tiny_index, "What did we discuss last Friday?", "seed-adaptive")
    assert response.profile == "timeline"
    by_id = {r.id: r for r in response.results}
    # timeline: w_time 0.8 · S_time 1 · F_conf(0.9) 1.0 · F_vit(55) 1.0
    assert by_id["d09"].components["time"] == pytest.approx(0.8 * 1 * 1.0 * 1.0)
    assert "time" not in by_id["d08"].components  # created 11-19: outside the window


@pytest.mark.parametrize("text", ["1" * 100_000, "1" * 100_000 + "天前", "过去" * 50_000])
def test_a_100k_character_query_is_parsed_in_linear_time(text):
    """'N天前' once backtracked over every digit: 100,000 digits took over two minutes."""
    import time

    started = time.perf_counter()
    parse_time_window(text, NOW)
    assert time.perf_counter() - started < 2.0


def test_huge_day_counts_do_not_overflow():
    assert window_days("99999999999 days ago") is not None
    assert window_days("过去99999999天")[1] == date(2026, 11, 20)


@pytest.mark.parametrize("text", ["past " + "9" * 5_000 + " days", "9" * 5_000 + "天前", "1" * 100_000 + "天前"])
def test_day_counts_beyond_int_conversion_limits_do_not_raise(text):
    """Python refuses int() of over 4300 digits; such a count means 'as far back as allowed'."""
    assert parse_time_window(text, NOW) is not None


def test_last_weekday_means_that_day_of_the_previous_calendar_week():
    wednesday = datetime(2026, 11, 18, 12, tzinfo=timezone.utc)
    # previous week runs Mon 11-09 … Sun 11-15, so its Monday is 11-09 (not this week's 11-16)
    for text in ("what did we decide last Monday", "上周一说了什么"):
        window = parse_time_window(text, wednesday)
        assert (window.start.date(), window.end.date()) == (date(2026, 11, 9), date(2026, 11, 10))
    plain = parse_time_window("what happened on Monday", wednesday)
    assert plain.start.date() == date(2026, 11, 16)  # a bare weekday: the most recent one

