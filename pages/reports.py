"""Reports: generate and download the offline report; browse past experiments."""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st

import numpy as np
import pandas as pd

from eval.stores import configs as cfg
from pages import _errors as er
from pages import _harness as hx
from pages import _state as sh
from pages._preparing import require_pool
from pages import _tune_state as tn
from pages import _snapshots as snaps
from pages import _tables as tb
from pages._markup import code, md
from eval.stores.inputs import describe_changes

ws = sh.workspace()
st.html(tb.CSS)
st.title("Reports")
st.caption(f"**{md(ws.dataset.name)}** · offline report of the chosen pipelines against the baseline, every "
           f"experiment logged from Tune, Evaluate or Sweep (stored under {code(sh.home_dir())}), and any two "
           "snapshots side by side.")

st.session_state.setdefault("reports_pipelines", ["rrf", "seed-adaptive", "seed-salience"])
st.session_state.setdefault("reports_file", None)
st.session_state.setdefault("reports_flash", "")
if st.session_state["reports_flash"]:          # set by a callback: shown before anything can stop the page
    st.toast(st.session_state["reports_flash"])
    st.session_state["reports_flash"] = ""


def snapshot_choices(records: list[dict]) -> dict[str, str]:
    """label → display: every logged experiment, then pipelines, presets and saved profiles."""
    out = {f"exp:{i}": f"experiment #{i} · {r.get('name', '')} · {r.get('time', '')}" for i, r in enumerate(records)}
    out.update({label: sh.format_label(label) for label in cfg.config_labels()})
    return out


def snapshot_config(label: str, records: list[dict]):
    if label.startswith("exp:"):
        return sh.parse_toml(records[int(label[4:])]["config"])
    return sh.config_or_stop(label)


def compare_snapshots() -> None:
    """Any two snapshots side by side on the current dataset: metric deltas with significance
    and each query's rank changes."""
    st.subheader("Compare two configurations (re-scored on today's data)")
    if not ws.has_queries:
        st.info("Comparing needs a query set.")
        return
    c = require_pool(ws)
    records = er.experiments_or_stop()
    choices = snapshot_choices(records)
    keys = list(choices)
    st.session_state.setdefault("reports_snap_a", "rrf" if "rrf" in keys else keys[0])
    st.session_state.setdefault("reports_snap_b", "seed-adaptive" if "seed-adaptive" in keys else keys[-1])
    for key in ("reports_snap_a", "reports_snap_b"):
        if st.session_state[key] not in keys:
            st.session_state[key] = keys[0]
    row = st.columns([2, 2, 1], vertical_alignment="bottom")
    a_label = row[0].selectbox("A", keys, key="reports_snap_a", format_func=choices.get)
    b_label = row[1].selectbox("B", keys, key="reports_snap_b", format_func=choices.get)
    fisher = row[2].toggle("Fisher p", key="reports_snap_fisher",
                           help="Fisher's randomization test (10,000 permutations) instead of the paired t-test.")
    try:
        a_cfg, b_cfg = snapshot_config(a_label, records), snapshot_config(b_label, records)
    except ValueError as error:
        st.error(f"Cannot load a snapshot: {md(error)}")
        return
    a_ev, b_ev = ws.evaluation(a_cfg), ws.evaluation(b_cfg)
    rows = hx.compare_live(a_ev, b_ev)
    if fisher:
        ps = hx.fisher_cached(ws.path, ws.stamp, ws.embedder, ws.analyzer, ws.qrels_rev, a_cfg, b_cfg)
        for r in rows:
            r["p"], r["p_text"] = ps[r["metric"]], hx.fmt_p(ps[r["metric"]])
    st.caption(f"B = {code(b_cfg.name)} against A = {code(a_cfg.name)}, re-evaluated on {md(ws.dataset.name)} "
               f"({rows[0]['n'] if rows else 0} counted queries) · p: "
               f"{'Fisher randomization' if fisher else 'paired t-test'} (one pair compared: uncorrected, as in `rwb eval`)")
    st.html(tb.cards_html(rows))
    frame = snapshot_rank_changes(c, a_ev, b_ev)
    moved = frame[frame["Δ nDCG@5"].abs() > 1e-12]
    st.markdown(f"**Per query** · {len(moved)} of {len(frame)} queries change {sh.metric_label(sh.PRIMARY)}; "
                "first relevant rank in A → B (— = none in the top results)")
    st.dataframe(frame.sort_values("Δ nDCG@5", key=lambda x: -x.abs()), hide_index=True, key="reports_snap_table",
                 height=300, column_config={     # widths: every column shows at 1400 px
                     "query": st.column_config.TextColumn(width=60), "text": st.column_config.TextColumn(width=250),
                     "Δ nDCG@5": st.column_config.NumberColumn(format="%+.3f", width=85),
                     "A": st.column_config.NumberColumn(format="%.3f", width=60),
                     "B": st.column_config.NumberColumn(format="%.3f", width=60),
                     "first relevant": st.column_config.TextColumn(width=100),
                     "top-5 changed": st.column_config.NumberColumn(width=100),
                     "top A → B": st.column_config.TextColumn(width=135)})


def snapshot_rank_changes(c, a_ev, b_ev) -> pd.DataFrame:
    qrels, _ = ws.judged()
    a_vals, b_vals = a_ev.values[sh.PRIMARY], b_ev.values[sh.PRIMARY]
    rows = []
    for qi, qid in enumerate(c.query_ids):
        judged = qrels.get(qid, {})
        if not any(g > 0 for g in judged.values()):
            continue
        a_ids = [c.doc_ids[int(c.doc_idx[r])] for r in a_ev.run.ranking.for_query(qi)]
        b_ids = [c.doc_ids[int(c.doc_idx[r])] for r in b_ev.run.ranking.for_query(qi)]
        first = lambda ids: next((i + 1 for i, d in enumerate(ids) if judged.get(d, 0) > 0), None)
        fa, fb = first(a_ids), first(b_ids)
        rows.append({"query": qid, "text": " ".join(c.query_texts[qi].split())[:90],
                     "A": float(np.nan_to_num(a_vals[qi])), "B": float(np.nan_to_num(b_vals[qi])),
                     "Δ nDCG@5": float(np.nan_to_num(b_vals[qi]) - np.nan_to_num(a_vals[qi])),
                     "first relevant": f"{fa or '—'} → {fb or '—'}",
                     "top-5 changed": len(set(a_ids[:5]) ^ set(b_ids[:5])) // 2,
                     "top A → B": f"{a_ids[0] if a_ids else '—'} → {b_ids[0] if b_ids else '—'}"})
    return pd.DataFrame(rows)

with st.container(border=True):
    st.markdown("**Offline report** · the harness's `report.html` (self-contained), `report.md` and `report.json`: "
                "method, every metric at the Evaluate page's cutoffs with significance, confidence intervals, raw "
                "and corrected p, per intent, per query, token budget, intent router, fingerprint")
    options = cfg.config_labels()
    st.session_state["reports_pipelines"] = [x for x in st.session_state["reports_pipelines"] if x in options]
    row = st.columns([3, 1.1, 1], vertical_alignment="bottom")
    picked = row[0].multiselect("Pipelines in the report", options, key="reports_pipelines",
                                format_func=sh.format_label)
    last_sweep = st.session_state.get("sweep_result")
    with_sweep = row[1].toggle("Include last sweep", key="reports_with_sweep", disabled=last_sweep is None,
                               help="The sweep run on the Sweep page in this session.")
    if row[2].button("Generate", type="primary", icon=":material/description:", width="stretch",
                     disabled=not ws.has_queries or not picked):
        require_pool(ws)
        try:
            with st.spinner("Evaluating, testing significance and writing the report…"):
                # the cutoffs, gain and correction chosen on Evaluate (its defaults when not visited)
                options = hx.ExperimentOptions(
                    cutoffs=tuple(st.session_state.get("eval_cutoffs") or ()) or hx.ExperimentOptions().cutoffs,
                    gain=st.session_state.get("eval_gain") or "linear",
                    correction=st.session_state.get("eval_correction") or "holm")
                paths = hx.build_report(ws, {label: cfg.resolve_config(label) for label in picked},
                                        last_sweep if with_sweep else None, options)
            st.session_state["reports_file"] = {kind: str(path) for kind, path in paths.items()}
        except ValueError as error:
            st.error(f"Report not written: {md(error)}")
    report = st.session_state["reports_file"]
    if report is not None:
        folder = Path(report["html"]).parent
        st.caption(f"Written to {code(folder)}")
        b = st.columns(4)
        for col, (kind, mime) in zip(b, (("html", "text/html"), ("md", "text/markdown"), ("json", "application/json"))):
            path = Path(report[kind])
            if path.is_file():
                col.download_button(f"report.{kind}", path.read_bytes(), file_name=f"{folder.name}.{kind}", mime=mime,
                                    icon=":material/download:", width="stretch", key=f"reports_dl_{kind}")
        opened = b[3].toggle("Open report.html", key="reports_open", disabled=not Path(report["html"]).is_file(),
                             help="Show the report here, as a browser opens the downloaded file (its charts "
                                  "included; the file is self-contained and written by the workbench).")
        if opened and Path(report["html"]).is_file():
            st.iframe(Path(report["html"]), height=900)
        # the preview shows report.md as text, and only when asked for: it carries the dataset's,
        # the queries' and the pipelines' own strings (an image there must not be fetched)
        if Path(report["md"]).is_file() and st.toggle("Preview report.md", key="reports_preview"):
            st.code(Path(report["md"]).read_text("utf-8"), language="markdown", wrap_lines=True)

compare_snapshots()
snaps.section(ws)
snaps.check_history(ws)
st.subheader("Past experiments")
records = er.experiments_or_stop()
experiments = tb.experiments_frame(records)
if experiments.empty:
    st.info("No experiments yet: use **Log experiment** on Tune, Evaluate or Sweep.", icon=":material/science:")
    st.stop()

f = st.columns([1, 1, 2])
datasets = f[0].multiselect("Dataset", sorted(experiments["dataset"].unique()), key="reports_datasets")
sources = f[1].multiselect("Source", sorted(experiments["source"].unique()), key="reports_sources")
search = f[2].text_input("Search", key="reports_search", placeholder="name, fingerprint…")
shown = tb.filter_frame(experiments, search, dataset=datasets, source=sources).iloc[::-1]
metric_cols = {sh.metric_label(m): st.column_config.NumberColumn(format="%.3f", width=64) for m in sh.METRICS}
text = st.column_config.TextColumn
event = st.dataframe(shown, hide_index=True, key="reports_table", on_select="rerun", selection_mode="single-row",
                     column_config={"#": st.column_config.NumberColumn(width=36), "time": text(width=112),   # fits 1400 px
                                    "name": text(width=150), "source": text(width=62), "dataset": text(width=70),
                                    "fingerprint": text(width=78), "embedder": text(width=72), **metric_cols})
rows = event.selection.rows if event is not None else []
if not rows:
    st.caption("Select a row to see its configuration.")
    st.stop()

index = int(shown.iloc[rows[0]]["#"])
record = er.experiments_or_stop()[index]
left, right = st.columns([1.2, 1], gap="large")
with left:
    st.markdown(f"**{md(record.get('name'))}** · {md(record.get('time'))} · from {md(record.get('source'))}")
    st.code(record.get("config", ""), language="toml")
with right:
    base_metrics = record.get("baseline_metrics") or {}
    st.markdown(f"**Metrics** · against baseline {code(record.get('baseline') or '—')}")
    st.table([{"metric": sh.metric_label(m), "value": f"{v:.4f}",
               "baseline": f"{base_metrics[m]:.4f}" if m in base_metrics else "—",
               "Δ": f"{v - base_metrics[m]:+.4f}" if m in base_metrics else "—"}
              for m, v in (record.get("metrics") or {}).items()])
    names = snaps.changed_since(ws, record)
    if names:
        st.warning(f"Logged with other inputs than today's — {md(describe_changes(names))}.", icon=":material/warning:")
    elif record.get("fingerprint") != ws.fingerprint():
        st.warning("Logged on a different dataset version (fingerprint differs).", icon=":material/warning:")

    def on_open() -> None:
        try:
            config = sh.parse_toml(record["config"])
        except ValueError as error:
            st.session_state["reports_flash"] = f":red[{md(error)}]"
            return
        tn.set_config(config, config.name if config.name in cfg.config_labels() else None)
        st.session_state["reports_flash"] = "Opened in Tune."

    b = st.columns(3)
    b[0].button("Open in Tune", icon=":material/tune:", on_click=on_open, width="stretch")
    b[1].download_button("TOML", record.get("config", ""), file_name=f"{record.get('name', 'config')}.toml",
                         icon=":material/download:", width="stretch")
    b[2].download_button("JSON", json.dumps(record, indent=1, ensure_ascii=False),
                         file_name=f"experiment-{index}.json", icon=":material/download:", width="stretch")
