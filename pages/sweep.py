"""Sweep: grid or random search over two knobs (eval.sweep), an rrf_k curve, cross-validated winners."""

from __future__ import annotations

import math

import numpy as np
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from pages import _shared as sh

TUNE_LABEL = "tune:current"

ws = sh.workspace()
c = sh.require_pool(ws)
st.title("Sweep")
st.caption(f"**{ws.dataset.name}** · search two knobs of a pipeline over the query set; k-fold cross-validation "
           "shows how much of the gain survives on held-out queries.")

options = sh.config_labels()
if sh.TUNE_CONFIG in st.session_state:
    options.insert(0, TUNE_LABEL)
st.session_state.setdefault("sweep_base", TUNE_LABEL if TUNE_LABEL in options else "rrf")
if st.session_state["sweep_base"] not in options:
    st.session_state["sweep_base"] = "rrf"
st.session_state.setdefault("sweep_mode", "Grid")
st.session_state.setdefault("sweep_metric", sh.PRIMARY)
st.session_state.setdefault("sweep_folds", 3)
st.session_state.setdefault("sweep_result", None)
st.session_state.setdefault("sweep_rrfk", None)


def resolve(label: str):
    return st.session_state[sh.TUNE_CONFIG] if label == TUNE_LABEL else sh.resolve_config(label)


def fmt(label: str) -> str:
    return "◎ Tune · current knobs" if label == TUNE_LABEL else sh.format_label(label)


# ---- controls ----------------------------------------------------------------------------------
with st.container(border=True):
    row = st.columns([1.6, 1.0, 1.0, 0.8], vertical_alignment="bottom")
    base_label = row[0].selectbox("Pipeline to sweep", options, key="sweep_base", format_func=fmt)
    base = resolve(base_label)
    mode = row[1].segmented_control("Search", ["Grid", "Random"], key="sweep_mode", required=True)
    metric = row[2].selectbox("Objective", sh.METRICS, key="sweep_metric", format_func=sh.metric_label)
    folds = row[3].number_input("CV folds", 2, 10, key="sweep_folds")

    edit_profile = None
    if base.fusion == "adaptive" and base.params.intent_router:
        names = [p.name for p in base.params.profiles]
        edit_profile = st.selectbox("Routed profile to sweep", names, key="sweep_edit_profile")
    knobs = {k.path: k for k in sh.sweepable_knobs(base, edit_profile)}
    paths = list(knobs)
    if len(paths) < 2:
        st.info(f"`{base.name}` uses the `{base.fusion}` fusion: too few knobs to sweep here.")
        st.stop()
    weight_paths = [p for p in paths if knobs[p].group == "weights"] or paths
    for key, default in (("sweep_x", weight_paths[0]), ("sweep_y", (weight_paths + paths)[1])):
        if st.session_state.get(key) not in paths:
            st.session_state[key] = default
    axes_cols = st.columns(2, gap="large")
    axes = {}
    for col, key in zip(axes_cols, ("sweep_x", "sweep_y")):
        with col:
            path = st.selectbox("X axis" if key == "sweep_x" else "Y axis", paths, key=key,
                                format_func=lambda p: f"{knobs[p].label.strip()} · {p}")
            knob = knobs[path]
            r = st.columns(3)
            lo = r[0].number_input("from", value=float(knob.lo), key=f"{key}_lo_{path}", step=float(knob.step))
            hi = r[1].number_input("to", value=float(knob.hi), key=f"{key}_hi_{path}", step=float(knob.step))
            steps = r[2].number_input("steps", 2, 101, value=11, key=f"{key}_steps",
                                      help="Grid resolution (a random search samples points of this grid).")
            axes[path] = (lo, hi, int(steps))
    same_axis = st.session_state["sweep_x"] == st.session_state["sweep_y"]
    r = st.columns([1, 1, 2], vertical_alignment="bottom")
    samples = r[0].number_input("Random samples", 1, 100_000, value=50, key="sweep_samples",
                                disabled=mode == "Grid")
    rrf_curve = base.fusion in ("rrf", "salience")
    r[1].toggle("rrf_k curve", value=rrf_curve, key="sweep_rrfk_on", disabled=not rrf_curve,
                help="Also sweep rrf_k over 1…200 with everything else fixed.")
    grid_size = int(np.prod([s for _, _, s in axes.values()]))
    n_settings = grid_size if mode == "Grid" else min(int(samples), grid_size)
    go_clicked = r[2].button(f"Run sweep · {n_settings} settings", type="primary", icon=":material/play_arrow:",
                             use_container_width=True, disabled=same_axis)
    if same_axis:
        st.caption(":orange[Pick two different knobs.]")

if go_clicked:
    bar = st.progress(0.0, text="Sweeping…")
    try:
        specs = [sh.param_spec(base, path, lo, hi, steps) for path, (lo, hi, steps) in axes.items()]
        result = sh.run_harness_sweep(
            ws, base, specs, metric, int(samples) if mode == "Random" else None, int(folds),
            progress=lambda done, total: bar.progress(done / total, text=f"Sweeping… {done}/{total}"))
        rrfk = None
        if st.session_state.get("sweep_rrfk_on") and rrf_curve:
            bar.progress(1.0, text="rrf_k curve…")
            rrfk = sh.run_harness_sweep(ws, base, [sh.ParamSpec("rrf.rrf_k", 1.0, 200.0, 1.0)], metric, None,
                                        int(folds))
        st.session_state["sweep_result"], st.session_state["sweep_rrfk"] = result, rrfk
        st.session_state["sweep_result_mode"] = mode
    except ValueError as error:
        st.error(f"Sweep not run: {error}", icon=":material/error:")
    bar.empty()

result: sh.SweepResult | None = st.session_state["sweep_result"]
if result is None:
    st.info("Set the ranges and run the sweep.", icon=":material/grid_on:")
    st.stop()

# ---- winner --------------------------------------------------------------------------------------
m = result.metric
best_cfg = result.best_config
base_ev = ws.evaluation(ws.baseline)
best_ev = ws.evaluation(best_cfg)
vs_base = sh.compare_metrics(base_ev, best_ev, [m]).iloc[0]
st.subheader("Winner")
cols = st.columns([1, 1, 1, 1.6], vertical_alignment="center")
cols[0].metric(f"best {sh.metric_label(m)}", f"{result.best_score:.3f}",
               delta=f"{result.best_score - result.base_score:+.3f}", delta_description="vs start", border=True,
               help="In-sample: the best setting on all queries (optimistic).")
cols[1].metric(f"vs baseline {ws.baseline.name}", f"{vs_base['baseline']:.3f}",
               delta=f"{vs_base['delta']:+.3f}",
               delta_description=f"p = {vs_base['p']:.3f}" if vs_base["p"] == vs_base["p"] else "p n/a", border=True)
cols[2].metric("held-out (CV)", f"{result.held_out_mean:.3f}", delta=f"{result.held_out_mean - result.train_mean:+.3f}",
               delta_description="vs train", border=True,
               help="Mean over folds of the training-fold winner's score on its held-out fold.")
settings_text = " · ".join(f"`{k}` = {v:g}" for k, v in result.best_params.items())
cols[3].markdown(f"**Setting** {settings_text}  \n{len(result.scores)} settings in {result.seconds:.2f} s "
                 f"({result.configs_per_second:,.0f}/s) · ties go to the first setting enumerated")


def on_apply() -> None:
    label = st.session_state["sweep_base"]
    sh.set_tune_config(result.best_config, label if label != TUNE_LABEL else st.session_state.get(sh.TUNE_SOURCE))
    st.session_state["sweep_flash"] = "Winner applied to Tune."


def on_save() -> None:
    name = st.session_state.get("sweep_profile_name", "").strip()
    try:
        sh.save_profile(name, result.best_config)
        st.session_state["sweep_flash"] = f"Saved profile **{name}**."
    except ValueError as error:
        st.session_state["sweep_flash"] = f":red[{error}]"


actions = st.columns([1, 1, 1, 2])
actions[0].button("Apply winner to Tune", icon=":material/tune:", on_click=on_apply, use_container_width=True)
with actions[1].popover("Save as profile", icon=":material/save:", use_container_width=True):
    st.text_input("Profile name", key="sweep_profile_name", placeholder="e.g. rrf-swept")
    st.button("Save", on_click=on_save, type="primary", key="sweep_save")
if actions[2].button("Log experiment", icon=":material/science:", use_container_width=True):
    sh.log_experiment(ws, best_cfg, best_ev.means, "sweep", ws.baseline, base_ev.means)
    st.toast("Logged the winner; see Reports.")
if st.session_state.get("sweep_flash"):
    st.toast(st.session_state.pop("sweep_flash"))

# ---- charts --------------------------------------------------------------------------------------
left, right = st.columns([1.25, 1], gap="large")
table = sh.sweep_frame(result)
x, y = result.space.names[0], result.space.names[-1]
best_row = table.iloc[result.best_index]
with left:
    st.subheader("Objective surface")
    if result.mode == "grid" and len(result.space.names) == 2:
        grid = table.pivot_table(index=y, columns=x, values=m, aggfunc="mean")
        z = grid.to_numpy()
        finite = np.isfinite(z).any()
        # clip the colour scale's low end so a few degenerate settings (all weights 0) don't flatten the rest
        low, high = (float(np.nanpercentile(z, 10)), float(np.nanmax(z))) if finite else (None, None)
        fig = go.Figure(go.Heatmap(z=z, x=grid.columns, y=grid.index, colorscale="Viridis", zmin=low, zmax=high,
                                   colorbar=dict(title=sh.metric_label(m)),
                                   hovertemplate=f"{x}=%{{x:.3g}}<br>{y}=%{{y:.3g}}<br>{m}=%{{z:.4f}}<extra></extra>"))
    else:
        fig = px.scatter(table, x=x, y=y, color=m, color_continuous_scale="Viridis")
        fig.update_traces(marker=dict(size=10))
    fig.add_trace(go.Scatter(x=[best_row[x]], y=[best_row[y]], mode="markers", showlegend=False,
                             marker=dict(symbol="star", size=18, color="#ff4b4b", line=dict(color="white", width=1)),
                             hovertemplate="winner<extra></extra>"))
    fig.update_layout(height=440, margin=dict(l=8, r=8, t=8, b=8), xaxis_title=x, yaxis_title=y)
    st.plotly_chart(fig, config={"displayModeBar": False}, key="sweep_heatmap")

with right:
    curve: sh.SweepResult | None = st.session_state.get("sweep_rrfk")
    if curve is not None:
        st.subheader("rrf_k curve")
        fig = px.line(sh.sweep_frame(curve), x="rrf.rrf_k", y=curve.metric, log_x=True,
                      labels={"rrf.rrf_k": "rrf_k", curve.metric: sh.metric_label(curve.metric)})
        start_k = float(sh.get_param(result.base, "rrf.rrf_k"))
        fig.add_vline(x=start_k, line_dash="dot", line_color="#8c959f")
        # an annotation on a log axis takes log10 coordinates (the line above does not)
        fig.add_annotation(x=math.log10(start_k), y=1.0, yref="paper", text=f"start ({start_k:g})",
                           showarrow=False, yanchor="bottom", font=dict(size=11, color="#8c959f"))
        fig.update_layout(height=200, margin=dict(l=8, r=8, t=24, b=8),
                          xaxis=dict(tickvals=[1, 2, 5, 10, 20, 50, 100, 200]))
        st.plotly_chart(fig, config={"displayModeBar": False}, key="sweep_rrfk_chart")
    st.subheader("Train vs held-out")
    folds_df = sh.folds_frame(result)
    long = folds_df.melt(id_vars=["fold"], value_vars=["train", "held-out"], var_name="split",
                         value_name=sh.metric_label(m))
    fig = px.bar(long, x="fold", y=sh.metric_label(m), color="split", barmode="group",
                 color_discrete_map={"train": "#4C78A8", "held-out": "#F58518"})
    fig.update_layout(height=200 if curve is not None else 300, margin=dict(l=8, r=8, t=8, b=8),
                      legend=dict(orientation="h", y=1.15), xaxis=dict(dtick=1), yaxis=dict(range=[0, 1.05]))
    st.plotly_chart(fig, config={"displayModeBar": False}, key="sweep_cv_chart")
    st.caption(f"train {result.train_mean:.3f} → held-out {result.held_out_mean:.3f} over {len(result.folds)} "
               f"folds of {result.n_queries} queries (seed {result.seed})")

with st.expander(f"All {len(table)} settings"):
    st.dataframe(table.sort_values(m, ascending=False), hide_index=True, height=300,
                 column_config={m: st.column_config.NumberColumn(sh.metric_label(m), format="%.4f")})
