"""Tune's Export popover: the current knobs as an engine's own configuration
(``eval.export``), or the line saying what the engine cannot express."""

from __future__ import annotations

import streamlit as st

from pages import _tune_state as tn
from pages._markup import md


def export_popover(column, notes: tuple[str, ...] = ()) -> None:
    """The popover in ``column`` (``notes``: lines the exported file carries, e.g. that the
    knobs' figures are in-sample). It keeps its open state in the session
    (``on_change="rerun"``): a rerun — a choice inside it, or anything else — leaves it open, and
    opening it reruns the page, so what it shows reads the knobs as they are now."""
    export = column.popover("Export…", width="stretch", key="tune_export_open", on_change="rerun")
    if export.open:
        from eval.export import EXPORTERS, export_config

        with export:
            engines = list(EXPORTERS)   # the engine chosen last time, kept while it is closed
            kept = st.session_state.get("tune_export_engine_kept")
            engine = st.selectbox("Engine", engines, key="tune_export_engine",
                                  index=engines.index(kept) if kept in engines else 0,
                                  format_func=lambda e: f"{e} — {EXPORTERS[e].summary}")
            st.session_state["tune_export_engine_kept"] = engine
            try:
                text = export_config(tn.config(), engine, notes=notes)
                st.code(text, language="python" if EXPORTERS[engine].suffix == ".py" else "json")
                st.download_button("Download", text, key="tune_export_download",
                                   file_name=f"rwb-{engine}{EXPORTERS[engine].suffix}",
                                   icon=":material/download:", on_click="ignore")
            except ValueError as error:  # what the engine cannot express, named (not a fault)
                st.error(md(str(error)))
