"""Tune's ranking HTML (pages/_tables.py): what a reader of the two rankings sees."""

from __future__ import annotations

import re

from pages._tables import ranking_html
from retrieval.pipeline import Response, Result


def _response(*results: Result) -> Response:
    return Response("q", "rrf", "hybrid", "", [], 0, None, list(results))


def test_ranking_caption_is_its_own_title_not_a_result_title():
    # the caption once showed the last result's title ("<b>Reversible migrations</b> —") as text
    current = _response(Result("m1", 0, 0.5, {"dense": 0.3, "sparse": 0.2}, "a.md", "first text", title="Alpha"),
                        Result("m2", 1, 0.4, {"dense": 0.4}, "b.md", "second text", title="Reversible migrations"))
    page = ranking_html(current, {"m1": 2}, title="Current · rrf (tuned)")
    caption = re.search(r'<div class="rwb-h">(.*?)</div>', page).group(1)
    assert caption == "<b>Current</b> · <code>rrf (tuned)</code>"
    assert "<b>Reversible migrations</b> — second text" in page        # the title leads its own row


def test_ranking_shows_movement_grade_and_full_text_escaped():
    baseline = _response(Result("m2", 0, 0.9, {"dense": 0.9}, "", "b"), Result("m1", 1, 0.8, {"dense": 0.8}, "", "a"))
    long_text = "<img src=x> " + "word " * 100
    current = _response(Result("m1", 0, 0.5, {"dense": 0.5}, "notes/a.md", long_text),
                        Result("m3", 1, 0.4, {"dense": 0.4}, "", "new one"))
    page = ranking_html(current, {"m1": 3}, baseline)
    cells = re.findall(r"<tr class=\"rwb-r\"><td>(\d+)</td><td[^>]*>([^<]+)</td>", page)
    assert cells == [("1", "▲1"), ("2", "new")]                         # m1 rose from 2nd to 1st; m3 is new
    assert "★★★" in page                                                # m1 judged 3
    assert "<img" not in page and "&lt;img src=x&gt;" in page           # data is text, never markup
    assert "word " * 99 in page and "notes/a.md" in page                # the whole text and its path, on click
