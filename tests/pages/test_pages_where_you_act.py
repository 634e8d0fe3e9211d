"""AppTest for issue 42 (the daily tool, round 3): what you act on is where you look, undo where
you grade, no raw ``None`` in a table, a refusal in an error box.

On tiny, Tune opens q1 under rrf against the baseline vector; q1's one judgment is d03 = 3."""

from __future__ import annotations

import re

from streamlit.testing.v1.element_tree import Column, Dataframe

from tests.pages.test_app import frame_with, run, shown_docs


def walk(node, path=()):
    """Every element of the tree in page order, with the blocks above it."""
    children = getattr(node, "children", None)
    if children is None:
        yield node, path
        return
    for key in sorted(children):
        yield from walk(children[key], path + (node,))


def placed(at, wanted) -> tuple[int, tuple] | None:
    """(page-order position, enclosing blocks) of the first element ``wanted`` accepts."""
    for i, (element, path) in enumerate(walk(at.main)):
        if wanted(element):
            return i, path
    return None


def is_ranking(element) -> bool:
    body = getattr(element.proto, "body", "") if element.type == "html" else ""
    return 'class="rwb-t"' in body and "Δ</th>" in body


def column_of(path) -> object:
    return next(block for block in path if isinstance(block, Column))    # the outermost: left or right


def test_query_list_and_queue_sit_above_the_ranking_in_its_column(app):
    at = run(app.toggle(key="tune_query_list").set_value(True))
    at = run(at.toggle(key="tune_queue").set_value(True))
    ranking = placed(at, is_ranking)
    table = placed(at, lambda e: isinstance(e, Dataframe) and "delta" in e.value.columns)
    pills = {id(p) for p in at.get("pills") if p.key.startswith("tune_queue_")}
    queue = placed(at, lambda e: id(e) in pills)
    assert ranking and table and queue
    assert table[0] < ranking[0] and queue[0] < ranking[0]          # above the ranking, not under it
    assert column_of(table[1]) is column_of(ranking[1]) is column_of(queue[1])   # in the results column


def test_a_grade_is_undone_where_it_was_given_any_row_not_only_the_last(app, home):
    from eval.stores.judgments import JudgmentStore
    from retrieval.dataset import load_dataset
    from tests.pages.test_app import TINY

    store = JudgmentStore(load_dataset(TINY), home)
    at = run(app.segmented_control(key="tune_rows").set_value("Grade"))
    at = run(at.pills(key="tune_g_c_q1_d05").set_value(0))
    at = run(at.pills(key="tune_g_c_q1_d08").set_value(2))
    assert store.qrels()["q1"] == {"d03": 3, "d05": 0, "d08": 2}
    assert at.button(key="tune_undo_last").label == "Undo: d08 = 2 for q1"     # the latest grade's undo
    at = run(at.button(key="tune_undo_c_q1_d05").click())      # the earlier one, from its own row
    assert store.qrels()["q1"] == {"d03": 3, "d08": 2}
    assert at.pills(key="tune_g_c_q1_d05").value is None
    assert [(h["doc"], h["after"]) for h in store.history()] == [("d08", 2)]
    at = run(at.button(key="tune_undo_last").click())
    assert store.qrels()["q1"] == {"d03": 3}
    assert not [b for b in at.button if (b.key or "").startswith("tune_undo_")]   # nothing left to undo


def test_data_judgments_table_shows_no_raw_none(app):
    from tests.pages.test_app import goto

    at = run(app.segmented_control(key="tune_rows").set_value("Grade"))
    at = run(at.pills(key="tune_g_c_q1_d05").set_value(0))        # judged here only: no dataset grade
    at = goto(at, "pages/data.py")
    at = run(at.selectbox(key="data_query").set_value("q1"))
    table = frame_with(at, "dataset", "in effect")
    assert table.set_index("doc")["dataset"].to_dict() == {"d03": "3", "d05": "—"}


def test_an_export_refusal_shows_in_an_error_box(app):
    at = run(app.slider(key="tune_k_rrf.w_dense").set_value(0.0))
    at = run(at.slider(key="tune_k_rrf.w_sparse").set_value(0.0))
    at.session_state["tune_export_open"] = True
    at = run(at)
    refusals = [e.value for e in at.error if "both path weights 0" in e.value]
    assert refusals and not [e.value for e in at.info if "both path weights 0" in e.value]


def test_evaluate_per_intent_table_spans_the_page_not_half_of_it(app):
    """Issue 42 item 6: in the left half beside the scatter, the per-intent table of devmem's
    six columns scrolled sideways at 1400 px ("preference" hidden); at the page's width each shows."""
    from tests.pages.test_app import goto

    at = goto(app, "pages/evaluate.py")
    table = placed(at, lambda e: isinstance(e, Dataframe) and e.value.columns[0] == "pipeline"
                   and all(re.fullmatch(r"\S+ \(\d+\)", c) for c in e.value.columns[1:]))   # "intent (n)" columns
    assert table is not None
    assert not any(isinstance(block, Column) for block in table[1])            # in no column: full width
