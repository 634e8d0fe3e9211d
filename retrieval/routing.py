"""Query routing: seed 000's fast path and timeline path, and seed 001's intent router.

Fast path (seed 000, table "路由规则"): a query naming a memory file's kind is answered
with that file's memories, in file order, without searching.
Timeline path: time words send the query to the journal memories of the last 7 days.
Intent router: rules first — identifiers, error codes and file paths → debug; time
words → timeline; idea words → brainstorm; otherwise concept.
"""

from __future__ import annotations

import re

FAST_PATH_RULES: tuple[tuple[str, str], ...] = (
    (r"偏好|\bpreferences?\b|\bprefer(s|red)?\b", "user/preferences.md"),
    (r"指令|\binstructions?\b|规则|\brules?\b", "user/instructions.md"),
    (r"任务|\btasks?\b|\btodo\b", "TASKS.md"),
    (r"实体|\bentit(y|ies)\b|人物|\bpeople\b", "user/entities.md"),
    (r"决策|\bdecisions?\b|\bdecided\b", "agent/decisions.md"),
    (r"模式|\bpatterns?\b", "agent/patterns.md"),
)
TIMELINE_TRIGGER = re.compile(
    r"最近|\brecent(ly)?\b|\btoday\b|今天|昨天|\byesterday\b|\b(past|last)\s+\d+\s+days?\b|这几天|过去\s*\d+\s*天",
    re.IGNORECASE,
)
TIMELINE_DAYS = 7
JOURNAL_PREFIX = "journal/"

_IDENTIFIER = re.compile(
    r"\b[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+"          # snake_case / SCREAMING_CASE
    r"|\bE[A-Z]{4,}\b|\b[A-Z]+\d+[A-Z0-9]*\b"          # ECONNRESET, E11000
    r"|\b[a-z]+[A-Z][A-Za-z0-9]*\b"                  # camelCase
    r"|(?<![\w.-])[\w.-]+/[\w./-]+|\b\w+\.(?:py|ts|js|md|toml|json|yaml|yml|sql|go|rs)\b"  # paths, files
    r"|\b[A-Za-z]*Error\b|\b(?:[Ee]xception|[Tt]raceback|[Ee]rrors?|[Bb]ugs?|[Cc]rash\w*|[Ff]ix\w*|[Ff]ail\w*)\b"
    r"|\b[45]\d\d\b|报错|错误|异常|修复|失败|崩溃"
)
_TIME = re.compile(
    r"\b(yesterday|today|tonight|recent(ly)?|lately|last\s+(week|month|friday|monday|tuesday|wednesday|thursday|"
    r"saturday|sunday|\d+\s+days?)|past\s+\d+\s+days?|\d+\s+days?\s+ago|this\s+(week|month)|when\s+did)\b"
    r"|昨天|今天|前天|最近|上周|上星期|本周|这周|这几天|上个月|天前|过去\s*\d+\s*天|什么时候|哪天",
    re.IGNORECASE,
)
_BRAINSTORM = re.compile(
    r"\b(ideas?|brainstorm\w*|suggest\w*|alternatives?|how (could|might) we|what if|options for|ways to)\b"
    r"|有什么办法|有什么想法|点子|头脑风暴|建议|思路|怎么优化|有哪些方案",
    re.IGNORECASE,
)
_FAST = tuple((re.compile(pattern, re.IGNORECASE), target) for pattern, target in FAST_PATH_RULES)
INTENTS = ("debug", "timeline", "brainstorm", "concept")


def fast_path_target(query: str) -> str | None:
    """The memory file a query asks for directly, or None."""
    for pattern, target in _FAST:
        if pattern.search(query):
            return target
    return None


def triggers_timeline(query: str) -> bool:
    return bool(TIMELINE_TRIGGER.search(query))


def route_intent(query: str) -> str:
    """Profile name for a query: debug, timeline, brainstorm or concept (rules, in that order)."""
    if _IDENTIFIER.search(query):
        return "debug"
    if _TIME.search(query):
        return "timeline"
    if _BRAINSTORM.search(query):
        return "brainstorm"
    return "concept"
