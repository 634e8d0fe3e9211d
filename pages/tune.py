"""Tune: every knob of a pipeline, the ranking next to the baseline, live query-set metrics.

Everything a knob changes lives in one fragment (``live``): a knob move reruns only it —
knobs, metric cards, the two rankings — and those are light HTML, not data grids or charts.
"""

from __future__ import annotations

import functools
import time

import streamlit as st

from eval.stores import configs as cfg
from eval.experiments import views
from eval.experiments.live import evaluate_config
from eval.statistics.provenance import in_sample
from pages import _harness as hx
from pages import _knobs as kn
from pages import _state as s
from pages._preparing import require_pool
from pages import _tables as tb
from pages import _tune_state as tn
from pages import _errors as er
from pages import _queue as qu
from pages import _snapshots as snaps
from pages import _tries as tr
from pages import _weights as lw
from pages import _grading as gr
from pages import _dataset_line as dataset_line
from pages._export import export_popover
from pages._focus import SKIP_LINK, TO_TOP
from eval.stores.tries import TryStore
from pages._markup import code, html as h, md
from retrieval.fusion.adaptive import band_counts

ws = s.workspace()
c = require_pool(ws) if ws.has_queries else None
pool_depth = c.pool_depth if c is not None else kn.DEFAULT_POOL_DEPTH
intents = {q.id: q.intent for q in ws.dataset.queries}
store = TryStore(ws.dataset)
tn.state()
if c is not None:
    tn.match_url_query(c.query_ids)
    tn.record_inputs(ws)

# ---- page state (page-prefixed; the page runs on its own) ----------------------------------
tn.restore_view()                 # Grade mode and the toggles a link names
st.session_state.setdefault("tune_flash", "")
st.session_state.setdefault("tune_rows", "Read")
st.session_state.setdefault("tune_fisher", False)
st.session_state.setdefault("tune_overwrite", "")


def kept(label: str) -> str:
    """Keep unsaved knob edits as a try before leaving them; say so."""
    entry = tn.keep_try(store, f"kept on leaving for {label}")
    return f" Your unsaved edits were kept as try #{entry['id']} (Tries)." if entry else ""


def on_source() -> None:
    label = st.session_state["tune_source_pick"]
    note = kept(label)
    if tn.update(("source", label)) is None and note:
        st.session_state["tune_flash"] = f"Started from {s.format_label(label)}.{note}"


def on_quality() -> None:
    if tn.update(("knob", kn.FUSION_PATH, "adaptive"), pool_depth) is None:
        st.session_state["tune_pane"] = "confidence"


def on_reset() -> None:
    note = kept("a reset")
    if tn.update(("reset",)) is None:
        st.session_state["tune_flash"] = f"Knobs reset to {s.format_label(tn.state().source)}.{note}"


def on_save_profile(overwrite: bool = False) -> None:
    name = st.session_state.get("tune_profile_name", "").strip()
    if cfg.profile_exists(name) and not overwrite:
        st.session_state["tune_overwrite"] = name       # ask first (a button appears)
        return
    try:
        cfg.save_profile(name, tn.config(), tn.state().source)
    except (ValueError, OSError) as error:  # a bad name, or a full or read-only RWB_HOME
        st.session_state["tune_flash"] = f":red[{md(error)}]"
        return
    st.session_state["tune_overwrite"] = ""
    tn.forget_start()                  # the profile just written may be the one started from
    tn.update(("source", f"saved:{name}"))
    st.session_state["tune_flash"] = f"Saved profile **{md(name)}**."


def header() -> None:
    """Starting point, reset, and (with an intent router) the profile being edited."""
    labels = tn.start_labels(cfg.config_labels())        # a learned pipeline stays once picked away from
    st.session_state["tune_source_pick"] = tn.state().source
    row = st.columns([3, 1.25], vertical_alignment="bottom")
    row[0].selectbox("Start from", labels, key="tune_source_pick", format_func=tn.start_label, on_change=on_source,
                     help="A seed pipeline, one of seed 001's profiles, or a saved profile.")
    row[1].button("Reset", on_click=on_reset, width="stretch",
                  help="Reset every knob to the chosen starting point.")
    if detail := tn.start_detail(tn.state().source):      # the whole name, where the box shows it cut
        st.caption(md(detail))


def knob_panel(config, routed: str | None) -> str | None:
    edit_profile = None
    names = kn.routed_profiles(config)
    if names:
        st.session_state.setdefault("tune_edit_profile", routed if routed in names else names[0])
        if st.session_state["tune_edit_profile"] not in names:
            st.session_state["tune_edit_profile"] = names[0]
        edit_profile = st.selectbox("Profile to edit", names, key="tune_edit_profile",
                                    help="With the intent router on, each query uses its routed profile."
                                         + (f" This query routes to **{md(routed)}**." if routed else ""))
    refs = kn.tune_knobs(config, edit_profile)
    before, now = kn.drawn()
    kn.render(refs[0], pool_depth, before, now, help_icon=True)      # the fusion method, above the panes
    panes = [p for p in kn.PANES if any(kn.pane_of(r) == p for r in refs)]
    if st.session_state.get("tune_pane") not in panes:
        st.session_state["tune_pane"] = panes[0]
    pane = st.segmented_control("Knobs", panes, key="tune_pane", required=True, format_func=kn.PANES.get,
                                label_visibility="collapsed")
    weights = views.learned_weights(config)           # a linear learned model: a table, not sliders
    in_table = {row["path"] for row in weights}
    shown = [ref for ref in refs if kn.pane_of(ref) == pane and ref.path not in in_table]
    for ref in shown:
        kn.render(ref, pool_depth, before, now)
    kn.help_list(shown)
    if weights and pane == "fusion":
        lw.weights_table(weights, pool_depth)
    if pane in ("confidence", "vitality"):
        factor = next((r for r in refs if kn.pane_of(r) == pane), None)
        if factor is not None:
            quality = kn.owner_of(config, factor)        # the QualityFactors the pane's knobs belong to
            high, mid, low = band_counts(*s.doc_quality(ws.dataset), quality)[
                "confidence" if pane == "confidence" else "vitality"]
            st.caption(f"Documents per {pane} band: high {high} · mid {mid} · low {low} (of {high + mid + low}). "
                       "A factor whose band is empty changes nothing.")
    for warning in kn.pane_warnings(config, refs, pane):
        st.caption(f":orange[{md(warning)}]")
    if not any(kn.pane_of(r) == "confidence" for r in refs):
        st.button("Add F_conf / F_vit (seed 001's adaptive fusion)", on_click=on_quality, key="tune_quality",
                  width="stretch", help="Switch the fusion to adaptive: confidence and vitality "
                                                 "factors on top of the weighted paths.")
    if config.fusion in ("vector", "bm25"):
        st.caption("Single-path baseline: no weights to tune. Pick a fusion method above.")
    return edit_profile


def on_query_row() -> None:
    """A row of the query list clicked: that query opens here (rows are in the pool's order)."""
    rows = st.session_state["tune_query_table"].selection.rows
    if rows:
        tn.keep_try(store, "settled")
        tn.update(("query", int(rows[0])))
        st.session_state["tune_full_run"] = True    # the picker above the fragment follows: a full run


def on_pick(kind: str, key: str) -> None:
    tn.keep_try(store, "settled")           # leaving a set of knob moves for another query: a try
    tn.update((kind, st.session_state[key]))


def query_picker() -> None:
    """Which query (outside the fragment: a query list is long, and a knob move need not resend it)."""
    state = tn.state()
    picks = st.columns([1.2, 2.05, 0.75], gap="medium", vertical_alignment="bottom")
    modes = ["Query set", "Free text"] if c is not None else ["Free text"]
    qi = state.query_index(c.n_queries if c is not None else 0)
    st.session_state["tune_mode"] = "Query set" if qi is not None else "Free text"
    picks[0].segmented_control("Query", modes, key="tune_mode", required=True, on_change=on_pick,
                               args=("mode", "tune_mode"))
    if qi is not None:
        st.session_state["tune_query"] = qi
        picks[1].selectbox("Query from the set", range(c.n_queries), key="tune_query",
                           format_func=lambda i: tb.query_label(c, i), on_change=on_pick, args=("query", "tune_query"))
    else:
        st.session_state["tune_free_text"] = state.text
        picks[1].text_input("Free-text query", key="tune_free_text", placeholder="ask the memory anything…",
                            on_change=on_pick, args=("text", "tune_free_text"))
    picks[2].segmented_control("Rows", ["Read", "Grade"], key="tune_rows", required=True,
                               disabled=c is None,
                               help="Grade: one click per result sets its judgment for this query.")
    row = st.columns([2.0, 0.75, 0.85, 1.05, 0.85], vertical_alignment="center")   # one row, no tall column
    row[1].toggle("Fisher p", key="tune_fisher", disabled=c is None,
                  help="Fisher's randomization test instead of the paired t-test (10,000 "
                       "permutations; computed once per configuration).")
    row[2].toggle("Query list", key="tune_query_list", disabled=c is None,
                  help="Every query's score and delta against the baseline (click a header to "
                       "sort).")
    row[3].toggle("Judging queue", key="tune_queue", disabled=c is None,
                  help="The unjudged results in this configuration's or the baseline's top 5, "
                       "by how far one grade could swing the comparison; grade them here.")
    row[4].toggle("Snapshots", key="tune_snapshots", disabled=c is None,
                  help="Compare two frozen snapshots, or one with the current knobs: the knobs "
                       "that differ, mean metrics, per-query deltas, both rankings with their text "
                       "(Freeze keeps the current knobs' results under a name).")
    if qi is not None:
        with row[0]:
            tr.query_note(store, c.query_ids[qi])


def query_pick(state) -> tuple[int | None, str]:
    qi = state.query_index(c.n_queries if c is not None else 0)
    return qi, ("" if qi is not None else state.text.strip())


def actions() -> None:
    """Save, log, export and tries, outside the live fragment: a knob move does not redraw them,
    and each reads the knobs when it is pressed."""
    b = st.columns(5)
    with b[0].popover("Save…", width="stretch"):
        st.text_input("Profile name", key="tune_profile_name", placeholder="e.g. debug-heavier-bm25")
        st.button("Save", on_click=on_save_profile, type="primary", key="tune_save_profile")
        pending = st.session_state["tune_overwrite"]
        if pending and pending == st.session_state.get("tune_profile_name", "").strip():
            st.warning(f"A profile named **{md(pending)}** exists.")
            st.button(f"Overwrite {pending}", on_click=on_save_profile, args=(True,),
                      key="tune_overwrite_yes")
    if b[1].button("Log experiment", key="tune_log", width="stretch", disabled=c is None,
                   help="Store config, dataset fingerprint and metrics."):
        scored = st.session_state.get(tn.SCORED)
        if scored is not None and scored[0] == tn.config():   # the scores of the knobs shown
            config, means, _, baseline_means = scored
            entry = ws.log_experiment(config, means, "tune", baseline_means)
            st.toast(f"Logged experiment **{md(entry['name'])}** ({entry['time']}).")
    state = tn.state()
    provenance = in_sample(ws.dataset.fingerprint, state.provenance, source=state.source)
    export_popover(b[2], (provenance.export_note(),) if provenance else ())
    with b[3].popover("Freeze…", icon=":material/ac_unit:", width="stretch", disabled=c is None):
        snaps.freeze_form(ws, c is None)
    if c is not None:
        with b[4]:
            tr.panel(store, s.PRIMARY, s.metric_label(s.PRIMARY))


def beside_ranking(pool, ev, base_ev, qrels, run_name: str) -> None:
    """The query list and the judging queue, when on, at the top of the results column: each in a
    box of its own height, so the ranking the clicked query opens stays in view below them."""
    if st.session_state.get("tune_query_list"):
        label = s.metric_label(s.PRIMARY)
        st.caption("Click a row to open its query here (its ranking is right below).")
        st.dataframe(views.query_table(pool, ev, base_ev, qrels, s.PRIMARY), hide_index=True,
                     width="stretch", height=245, key="tune_query_table", on_select=on_query_row,
                     selection_mode="single-row", column_config={
                         "query": st.column_config.TextColumn("query", width=70),
                         "text": st.column_config.TextColumn("text", width=160),   # the column fits 1400 px
                         "score": st.column_config.NumberColumn(label, format="%.4f", width=80),
                         "baseline": st.column_config.NumberColumn(f"base {label}", format="%.4f",
                                                                   width=95),
                         "delta": st.column_config.NumberColumn("Δ", format="%+.4f", width=70),
                         "judged@5": st.column_config.NumberColumn(format="%.1f", width=75,
                                                                   help="the share of the top 5 with any judgment")})
    if st.session_state.get("tune_queue"):
        with st.container(height=330, border=False):
            qu.panel(ws, pool, qrels, ev, base_ev, run_name, functools.partial(gr.on_grade, ws))


@st.fragment
def live() -> None:
    started = time.perf_counter()
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    fragment_run = bool(ctx is not None and ctx.fragment_ids_this_run)
    if not fragment_run:
        started = st.session_state.get(s.K_RUN_STARTED, started)
    if st.session_state.pop("tune_full_run", False) and fragment_run:
        st.rerun()       # a change the parts above or below the fragment show
    dataset_line.draw_from_fragment()      # the sidebar's count follows a grade, the page does not rerun

    state = tn.state()                    # the one source: the knobs show it and it ranks
    config = state.config
    qi, free_text = query_pick(state)
    st.session_state["tune_ranked"] = (config, qi, free_text)
    left, right = st.columns([1.45, 2.8], gap="medium")      # four knob panes fit at 1400 px
    routed = c.intent_route[qi] if qi is not None else None

    with left:
        header()
        knob_panel(config, routed)
        if (refusal := tn.take_refusal()) is not None:      # shown once, right after the refused action
            er.refused(refusal.label, refusal.message)

    rev = ws.qrels_rev
    base_ev = s.live_evaluation(ws.path, ws.stamp, ws.embedder, ws.analyzer, rev, ws.baseline) if c is not None else None
    qrels, judged = s.get_judged(ws.path, ws.stamp, ws.embedder, ws.analyzer, rev) if c is not None else ({}, None)
    pool = c
    ev = (evaluate_config(pool, judged, config, routes=s.routes_for(ws.path, ws.stamp, ws.embedder, ws.analyzer, config))
          if c is not None else None)
    if ev is not None:
        tn.record_scores(config, ev.means, ws.baseline.name, base_ev.means)
    run_name = f"{config.name}{' (tuned)' if tn.is_tuned(state) else ''}"

    fisher = st.session_state["tune_fisher"] and ev is not None
    with right:
        if ev is not None:
            gr.undo_last(ws)             # after a grade (a row, the queue): its undo, where one grades
            beside_ranking(pool, ev, base_ev, qrels, run_name)
        ps = None
        if fisher:
            with st.spinner("Fisher's randomization test: 10,000 permutations per metric…"):
                ps = hx.fisher_cached(ws.path, ws.stamp, ws.embedder, ws.analyzer, rev, ws.baseline, config)
        provenance = (in_sample(ws.dataset.fingerprint, state.provenance, source=state.source)
                      if c is not None else None)
        view = views.tune_view(
            config, ws.dataset.documents, pool=pool, ev=ev, baseline=ws.baseline, base_ev=base_ev, qrels=qrels,
            qi=qi, intent=intents.get(c.query_ids[qi], "") if qi is not None else "",
            free_text=ws.free_text(free_text) if qi is None and free_text else None,
            metrics=s.METRICS, primary=s.PRIMARY, fisher=ps)
        summary = ""
        badges = list(view.badges)
        if provenance and view.rows:       # chosen or fitted on these very queries: every figure says so
            for row in view.rows:
                row["p_text"] = f"{row['p_text']} · {provenance.tag}"
                row["help"] = f"{row['help']} ({provenance.note()})"
            badges.insert(0, ("orange", provenance.note()))
        lead = (f"the figure to trust: {provenance.headline()} (the cards below: {provenance.tag})"
                if provenance and provenance.headline() else "")
        if view.rows:
            test = ("Fisher's randomization test (10,000 permutations, cached per configuration)" if fisher
                    else "paired t-test")
            summary = (f"Query set · metrics@5 · <code>{h(run_name)}</code> vs baseline "
                       f"<code>{h(ws.baseline.name)}</code> over {view.n_judged} judged queries · p: {test} "
                       "(one configuration vs the baseline: nothing to correct across systems, as in "
                       f"<code>rwb eval</code>; judged@5: paired t-test) · judgments: "
                       f"{h(hx.judgments_label(ws.path, ws.stamp, rev))}")
        if view.rows and ev is not None:  # does the verdict survive the unjudged documents? (issue 40)
            bounds = ev.bounds_against(base_ev, pool, qrels, s.PRIMARY)
            summary += ("<br>" + ("✓ " if bounds.holds else "⚠ ") + h(bounds.text())
                        + ("" if bounds.holds else " — the judging queue lists them"))
        if view.score is not None:
            summary += "<br>" + tb.query_score_html(view.score, s.metric_label(view.score.metric))
        if qi is None and not free_text:
            st.info("Type a query to search the corpus with the current knobs.")
        if view.rows or badges:
            st.html(tb.summary_html(view.rows, summary, badges, lead))   # one element: cards, caption, badges
        response, baseline, judgments = view.response, view.baseline, view.judgments
        if response is not None:
            grading = qi is not None and st.session_state["tune_rows"] == "Grade"
            if grading:
                qid = c.query_ids[qi]
                changed = gr.changed_docs(ws, qid)
                st.markdown(f"**Current** · {code(run_name)}")
                for r in response.results:
                    gr.grade_row(ws, "c", qid, r, judgments.get(r.id), [0.9, 4.2, 1.9], r.id in changed)
                st.markdown(f"**Baseline** · {code(ws.baseline.name)}")
                for r in baseline.results:
                    gr.grade_row(ws, "b", qid, r, judgments.get(r.id), [0.9, 4.2, 1.9], r.id in changed)
            else:
                cur, base = st.columns([1.7, 1], gap="small")
                cur.html(tb.ranking_html(response, judgments, baseline, title=f"Current · {run_name}"))
                base.html(tb.ranking_html(baseline, judgments, title=f"Baseline · {ws.baseline.name}"))
            if view.missed:
                st.html(tb.missed_html(view.missed, title=f"Judged relevant, not returned · {len(view.missed)}"))
            if qi is not None:
                if grading:
                    unjudged = [r for r in response.results if r.id not in judgments]
                    with st.form("tune_grade_all", border=True):
                        st.markdown(f"**Grade the {len(unjudged)} unjudged results in one pass**")
                        for r in unjudged:
                            cols = st.columns([0.9, 4.2, 1.9], vertical_alignment="center")
                            cols[0].markdown(f"`{r.id}`")
                            cols[1].markdown(md(" ".join(r.text.split())[:140]))
                            cols[2].pills("grade", s.GRADES, key=f"tune_ga_{r.id}", label_visibility="collapsed")
                        st.form_submit_button("Save grades", type="primary", disabled=not unjudged,
                                              on_click=gr.on_grade_all, args=(ws, c.query_ids[qi], [r.id for r in unjudged]))

        if st.session_state["tune_flash"]:
            st.toast(st.session_state["tune_flash"])
            st.session_state["tune_flash"] = ""
        if c is not None:
            tn.sync_url(state, c.query_ids)        # a knob move is a fragment run: the link follows it
        if ev is not None:
            total = (time.perf_counter() - started) * 1000
            st.caption(f"Server: this {'fragment ' if fragment_run else ''}rerun took **{total:.1f} ms** "
                       f"(engine: re-score + rank + metrics over {c.n_queries} queries {ev.seconds * 1000:.2f} ms); "
                       "the browser's own rendering comes on top.")


st.html(tb.CSS)           # once per page, outside the fragment: the live HTML below carries no styles
arrived = st.session_state.pop(tn.ARRIVED, False)      # opened from Evaluate: at the page's top
st.sidebar.html(SKIP_LINK + (TO_TOP if arrived else ""), unsafe_allow_javascript=True)   # scripts: no room taken
st.title("Tune")
st.caption(f"**{md(ws.dataset.name)}** · every knob re-scores the whole query set from its candidate table — "
           "no index is touched.")
query_picker()
actions()
live()
if c is not None and st.session_state.get("tune_snapshots"):
    with st.container(border=True, key="tune_snapshots_pane"):
        st.markdown("**Snapshots**")
        snaps.section(ws, prefix="tune_snap")
