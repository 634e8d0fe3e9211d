"""Tune's tries panel and query notes: list, restore, name and annotate (``eval.stores.tries``)."""

from __future__ import annotations

import streamlit as st

from eval.stores.tries import TryStore
from pages import _tune_state as tn
from pages._markup import html as h, md


def _flash(text: str) -> None:
    st.session_state["tune_flash"] = text


def on_keep(store: TryStore) -> None:
    entry = tn.keep_try(store, force=True)
    _flash(f"Kept as try #{entry['id']}." if entry
           else "Nothing to keep yet: the ranking is not scored.")


def on_restore(store: TryStore) -> None:
    try_id = st.session_state.get("tune_try_pick")
    if try_id is not None:
        tn.restore_try(store, int(try_id))
        _flash(f"Restored try #{try_id}.")


def on_describe(store: TryStore) -> None:
    try_id = st.session_state.get("tune_try_pick")
    if try_id is None:
        return
    try:
        store.describe(int(try_id), st.session_state.get("tune_try_name", ""),
                       st.session_state.get("tune_try_notes", ""))
        _flash(f"Try #{try_id} saved.")
    except ValueError as error:
        _flash(f":red[{md(error)}]")


def on_query_note(store: TryStore, query_id: str) -> None:
    try:
        store.note_query(query_id, st.session_state.get("tune_query_note", ""))
    except ValueError as error:
        _flash(f":red[{md(error)}]")


def tries_table(tries: list[dict], primary: str, label: str) -> str:
    rows = []
    for t in reversed(tries[-12:]):
        value = t["metrics"].get(primary, float("nan"))
        delta = value - t["baseline_metrics"].get(primary, float("nan"))
        changes = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in t["changes"].items()) or "—"
        name = h(t["name"] or t["source"])
        rows.append(f"<tr><td>#{t['id']}</td><td>{name}</td><td>{value:.4f}</td>"
                    f"<td>{delta:+.4f}</td><td>{h(changes[:60])}</td></tr>")
    head = f"<tr><th>try</th><th>name</th><th>{h(label)}</th><th>Δ</th><th>changed</th></tr>"
    body = "".join(rows)
    return f'<table class="rwb-t rwb-tries"><thead>{head}</thead><tbody>{body}</tbody></table>'


def panel(store: TryStore, primary: str, label: str) -> None:
    """A popover: the tries (newest first) with their scores, restore, name and notes."""
    tries = store.tries()
    with st.popover(f"Tries · {len(tries)}", width="stretch"):
        st.button("Keep the current knobs as a try", on_click=on_keep, args=(store,),
                  key="tune_try_keep")
        if not tries:
            st.caption("No tries yet: a try is kept when you leave a set of knob moves "
                       "(another query, starting point or reset) or press the button above.")
            return
        st.html(tries_table(tries, primary, label))
        ids = [t["id"] for t in reversed(tries)]
        if st.session_state.get("tune_try_pick") not in ids:
            st.session_state["tune_try_pick"] = ids[0]
        by_id = {t["id"]: t for t in tries}
        st.selectbox("Try", ids, key="tune_try_pick",
                     format_func=lambda i: f"#{i} {by_id[i]['name'] or by_id[i]['source']}")
        chosen = by_id[st.session_state["tune_try_pick"]]
        st.button("Restore this try", on_click=on_restore, args=(store,), type="primary",
                  key="tune_try_restore")
        st.session_state["tune_try_name"] = chosen["name"]
        st.session_state["tune_try_notes"] = chosen["notes"]
        with st.form("tune_try_form", border=False):
            st.text_input("Name", key="tune_try_name", max_chars=64)
            st.text_area("Notes", key="tune_try_notes", height=80)
            st.form_submit_button("Save name and notes", on_click=on_describe, args=(store,))


def query_note(store: TryStore, query_id: str) -> None:
    note = store.query_notes().get(query_id, "")
    st.session_state["tune_query_note"] = note
    with st.expander(f"Notes on {md(query_id)}" + (" ·  ✎" if note else ""), expanded=False):
        st.text_area("Notes on this query", key="tune_query_note", height=80,
                     label_visibility="collapsed", on_change=on_query_note, args=(store, query_id),
                     placeholder="what to look at, why it fails…")
