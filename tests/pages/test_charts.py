"""Plotly figures show text from data as text, never as markup: Evaluate's (pages/_charts.py) and
the report's (eval/reports/report.py, through eval.reports.markup.plain_figure)."""

from __future__ import annotations

import pandas as pd

import plotly.graph_objects as go

from eval.reports.markup import plain, plain_figure
from pages._charts import intents_figure, per_query_figure

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


def test_the_reports_figures_escape_names_labels_and_titles_but_keep_their_hover_markup():
    fig = go.Figure([go.Bar(name="<b>p</b>", x=["<i>debug</i>", "concept"], y=[0.5, 0.4],
                            hovertemplate="%{x}<br>%{y}<extra></extra>")])
    fig.update_layout(title="vs <a href='http://e.x'>vector</a>", xaxis_title="<u>q</u>",
                      updatemenus=[dict(buttons=[dict(label="<b>ndcg@5</b>", method="restyle",
                                                      args=[{}])])])
    plain_figure(fig)
    bar = fig.data[0]
    assert bar.name == "&lt;b&gt;p&lt;/b&gt;" and list(bar.x) == ["&lt;i&gt;debug&lt;/i&gt;", "concept"]
    assert list(bar.y) == [0.5, 0.4]                       # numbers untouched
    assert bar.hovertemplate == "%{x}<br>%{y}<extra></extra>"   # the code's own markup kept
    assert fig.layout.title.text == "vs &lt;a href='http://e.x'&gt;vector&lt;/a&gt;"
    assert fig.layout.xaxis.title.text == "&lt;u&gt;q&lt;/u&gt;"
    assert fig.layout.updatemenus[0].buttons[0].label == "&lt;b&gt;ndcg@5&lt;/b&gt;"
