"""Evaluate's plotly figures (pages/_charts.py) show text from data as text, never as markup."""

from __future__ import annotations

import pandas as pd

from pages._charts import intents_figure, per_query_figure, plain

LINK = "<a href='http://e.x'>click</a>"


def test_plain_escapes_what_plotly_reads_as_markup():
    assert plain("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert plain("nothing to do") == "nothing to do"


def test_the_per_query_scatter_shows_query_text_as_text_and_keeps_the_raw_id_for_clicks():
    points = pd.DataFrame({"query": ["q<1>", "q2"], "text": [LINK, "plain"],
                           "intent": ["<b>debug</b>", "concept"], "baseline": [0.2, 0.5],
                           "candidate": [0.4, 0.5], "delta": [0.2, 0.0]})
    fig = per_query_figure(points, "<i>vector</i>", "rrf", "ndcg@5")
    marked = fig.data[0]                    # the first intent's trace: query q<1>
    assert marked.name == "&lt;b&gt;debug&lt;/b&gt;"
    row = list(marked.customdata[0])
    assert row[0] == "q<1>"                 # a click on the point selects this query id
    assert "q&lt;1&gt;" in row and "&lt;a href='http://e.x'&gt;click&lt;/a&gt;" in row
    assert not any("<" in str(v) for v in row[1:])
    assert fig.layout.xaxis.title.text.startswith("&lt;i&gt;vector&lt;/i&gt;")


def test_the_intent_bars_show_intent_and_pipeline_names_as_text():
    intents = pd.DataFrame({"intent": ["<b>debug</b>"], "pipeline": ["<a>p</a>"], "ndcg@5": [0.5],
                            "queries": [3]})
    fig = intents_figure(intents, "ndcg@5")
    assert fig.data[0].name == "&lt;a&gt;p&lt;/a&gt;"
    assert list(fig.data[0].x) == ["&lt;b&gt;debug&lt;/b&gt;"]
