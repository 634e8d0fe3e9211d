"""Evaluate: pipelines side by side on the query set, as ``rwb eval`` computes them (``eval.experiments.experiment``):
every metric at the chosen cutoffs, one metric's statistics (CIs, raw and corrected p), per intent, per query."""

from __future__ import annotations

from functools import partial

import streamlit as st

from eval.statistics.significance import CORRECTION_NAMES, CORRECTIONS
from eval.metrics.ranx_eval import DEFAULT_CUTOFFS, GAINS
from eval.experiments.experiment import ExperimentOptions
from eval.statistics.judged_below import bias_lines
from eval.reports.report import BIAS_NOTE, SHORT_NOTE, legend, method_lines, short_notes
from eval.statistics.provenance import in_sample
from eval.stores import configs as cfg
from pages import _charts as ch
from pages import _harness as hx
from pages import _state as sh
from pages._preparing import require_pool
from pages import _tune_state as tn
from pages import _tables as tb
from pages import _url as url
from pages._markup import code, md
from retrieval.pipeline import response_for

TUNE_LABEL = "tune:current"
FIELDS = {"pipelines": url.Field("eval_pipelines", many=True), "k": url.Field("eval_cutoffs", int, many=True),
          "gain": url.Field("eval_gain"), "correction": url.Field("eval_correction"),
          "stat": url.Field("eval_stat_metric"), "intent_metric": url.Field("eval_metric"),
          "candidate": url.Field("eval_candidate"), "q": url.Field("eval_query")}

ws = sh.workspace()
c = require_pool(ws)
st.html(tb.CSS)
st.title("Evaluate")

options = cfg.config_labels()
if TUNE_LABEL in st.query_params.get_all("pipelines"):
    tn.state()                          # a link with Tune's knobs: a session without them takes the link's
if tn.has_state():
    options.insert(0, TUNE_LABEL)
url.restore("evaluate", FIELDS)         # a link's view (each value checked against its choices below)
st.session_state.setdefault("eval_pipelines", [x for x in ("rrf", "weighted", "seed-adaptive", "seed-salience")
                                               if x in options])
st.session_state["eval_pipelines"] = [x for x in st.session_state["eval_pipelines"] if x in options]
st.session_state.setdefault("eval_cutoffs", list(DEFAULT_CUTOFFS))
st.session_state["eval_cutoffs"] = [k for k in st.session_state["eval_cutoffs"] if k in DEFAULT_CUTOFFS]
for key, default, allowed in (("eval_gain", "linear", GAINS), ("eval_correction", "holm", CORRECTIONS)):
    if st.session_state.setdefault(key, default) not in allowed:
        st.session_state[key] = default
st.session_state.setdefault("eval_last_selection", None)


def keep_url() -> None:
    """The view in the URL, with Tune's knobs when it shows them: a reload or a shared link opens it."""
    url.keep(FIELDS, tn.knob_params(tn.state()) if TUNE_LABEL in st.session_state["eval_pipelines"] else None)


def resolve(label: str):
    return tn.config() if label == TUNE_LABEL else sh.config_or_stop(label)


def fmt(label: str) -> str:
    return "◎ Tune · current knobs" if label == TUNE_LABEL else sh.format_label(label)


def provenance(label: str):
    """Why ``label``'s figures here are in-sample (``eval.statistics.provenance``), or None."""
    if label == TUNE_LABEL:
        state = tn.state()
        return in_sample(ws.dataset.fingerprint, state.provenance, source=state.source)
    return in_sample(ws.dataset.fingerprint, source=label)


def display(label: str) -> str:
    name = "tune (current)" if label == TUNE_LABEL else label
    known = provenance(label)
    return f"{name} · {known.tag}" if known else name


def open_on_tune(shown: str, qid: str) -> None:
    """Tune opens query ``qid`` under the pipeline Evaluate showed as ``shown`` (a display name):
    that pipeline as Tune's starting point, or Tune's own knobs for its current column."""
    label = label_of.get(shown, shown)
    if label != TUNE_LABEL:
        tn.update(("source", label))
    tn.update(("query", list(c.query_ids).index(qid)))
    st.session_state[tn.ARRIVED] = True          # Tune starts at its top, not at Evaluate's scroll
    st.switch_page("pages/tune.py")


def on_query_row(shown: str, qids: list[str]) -> None:
    """A row of the per-query table clicked: open it on Tune after this run's callbacks."""
    rows = st.session_state["eval_query_table"].selection.rows
    if rows:
        st.session_state["eval_open"] = (shown, qids[int(rows[0])])


picked = st.multiselect("Pipelines to compare", options, key="eval_pipelines", format_func=fmt,
                        placeholder="choose pipelines or profiles", persist_state="session")
label_of = {display(label): label for label in picked}
configs = {display(label): resolve(label) for label in picked}
in_sample_notes = {display(label): known.note() for label in picked if (known := provenance(label))}
row = st.columns([2.2, 1.3, 1.3], vertical_alignment="bottom")
cutoffs = row[0].multiselect("Cutoffs k", DEFAULT_CUTOFFS, key="eval_cutoffs",
                             help="Every metric at each cutoff, and MAP over the whole ranking.")
gain = row[1].segmented_control("nDCG gain", list(GAINS), key="eval_gain",
                                help="linear: rel / log2(rank+1) (ranx ndcg); exponential: (2^rel − 1) / "
                                     "log2(rank+1) (ranx ndcg_burges)") or "linear"
correction = row[2].selectbox("Correction", list(CORRECTIONS), key="eval_correction",
                              format_func=lambda x: CORRECTION_NAMES[x] if x != "none" else "none",
                              help="Multiple-comparison correction per metric, across the pipelines compared "
                                   "with the baseline (as PyTerrier's Experiment).")
if not cutoffs:
    st.warning("No cutoff chosen: showing k = 5.")
try:
    experiment = hx.experiment_for(ws, configs, ExperimentOptions(cutoffs=tuple(cutoffs) or (5,), gain=gain,
                                                                  correction=correction))
except ValueError as error:
    st.error(f"Cannot evaluate: {md(error)}")
    st.stop()
evaluation, significance, intervals = experiment.evaluation, experiment.significance, experiment.intervals
primary = experiment.primary
base_label = experiment.baseline
st.caption(f"**{md(ws.dataset.name)}** · {evaluation.n_queries} judged queries · baseline {code(base_label)} (change "
           "it in the sidebar)" + ("" if significance else " · pick pipelines to test them against it") + "  \n"
           + "  \n".join(md(line) for line in method_lines(experiment.settings(), significance, intervals)))
for name, note in in_sample_notes.items():   # the figures of a configuration chosen on these queries
    st.warning(f"{code(name)}: {md(note)} — its figures below are optimistic.", icon=":material/warning:")

# ---- means of every metric, then one metric's statistics ------------------------------------------
means_col, stats_col = st.container(), st.container()     # stacked: every column shows at 1400 px
with means_col:
    st.subheader("Means")
    st.dataframe(tb.style_marks(tb.means_frame(evaluation, significance)), hide_index=True, key="eval_table",
                 height=min(36 * (len(evaluation.metrics) + 1) + 3, 520),
                 column_config={"metric": st.column_config.TextColumn("metric", pinned=True)})
    if significance:
        st.caption(md(legend(significance)))
    if experiment.bias:                 # judged@k, nDCG'@k, bpref (eval.metrics.judgment_bias)
        header, rows, notes = bias_lines(list(experiment.bias))
        st.markdown("**Judgment bias** · how much of each top k was never judged")
        pinned = st.column_config.TextColumn("pipeline", pinned=True)
        st.dataframe([dict(zip(header, r)) for r in rows], hide_index=True, key="eval_bias",
                     column_config={"pipeline": pinned})
        st.caption(md(BIAS_NOTE) + "".join(f"  \n:orange[{md(n)}]" for n in notes))
with stats_col:
    st.subheader("Statistics")
    if st.session_state.get("eval_stat_metric") not in evaluation.metrics:
        st.session_state["eval_stat_metric"] = primary
    stat_metric = st.selectbox("Metric", evaluation.metrics, key="eval_stat_metric", format_func=sh.metric_label)
    st.dataframe(tb.style_marks(tb.statistics_frame(evaluation, significance, intervals, stat_metric)),
                 hide_index=True, key="eval_stats",
                 column_config={"pipeline": st.column_config.TextColumn("pipeline", pinned=True),
                                "W/T/L": st.column_config.TextColumn(
                                    "W/T/L", help="queries won / tied / lost against the baseline")})
    notes = short_notes(evaluation)
    if notes:
        st.caption(md(SHORT_NOTE) + "  \n" + "  \n".join(md(n) for n in notes))
if st.button("Log these as experiments", icon=":material/science:", disabled=not picked):
    for label, config in configs.items():
        if label in evaluation.results:
            ws.log_experiment(config, evaluation.results[label], "evaluate", evaluation.results[base_label])
    st.toast(f"Logged {len(configs)} experiment(s); see Reports.")

chart_col, scatter_col = st.columns(2, gap="large")

# ---- per intent -----------------------------------------------------------------------------
with chart_col:
    st.subheader("Per intent")
    if st.session_state.get("eval_metric") not in evaluation.metrics:
        st.session_state["eval_metric"] = primary
    metric = st.selectbox("Metric", evaluation.metrics, key="eval_metric", format_func=sh.metric_label)
    fig = ch.intents_figure(tb.per_intent_frame(evaluation, metric), metric)
    st.plotly_chart(fig, config=ch.CONFIG, key="eval_intents")
# the table at the page's width, under both charts: every intent's column shows at 1400 px
st.dataframe(tb.intent_frame(evaluation, metric), hide_index=True, key="eval_intent_table",
             column_config={"pipeline": st.column_config.TextColumn("pipeline", pinned=True)})

# ---- per query scatter -------------------------------------------------------------------------
with scatter_col:
    st.subheader("Per query")
    candidates = [label for label in evaluation.results if label != base_label]
    if not candidates:
        st.info("Pick at least one pipeline to compare with the baseline.")
        keep_url()
        st.stop()
    if st.session_state.get("eval_candidate") not in candidates:
        st.session_state["eval_candidate"] = candidates[0]
    cand_label = st.selectbox("Candidate", candidates, key="eval_candidate")
    points = tb.per_query_frame(evaluation, base_label, cand_label, primary)
    better, worse = int((points["delta"] > 1e-12).sum()), int((points["delta"] < -1e-12).sum())
    st.caption(f"{sh.metric_label(primary)} per query: {better} better, {worse} worse, "
               f"{len(points) - better - worse} tied · click a point to open its rankings")
    fig = ch.per_query_figure(points, base_label, cand_label, primary)
    # a new point selection picks the query below (read before the selectbox is drawn)
    selection = st.session_state.get("eval_scatter")
    chosen = [p.get("customdata", [None])[0] for p in (selection or {}).get("selection", {}).get("points", [])]
    chosen = [q for q in chosen if q in c.query_ids]
    if chosen and chosen != st.session_state["eval_last_selection"]:
        st.session_state["eval_query"] = chosen[0]
    st.session_state["eval_last_selection"] = chosen or None
    st.plotly_chart(fig, on_select="rerun", selection_mode="points", key="eval_scatter",
                    config={"displayModeBar": False})

# ---- per query, a table: sortable, a row opens its query on Tune under the candidate ---------------
st.subheader("Per query · table")
st.caption(f"{sh.metric_label(primary)} per query under {code(base_label)} and {code(cand_label)}; click a "
           f"header to sort, a row to open that query on Tune under {code(cand_label)}.")
table = points.drop(columns="text").assign(text=points["text"])          # the text last: it is the widest
number = st.column_config.NumberColumn
st.dataframe(table, hide_index=True, key="eval_query_table", on_select=partial(on_query_row, cand_label,
                                                                               list(table["query"])),
             selection_mode="single-row", height=min(36 * (len(table) + 1) + 3, 420),
             column_config={"query": st.column_config.TextColumn("query", pinned=True),
                            "baseline": number(base_label, format="%.4f"),
                            "candidate": number(cand_label, format="%.4f"),
                            "delta": number("Δ", format="%+.4f"),
                            "text": st.column_config.TextColumn("text", width="large")})
if (go := st.session_state.pop("eval_open", None)) is not None:
    open_on_tune(*go)

# ---- one query's two rankings -------------------------------------------------------------------
st.subheader("Query drill-down")
ids = list(c.query_ids)
# open on the query the candidate hurts most (or, when it hurts none, helps most)
order = points.sort_values("delta", ascending=bool((points["delta"] < -1e-12).any()))["query"].tolist()
order = [q for q in order if q in ids]
st.session_state.setdefault("eval_query", order[0] if order else ids[0])
if st.session_state["eval_query"] not in ids:
    st.session_state["eval_query"] = ids[0]
pick = st.columns([4, 1], vertical_alignment="bottom")
qid = pick[0].selectbox("Query", ids, key="eval_query",
                        format_func=lambda q: tb.query_label(c, ids.index(q)),
                        help="Clicking a point in the scatter selects it too.")
qi = ids.index(qid)
keep_url()
if pick[1].button("Open on Tune", icon=":material/tune:", key="eval_open_tune", width="stretch",
                  help="Tune this query: Tune opens on it under the candidate shown here."):
    open_on_tune(cand_label, qid)
qrels, _ = ws.judged()
judgments = qrels.get(qid, {})
base_resp = response_for(c, evaluation.runs[base_label], qi, ws.dataset.documents)
cand_resp = response_for(c, evaluation.runs[cand_label], qi, ws.dataset.documents)
row = points[points["query"] == qid]
if not row.empty:
    r = row.iloc[0]
    st.markdown(f":gray-badge[intent · {md(r['intent'])}] :blue-badge[{md(base_label)} · {r['baseline']:.3f}] "
                f":violet-badge[{md(cand_label)} · {r['candidate']:.3f}] "
                + (f":green-badge[▲ {r['delta']:+.3f}]" if r["delta"] > 1e-12 else
                   f":red-badge[▼ {r['delta']:+.3f}]" if r["delta"] < -1e-12 else ":gray-badge[tied]"))
else:
    st.caption("This query has no relevant judgment: it does not count in the metrics.")
left, right = st.columns(2, gap="medium")
for col, title, resp, base in ((left, f"Baseline · {code(base_label)}", base_resp, None),
                               (right, f"Candidate · {code(cand_label)}", cand_resp, base_resp)):
    col.markdown(f"**{title}** · route {md(resp.route)}" + (f" · profile {md(resp.profile)}" if resp.profile else ""))
    col.html(tb.ranking_html(resp, judgments, base))
