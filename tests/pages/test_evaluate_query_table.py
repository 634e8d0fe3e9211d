"""Issue 42 item 3: Evaluate's per-query table — sortable, one row per judged query with the
baseline's and the candidate's values — and a query opened on Tune from Evaluate opens under the
pipeline Evaluate was showing (its candidate), not whatever Tune had before.

On tiny, the sidebar's baseline is vector; Evaluate compares rrf and weighted with it."""

from __future__ import annotations

import pytest

from tests.pages.test_app import frame_with, goto, run


def test_the_per_query_table_opens_a_row_on_tune_under_the_candidate_shown(app):
    from pages import _tune_state as tn

    at = run(app.selectbox(key="tune_source_pick").set_value("profile:debug"))     # Tune on another pipeline
    at = goto(at, "pages/evaluate.py")
    at = run(at.multiselect(key="eval_pipelines").set_value(["rrf", "weighted"]))
    at = run(at.selectbox(key="eval_candidate").set_value("weighted"))
    table = frame_with(at, "query", "intent", "baseline", "candidate", "delta")
    assert sorted(table["query"]) == ["q1", "q2", "q3", "q4"]                  # every judged query
    assert list(table["delta"]) == pytest.approx(list(table["candidate"] - table["baseline"]))
    at = run(at.selectbox(key="eval_query").set_value("q3"))
    at.button(key="eval_open_tune").click().run()
    state = at.session_state[tn.KEY]
    assert (state.source, state.config.name, state.query) == ("weighted", "weighted", 2)


def click_row(at, key: str, row: int):
    """What a browser sends when a row of the selectable table ``key`` is clicked: the table's
    selection state (a JSON string widget value, as Streamlit's frontend writes it)."""
    import json

    from streamlit.proto.WidgetStates_pb2 import WidgetState
    from streamlit.testing.v1.element_tree import Widget

    table = next(d for d in at.dataframe if d.key == key)

    class Selected(Widget):
        def __init__(self):
            self.proto, self.root, self.key, self.type = table.proto, table.root, key, "dataframe"
            self.id = table.proto.id

        value = None

        @property
        def _widget_state(self):
            state = WidgetState(id=self.id)
            state.string_value = json.dumps({"selection": {"rows": [row], "columns": [], "cells": []}})
            return state

    parent = next(node for node in walk_blocks(at._tree) if table in node.children.values())
    slot = next(k for k, v in parent.children.items() if v is table)
    parent.children[slot] = Selected()
    return at.run()


def walk_blocks(node):
    children = getattr(node, "children", None)
    if children is None:
        return
    yield node
    for child in children.values():
        yield from walk_blocks(child)


def test_a_row_click_opens_that_query_on_tune_under_the_candidate(app):
    from pages import _tune_state as tn

    at = run(app.selectbox(key="tune_source_pick").set_value("profile:debug"))
    at = goto(at, "pages/evaluate.py")
    at = run(at.multiselect(key="eval_pipelines").set_value(["rrf", "weighted"]))
    at = run(at.selectbox(key="eval_candidate").set_value("rrf"))
    table = frame_with(at, "query", "intent", "baseline", "candidate", "delta")
    row = list(table["query"]).index("q2")
    at = click_row(at, "eval_query_table", row)
    assert not at.exception
    state = at.session_state[tn.KEY]
    assert (state.source, state.config.name, state.query) == ("rrf", "rrf", 1)
