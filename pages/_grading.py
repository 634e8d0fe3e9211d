"""Grading on Tune: one click per result row, the one-pass form, the judging queue's pills; every
grade goes to the workspace's judgment store (``eval.stores.judgments``), a 0 included."""

from __future__ import annotations

import streamlit as st

from pages import _state as s
from pages._markup import code, md


def changed() -> None:
    """A judgment changed from inside Tune's fragment: the fragment alone reruns, as for a knob
    (it draws the sidebar's count, ``pages._dataset_line``); the whole page reruns only while the
    Snapshots pane, outside the fragment, shows grades beside its rankings."""
    if st.session_state.get("tune_snapshots"):
        st.session_state["tune_full_run"] = True


def on_grade(ws, qid: str, doc: str, key: str) -> None:
    value = st.session_state.get(key)
    if value is None:
        return
    try:
        ws.judgments.grade(qid, doc, int(value), author="tune", rater=s.rater())
    except ValueError as error:  # a full or read-only RWB_HOME, a damaged judgments file
        st.session_state["tune_flash"] = f":red[{md(error)}]"
        return
    st.session_state["tune_flash"] = (f"Judged {md(doc)} = {value} for {md(qid)}. Undo: the button above "
                                      "the ranking, or ↶ on the row.")
    st.session_state["tune_last_grade"] = (qid, doc, int(value))
    changed()


def on_undo(ws, qid: str, doc: str) -> None:
    """Undo the latest change of one (query, document) judgment (the store's undo), any pair."""
    try:
        change = ws.judgments.undo(qid, doc)
    except ValueError as error:  # a damaged judgments file, a full or read-only RWB_HOME
        st.session_state["tune_flash"] = f":red[{md(error)}]"
        return
    if (st.session_state.get("tune_last_grade") or ())[:2] == (qid, doc):
        st.session_state["tune_last_grade"] = None
    st.session_state["tune_flash"] = ("Nothing to undo." if change is None else
                                      f"Undid {md(qid)} / {md(doc)}: {change['after']} → "
                                      f"{'—' if change['before'] is None else change['before']}.")
    changed()


def undo_last(ws) -> None:
    """After a grade: a button that undoes it, where the grading happens."""
    last = st.session_state.get("tune_last_grade")
    if last:
        qid, doc, value = last
        st.button(f"Undo: {doc} = {value} for {qid}", icon=":material/undo:", key="tune_undo_last",
                  on_click=on_undo, args=(ws, qid, doc), help="Revert this grade (the judgment store's undo).")


def changed_docs(ws, qid: str) -> set[str]:
    """Documents of this query whose judgment the workbench changed (each can be undone)."""
    try:
        return {change["doc"] for change in ws.judgments.history() if change["query"] == qid}
    except ValueError:
        return set()


def on_grade_all(ws, qid: str, docs: list[str]) -> None:
    """The one-pass form: every unjudged result given a grade is saved at once."""
    saved = 0
    for doc in docs:
        value = st.session_state.get(f"tune_ga_{doc}")
        if value is not None:
            try:
                ws.judgments.grade(qid, doc, int(value), author="tune", rater=s.rater())
            except ValueError as error:
                st.session_state["tune_flash"] = f":red[{saved} grade(s) saved, then: {md(error)}]"
                return
            saved += 1
    st.session_state["tune_flash"] = f"Saved {saved} grade(s) for {md(qid)}."
    changed()


def grade_row(ws, prefix: str, qid: str, result, grade, width, changed: bool = False) -> None:
    """A ranking row with one-click grading (Grade mode); ↶ undoes the row's latest change."""
    key = f"tune_g_{prefix}_{qid}_{result.id}"
    st.session_state[key] = grade
    cols = st.columns([*width, 0.45], vertical_alignment="center")
    text = " ".join(result.text.split())
    cols[0].markdown(f"**{result.rank + 1}** · {code(result.id)}")
    cols[1].markdown(md(text[:140] + ("…" if len(text) > 140 else "")), help=md(text[:2000]))
    cols[2].pills("grade", s.GRADES, key=key, on_change=on_grade, args=(ws, qid, result.id, key),
                  label_visibility="collapsed")
    if changed:
        cols[3].button("↶", key=f"tune_undo_{prefix}_{qid}_{result.id}", on_click=on_undo,
                       args=(ws, qid, result.id), help=f"Undo the latest change of {result.id}'s judgment")
