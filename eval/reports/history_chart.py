"""The check history of a dataset as a chart: a metric over time, per pipeline, with the checks
whose inputs changed since the previous check of that pipeline marked and named
(``eval.stores.history.CheckHistory`` entries; the Reports page draws it)."""

from __future__ import annotations

import plotly.graph_objects as go

from eval.reports.markup import plain, plain_figure
from eval.stores.inputs import WORDS, changed


def history_points(entries: list[dict], metric: str) -> list[dict]:
    """One point per check that gated ``metric``: time, pipeline, today's and the snapshot's
    value, verdict, and the inputs changed since the pipeline's previous check ([] for its first)."""
    points, last = [], {}
    for entry in entries:
        value = (entry.get("metrics") or {}).get(metric)
        if not isinstance(value, (int, float)):
            continue
        pipeline = str(entry.get("pipeline", ""))
        before = last.get(pipeline)
        points.append({"time": str(entry.get("time", "")), "pipeline": pipeline, "value": float(value),
                       "frozen": (entry.get("frozen") or {}).get(metric), "passed": bool(entry.get("passed")),
                       "snapshot": str(entry.get("snapshot", "")),
                       "changed": changed(before, entry.get("inputs")) if before is not None else []})
        last[pipeline] = entry.get("inputs")
    return points


def history_figure(entries: list[dict], metric: str) -> go.Figure:
    """``metric`` over time per pipeline (failed checks as crosses), the snapshot's value dashed,
    and a vertical line with the changed inputs' names where the inputs changed."""
    points = history_points(entries, metric)
    fig = go.Figure()
    for pipeline in dict.fromkeys(p["pipeline"] for p in points):
        mine = [p for p in points if p["pipeline"] == pipeline]
        fig.add_scatter(x=[p["time"] for p in mine], y=[p["value"] for p in mine], mode="lines+markers",
                        name=pipeline, marker={"symbol": ["circle" if p["passed"] else "x" for p in mine],
                                               "size": [8 if p["passed"] else 12 for p in mine]},
                        customdata=[[plain(p["snapshot"]), "pass" if p["passed"] else "FAIL"] for p in mine],
                        hovertemplate="%{x}<br>" + plain(metric) + " %{y:.4f}<br>vs %{customdata[0]}: "
                                      "%{customdata[1]}<extra></extra>")
        frozen = [p["frozen"] for p in mine]
        if any(isinstance(v, (int, float)) for v in frozen):
            fig.add_scatter(x=[p["time"] for p in mine], y=frozen, mode="lines", line={"dash": "dot"},
                            name=f"{pipeline} · snapshot", hoverinfo="skip")
        for p in mine:
            if p["changed"]:
                fig.add_vline(x=p["time"], line={"dash": "dash", "color": "#b45309", "width": 1})
                fig.add_annotation(x=p["time"], y=1, yref="paper", showarrow=False, textangle=-90,
                                   xanchor="right", yanchor="top", font={"size": 10, "color": "#b45309"},
                                   text=plain(", ".join(WORDS[n].removeprefix("the ") for n in p["changed"])))
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10}, yaxis_title=metric,
                      title=f"{metric} at each check (× failed; dashed line: an input changed)")
    return plain_figure(fig)
