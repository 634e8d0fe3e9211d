"""Reports: generate and download the offline report; browse past experiments."""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st

from pages import _shared as sh

ws = sh.workspace()
st.title("Reports")
st.caption(f"**{ws.dataset.name}** · offline report of the chosen pipelines against the baseline, and every "
           f"experiment logged from Tune, Evaluate or Sweep (stored under `{sh.home_dir()}`).")

st.session_state.setdefault("reports_pipelines", ["rrf", "seed-adaptive", "seed-salience"])
st.session_state.setdefault("reports_file", None)
st.session_state.setdefault("reports_flash", "")

with st.container(border=True):
    st.markdown("**Offline report** · the harness's `report.html` (self-contained), `report.md` and `report.json`: "
                "metrics with significance, per intent, per query, token budget, intent router, fingerprint")
    options = sh.config_labels()
    st.session_state["reports_pipelines"] = [x for x in st.session_state["reports_pipelines"] if x in options]
    row = st.columns([3, 1.1, 1], vertical_alignment="bottom")
    picked = row[0].multiselect("Pipelines in the report", options, key="reports_pipelines",
                                format_func=sh.format_label)
    last_sweep = st.session_state.get("sweep_result")
    with_sweep = row[1].toggle("Include last sweep", key="reports_with_sweep", disabled=last_sweep is None,
                               help="The sweep run on the Sweep page in this session.")
    if row[2].button("Generate", type="primary", icon=":material/description:", use_container_width=True,
                     disabled=not ws.has_queries or not picked):
        sh.require_pool(ws)
        try:
            with st.spinner("Evaluating, testing significance and writing the report…"):
                paths = sh.build_report(ws, {label: sh.resolve_config(label) for label in picked},
                                        last_sweep if with_sweep else None)
            st.session_state["reports_file"] = {kind: str(path) for kind, path in paths.items()}
        except ValueError as error:
            st.error(f"Report not written: {error}")
    report = st.session_state["reports_file"]
    if report is not None:
        folder = Path(report["html"]).parent
        st.caption(f"Written to `{folder}`")
        b = st.columns(3)
        for col, (kind, mime) in zip(b, (("html", "text/html"), ("md", "text/markdown"), ("json", "application/json"))):
            path = Path(report[kind])
            if path.is_file():
                col.download_button(f"report.{kind}", path.read_bytes(), file_name=f"{folder.name}.{kind}", mime=mime,
                                    icon=":material/download:", use_container_width=True, key=f"reports_dl_{kind}")
        if Path(report["md"]).is_file():
            with st.expander("Preview (Markdown)", expanded=False):
                st.markdown(Path(report["md"]).read_text("utf-8"))

st.subheader("Past experiments")
experiments = sh.experiments_frame()
if experiments.empty:
    st.info("No experiments yet: use **Log experiment** on Tune, Evaluate or Sweep.", icon=":material/science:")
    st.stop()

f = st.columns([1, 1, 2])
datasets = f[0].multiselect("Dataset", sorted(experiments["dataset"].unique()), key="reports_datasets")
sources = f[1].multiselect("Source", sorted(experiments["source"].unique()), key="reports_sources")
search = f[2].text_input("Search", key="reports_search", placeholder="name, fingerprint…")
shown = sh.filter_frame(experiments, search, dataset=datasets, source=sources).iloc[::-1]
metric_cols = {sh.metric_label(m): st.column_config.NumberColumn(format="%.3f", width="small") for m in sh.METRICS}
event = st.dataframe(shown, hide_index=True, key="reports_table", on_select="rerun", selection_mode="single-row",
                     column_config={"#": st.column_config.NumberColumn(width=40), **metric_cols})
rows = event.selection.rows if event is not None else []
if not rows:
    st.caption("Select a row to see its configuration.")
    st.stop()

index = int(shown.iloc[rows[0]]["#"])
record = sh.experiment_record(index)
left, right = st.columns([1.2, 1], gap="large")
with left:
    st.markdown(f"**{record.get('name')}** · {record.get('time')} · from {record.get('source')}")
    st.code(record.get("config", ""), language="toml")
with right:
    st.markdown("**Metrics**")
    st.json({"metrics": record.get("metrics"), "baseline": record.get("baseline"),
             "baseline_metrics": record.get("baseline_metrics")}, expanded=True)
    if record.get("fingerprint") != ws.fingerprint():
        st.warning("Logged on a different dataset version (fingerprint differs).", icon=":material/warning:")

    def on_open() -> None:
        try:
            config = sh.parse_toml(record["config"])
        except ValueError as error:
            st.session_state["reports_flash"] = f":red[{error}]"
            return
        sh.set_tune_config(config, config.name if config.name in sh.config_labels() else None)
        st.session_state["reports_flash"] = "Opened in Tune."

    b = st.columns(3)
    b[0].button("Open in Tune", icon=":material/tune:", on_click=on_open, use_container_width=True)
    b[1].download_button("TOML", record.get("config", ""), file_name=f"{record.get('name', 'config')}.toml",
                         icon=":material/download:", use_container_width=True)
    b[2].download_button("JSON", json.dumps(record, indent=1, ensure_ascii=False),
                         file_name=f"experiment-{index}.json", icon=":material/download:", use_container_width=True)

if st.session_state["reports_flash"]:
    st.toast(st.session_state["reports_flash"])
    st.session_state["reports_flash"] = ""
