"""The Sweep page's Learn mode: ``rwb learn``'s whole run (``eval.learning.transfer.learn_report``:
the folds' groups, nested CV with the guard and the memorisation check, leave one kind out, fold
seeds) on the page's pool and judgments, drawn from ``eval.experiments.views.learn_view`` — the
held-out figure against the default and the best single path, the folds' grouping, the figures
per kind of query, the guard's decisions, a linear model's weights — and the learned pipeline
applied to Tune, saved as a profile or downloaded."""

from __future__ import annotations

import json
from typing import Callable

import streamlit as st

from eval.experiments.views import LearnView, learn_view
from eval.learning.fit import MODELS
from eval.learning.leakage import AUTO, fold_choices
from eval.learning.nested import DEFAULT_INNER_FOLDS, LearnResult
from eval.learning.router import LEARNED_PIPELINE
from eval.learning.transfer import MAX_REPEATS, learn_report
from eval.statistics.provenance import from_tuning
from pages import _harness as hx
from pages import _state as sh
from pages._markup import md
from retrieval.fusion.learned.model import model_to_json

RESULT = "learn_result"          # (what it was learned on, LearnReport)
CHOSEN = "(best fixed pipeline)"  # the fallback chosen in the inner folds (rwb learn's default)
MODEL_HELP = ("auto: chosen in the inner folds among all · linear: one weight per feature "
              "(knobs on Tune) · lambdamart: LightGBM's lambdarank · moe: seed 001 §6, query "
              "features → the profile's weights per query")
FOLD_BY_HELP = ("auto (rwb learn's default): the queries' group field, or the groups of queries "
                "that share a relevant document, where they are clear, else by query · none: by "
                "query · a field: folds keep each of its values whole")


def _key(ws: sh.Workspace, default_label: str) -> tuple:
    return (ws.path, ws.stamp, ws.embedder, ws.analyzer, ws.qrels_rev, default_label)


def render(ws: sh.Workspace, options: list[str], fmt: Callable[[str], str],
           on_apply: Callable, on_save: Callable) -> None:
    """The controls, the run (named progress) and the result with its actions."""
    qrels, judged = ws.judged()
    n_judged = judged.n_judged
    labels = [CHOSEN, *(x for x in options if x != "tune:current")]
    with st.container(border=True):
        row = st.columns([2.4, 1.6], vertical_alignment="bottom")      # the model's four buttons whole at 1400 px
        model = row[0].segmented_control("Model", ["auto", *MODELS], key="learn_model",
                                         required=True, default="auto", help=MODEL_HELP)
        default_label = row[1].selectbox(
            "Fallback (the guard keeps it)", labels, key="learn_default",
            format_func=lambda x: "best fixed (per fold)" if x == CHOSEN else fmt(x),
            help="best fixed pipeline (rwb learn's default): each training part keeps the named "
                 "fixed pipeline that scores best there, and a model must beat that one. Another "
                 "choice makes that one pipeline the floor (rwb learn --default).")
        row = st.columns([1.3, 0.75, 0.75, 0.6, 0.8], vertical_alignment="bottom")
        fold_by = row[0].selectbox("Folds by", fold_choices(ws.dataset.queries),
                                   key="learn_fold_by", help=FOLD_BY_HELP)
        top = max(2, min(10, n_judged))
        folds = row[1].number_input("Outer folds", 2, top, value=min(5, top), key="learn_folds")
        inner = row[2].number_input("Inner folds", 2, 10, value=DEFAULT_INNER_FOLDS,
                                    key="learn_inner", help="Inside each outer training part: "
                                    "they choose the model and guard the default.")
        seed = row[3].number_input("Seed", 0, 1_000_000, value=0, key="learn_seed")
        seeds = row[4].number_input("Fold seeds", 1, MAX_REPEATS, value=1, key="learn_repeats",
                                    help="Run the nested CV with this many fold seeds (seed, "
                                         "seed+1, …) and show the held-out figure's spread.")
        row = st.columns([1.3, 0.9, 1.0], vertical_alignment="bottom")
        transfer = row[0].toggle("Leave one kind out", value=True, key="learn_transfer",
                                 help="Run the whole procedure once more with each kind of "
                                      "query (intent) held out whole.")
        guard = row[1].toggle("Guard", value=True, key="learn_guard",
                              help="Keep the default unless a model beats it in the inner "
                                   "folds by a standard error and is clearly worse on no kind "
                                   "of query (off: rwb learn --no-guard).")
        clicked = row[2].button("Learn", type="primary", icon=":material/model_training:",
                                key="learn_run", width="stretch", disabled=n_judged < 2)
        st.caption(f"{int(folds)} outer folds × {int(inner)} inner · {n_judged} judged queries · "
                   "features from the candidate table, labels from the judgments every figure "
                   "uses")
    default = None if default_label == CHOSEN else sh.config_or_stop(default_label)
    if clicked:
        asked = f"{model} · {int(folds)} outer folds × {int(inner)} inner"
        bar = st.progress(0.0, text=f"Learning ({asked}): fitting…")

        def stage(name: str) -> Callable[[int, int], None]:
            def progress(done: int, total: int) -> None:
                bar.progress(min(1.0, done / max(1, total)),
                             text=f"Learning ({asked}): {name} {done}/{total}")
            return progress

        try:
            report = learn_report(ws.pool(), qrels,
                                  ws.dataset.queries, model, folds=int(folds), seed=int(seed),
                                  fold_by=None if fold_by == AUTO else fold_by,
                                  transfer=transfer, repeats=int(seeds), progress=stage,
                                  inner_folds=int(inner), guard=guard, default=default,
                                  routes=sh.routes_for(ws.path, ws.stamp, ws.embedder, ws.analyzer,
                                                       default or LEARNED_PIPELINE))
            st.session_state[RESULT] = (_key(ws, default_label), report)
        except ValueError as error:
            st.error(f"Nothing learned: {md(error)}", icon=":material/error:")
        bar.empty()
    stored = st.session_state.get(RESULT)
    if stored is not None and stored[0] != _key(ws, default_label):   # other data: stale
        st.session_state[RESULT] = stored = None
    if stored is None:
        st.info("Choose the model and learn: every figure below is held out (nested "
                "cross-validation) unless it says in-sample.", icon=":material/model_training:")
        return
    show(stored[1].result, learn_view(stored[1]), default_label, on_apply, on_save)


def show(r: LearnResult, v: LearnView, default_label: str, on_apply: Callable,
         on_save: Callable) -> None:
    st.subheader("Held-out estimate (nested cross-validation)")
    metric = v.metric
    st.caption(md(v.grouping))
    if v.memorisation:
        (st.warning if v.memorisation_warn else st.caption)(
            md(v.memorisation), **({"icon": ":material/warning:"} if v.memorisation_warn else {}))
    cols = st.columns(4)
    cols[0].metric(f"learned · held-out {metric}", f"{v.held_out:.3f}", border=True,
                   help="Each query scored by the model a learning run that never saw it chose "
                        "and fitted.")
    for col, comp in zip(cols[1:3], v.comparisons):
        col.metric(f"vs {comp['name']}", f"{comp['mean']:.3f}", delta=f"{comp['delta']:+.3f}",
                   delta_description=f"p {hx.fmt_p(comp['p'])}", border=True,
                   help=f"Fisher's randomization test, paired over the same {r.n_queries} "
                        f"held-out queries (Holm over the two comparisons: "
                        f"{hx.fmt_p(comp['p_holm'])}); W/T/L {comp['wtl']}.")
    cols[3].metric("final · in-sample", f"{v.final_score:.3f}", border=True,
                   help="The procedure run on all queries, scored on the queries it was fitted "
                        "on: optimistic.")
    table = [{"pipeline": "learned (held out)", metric: v.held_out,
              "judged@5": r.judged["held_out"], "Δ learned": "—", "p Fisher": "",
              "p Holm": "", "W/T/L": ""}]
    table += [{"pipeline": c["name"], metric: c["mean"],
               "judged@5": r.judged.get(c["pipeline"], float("nan")), "Δ learned": f"{c['delta']:+.4f}",
               "p Fisher": hx.fmt_p(c["p"]), "p Holm": hx.fmt_p(c["p_holm"]),
               "W/T/L": c["wtl"]} for c in v.comparisons]
    st.dataframe(table, hide_index=True, key="learn_compare", width="stretch",
                 column_config={metric: st.column_config.NumberColumn(format="%.4f"),
                                "judged@5": st.column_config.NumberColumn(
                                    format="%.3f", help="share of the top 5 with any judgment"),
                                "Δ learned": st.column_config.TextColumn(
                                    help="the held-out difference; — on the learned row itself")})
    if v.stability:
        st.caption(md(v.stability))
    if v.per_kind:
        st.markdown("**Held out, per kind of query** (transfer)")
        st.dataframe(v.per_kind, hide_index=True, key="learn_per_kind", width="stretch",
                     column_config={k: st.column_config.NumberColumn(format="%.4f")
                                    for k in v.per_kind[0] if k not in ("kind", "queries")})
    if v.transfer_line:
        st.markdown(md(v.transfer_line))
    st.markdown(f"**Final model** {md(v.final)}  \n{len(r.feature_names)} features at depth "
                f"{r.depth} · {r.n_fits} fits in {r.seconds:.1f} s · {md(r.model)}, {r.folds} "
                f"folds, seed {r.seed} · in-sample {metric} {v.final_score:.4f} (scored on the "
                "queries it was fitted on)")
    st.dataframe(v.folds, hide_index=True, key="learn_folds_table", width="stretch",
                 column_config={
                     "held-out": st.column_config.NumberColumn(f"held-out {metric}", format="%.4f"),
                     "default (inner)": st.column_config.NumberColumn(format="%.4f")})
    st.markdown(f"**What was kept** {md(v.kept)}")
    st.markdown("**The guard's decisions**  \n" + "  \n".join(md(line) for line in v.guard))
    st.caption("Each candidate's inner cross-validation on all queries (held out within the "
               "inner folds; the fixed pipeline is its mean on all of them):")
    st.dataframe(v.candidates, hide_index=True, key="learn_candidates", width="stretch",
                 column_config={k: st.column_config.NumberColumn(format="%.4f")
                                for k in (v.candidates[0] if v.candidates else {}) if k != "candidate"})
    if v.weights:
        st.caption(f"The linear model's weights on standardised features (fitted on all "
                   f"queries: in-sample), the {len(v.weights)} largest of {v.n_weights}; all are "
                   "in the TOML")
        st.dataframe(v.weights, hide_index=True, key="learn_weights", width="stretch",
                     column_config={"weight": st.column_config.NumberColumn(format="%+.4f")})
    with st.expander(f"What the {len(v.glossary)} features measure"):
        st.dataframe(v.glossary, hide_index=True, key="learn_glossary", width="stretch")
    try:                                         # kept under $RWB_HOME/learned/: a link restores it
        label, config = r.keep()
    except (ValueError, OSError) as error:
        st.error(f"The learned model cannot be kept: {md(error)}", icon=":material/error:")
        return
    source = label or default_label
    acts = st.columns([1, 1, 1, 1])
    acts[0].button("Apply to Tune", icon=":material/tune:", key="learn_apply",
                   width="stretch", on_click=on_apply,
                   args=(config, source, f"Learned pipeline (held-out {r.comparisons[0].delta:+.3f} vs "
                                         f"{r.comparisons[0].name}, p {hx.fmt_p(r.comparisons[0].p_fisher)})",
                         from_tuning(r.record())))
    with acts[1].popover("Save as profile", icon=":material/save:", width="stretch"):
        st.text_input("Profile name", key="learn_profile_name", placeholder="e.g. learned-devmem")
        st.button("Save", type="primary", key="learn_save", on_click=on_save,
                  args=(config, source, "learn_profile_name"))
    model_name = "learned.model.json" if r.stored_model is not None else ""
    acts[2].download_button("Download TOML", r.to_toml(model_name), file_name="learned.toml",
                            mime="application/toml", icon=":material/download:",
                            key="learn_download", width="stretch")
    if r.stored_model is not None:
        acts[3].download_button("Download model", json.dumps(model_to_json(r.stored_model)) + "\n",
                                file_name=model_name, mime="application/json",
                                icon=":material/download:", key="learn_download_model",
                                width="stretch",
                                help="Keep it beside learned.toml: the TOML names it.")
