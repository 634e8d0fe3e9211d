"""Tune: every knob of a pipeline, the ranking next to the baseline, live query-set metrics.

Everything a knob changes lives in one fragment (``live``): a knob move reruns only it —
knobs, metric cards, the two rankings — and those are light HTML, not data grids or charts.
"""

from __future__ import annotations

import time

import streamlit as st

from eval import configs as cfg
from eval.experiments.live import evaluate_config
from pages import _harness as hx
from pages import _knobs as kn
from pages import _state as s
from pages import _tables as tb
from pages._markup import code, html as h, md
from retrieval.pipeline import response_for, run_pipeline

ws = s.workspace()
c = s.require_pool(ws) if ws.has_queries else None
s.tune_config()
pool_depth = c.pool_depth if c is not None else kn.DEFAULT_POOL_DEPTH

# ---- page state (page-prefixed; the page runs on its own) ----------------------------------
st.session_state.setdefault("tune_mode", "Query set" if c is not None else "Free text")
st.session_state.setdefault("tune_query", 0)
st.session_state.setdefault("tune_free_text", "")
st.session_state.setdefault("tune_error", None)
st.session_state.setdefault("tune_flash", "")
st.session_state.setdefault("tune_rows", "Read")
st.session_state.setdefault("tune_fisher", False)
st.session_state.setdefault("tune_overwrite", "")
ERROR_KEY = "tune_error"


def on_source() -> None:
    label = st.session_state["tune_source_pick"]
    s.set_tune_config(cfg.resolve_config(label), label)
    st.session_state[ERROR_KEY] = None


def on_reset() -> None:
    label = st.session_state[s.TUNE_SOURCE]
    s.set_tune_config(cfg.resolve_config(label), label)
    st.session_state[ERROR_KEY] = None
    st.session_state["tune_flash"] = f"Knobs reset to {s.format_label(label)}."


def on_save_profile(overwrite: bool = False) -> None:
    st.session_state[ERROR_KEY] = None
    name = st.session_state.get("tune_profile_name", "").strip()
    if cfg.profile_exists(name) and not overwrite:
        st.session_state["tune_overwrite"] = name       # ask first (a button appears)
        return
    try:
        cfg.save_profile(name, st.session_state[s.TUNE_CONFIG], st.session_state[s.TUNE_SOURCE])
    except ValueError as error:
        st.session_state["tune_flash"] = f":red[{md(error)}]"
        return
    st.session_state["tune_overwrite"] = ""
    label = f"saved:{name}"
    s.set_tune_config(cfg.resolve_config(label), label)
    st.session_state["tune_flash"] = f"Saved profile **{md(name)}**."


def on_grade(qid: str, doc: str, key: str) -> None:
    value = st.session_state.get(key)
    st.session_state[ERROR_KEY] = None
    if value is None:
        return
    ws.judgments.grade(qid, doc, int(value), author="tune")
    st.session_state["tune_flash"] = f"Judged {md(doc)} = {value} for {md(qid)}."


def on_grade_all(qid: str, docs: list[str]) -> None:
    """The one-pass form: every unjudged result given a grade is saved at once."""
    saved = 0
    for doc in docs:
        value = st.session_state.get(f"tune_ga_{doc}")
        if value is not None:
            ws.judgments.grade(qid, doc, int(value), author="tune")
            saved += 1
    st.session_state["tune_flash"] = f"Saved {saved} grade(s) for {md(qid)}."


def grade_row(prefix: str, qid: str, result, grade, width) -> None:
    """A ranking row with one-click grading (Grade mode)."""
    key = f"tune_g_{prefix}_{qid}_{result.id}"
    st.session_state[key] = grade
    cols = st.columns(width, vertical_alignment="center")
    text = " ".join(result.text.split())
    cols[0].markdown(f"**{result.rank + 1}** · {code(result.id)}")
    cols[1].markdown(md(text[:140] + ("…" if len(text) > 140 else "")), help=md(text[:2000]))
    cols[2].pills("grade", s.GRADES, key=key, on_change=on_grade, args=(qid, result.id, key),
                  label_visibility="collapsed")


def header() -> None:
    """Starting point, reset, and (with an intent router) the profile being edited."""
    labels = cfg.config_labels()
    st.session_state["tune_source_pick"] = st.session_state[s.TUNE_SOURCE]
    if st.session_state["tune_source_pick"] not in labels:
        labels.append(st.session_state["tune_source_pick"])
    row = st.columns([3, 1.25], vertical_alignment="bottom")
    row[0].selectbox("Start from", labels, key="tune_source_pick", format_func=s.format_label, on_change=on_source,
                     help="A seed pipeline, one of seed 001's profiles, or a saved profile.")
    row[1].button("Reset", on_click=on_reset, use_container_width=True,
                  help="Reset every knob to the chosen starting point.")


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
    kn.render(refs[0], pool_depth, ERROR_KEY)                      # the fusion method, above the panes
    panes = [p for p in kn.PANES if any(kn.pane_of(r.path) == p for r in refs)]
    if st.session_state.get("tune_pane") not in panes:
        st.session_state["tune_pane"] = panes[0]
    pane = st.segmented_control("Knobs", panes, key="tune_pane", required=True, format_func=kn.PANES.get,
                                label_visibility="collapsed")
    for ref in refs:
        if kn.pane_of(ref.path) == pane:
            kn.render(ref, pool_depth, ERROR_KEY)
    if pane in ("confidence", "vitality"):
        quality = next((r for r in refs if r.path.endswith(".quality.conf_high")), None)
        if quality is not None:
            profile = kn.value_of_profile(config, quality.path.rsplit(".quality.", 1)[0])
            high, mid, low = kn.band_counts(*s.doc_quality(ws.path, ws.stamp), profile.quality)[
                "confidence" if pane == "confidence" else "vitality"]
            st.caption(f"Documents per {pane} band: high {high} · mid {mid} · low {low} (of {high + mid + low}). "
                       "A factor whose band is empty changes nothing.")
    if config.fusion in ("vector", "bm25"):
        st.caption("Single-path baseline: no weights to tune. Pick a fusion method above.")
    return edit_profile


def query_picker() -> None:
    """Which query (outside the fragment: a query list is long, and a knob move need not resend it)."""
    picks = st.columns([1.2, 2.05, 0.75], gap="medium", vertical_alignment="bottom")
    modes = ["Query set", "Free text"] if c is not None else ["Free text"]
    picks[0].segmented_control("Query", modes, key="tune_mode", required=True)
    if st.session_state["tune_mode"] == "Query set" and c is not None:
        if st.session_state["tune_query"] not in range(c.n_queries):
            st.session_state["tune_query"] = 0
        picks[1].selectbox("Query from the set", range(c.n_queries), key="tune_query",
                           format_func=lambda i: tb.query_label(c, i))
    else:
        picks[1].text_input("Free-text query", key="tune_free_text", placeholder="ask the memory anything…")
    with picks[2]:
        st.segmented_control("Rows", ["Read", "Grade"], key="tune_rows", required=True, disabled=c is None,
                             help="Grade: one click per result sets its judgment for this query.")
        st.toggle("Fisher p", key="tune_fisher", disabled=c is None,
                  help="Fisher's randomization test instead of the paired t-test (10,000 permutations; "
                       "computed once per configuration).")


def query_pick() -> tuple[int | None, str]:
    if st.session_state["tune_mode"] == "Query set" and c is not None:
        return st.session_state["tune_query"], ""
    return None, st.session_state["tune_free_text"].strip()


@st.fragment
def live() -> None:
    started = time.perf_counter()
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    fragment_run = bool(ctx is not None and ctx.fragment_ids_this_run)
    if not fragment_run:
        started = st.session_state.get(s.K_RUN_STARTED, started)

    config = st.session_state[s.TUNE_CONFIG]
    qi, free_text = query_pick()
    left, right = st.columns([1.2, 2.8], gap="medium")
    routed = c.intent_route[qi] if qi is not None else None

    with left:
        header()
        knob_panel(config, routed)
        error = st.session_state.get(ERROR_KEY)
        if error is not None:               # shown once, right after the refused move
            st.warning(f"**{md(error.label)}** not applied: {md(error.message)}")
            st.session_state[ERROR_KEY] = None
        b = st.columns(2)
        with b[0].popover("Save…", use_container_width=True):
            st.text_input("Profile name", key="tune_profile_name", placeholder="e.g. debug-heavier-bm25")
            st.button("Save", on_click=on_save_profile, type="primary", key="tune_save_profile")
            pending = st.session_state["tune_overwrite"]
            if pending and pending == st.session_state.get("tune_profile_name", "").strip():
                st.warning(f"A profile named **{md(pending)}** exists.")
                st.button(f"Overwrite {pending}", on_click=on_save_profile, args=(True,), key="tune_overwrite_yes")
        log_clicked = b[1].button("Log experiment", use_container_width=True, disabled=c is None,
                                  help="Store config, dataset fingerprint and metrics.")

    config = st.session_state[s.TUNE_CONFIG]      # a knob callback may have changed it
    ev = None
    rev = ws.qrels_rev
    base_ev = s.live_evaluation(ws.path, ws.stamp, ws.embedder, rev, ws.baseline) if c is not None else None
    qrels, judged = s.get_judged(ws.path, ws.stamp, ws.embedder, rev) if c is not None else ({}, None)
    pool = s.pool_for(ws.path, ws.stamp, ws.embedder, config) if c is not None else None   # learned routes if used
    ev = evaluate_config(pool, judged, config) if c is not None else None
    run_name = f"{config.name}{' (tuned)' if s.is_tuned(config) else ''}"

    with right:
        if ev is not None:
            fisher = st.session_state["tune_fisher"]
            rows = hx.compare_live(base_ev, ev)
            test = "paired t-test"
            if fisher:
                ps = hx.fisher_cached(ws.path, ws.stamp, ws.embedder, rev, ws.baseline, config)
                for row in rows:
                    row["p"] = ps[row["metric"]]
                    row["p_text"] = hx.fmt_p(row["p"])
                test = "Fisher's randomization test (10,000 permutations, cached per configuration)"
            for row in rows:
                row["help"] = f"{row['label']}: {row['value']:.4f} vs baseline {row['baseline']:.4f} over {row['n']} queries"
            n = int(judged.n_judged)
            summary = (f"Query set · metrics@5 · <code>{h(run_name)}</code> vs baseline <code>{h(ws.baseline.name)}</code> "
                       f"over {n} judged queries · p: {test} (one configuration vs the baseline: nothing to correct "
                       "across systems, as in <code>rwb eval</code>)")
        else:
            rows, summary = [], ""

        response = baseline = None
        judgments: dict = {}
        intent = ""
        if qi is not None:
            response = response_for(pool, ev.run, qi, ws.dataset.documents)
            baseline = response_for(s.pool_for(ws.path, ws.stamp, ws.embedder, ws.baseline), base_ev.run, qi,
                                    ws.dataset.documents)
            judgments = qrels.get(c.query_ids[qi], {})
            intent = next((q.intent for q in ws.dataset.queries if q.id == c.query_ids[qi]), "")
        elif free_text:
            fc = ws.free_text(free_text)
            response = response_for(fc, run_pipeline(fc, config), 0, ws.dataset.documents)
            baseline = response_for(fc, run_pipeline(fc, ws.baseline), 0, ws.dataset.documents)
        else:
            st.info("Type a query to search the corpus with the current knobs.")

        badges = []
        if response is not None:
            badges = [("blue", f"route · {response.route}")]
            if response.profile:
                badges.append(("violet", f"profile · {response.profile}"))
            if intent:
                badges.append(("gray", f"intent · {intent}"))
            budget = f" / {config.token_budget}" if config.token_budget else ""
            badges.append(("gray", f"{response.total_tokens}{budget} tokens"))
            badges.append(("gray", f"{len(response.results)} results"))
            badges += [("orange", f"degraded: {note}") for note in response.degraded]
        if rows or badges:
            st.html(tb.summary_html(rows, summary, badges))       # one element: cards, caption, badges
        if response is not None:
            grading = qi is not None and st.session_state["tune_rows"] == "Grade"
            if grading:
                qid = c.query_ids[qi]
                st.markdown(f"**Current** · {code(run_name)}")
                for r in response.results:
                    grade_row("c", qid, r, judgments.get(r.id), [0.9, 4.2, 1.9])
                st.markdown(f"**Baseline** · {code(ws.baseline.name)}")
                for r in baseline.results:
                    grade_row("b", qid, r, judgments.get(r.id), [0.9, 4.2, 1.9])
            else:
                cur, base = st.columns([1.7, 1], gap="small")
                cur.html(tb.ranking_html(response, judgments, baseline, title=f"Current · {run_name}"))
                base.html(tb.ranking_html(baseline, judgments, title=f"Baseline · {ws.baseline.name}"))
            if qi is not None:
                returned = {r.id for r in response.results}
                text_of = ws.dataset.documents
                by_id = {d.id: d for d in text_of} if judgments else {}
                missed = [(d, g, by_id[d].text if d in by_id else "") for d, g in
                          sorted(judgments.items(), key=lambda x: -x[1]) if g > 0 and d not in returned]
                if missed:
                    st.html(tb.missed_html(missed, title=f"Judged relevant, not returned · {len(missed)}"))
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
                                              on_click=on_grade_all, args=(c.query_ids[qi], [r.id for r in unjudged]))

        if log_clicked and ev is not None:
            entry = ws.log_experiment(config, ev.means, "tune", base_ev.means)
            st.toast(f"Logged experiment **{md(entry['name'])}** ({entry['time']}).")
        if st.session_state["tune_flash"]:
            st.toast(st.session_state["tune_flash"])
            st.session_state["tune_flash"] = ""
        if ev is not None:
            total = (time.perf_counter() - started) * 1000
            st.caption(f"Server: this {'fragment ' if fragment_run else ''}rerun took **{total:.1f} ms** "
                       f"(engine: re-score + rank + metrics over {c.n_queries} queries {ev.seconds * 1000:.2f} ms); "
                       "the browser's own rendering comes on top.")


st.html(tb.CSS)           # once per page, outside the fragment: the live HTML below carries no styles
st.title("Tune")
st.caption(f"**{md(ws.dataset.name)}** · every knob re-scores the whole query set from its candidate table — "
           "no index is touched.")
query_picker()
live()
