"""Frozen snapshots on Reports and Tune: freeze a configuration's results under a name with notes,
compare two (or one with Tune's current knobs, not frozen) — the knobs that differ, mean
metrics, per-query deltas largest first and, on a click, both rankings side by side with their
text (``eval.stores.snapshots``; the tables from ``eval.experiments.views``)."""

from __future__ import annotations

import re
import time

import streamlit as st

from eval.experiments import views
from eval.experiments.explain import explain_rows
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
NAME_CHARS = 64  # the longest name the snapshot store accepts (eval.stores.files.check_name)


def _config(label: str):
    return tn.config() if label == TUNE_LABEL else cfg.resolve_config(label)


def _label(label: str) -> str:
    return "◎ Tune · current knobs" if label == TUNE_LABEL else sh.format_label(label)


def _pick_label(name: str) -> str:
    """A snapshot picker's option: the snapshot's name, or Tune's current knobs (not frozen)."""
    return "◎ current knobs (not frozen)" if name == TUNE_LABEL else name


def _freeze(ws, config, name: str, notes: str) -> str:
    """Freeze ``config`` under ``name``; the flash message (a refusal in red)."""
    try:
        qrels, _ = ws.judged()
        SnapshotStore(ws.dataset).freeze(name, ws.evaluation(config), ws.pool(), qrels, notes)
        return f"Froze snapshot **{md(name)}**."
    except ValueError as error:
        return f":red[{md(error)}]"


def on_freeze(ws) -> None:
    name = st.session_state.get("snap_name", "").strip()
    try:
        config = _config(st.session_state["snap_config"])
    except ValueError as error:
        st.session_state["reports_flash"] = f":red[{md(error)}]"
        return
    flash = _freeze(ws, config, name, st.session_state.get("snap_notes", ""))
    st.session_state["reports_flash"] = flash
    if not flash.startswith(":red"):            # saved: the form starts empty for the next one
        st.session_state["snap_name"] = ""
        st.session_state["snap_notes"] = ""


def auto_name(config, taken: list[str]) -> str:
    """``<pipeline>-<date>-<time>``, with ``-2``, ``-3``… when frozen twice in one second: a
    name the snapshot store accepts (``check_name``) whatever the pipeline is called — other
    characters become ``-``, the pipeline's part is cut to fit, ``pipeline`` when none is left."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    head = re.sub(r"[^A-Za-z0-9 _.-]+", "-", config.name).strip(" _.-")
    head = head[:NAME_CHARS - len(stamp) - 5].rstrip(" _.-") or "pipeline"
    base = f"{head}-{stamp}"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def on_freeze_tune(ws) -> None:
    """Tune's freeze: the current knobs, under the name and notes typed in Freeze's form, else
    named after the pipeline and the time; a saved form starts empty for the next one."""
    config = tn.config()
    name = st.session_state.get("tune_freeze_name", "").strip() or auto_name(
        config, SnapshotStore(ws.dataset).names())
    notes = st.session_state.get("tune_freeze_notes", "").strip() or "frozen on Tune"
    flash = _freeze(ws, config, name, notes)
    st.session_state["tune_flash"] = flash
    if not flash.startswith(":red"):
        st.session_state["tune_freeze_name"] = ""
        st.session_state["tune_freeze_notes"] = ""


def freeze_form(ws, disabled: bool) -> None:
    """Tune's Freeze popover's body: a name (the pipeline and the time when left empty), notes
    and the button."""
    st.text_input("Snapshot name", key="tune_freeze_name", disabled=disabled,
                  placeholder="empty: the pipeline and the time", max_chars=NAME_CHARS)
    st.text_input("Notes", key="tune_freeze_notes", disabled=disabled,
                  placeholder="e.g. before lowering rrf_k")
    st.button("Freeze", type="primary", icon=":material/ac_unit:", disabled=disabled, key="tune_freeze",
              on_click=on_freeze_tune, args=(ws,),
              help="Keep the current knobs' rankings and per-query values as a snapshot to compare "
                   "later, here or on Reports.")


def _current(ws) -> dict:
    """Tune's current knobs as a snapshot record, not frozen (``SnapshotStore.record``)."""
    qrels, _ = ws.judged()
    config = tn.config()
    return SnapshotStore(ws.dataset).record(TUNE_LABEL, ws.evaluation(config), ws.pool(), qrels,
                                            "the knobs on Tune now, not frozen")


def _load(ws, store, name: str) -> dict:
    return _current(ws) if name == TUNE_LABEL else store.load(name)


def _side(letter: str, record: dict) -> str:
    config = code(record.get("config_name") or "?")
    if record.get("name") == TUNE_LABEL:
        return f"{letter} = {config}, the current knobs on Tune (not frozen)"
    return (f"{letter} = {config} frozen {md(record.get('time') or '?')}"
            + (f" ({md(record['notes'])})" if record.get("notes") else ""))


def knob_changes(a: dict, b: dict) -> str | None:
    """Which knobs differ between two records' configurations, in words
    (``views.config_changes``); None when a configuration cannot be read."""
    try:
        return views.config_changes(sh.parse_toml(a.get("config", "")), sh.parse_toml(b.get("config", "")))
    except ValueError:
        return None


def section(ws, prefix: str = "snap") -> None:
    """The freeze form (Reports only) and the comparison of two snapshots."""
    if not ws.has_queries:
        st.info("Snapshots need a query set.")
        return
    store = SnapshotStore(ws.dataset)
    if prefix == "snap":
        st.subheader("Frozen snapshots")
        labels = ([TUNE_LABEL] if tn.has_state() else []) + cfg.config_labels()
        row = st.columns([2, 2, 2, 1], vertical_alignment="bottom")
        row[0].selectbox("Configuration", labels, key="snap_config",
                         format_func=_label)
        row[1].text_input("Snapshot name", key="snap_name", placeholder="e.g. before-bm25-change")
        row[2].text_input("Notes", key="snap_notes")
        row[3].button("Freeze", type="primary", key="snap_freeze", on_click=on_freeze, args=(ws,),
                      width="stretch",
                      help="Keep this configuration's rankings and per-query values as they are "
                           "now, with the judgments' version.")
    names = store.names() + ([TUNE_LABEL] if tn.has_state() else [])   # the current knobs, not frozen
    if len(names) < 2:
        st.caption("Freeze a snapshot to compare it with the current knobs on Tune (or two to compare "
                   "them here).")
        return
    pick = st.columns(2)
    a_name = pick[0].selectbox("Snapshot A", names, key=f"{prefix}_a", format_func=_pick_label)
    b_name = pick[1].selectbox("Snapshot B", names, key=f"{prefix}_b", index=len(names) - 1,
                               format_func=_pick_label)
    try:
        a, b = _load(ws, store, a_name), _load(ws, store, b_name)
    except ValueError as error:  # a damaged or foreign stored snapshot: one notice, the rest of the page
        st.error(md(error))
        return
    st.caption(_side("A", a) + " · " + _side("B", b))
    names = changed(a.get("inputs"), b.get("inputs"))
    if names:
        knobs = knob_changes(a, b) if "pipeline" in names else None
        st.warning(f"A and B differ in their inputs — {md(describe_changes(names))}"
                   + (f" ({md(knobs)})" if knobs else "") + ": part of a delta may come from them.")
    elif a.get("judgments") != b.get("judgments"):  # snapshots frozen before inputs were recorded
        st.warning("A and B were scored with different judgments: part of a delta may come from "
                   "the grades.")
    elif a.get("fingerprint") != b.get("fingerprint"):
        st.warning("A and B were frozen on different versions of the dataset.")
    if "queries" in names and not st.toggle("Compare the queries both hold", key=f"{prefix}_other_queries",
                                            help="A and B were frozen on different query sets."):
        st.info("A and B were frozen on different query sets; a per-query comparison is refused "
                "unless asked.")
        return
    number = st.column_config.NumberColumn
    st.markdown("**Mean metrics**")
    st.dataframe(views.snapshot_means(a, b), hide_index=True, key=f"{prefix}_means",
                 column_config={"A": number(format="%.4f"), "B": number(format="%.4f"),
                                "delta": number("Δ (B − A)", format="%+.4f")})
    metric = sh.PRIMARY
    rows = compare(a, b, metric)
    label = sh.metric_label(metric)
    columns = {"A": number(f"A {label}", format="%.4f"),
               "B": number(f"B {label}", format="%.4f"),
               "delta": number("Δ", format="%+.4f")}
    st.markdown(f"**Per query** · {label}, the largest change first; select a row for both rankings")
    event = st.dataframe(rows, hide_index=True, key=f"{prefix}_table", on_select="rerun",
                         selection_mode="single-row", column_config=columns)
    chosen = event.selection.rows if event is not None else []
    if not chosen:
        st.caption("Select a query to see both rankings side by side.")
        return
    qid = rows[chosen[0]]["query"]
    st.markdown(f"**{md(qid)}** · A {code(_pick_label(a['name']))} | B {code(_pick_label(b['name']))}")
    st.dataframe(views.snapshot_rankings(a, b, qid, ws.dataset.documents, qrels=ws.judged()[0]), hide_index=True,
                 key=f"{prefix}_rankings", column_config={
                     "rank": number(width=50), "A": st.column_config.TextColumn(width=70),
                     "B": st.column_config.TextColumn(width=70),
                     "A grade": st.column_config.TextColumn("grade", width=50,
                                                            help="A's judgment (the grades it was frozen with)"),
                     "B grade": st.column_config.TextColumn("grade", width=50,
                                                            help="B's judgment (the grades it was frozen with)"),
                     "A text": st.column_config.TextColumn(width="large"),
                     "B text": st.column_config.TextColumn(width="large")})


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
    if not metrics:  # entries without a metric (damaged or foreign): one notice, the rest of the page
        st.info(f"The check history of {md(ws.dataset.name)} holds {len(entries)} entries, none with a metric "
                "value: nothing to chart.")
        return
    metric = st.selectbox("Metric", metrics, key="reports_history_metric") if len(metrics) > 1 else metrics[0]
    st.plotly_chart(history_figure(entries, metric), config=ch.CONFIG, key="reports_history")
    st.caption(f"{len(entries)} `rwb check` runs on {md(ws.dataset.name)}; the latest: "
               f"{md(entries[-1].get('time', ''))}, {'passed' if entries[-1].get('passed') else 'FAILED'}.")
    explained = [e for e in entries if (e.get("explain") or {}).get(metric)]
    if explained:  # `rwb check --explain`: each changed input's share of the change
        st.caption(f"Where {md(metric)}'s change came from (`rwb check --explain`, latest first):")
        st.dataframe(explain_rows(explained[::-1][:20], metric), hide_index=True)
