"""Reports' frozen snapshots: freeze a configuration's results, compare two per query and, on a
click, their rankings side by side (``eval.stores.snapshots``)."""

from __future__ import annotations

import streamlit as st

from eval.reports.history_chart import history_figure
from eval.stores import configs as cfg
from eval.stores.history import CheckHistory
from eval.stores.inputs import changed, describe_changes
from eval.stores.snapshots import SnapshotStore, compare
from pages import _charts as ch
from pages import _state as sh
from pages import _tune_state as tn
from pages._markup import code, md

TUNE_LABEL = "tune:current"


def _config(label: str):
    return tn.config() if label == TUNE_LABEL else cfg.resolve_config(label)


def _label(label: str) -> str:
    return "◎ Tune · current knobs" if label == TUNE_LABEL else sh.format_label(label)


def on_freeze(ws) -> None:
    name = st.session_state.get("snap_name", "").strip()
    try:
        config = _config(st.session_state["snap_config"])
        qrels, _ = ws.judged()
        SnapshotStore(ws.dataset).freeze(name, ws.evaluation(config), ws.pool(), qrels,
                                         st.session_state.get("snap_notes", ""))
        st.session_state["reports_flash"] = f"Froze snapshot **{md(name)}**."
    except ValueError as error:
        st.session_state["reports_flash"] = f":red[{md(error)}]"


def section(ws) -> None:
    st.subheader("Frozen snapshots")
    if not ws.has_queries:
        st.info("Snapshots need a query set.")
        return
    store = SnapshotStore(ws.dataset)
    labels = ([TUNE_LABEL] if tn.has_state() else []) + cfg.config_labels()
    row = st.columns([2, 2, 2, 1], vertical_alignment="bottom")
    row[0].selectbox("Configuration", labels, key="snap_config",
                     format_func=_label)
    row[1].text_input("Snapshot name", key="snap_name", placeholder="e.g. before-bm25-change")
    row[2].text_input("Notes", key="snap_notes")
    row[3].button("Freeze", type="primary", key="snap_freeze", on_click=on_freeze, args=(ws,),
                  use_container_width=True,
                  help="Keep this configuration's rankings and per-query values as they are now, "
                       "with the judgments' version.")
    names = store.names()
    if len(names) < 2:
        st.caption("Freeze two snapshots to compare them.")
        return
    pick = st.columns(2)
    a_name = pick[0].selectbox("Snapshot A", names, key="snap_a")
    b_name = pick[1].selectbox("Snapshot B", names, key="snap_b", index=len(names) - 1)
    a, b = store.load(a_name), store.load(b_name)
    st.caption(f"A = {code(a['config_name'])} frozen {md(a['time'])} · "
               f"B = {code(b['config_name'])} frozen {md(b['time'])}")
    names = changed(a.get("inputs"), b.get("inputs"))
    if names:
        st.warning(f"A and B differ in their inputs — {md(describe_changes(names))}: part of a delta may come "
                   "from them.")
    elif a["judgments"] != b["judgments"]:  # snapshots frozen before inputs were recorded
        st.warning("A and B were scored with different judgments: part of a delta may come from "
                   "the grades.")
    elif a["fingerprint"] != b["fingerprint"]:
        st.warning("A and B were frozen on different versions of the dataset.")
    if "queries" in names and not st.toggle("Compare the queries both hold", key="snap_other_queries",
                                            help="A and B were frozen on different query sets."):
        st.info("A and B were frozen on different query sets; a per-query comparison is refused "
                "unless asked.")
        return
    metric = sh.PRIMARY
    rows = compare(a, b, metric)
    label = sh.metric_label(metric)
    columns = {"A": st.column_config.NumberColumn(f"A {label}", format="%.4f"),
               "B": st.column_config.NumberColumn(f"B {label}", format="%.4f"),
               "delta": st.column_config.NumberColumn("Δ", format="%+.4f")}
    event = st.dataframe(rows, hide_index=True, key="snap_table", on_select="rerun",
                         selection_mode="single-row", column_config=columns)
    chosen = event.selection.rows if event is not None else []
    if not chosen:
        st.caption("Select a query to see both rankings side by side.")
        return
    qid = rows[chosen[0]]["query"]
    left, right = st.columns(2)
    for col, snap, label in ((left, a, "A"), (right, b, "B")):
        col.markdown(f"**{label}** · {code(snap['name'])} · {md(qid)}")
        ranking = snap["queries"][qid]["ranking"]
        col.table([{"rank": i + 1, "doc": doc} for i, doc in enumerate(ranking)])


def changed_since(ws, record: dict) -> list[str]:
    """The inputs (``eval.stores.inputs``) that differ between a logged record and today's
    workspace for its configuration; [] when the record has none or its config cannot be read."""
    if not isinstance(record.get("inputs"), dict):
        return []
    try:
        config = sh.parse_toml(record.get("config", ""))
    except ValueError:
        return []
    return changed(record["inputs"], ws.inputs(config))


def check_history(ws) -> None:
    """The dataset's ``rwb check`` history (``eval.reports.history_chart``)."""
    try:
        entries = CheckHistory(ws.dataset).entries()
    except ValueError as error:
        st.error(f"Cannot read the check history: {md(error)}")
        return
    if not entries:
        return
    st.subheader("Checks over time")
    metrics = list(dict.fromkeys(m for e in entries for m in (e.get("metrics") or {})))
    metric = st.selectbox("Metric", metrics, key="reports_history_metric") if len(metrics) > 1 else metrics[0]
    st.plotly_chart(history_figure(entries, metric), config=ch.CONFIG, key="reports_history")
    st.caption(f"{len(entries)} `rwb check` runs on {md(ws.dataset.name)}; the latest: "
               f"{md(entries[-1].get('time', ''))}, {'passed' if entries[-1].get('passed') else 'FAILED'}.")
