"""Tune: every knob of a pipeline as a widget; the ranking next to the baseline, live metrics."""

from __future__ import annotations

import streamlit as st

from pages import _shared as sh
from retrieval.pipeline import response_for, run_pipeline

ws = sh.workspace()
config = sh.tune_config()
c = sh.require_pool(ws) if ws.has_queries else None

# ---- page state (page-prefixed; the page runs on its own) ----------------------------------
st.session_state.setdefault("tune_mode", "Query set" if c is not None else "Free text")
st.session_state.setdefault("tune_query", 0)
st.session_state.setdefault("tune_free_text", "")
st.session_state.setdefault("tune_error", "")
st.session_state.setdefault("tune_flash", "")
st.session_state["tune_source_pick"] = st.session_state[sh.TUNE_SOURCE]
pool_depth = c.pool_depth if c is not None else sh.DEFAULT_POOL_DEPTH


def on_source() -> None:
    label = st.session_state["tune_source_pick"]
    sh.set_tune_config(sh.resolve_config(label), label)
    st.session_state["tune_error"] = ""


def on_reset() -> None:
    label = st.session_state[sh.TUNE_SOURCE]
    sh.set_tune_config(sh.resolve_config(label), label)
    st.session_state["tune_error"] = ""
    st.session_state["tune_flash"] = f"Knobs reset to {sh.format_label(label)}."


def on_knob(knob: sh.Knob) -> None:
    current = st.session_state[sh.TUNE_CONFIG]
    try:
        st.session_state[sh.TUNE_CONFIG] = sh.apply_knob(current, knob, st.session_state[knob.key], pool_depth)
        st.session_state["tune_error"] = ""
    except ValueError as error:
        st.session_state["tune_error"] = f"**{knob.label.strip()}** not applied: {error}"
        st.session_state[knob.key] = sh.knob_value(current, knob)


def on_save_profile() -> None:
    name = st.session_state.get("tune_profile_name", "").strip()
    try:
        sh.save_profile(name, st.session_state[sh.TUNE_CONFIG])
    except ValueError as error:
        st.session_state["tune_flash"] = f":red[{error}]"
        return
    label = f"saved:{name}"
    sh.set_tune_config(sh.resolve_config(label), label)
    st.session_state["tune_flash"] = f"Saved profile **{name}**."


def render_knob(knob: sh.Knob, value) -> None:
    if knob.key not in st.session_state:
        st.session_state[knob.key] = value
    common = dict(key=knob.key, on_change=on_knob, args=(knob,), help=knob.help or None)
    if knob.kind == "float":
        lo, hi = min(knob.lo, value), max(knob.hi, value)
        st.slider(knob.label, float(lo), float(hi), step=float(knob.step), **common)
    elif knob.kind == "int":
        st.number_input(knob.label, int(min(knob.lo, value)), int(max(knob.hi, value)), step=int(knob.step),
                        **common)
    elif knob.kind == "opt_int":
        st.number_input(knob.label, min_value=int(knob.lo), step=int(knob.step), placeholder="none", **common)
    elif knob.kind == "opt_float":
        st.number_input(knob.label, step=float(knob.step), format="%.4f", placeholder="none", **common)
    elif knob.kind == "bool":
        st.toggle(knob.label, **common)
    else:
        st.selectbox(knob.label, knob.options, **common)


# ---- header and query / config pickers --------------------------------------------------------
st.title("Tune")
st.caption(f"**{ws.dataset.name}** · every knob re-scores the whole query set from its candidate table — "
           "no index is touched.")

top = st.columns([1.45, 3.4, 1.8, 0.75], vertical_alignment="bottom")
modes = ["Query set", "Free text"] if c is not None else ["Free text"]
top[0].segmented_control("Query", modes, key="tune_mode", required=True, persist_state="session")
qi = None
free_text = ""
if st.session_state["tune_mode"] == "Query set" and c is not None:
    if st.session_state["tune_query"] not in range(c.n_queries):
        st.session_state["tune_query"] = 0
    qi = top[1].selectbox("Query from the set", range(c.n_queries), key="tune_query",
                          format_func=lambda i: sh.query_label(c, ws.dataset, i), persist_state="session")
else:
    free_text = top[1].text_input("Free-text query", key="tune_free_text", placeholder="ask the memory anything…",
                                  persist_state="session").strip()
labels = sh.config_labels()
if st.session_state["tune_source_pick"] not in labels:
    labels.append(st.session_state["tune_source_pick"])
top[2].selectbox("Start from", labels, key="tune_source_pick", format_func=sh.format_label, on_change=on_source,
                 help="A seed pipeline, one of seed 001's profiles, or a saved profile.")
top[3].button("Reset", icon=":material/restart_alt:", on_click=on_reset, use_container_width=True,
              help="Reset every knob to the chosen starting point.")

if st.session_state["tune_flash"]:
    st.toast(st.session_state["tune_flash"])
    st.session_state["tune_flash"] = ""

main_col = st.container()

# ---- knobs (in the sidebar, under the workspace pickers) -------------------------------------
with st.sidebar:
    st.divider()
    st.markdown("#### :material/tune: Knobs")
    edit_profile = None
    if config.fusion == "adaptive" and config.adaptive.intent_router:
        names = [p.name for p in config.adaptive.profiles]
        routed = c.intent_route[qi] if qi is not None else None
        st.session_state.setdefault("tune_edit_profile", routed if routed in names else names[0])
        edit_profile = st.selectbox("Profile to edit", names, key="tune_edit_profile",
                                    help="With the intent router on, each query uses its routed profile."
                                         + (f" This query routes to **{routed}**." if routed else ""))
    knobs = sh.knobs_for(config, edit_profile, pool_depth)
    for group, title in sh.KNOB_GROUPS.items():
        members = [k for k in knobs if k.group == group]
        if not members:
            continue
        with st.expander(title, expanded=group != "quality"):
            for knob in members:
                render_knob(knob, sh.knob_value(config, knob))
            if group == "weights" and config.fusion in ("rrf", "weighted"):
                st.caption("Time and graph weights apply to the adaptive fusion only.")
    if config.fusion in ("vector", "bm25"):
        st.caption("Single-path baseline: no weights to tune. Pick rrf, weighted, adaptive or salience.")
    if st.session_state["tune_error"]:
        st.warning(st.session_state["tune_error"], icon=":material/block:")
    with st.popover("Save as profile", icon=":material/save:", use_container_width=True):
        st.text_input("Profile name", key="tune_profile_name", placeholder="e.g. debug-heavier-bm25")
        st.button("Save", on_click=on_save_profile, type="primary", key="tune_save_profile")
    log_clicked = st.button("Log experiment", icon=":material/science:", use_container_width=True,
                            disabled=c is None, help="Store config, dataset fingerprint and metrics.")

# ---- evaluation (the measured part of a knob change) ------------------------------------------
ev = ws.evaluate_now(config) if c is not None else None
base_ev = ws.evaluation(ws.baseline) if c is not None else None
tuned = sh.is_tuned(config)
run_name = f"{config.name}{' (tuned)' if tuned else ''}"

with main_col:
    if qi is not None:
        response = response_for(c, ev.run, qi, ws.dataset.documents)
        baseline = response_for(c, base_ev.run, qi, ws.dataset.documents)
        qrels, _ = ws.judged()
        judgments = qrels.get(c.query_ids[qi], {})
        intent = next((q.intent for q in ws.dataset.queries if q.id == c.query_ids[qi]), "")
    elif free_text:
        fc = ws.free_text(free_text)
        response = response_for(fc, run_pipeline(fc, config), 0, ws.dataset.documents)
        baseline = response_for(fc, run_pipeline(fc, ws.baseline), 0, ws.dataset.documents)
        judgments, intent = {}, ""
    else:
        response = baseline = None
        st.info("Type a query to search the corpus with the current knobs.", icon=":material/search:")

    if response is not None:
        st.markdown(f"#### {response.query}")
        badges = [f":blue-badge[:material/alt_route: route · {response.route}]"]
        if response.profile:
            badges.append(f":violet-badge[:material/person: profile · {response.profile}]")
        if intent:
            badges.append(f":gray-badge[intent · {intent}]")
        budget = f" / {config.token_budget}" if config.token_budget else ""
        badges.append(f":gray-badge[:material/token: {response.total_tokens}{budget} tokens]")
        badges.append(f":gray-badge[{len(response.results)} results]")
        st.markdown(" ".join(badges))
        for note in response.degraded:
            st.warning(f"Degraded: {note}", icon=":material/warning:")

        left, right = st.columns([2.5, 1], gap="medium")
        frame = sh.ranking_frame(response, judgments, baseline)
        base_frame = sh.ranking_frame(baseline, judgments)[["#", "doc", "grade", "score"]]
        height = 38 + 35 * max(1, len(frame), len(base_frame))
        with left:
            st.markdown(f"**Current** · `{run_name}`")
            st.dataframe(sh.style_movement(frame), column_config=sh.RANKING_COLUMNS, hide_index=True,
                         height=height, key="tune_ranking")
        with right:
            st.markdown(f"**Baseline** · `{ws.baseline.name}`")
            st.dataframe(base_frame, column_config=sh.RANKING_COLUMNS, hide_index=True, height=height,
                         key="tune_baseline_ranking")
        if response.results:
            st.markdown("**Score breakdown** · additive components of each result's score")
            st.plotly_chart(sh.components_figure(response), config={"displayModeBar": False},
                            key="tune_breakdown")
        else:
            st.info("No result passes the current thresholds.", icon=":material/filter_alt_off:")

    if ev is not None:
        st.markdown(f"**Query set · metrics@5** · `{run_name}` vs `{ws.baseline.name}` over "
                    f"{int(ws.judged()[1].n_judged)} judged queries")
        comparison = sh.compare_metrics(base_ev, ev)
        cols = st.columns(len(comparison))
        for col, row in zip(cols, comparison.itertuples(index=False)):
            p_text = f"p = {row.p:.3f}" if row.p == row.p else "p n/a"
            col.metric(sh.metric_label(row.metric), f"{row.value:.3f}", delta=f"{row.delta:+.3f}",
                       delta_color="normal" if abs(row.delta) > 1e-12 else "off",
                       delta_description=p_text, border=True,
                       help=f"baseline {row.baseline:.3f} · p: Fisher's randomization test over {row.n} queries "
                            f"({sh.TUNE_PERMUTATIONS:,} permutations), Holm-corrected over these "
                            f"{len(comparison)} metrics")
        st.caption(f"p: Fisher's randomization test over the judged queries, Holm-corrected over these "
                   f"{len(comparison)} metrics (Evaluate corrects over every pipeline × metric, so its p is larger).")

    if qi is not None and response is not None:
        with st.expander("Grade a result", icon=":material/grading:"):
            ids = [r.id for r in response.results] or [d.id for d in ws.dataset.documents]
            text_of = {d.id: d.text for d in ws.dataset.documents}
            g1, g2, g3 = st.columns([2.2, 1.6, 1], vertical_alignment="bottom")
            doc = g1.selectbox("Document", ids, key="tune_grade_doc",
                               format_func=lambda d: f"{d} — {text_of[d][:60]}")
            current = judgments.get(doc)
            grade = g2.segmented_control("Grade", sh.GRADES, key="tune_grade_value",
                                         default=current if current is not None else None,
                                         help=" · ".join(sh.GRADE_LABELS.values()))

            def on_grade(qid=c.query_ids[qi], doc=doc, grade=grade):
                value = st.session_state.get("tune_grade_value")
                if value is None:
                    st.session_state["tune_flash"] = ":red[Pick a grade first.]"
                    return
                ws.judgments.grade(qid, doc, int(value), author="tune")
                st.session_state["tune_flash"] = f"Judged {doc} = {value} for {qid}."

            g3.button("Save judgment", on_click=on_grade, type="primary", use_container_width=True)
            st.caption(f"Saved to the workbench's judgment store ({ws.judgments.path}); the dataset's own qrels "
                       "file is never modified. Undo and history are on the Data page.")

    if log_clicked and ev is not None:
        entry = sh.log_experiment(ws, config, ev.means, "tune", ws.baseline, base_ev.means)
        st.toast(f"Logged experiment **{entry['name']}** ({entry['time']}).")

    if ev is not None:
        st.caption(f":material/timer: Last knob change: re-score + rank + metrics over {c.n_queries} queries "
                   f"took **{ev.seconds * 1000:.2f} ms** (target < 50 ms).")
