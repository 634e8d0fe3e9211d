"""Sweep: grid or random search over two knobs (eval.search.sweep), the curve of the knob its owner declares
(``Knob.curve``: rrf_k), cross-validated winners;
Optimise: an Optuna search over many knobs with its nested-CV held-out estimate (eval.search.tune)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from eval.experiments import views

from eval.search import tune as tune_mod
from eval.statistics.provenance import Provenance, from_tuning
from eval.stores import configs as cfg
from pages import _charts as ch
from pages import _harness as hx
from pages import _knobs as kn
from pages import _state as sh
from pages._preparing import require_pool
from pages import _tune_state as tn
from pages import _tables as tb
from pages import _url as url
from pages._markup import code, md
from retrieval.pipeline import get_param, knobs as pipeline_knobs, with_params

TUNE_LABEL = "tune:current"
ONE_AXIS = ""          # the Y axis picker's "none": the sweep varies X alone
FIELDS = {"mode": url.Field("sweep_page_mode", default="Sweep"), "pipeline": url.Field("sweep_base"),
          "search": url.Field("sweep_mode"), "objective": url.Field("sweep_metric"),
          "folds": url.Field("sweep_folds", int), "x": url.Field("sweep_x"), "y": url.Field("sweep_y"),
          "samples": url.Field("sweep_samples", int, default=50), "curve": url.Field("sweep_rrfk_on", bool)}


def range_fields() -> dict[str, url.Field]:
    """Each axis's range (its keys name the knob, so that another knob starts at its own range)."""
    out = {}
    for axis in ("x", "y"):
        path = st.session_state.get(f"sweep_{axis}")
        if path:
            out |= {f"{axis}_lo": url.Field(f"sweep_{axis}_lo_{path}", float),
                    f"{axis}_hi": url.Field(f"sweep_{axis}_hi_{path}", float),
                    f"{axis}_steps": url.Field(f"sweep_{axis}_steps", int, default=11)}
    return out

ws = sh.workspace()
c = require_pool(ws)
st.title("Sweep")
st.caption(f"**{md(ws.dataset.name)}** · search two knobs of a pipeline over the query set; k-fold cross-validation "
           "shows how much of the gain survives on held-out queries · judgments: "
           f"{md(hx.judgments_label(ws.path, ws.stamp, ws.qrels_rev))}")

options = cfg.config_labels()
if tn.has_state():
    options.insert(0, TUNE_LABEL)
url.restore("sweep", FIELDS)            # a link's settings (each checked against its choices below)
url.restore("sweep_ranges", range_fields())
st.session_state.setdefault("sweep_base", TUNE_LABEL if TUNE_LABEL in options else "rrf")
if st.session_state["sweep_base"] not in options:
    st.session_state["sweep_base"] = "rrf"
for key, default, allowed in (("sweep_mode", "Grid", ("Grid", "Random")), ("sweep_metric", sh.PRIMARY, sh.METRICS),
                              ("sweep_folds", 3, range(2, 11)), ("sweep_samples", 50, range(1, 100_001)),
                              ("sweep_page_mode", "Sweep", ("Sweep", "Optimise", "Learn"))):
    if st.session_state.setdefault(key, default) not in allowed:
        st.session_state[key] = default
st.session_state.setdefault("sweep_result", None)
st.session_state.setdefault("sweep_rrfk", None)


def resolve(label: str):
    return tn.config() if label == TUNE_LABEL else sh.config_or_stop(label)


def fmt(label: str) -> str:
    return "◎ Tune · current knobs" if label == TUNE_LABEL else sh.format_label(label)


def source_of(label: str) -> str:
    return label if label != TUNE_LABEL else tn.state().source


def on_apply_config(config, label: str, what: str, provenance: Provenance | None = None) -> None:
    """Apply ``config`` to Tune and go there; Tune's toast says what changed. ``provenance``:
    how it was chosen on these queries, so every figure Tune shows of it says in-sample."""
    changes = views.config_changes(tn.config(), config)
    tn.set_config(config, source_of(label), provenance)
    st.session_state["tune_flash"] = f"{what} applied: {md(changes)}."
    st.session_state["sweep_goto_tune"] = True     # a callback cannot switch pages: the run does


if st.session_state.pop("sweep_goto_tune", False):
    st.switch_page("pages/tune.py")


def on_save_config(config, label: str, name_key: str) -> None:
    name = st.session_state.get(name_key, "").strip()
    try:
        cfg.save_profile(name, config, source_of(label))
        st.session_state["sweep_flash"] = f"Saved profile **{md(name)}**."
    except ValueError as error:
        st.session_state["sweep_flash"] = f":red[{md(error)}]"


page_mode = st.segmented_control(
    "Mode", ["Sweep", "Optimise", "Learn"], key="sweep_page_mode", required=True,
    help="Sweep: a grid or random search over two knobs. Optimise: an Optuna search over many "
         "knobs, scored by nested cross-validation. Learn: a fusion learned from the judgments "
         "(rwb learn), scored the same way.")


def flash() -> None:
    if st.session_state.get("sweep_flash"):
        st.toast(st.session_state.pop("sweep_flash"))


# ---- learn: eval.learning.nested.learn (a fusion learned from the judgments, nested CV) ------
if page_mode != "Sweep":
    url.keep({"mode": FIELDS["mode"]})
if page_mode == "Learn":
    from pages import _learn

    _learn.render(ws, options, fmt, on_apply_config, on_save_config)
    flash()
    st.stop()

# ---- optimise: eval.search.tune (Optuna TPE / grid / random, nested cross-validation) -------------------
if page_mode == "Optimise":
    qrels, judged = ws.judged()
    n_judged = judged.n_judged
    with st.container(border=True):
        row = st.columns([1.4, 1.45, 0.8, 0.8, 0.8, 1.0], vertical_alignment="bottom")   # "random" fits at 1400 px
        opt_label = row[0].selectbox("Pipeline to optimise", options, key="opt_base", format_func=fmt,
                                     index=options.index("rrf") if "rrf" in options else 0)
        opt_base = resolve(opt_label)
        sampler = row[1].segmented_control("Sampler", list(tune_mod.SAMPLERS), key="opt_sampler", required=True,
                                           default="tpe", help="tpe: Optuna's TPE · grid: the knobs' slider steps · "
                                                               "random: uniform draws")
        trials = row[2].number_input("Trials", 1, 500, value=30, key="opt_trials", help="trials per search")
        folds = row[3].number_input("Outer folds", 2, max(2, min(10, n_judged)), value=max(2, min(5, n_judged)),
                                    key="opt_folds")
        seed = row[4].number_input("Seed", 0, 1_000_000, value=0, key="opt_seed")
        opt_metric = row[5].selectbox("Objective", sh.METRICS, key="opt_metric", format_func=sh.metric_label)
        names = tune_mod.tunable(opt_base)
        own = [n for n in names if n.startswith(f"{opt_base.fusion}.")]
        picked = st.multiselect("Parameters to search", names, default=own or names[:1], key=f"opt_params_{opt_label}",
                                help="each over its knob's slider range and step")
        st.caption(f"{len(picked)} parameter(s) · {int(trials)} trials per search · {int(folds)} outer folds × "
                   f"{tune_mod.DEFAULT_INNER_FOLDS} inner (the guard against the default) · {n_judged} judged queries")
        opt_clicked = st.button("Run optimiser", type="primary", icon=":material/play_arrow:", key="opt_run",
                                width="stretch", disabled=not picked)
    if opt_clicked:
        asked = f"{int(trials)} trials per search × {int(folds) + 1} searches ({int(folds)} outer folds + final)"
        bar = st.progress(0.0, text=f"Optimising: {asked}…")
        try:
            st.session_state["opt_result"] = tune_mod.tune(
                c, qrels, opt_base, tune_mod.knob_space(opt_base, picked), trials=int(trials), folds=int(folds),
                seed=int(seed), sampler=sampler, metric=opt_metric,
                progress=lambda done, total: bar.progress(done / total, text=f"Optimising: {asked} · "
                                                          f"{done / total:.0%} of the scoring done"))
        except ValueError as error:
            st.error(f"Optimiser not run: {md(error)}", icon=":material/error:")
        bar.empty()
    tuned: tune_mod.TuneResult | None = st.session_state.get("opt_result")
    if tuned is not None and tuned.base != opt_base:       # the pipeline changed: the result is stale
        st.session_state["opt_result"] = tuned = None
    if tuned is None:
        st.info("Pick the parameters and run the optimiser.", icon=":material/auto_graph:")
        st.stop()
    st.subheader("Held-out estimate (nested cross-validation)")
    d, single = tuned.comparisons
    cols = st.columns(4)
    cols[0].metric(f"tuned · held-out {sh.metric_label(tuned.metric)}", f"{tuned.held_out_mean:.3f}", border=True,
                   help="Each query scored by the configuration a tuning run that never saw it chose.")
    for col, comp in ((cols[1], d), (cols[2], single)):
        col.metric(f"vs {comp.name}", f"{comp.mean:.3f}", delta=f"{comp.delta:+.3f}",
                   delta_description=f"p {hx.fmt_p(comp.p_fisher)} (Holm {hx.fmt_p(comp.p_fisher_holm)})",
                   border=True, help=f"Fisher's randomization test, paired over the same {tuned.n_queries} "
                                     f"held-out queries; W/T/L {comp.wins}/{comp.ties}/{comp.losses}.")
    cols[3].metric("final · in-sample", f"{tuned.final_score:.3f}", border=True,
                   help="The procedure run on all queries; its score on them is optimistic.")
    final_text = (" · ".join(f"{code(k)} = {v:g}" for k, v in tuned.final.pick.items())
                  if tuned.final.kind == "tuned" else f"{code(tuned.final.record.get('fallback', tuned.base.name))} kept")
    if tuned.final.kind == "tuned":
        for edge in views.on_edge(tuned.final.pick, {sp.name: (sp.lo, sp.hi) for sp in tuned.space}):
            st.warning(f"Final setting on the edge: {md(edge)}; the best value may lie outside the "
                       "range searched.", icon=":material/warning:")
    st.markdown(f"**Final setting** {final_text}  \n{tuned.n_configs} configurations in {tuned.seconds:.1f} s · "
                f"{tuned.sampler}, {tuned.trials} trials, {tuned.folds} folds, seed {tuned.seed}")
    st.dataframe([{"fold": f.fold, "held out": len(f.test_ids), "chosen": tune_mod.chosen_text(f),
                   "setting": ", ".join(f"{k}={v:g}" for k, v in f.applied.items()),
                   "train": f.choice.record["train_mean"], "held-out": f.test_mean} for f in tuned.outer],
                 hide_index=True, key="opt_folds_table")
    acts = st.columns([1, 1, 1, 2])
    acts[0].button("Apply to Tune", icon=":material/tune:", key="opt_apply", width="stretch",
                   on_click=on_apply_config,
                   args=(tuned.final_config, opt_label, f"Optimised setting (held-out {d.delta:+.3f} vs "
                                                        f"{d.name}, p {hx.fmt_p(d.p_fisher)})",
                         from_tuning(tuned.tuning_table())))
    with acts[1].popover("Save as profile", icon=":material/save:", width="stretch"):
        st.text_input("Profile name", key="opt_profile_name", placeholder="e.g. rrf-optimised")
        st.button("Save", type="primary", key="opt_save", on_click=on_save_config,
                  args=(tuned.final_config, opt_label, "opt_profile_name"))
    acts[2].download_button("Download TOML", tuned.to_toml(), file_name=f"{tuned.final_config.name}.toml",
                            mime="application/toml", icon=":material/download:", key="opt_download",
                            width="stretch")
    flash()
    st.stop()


# ---- controls ----------------------------------------------------------------------------------
with st.container(border=True):
    row = st.columns([1.6, 1.0, 1.0, 0.8], vertical_alignment="bottom")
    base_label = row[0].selectbox("Pipeline to sweep", options, key="sweep_base", format_func=fmt)
    base = resolve(base_label)
    mode = row[1].segmented_control("Search", ["Grid", "Random"], key="sweep_mode", required=True)
    metric = row[2].selectbox("Objective", sh.METRICS, key="sweep_metric", format_func=sh.metric_label)
    folds = row[3].number_input("CV folds", 2, 10, key="sweep_folds")

    edit_profile = None
    names = kn.routed_profiles(base)
    if names:
        edit_profile = st.selectbox("Routed profile to sweep", names, key="sweep_edit_profile")
    knobs = kn.sweep_axes(base, edit_profile)
    paths = list(knobs)
    if not paths:
        st.info(f"{code(base.name)} uses the {code(base.fusion)} fusion: no knob to sweep here.")
        st.stop()
    weight_paths = [p for p, ref in knobs.items() if ref.knob.group == "weights"] or paths
    for key, default, allowed in (("sweep_x", weight_paths[0], paths),
                                  ("sweep_y", (weight_paths + paths + [ONE_AXIS])[1], [ONE_AXIS, *paths])):
        if st.session_state.get(key) not in allowed:
            st.session_state[key] = default
    axes_cols = st.columns(2, gap="large")
    axes = {}
    for col, key in zip(axes_cols, ("sweep_x", "sweep_y")):
        with col:
            path = st.selectbox("X axis" if key == "sweep_x" else "Y axis",
                                paths if key == "sweep_x" else [ONE_AXIS, *paths], key=key,
                                format_func=lambda p: kn.axis_label(knobs[p]) if p else "none: sweep X alone")
            if not path:                                       # one axis: X alone
                continue
            knob = knobs[path].knob
            step = float(knob.step or (knob.hi - knob.lo) / 10)
            r = st.columns(3)
            for end, value in (("lo", knob.lo), ("hi", knob.hi)):      # a link's range, else the knob's
                st.session_state.setdefault(f"{key}_{end}_{path}", float(value))
            if st.session_state.setdefault(f"{key}_steps", 11) not in range(2, 102):
                st.session_state[f"{key}_steps"] = 11
            lo = r[0].number_input("from", key=f"{key}_lo_{path}", step=step)
            hi = r[1].number_input("to", key=f"{key}_hi_{path}", step=step)
            steps = r[2].number_input("steps", 2, 101, key=f"{key}_steps",
                                      help="Grid resolution (a random search samples points of this grid).")
            axes[path] = (lo, hi, int(steps))
    same_axis = st.session_state["sweep_x"] == st.session_state["sweep_y"]     # never with Y none
    r = st.columns([1, 1, 2], vertical_alignment="bottom")
    samples = r[0].number_input("Random samples", 1, 100_000, key="sweep_samples", disabled=mode == "Grid")
    curve_ref = next((ref for ref in knobs.values() if ref.knob.curve), None)  # declared by its owner
    curve_label = curve_ref.knob.label if curve_ref else "knob"
    st.session_state.setdefault("sweep_rrfk_on", curve_ref is not None)
    r[1].toggle(f"{curve_label} curve", key="sweep_rrfk_on", disabled=curve_ref is None,
                help=f"Also sweep {curve_label} over {curve_ref.knob.lo:g}…{curve_ref.knob.hi:g} with everything "
                     "else fixed." if curve_ref else "No knob of this pipeline declares a curve of its own.")
    grid_size = int(np.prod([s for _, _, s in axes.values()]))
    n_settings = grid_size if mode == "Grid" else min(int(samples), grid_size)
    # a fixed label and key: a label with the settings count changed as a value was typed, and the
    # changed button lost the click that followed the typing
    go_clicked = r[2].button("Run sweep", type="primary", icon=":material/play_arrow:", key="sweep_run",
                             width="stretch", disabled=same_axis)
    st.caption(":orange[Pick two different knobs, or none for Y.]" if same_axis else
               f"{n_settings:,} settings × {int(folds)} folds")

url.keep({**FIELDS, **range_fields()})          # the settings in the URL: a reload or a link opens them
random = int(samples) if mode == "Random" else None
curve_on = bool(st.session_state.get("sweep_rrfk_on") and curve_ref is not None)
try:
    specs = [hx.param_spec(base, path, lo, hi, steps, knobs[path].knob.kind == "int")
             for path, (lo, hi, steps) in axes.items()]
    sweep_key = hx.sweep_key(ws, base, specs, metric, random, int(folds), curve_on)
except ValueError as error:
    specs, sweep_key = None, None
    if go_clicked:
        st.error(f"Sweep not run: {md(error)}", icon=":material/error:")
if go_clicked and specs is not None:
    bar = st.progress(0.0, text="Sweeping…")
    try:
        result = hx.run_sweep(
            ws, base, specs, metric, random, int(folds),
            progress=lambda done, total: bar.progress(done / total, text=f"Sweeping… {done}/{total}"))
        rrfk = None
        if curve_on:
            bar.progress(1.0, text=f"{curve_label} curve…")
            knob = curve_ref.knob
            rrfk = hx.run_sweep(ws, base, [hx.ParamSpec(curve_ref.path, float(knob.lo), float(knob.hi),
                                                        float(knob.step))], metric, None, int(folds), grid_alone=True)
        st.session_state["sweep_result"], st.session_state["sweep_rrfk"] = result, rrfk
        st.session_state["sweep_result_mode"] = mode
        if (why := hx.keep_sweep(ws, sweep_key, result, rrfk)) is not None:
            st.caption(f"Not kept for a reload ({md(why)}): it shows until the page is left.")
    except ValueError as error:
        st.error(f"Sweep not run: {md(error)}", icon=":material/error:")
    bar.empty()

result: hx.SweepResult | None = st.session_state["sweep_result"]
if result is not None and result.base != base:             # the pipeline changed: the result is stale
    st.session_state["sweep_result"] = st.session_state["sweep_rrfk"] = result = None
if result is None and sweep_key is not None and (kept := hx.kept_sweep(ws, sweep_key, base)) is not None:
    result, st.session_state["sweep_rrfk"] = kept          # the last sweep of these very settings
    st.session_state["sweep_result"] = result
    st.caption("The last sweep of these settings, kept from before (same pipeline, ranges, objective, "
               "folds and inputs); **Run sweep** runs it again.")
if result is None:
    st.info("Set the ranges and run the sweep.", icon=":material/grid_on:")
    st.stop()

# ---- winner --------------------------------------------------------------------------------------
m = result.metric
best_cfg = result.recommended          # the best setting, or the fixed pipeline that beats every one
base_ev = ws.evaluation(ws.baseline)
best_ev = ws.evaluation(best_cfg)
vs_base = hx.compare_live(base_ev, best_ev, [m])[0]
st.subheader("Winner")
cols = st.columns([1, 1, 1, 1.6], vertical_alignment="center")
cols[0].metric(f"best {sh.metric_label(m)}", f"{result.recommended_score:.3f}",
               delta=f"{result.recommended_score - result.base_score:+.3f}", delta_description="vs start",
               border=True, help="In-sample: the recommendation's score on all queries (optimistic) — the best "
                                 "setting, or a fixed pipeline that scores at least as high as every setting.")
cols[1].metric("winner vs baseline", f"{vs_base['value']:.3f}", delta=f"{vs_base['delta']:+.3f}",
               delta_description=f"p {vs_base['p_text']}", border=True,
               help=f"The winner's {sh.metric_label(m)} on all queries; the baseline {ws.baseline.name} scores "
                    f"{vs_base['baseline']:.3f}. p: paired t-test over the counted queries.")
held, gain, gain_p = views.sweep_held_out(c, ws.judged()[1], result)
cols[2].metric("held-out (CV)", f"{held:.3f}", delta=f"{gain:+.3f}", delta_description=f"p {hx.fmt_p(gain_p)}",
               border=True, help="Each query scored by what the fold that held it out picked (a setting or a "
                    "fixed pipeline); the delta is against the start pipeline on the same queries, p the paired "
                    "t-test: how much of the gain survives on queries the sweep did not pick on.")
settings_text = (f"the fixed pipeline {code(result.chosen_fixed)}, above every setting" if result.chosen_fixed
                 else " · ".join(f"{code(k)} = {v:g}" for k, v in result.best_params.items()))
cols[3].markdown(f"**Recommended** {settings_text}  \n{len(result.scores)} settings in {result.seconds:.2f} s "
                 f"({result.configs_per_second:,.0f}/s) · ties go to the first setting enumerated")
for edge in views.on_edge(result.best_params, {sp.name: (sp.lo, sp.hi) for sp in result.space.specs}):
    st.warning(f"Winner on the edge: {md(edge)}; the best value may lie outside the range searched "
               "— widen it before applying.", icon=":material/warning:")
st.caption(md(hx.fixed_note(result)))
if gain <= 0 or not gain_p < 0.05:
    st.caption(f"Held-out gain {gain:+.3f} (p {hx.fmt_p(gain_p)}): not a clear improvement on "
               "queries the sweep did not pick on.")


actions = st.columns([1, 1, 1, 2])
actions[0].button("Apply winner to Tune", icon=":material/tune:", on_click=on_apply_config,
                  args=(best_cfg, st.session_state["sweep_base"],
                        f"Winner (held-out gain {gain:+.3f}, p {hx.fmt_p(gain_p)})",
                        Provenance(ws.dataset.fingerprint, "a sweep (its recommendation on all queries)",
                                   gain, gain_p, result.base.name)), width="stretch")
with actions[1].popover("Save as profile", icon=":material/save:", width="stretch"):
    st.text_input("Profile name", key="sweep_profile_name", placeholder="e.g. rrf-swept")
    st.button("Save", on_click=on_save_config, type="primary", key="sweep_save",
              args=(best_cfg, st.session_state["sweep_base"], "sweep_profile_name"))
if actions[2].button("Log experiment", icon=":material/science:", width="stretch"):
    ws.log_experiment(best_cfg, best_ev.means, "sweep", base_ev.means)
    st.toast("Logged the winner; see Reports.")
flash()

# ---- charts --------------------------------------------------------------------------------------
left, right = st.columns([1.25, 1], gap="large")
table = tb.sweep_frame(result)
x, y = result.space.names[0], result.space.names[-1]
best_row = table.iloc[result.best_index]
with left:
    st.subheader("Objective surface")
    fig = ch.surface_figure(table, x, y, m, result.mode == "grid" and len(result.space.names) == 2, best_row)
    st.plotly_chart(fig, config=ch.CONFIG, key="sweep_heatmap")

with right:
    curve: hx.SweepResult | None = st.session_state.get("sweep_rrfk")
    if curve is not None:
        (path,) = curve.space.names
        label = next(ref.knob.label for ref in pipeline_knobs(result.base) if ref.path == path)
        st.subheader(f"{label} curve")
        fig = ch.curve_figure(tb.sweep_frame(curve), path, label, curve.metric, get_param(result.base, path))
        st.plotly_chart(fig, config=ch.CONFIG, key="sweep_rrfk_chart")
        best_k = curve.best_params[path]
        # the curve was measured at the starting pipeline's other values: what it offers is that
        # pipeline at its best k, never the grid winner's weights with it (a setting never scored)
        st.button(f"Apply the curve's best {label} = {best_k:g}", key="sweep_apply_k",
                  on_click=on_apply_config, width="stretch",
                  args=(curve.best_config, st.session_state["sweep_base"], f"{label} = {best_k:g} (the curve's best)",
                        Provenance(ws.dataset.fingerprint, f"the {label} curve (its best value on all queries)")),
                  help=f"The starting pipeline with {label} = {best_k:g}, everything else as it starts: the "
                       "setting the curve scored.")
    st.subheader("Train vs held-out")
    fig = ch.folds_figure(tb.folds_frame(result), m, 200 if curve is not None else 300)
    st.plotly_chart(fig, config=ch.CONFIG, key="sweep_cv_chart")
    st.caption(f"train {result.train_mean:.3f} → held-out {result.held_out_mean:.3f} over {len(result.folds)} "
               f"folds of {result.n_queries} queries (seed {result.seed})")

with st.expander(f"All {len(table)} settings"):
    st.dataframe(table.sort_values(m, ascending=False), hide_index=True, height=300,
                 column_config={m: st.column_config.NumberColumn(sh.metric_label(m), format="%.4f")})
