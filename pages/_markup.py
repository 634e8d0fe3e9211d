"""The pages' escaping of user strings: owned by ``eval.reports.markup`` (which ``report.md``
uses too); re-exported here for the pages. And ``fit``: a text cut to what a box shows."""

import unicodedata

from eval.reports.markup import code, html, md  # noqa: F401


def fit(text: str, width: int) -> str:
    """``text`` on one line within ``width`` columns — a wide (CJK) character counts two — cut
    with "…" when longer: a picker's option shown whole rather than clipped by its box."""
    text = " ".join(str(text).split())
    used, out = 0, []
    for ch in text:
        used += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
        if used > width:
            return "".join(out).rstrip() + "…"
        out.append(ch)
    return text
