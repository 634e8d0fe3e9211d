"""The time window a query names, resolved against a reference time ("now").

English and Chinese: today/今天, yesterday/昨天, the day before yesterday/前天,
N days ago/N天前, past|last N days/过去|最近N天, recent/lately/最近/这几天/近期 (7 days),
this week/本周/这周, last week/上周 (the previous Monday–Sunday), this month/本月,
last month/上个月, last <weekday>/上周<X> (that day of the previous week), <weekday>/周<X>
(the most recent such day before today). Windows are whole local days, end exclusive.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

WEEKDAYS_EN = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
RECENT_DAYS = 7
MAX_DAYS = 36_500  # "past 99999999999 days" means "ever", not an overflow
_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10}


@dataclass(frozen=True)
class TimeWindow:
    start: datetime
    end: datetime  # exclusive
    label: str

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end


def _number(text: str) -> int:
    if text.isdigit():  # compare lengths first: int() refuses strings of over 4300 digits
        return MAX_DAYS if len(text.lstrip("0")) > len(str(MAX_DAYS)) else min(int(text), MAX_DAYS)
    return _ZH_NUM.get(text, 0)


def _weekday(name: str) -> int:
    return WEEKDAYS_EN.index(name) if name in WEEKDAYS_EN else WEEKDAYS_ZH[name]


def parse_time_window(text: str, now: datetime) -> TimeWindow | None:
    """The first time expression in ``text`` as a window, or None."""
    lower = text.lower()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    one = timedelta(days=1)
    tomorrow = day + one

    def days(start: datetime, end: datetime, label: str) -> TimeWindow:
        return TimeWindow(start, end, label)

    match = re.search(r"\b(?:past|last|previous)\s+(\d+)\s+days?\b", lower) or re.search(
        r"(?:过去|最近|近)\s*(\d+|[一两二三四五六七八九十])\s*天", text)
    if match:
        count = _number(match.group(1))
        return days(tomorrow - count * one, tomorrow, f"past {count} days")
    match = re.search(r"\b(\d+)\s+days?\s+ago\b", lower) or re.search(r"(?<!\d)(\d+|[一两二三四五六七八九十])\s*天前", text)
    if match:
        start = day - _number(match.group(1)) * one
        return days(start, start + one, match.group(0))
    if re.search(r"day before yesterday|前天", lower):
        return days(day - 2 * one, day - one, "day before yesterday")
    if re.search(r"\byesterday\b|昨天|昨日", lower):
        return days(day - one, day, "yesterday")
    if re.search(r"\btoday\b|\bthis morning\b|\btonight\b|今天|今日", lower):
        return days(day, tomorrow, "today")
    monday = day - timedelta(days=day.weekday())
    match = re.search(r"\blast\s+(" + "|".join(WEEKDAYS_EN) + r")\b", lower) or re.search(r"上(?:周|星期|礼拜)([一二三四五六日天])", text)
    if match:  # that day of the previous calendar week
        target = monday - 7 * one + timedelta(days=_weekday(match.group(1)))
        return days(target, target + one, match.group(0))
    if re.search(r"\blast week\b|上周|上星期|上个星期|上礼拜", lower):
        return days(monday - 7 * one, monday, "last week")
    if re.search(r"\bthis week\b|本周|这周|这个星期", lower):
        return days(monday, tomorrow, "this week")
    if re.search(r"\blast month\b|上个月|上月", lower):
        first = day.replace(day=1)
        previous = (first - one).replace(day=1)
        return days(previous, first, "last month")
    if re.search(r"\bthis month\b|本月|这个月", lower):
        return days(day.replace(day=1), tomorrow, "this month")
    if re.search(r"\brecent(ly)?\b|\blately\b|\bthese days\b|最近|这几天|近期|近来", lower):
        return days(tomorrow - RECENT_DAYS * one, tomorrow, "recent")
    match = re.search(r"\b(?:on\s+)?(" + "|".join(WEEKDAYS_EN) + r")\b", lower) or re.search(r"(?:周|星期|礼拜)([一二三四五六日天])", text)
    if match:  # the most recent such day before today
        target = day - timedelta(days=(day.weekday() - _weekday(match.group(1))) % 7 or 7)
        return days(target, target + one, match.group(0))
    return None
