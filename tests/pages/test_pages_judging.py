"""AppTest: a grade of 0 given on the pages is a judgment like any other (issue 33.1) — stored,
shown (the pill reads 0), counted (judged@5, the sidebar, Tune's "+N edits", the Data page's
table and history), it takes the pair off the judging queue, and it is undone.

On tiny, Tune's current pipeline is rrf and its baseline vector; both rank q1
[d03 d05 d08 d06 d01] and q1's one judgment is d03 = 3. judged@5 before: q1 1/5, q2 1/5 (d01),
q3 0 (d08 below 5), q4 1/5 (d06) → 3/20 = 0.150. Grading d05 0 for q1 makes q1 2/5 → 4/20 = 0.200.
"""

from __future__ import annotations

import pytest
import streamlit as st

from eval.stores.judgments import JudgmentStore
from retrieval.dataset import load_dataset
from tests.pages.test_app import TINY, frame_with, goto, metric_values, route_through_main, run, start, texts


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("rwb-home-judging")


@pytest.fixture
def app(home, monkeypatch):
    route_through_main(monkeypatch)            # the sidebar runs on every rerun, as in a browser
    yield start(home, monkeypatch)
    st.cache_data.clear()
    st.cache_resource.clear()


def sidebar_count(at) -> str:
    return next(c.value for c in at.sidebar.caption if "judgments" in c.value).split(" · ")[-1]


def summary(at) -> str:
    return next(t for t in texts(at) if "Query set · metrics@5" in t)


def test_a_0_from_a_tune_row_is_shown_counted_listed_and_undone(app, home):
    at = run(app.segmented_control(key="tune_rows").set_value("Grade"))
    assert metric_values(at)["judged@5"] == "0.150"
    assert sidebar_count(at) == "4 judgments (explicit)"
    at = run(at.pills(key="tune_g_c_q1_d05").set_value(0))
    assert JudgmentStore(load_dataset(TINY), home).qrels()["q1"] == {"d03": 3, "d05": 0}
    assert at.pills(key="tune_g_c_q1_d05").value == 0           # the pill shows the 0
    assert at.pills(key="tune_g_b_q1_d05").value == 0           # in the baseline's row too
    assert metric_values(at)["judged@5"] == "0.200"
    assert sidebar_count(at) == "5 judgments (explicit)"
    assert "dataset qrels + 1 edit (history head" in summary(at)
    at = run(at.pills(key="tune_g_c_q1_d08").set_value(0))      # a second 0: two edits
    assert "dataset qrels + 2 edits (history head" in summary(at)
    assert metric_values(at)["judged@5"] == "0.250"             # q1 3/5 → 5/20

    at = goto(at, "pages/data.py")
    at = run(at.selectbox(key="data_query").set_value("q1"))
    table = frame_with(at, "dataset", "in effect")
    assert table.set_index("doc")["in effect"].to_dict() == {"d03": 3, "d05": 0, "d08": 0}
    assert table.set_index("doc")["changed"].to_dict() == {"d03": "", "d05": "✎", "d08": "✎"}
    history = frame_with(at, "before", "after")
    assert [list(r) for r in history[["doc", "before", "after"]].values] == [["d08", "—", "0"],
                                                                           ["d05", "—", "0"]]
    at = run(next(b for b in at.button if b.label == "Undo").click())
    assert JudgmentStore(load_dataset(TINY), home).qrels()["q1"] == {"d03": 3, "d05": 0}
    assert sidebar_count(at) == "5 judgments (explicit)"


def test_a_0_from_the_judging_queue_takes_the_pair_off_it(app, home):
    at = run(app.toggle(key="tune_queue").set_value(True))
    keys = [p.key for p in at.get("pills") if p.key.startswith("tune_queue_")]
    total = next(t for t in texts(at) if "unjudged pair(s)" in t)
    first = keys[0].removeprefix("tune_queue_")
    query_id, doc_id = first.split("_", 1)
    at = run(at.pills(key=keys[0]).set_value(0))
    assert JudgmentStore(load_dataset(TINY), home).qrels()[query_id][doc_id] == 0
    assert keys[0] not in [p.key for p in at.get("pills") if p.key.startswith("tune_queue_")]
    n_before = int(total.split("·")[1].split("unjudged")[0])
    assert any(f"{n_before - 1} unjudged pair(s)" in t for t in texts(at))
    assert sidebar_count(at) == "5 judgments (explicit)"


def test_the_queue_shows_the_query_text_and_the_grade_legend(app):
    at = run(app.toggle(key="tune_queue").set_value(True))
    shown = " ".join(texts(at))
    assert "ERR_CONN_REFUSED" in shown or "user_id 列改名了吗" in shown       # queries' text
    assert "Grades: 0 · not relevant · 1 · related · 2 · relevant · 3 · exact answer" in shown
