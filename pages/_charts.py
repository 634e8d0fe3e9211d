"""Plotly figures of the Evaluate and Sweep pages (Tune draws none: its score bars are HTML).

Text from data (query ids and texts, intents, pipeline and profile names) is shown as text:
plotly reads ``<b>``, ``<br>``, ``<a href>``… in labels and hovers as markup, so it goes through
``eval.reports.markup.plain`` (plotly decodes ``&lt;`` back to ``<`` on screen)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from eval.reports.markup import plain
from pages._state import PRIMARY, metric_label

CONFIG = {"displayModeBar": False}


def _plain_columns(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    for column in columns:
        frame[column] = frame[column].map(plain)
    return frame


def intents_figure(intents: pd.DataFrame, metric: str) -> go.Figure:
    intents = _plain_columns(intents, ["intent", "pipeline"])
    fig = px.bar(intents, x="intent", y=metric, color="pipeline", barmode="group", hover_data=["queries"],
                 labels={metric: metric_label(metric)})
    fig.update_layout(height=420, margin=dict(l=8, r=8, t=8, b=8), legend=dict(orientation="h", y=-0.25),
                      yaxis=dict(range=[0, 1.05]))
    return fig


def per_query_figure(points: pd.DataFrame, base_label: str, cand_label: str, metric: str = PRIMARY) -> go.Figure:
    # the raw id travels as custom data (a click selects that query); hovers show it as text
    points = _plain_columns(points.assign(shown=points["query"]), ["shown", "text", "intent"])
    fig = px.scatter(points, x="baseline", y="candidate", color="intent", custom_data=["query"],
                     hover_data={"query": False, "shown": True, "text": True, "delta": ":+.3f"},
                     labels={"shown": "query", "baseline": f"{plain(base_label)} {metric_label(metric)}",
                             "candidate": f"{plain(cand_label)} {metric_label(metric)}"})
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#8c959f", dash="dot"),
                             hoverinfo="skip", showlegend=False))
    fig.update_traces(marker=dict(size=11, opacity=0.75, line=dict(width=1, color="white")),
                      selector=dict(mode="markers"))
    fig.update_layout(height=420, margin=dict(l=8, r=8, t=8, b=8), legend=dict(orientation="h", y=-0.25),
                      xaxis=dict(range=[-0.05, 1.05]), yaxis=dict(range=[-0.05, 1.05]), clickmode="event+select")
    return fig


def surface_figure(table: pd.DataFrame, x: str, y: str, metric: str, grid_mode: bool, best_row) -> go.Figure:
    """The objective over the swept knobs: a heatmap (a two-axis grid), a scatter coloured by
    the objective (random points), or, with one axis (``x == y``), the objective against it;
    the winner starred."""
    if x == y:
        fig = px.line(table.sort_values(x), x=x, y=metric, markers=True, labels={metric: metric_label(metric)})
        fig.add_trace(go.Scatter(x=[best_row[x]], y=[best_row[metric]], mode="markers", showlegend=False,
                                 marker=dict(symbol="star", size=18, color="#ff4b4b", line=dict(color="white", width=1)),
                                 hovertemplate="winner<extra></extra>"))
        fig.update_layout(height=440, margin=dict(l=8, r=8, t=8, b=8), xaxis_title=x)
        return fig
    if grid_mode:
        grid = table.pivot_table(index=y, columns=x, values=metric, aggfunc="mean")
        z = grid.to_numpy()
        finite = np.isfinite(z).any()
        # clip the colour scale's low end so a few degenerate settings (all weights 0) don't flatten the rest
        low, high = (float(np.nanpercentile(z, 10)), float(np.nanmax(z))) if finite else (None, None)
        fig = go.Figure(go.Heatmap(z=z, x=grid.columns, y=grid.index, colorscale="Viridis", zmin=low, zmax=high,
                                   colorbar=dict(title=metric_label(metric)),
                                   hovertemplate=f"{x}=%{{x:.3g}}<br>{y}=%{{y:.3g}}<br>{metric}=%{{z:.4f}}<extra></extra>"))
    else:
        fig = px.scatter(table, x=x, y=y, color=metric, color_continuous_scale="Viridis")
        fig.update_traces(marker=dict(size=10))
    fig.add_trace(go.Scatter(x=[best_row[x]], y=[best_row[y]], mode="markers", showlegend=False,
                             marker=dict(symbol="star", size=18, color="#ff4b4b", line=dict(color="white", width=1)),
                             hovertemplate="winner<extra></extra>"))
    fig.update_layout(height=440, margin=dict(l=8, r=8, t=8, b=8), xaxis_title=x, yaxis_title=y)
    return fig


def curve_figure(curve_frame: pd.DataFrame, path: str, label: str, metric: str, start_k: float) -> go.Figure:
    """One knob's curve (the knob its owner declares ``curve``: rrf_k), on a log axis."""
    fig = px.line(curve_frame, x=path, y=metric, log_x=True, labels={path: label, metric: metric_label(metric)})
    fig.add_vline(x=start_k, line_dash="dot", line_color="#8c959f")
    # an annotation on a log axis takes log10 coordinates (the line above does not)
    fig.add_annotation(x=math.log10(start_k), y=1.0, yref="paper", text=f"start ({start_k:g})",
                       showarrow=False, yanchor="bottom", font=dict(size=11, color="#8c959f"))
    fig.update_layout(height=200, margin=dict(l=8, r=8, t=24, b=8),
                      xaxis=dict(tickvals=[t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
                                           if curve_frame[path].min() <= t <= curve_frame[path].max()]))
    return fig


def folds_figure(folds: pd.DataFrame, metric: str, height: int) -> go.Figure:
    long = folds.melt(id_vars=["fold"], value_vars=["train", "held-out"], var_name="split",
                      value_name=metric_label(metric))
    fig = px.bar(long, x="fold", y=metric_label(metric), color="split", barmode="group",
                 color_discrete_map={"train": "#4C78A8", "held-out": "#F58518"})
    fig.update_layout(height=height, margin=dict(l=8, r=8, t=8, b=8), legend=dict(orientation="h", y=1.15),
                      xaxis=dict(dtick=1), yaxis=dict(range=[0, 1.05]))
    return fig
