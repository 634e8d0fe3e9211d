"""Evaluation reports: ``report.json`` (everything, machine-readable), ``report.md`` and a
self-contained ``report.html`` (plotly's JavaScript inlined once; opens with no network).

Contents: the fingerprint that reproduces the result (dataset sha256, model, analyzer, pool
depth, every pipeline's TOML), the metrics table with significance marks against the baseline,
per-intent bars, per-query wins and losses against the baseline, the token-budget metric, the
intent router's confusion matrix and regret, and — when a sweep was run — its curve (one
parameter) or heatmap (two or more: the best score over the others) with the cross-validation
table (training vs held-out means).
"""

from __future__ import annotations

import html
import json
import math
import platform
import re
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from eval.budget import BudgetScore
from eval.compare import DOWN, UP, Significance
from eval.evaluate import Evaluation
from eval.router_eval import RouterEvaluation
from eval.sweep import SweepResult
from retrieval.bm25 import ANALYZER_VERSION
from retrieval.pipeline import to_toml

REPORT_VERSION = 1


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "unknown"


def _clean(value):
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def fingerprint(evaluation: Evaluation) -> dict:
    """What reproduces the numbers: data, model, analyzer, pool and configs."""
    return {
        "dataset": evaluation.dataset,
        "dataset_fingerprint": evaluation.fingerprint,
        "model": evaluation.embedder,
        "analyzer": ANALYZER_VERSION,
        "pool_depth": evaluation.pool_depth,
        "configs": {name: to_toml(config) for name, config in evaluation.configs.items()},
        "versions": {"rwb": _version("retrieval-workbench"), "ranx": _version("ranx"), "numpy": _version("numpy"),
                     "python": platform.python_version()},
    }


def eval_summary(evaluation: Evaluation, significance: Significance | None,
                 budget: dict[str, BudgetScore] | None = None, router: RouterEvaluation | None = None) -> dict:
    """The ``rwb eval --json`` document (also the core of ``report.json``)."""
    data = {
        "dataset": evaluation.dataset,
        "n_queries": evaluation.n_queries,
        "metrics": list(evaluation.metrics),
        "baseline": significance.baseline if significance else None,
        "pipelines": list(evaluation.results),
        "results": evaluation.results,
        "per_intent": evaluation.per_intent,
        "per_query": evaluation.per_query,
        "significance": {
            label: {m: {
                "p_value": cell.p_value, "p_adjusted": cell.p_adjusted, "significant": cell.significant,
                "wins": cell.wins, "ties": cell.ties, "losses": cell.losses, "delta": cell.delta,
                "p_values": cell.p_values, "p_adjusted_by_test": cell.p_adjusted_by_test,
            } for m, cell in cells.items()}
            for label, cells in (significance.cells.items() if significance else ())
        },
        "significance_test": significance.to_json() if significance else None,
        "intents": evaluation.intents,
        "excluded_queries": list(evaluation.excluded),
        "missing_queries": list(evaluation.missing),
        "fingerprint": fingerprint(evaluation),
    }
    if budget:
        data["budget"] = {label: {"token_budget": b.token_budget, "budget_recall": b.mean, "ceiling": b.ceiling,
                                  "mean_tokens": b.mean_tokens} for label, b in budget.items()}
    if router:
        data["router"] = router.to_json()
    return _clean(data)


# ---- text tables ---------------------------------------------------------------------------

# The report's number formats; the workbench's pages use the same ones.

def fmt_p(p: float | None) -> str:
    """A p-value: ``<0.001``, else three decimals; ``–`` when there is none (NaN, None)."""
    if p is None or not math.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_value(value: float | None, digits: int = 4) -> str:
    """A metric mean: ``digits`` decimals; ``–`` when there is none."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:.{digits}f}"


def fmt_delta(value: float | None, digits: int = 4) -> str:
    """A difference against the baseline, signed: ``+0.0123``; ``–`` when there is none."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:+.{digits}f}"


def metric_rows(evaluation: Evaluation, significance: Significance | None) -> list[list[str]]:
    """Table rows: pipeline, then per metric "mean mark", "p", "W/T/L"."""
    rows = []
    for label in evaluation.results:
        row = [label + (" (baseline)" if significance and label == significance.baseline else "")]
        for m in evaluation.metrics:
            cell = significance.cells.get(label, {}).get(m) if significance else None
            value = fmt_value(evaluation.results[label][m])
            if cell is None:
                row.append(value)
            else:
                wtl = f"{cell.wins}/{cell.ties}/{cell.losses}"
                row.append(f"{value}{cell.mark or ' '} p={fmt_p(cell.p_adjusted)} {wtl}")
        rows.append(row)
    return rows


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda v: str(v).replace("|", "\\|")
    out = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def legend(significance: Significance | None) -> str:
    if significance is None:
        return ""
    return (f"Cells: mean over the judged queries; {UP}/{DOWN} significantly better/worse than "
            f"{significance.baseline}; p = {significance.correction}-corrected p-value of the "
            f"{significance.test} test; W/T/L = queries where the pipeline wins/ties/loses against the baseline. "
            f"{significance.describe()}.")


def sweep_rows(result: SweepResult) -> list[list[str]]:
    rows = [[str(f.fold + 1), str(f.n_train), str(f.n_test),
             ", ".join(f"{k}={v:g}" for k, v in f.best.items()), f"{f.train_mean:.4f}", f"{f.test_mean:.4f}"]
            for f in result.folds]
    rows.append(["mean", "", "", "", f"{result.train_mean:.4f}", f"{result.held_out_mean:.4f}"])
    return rows


SWEEP_HEADER = ["fold", "train q", "held-out q", "best on training", "train mean", "held-out mean"]


# ---- figures -------------------------------------------------------------------------------

def _figure_html(fig, div_id: str, height: int) -> str:
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=70, b=60), template="plotly_white")
    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, default_height=f"{height}px",
                       default_width="100%", config={"displaylogo": False, "responsive": True})
    # drawn once plotly.js is unpacked (see _plotly_loader), not while the page parses
    return re.sub(r'<script(?: type="text/javascript")?>', '<script type="text/x-rwb-plot">', html)


def _plotly_loader() -> str:
    """plotly.js once, gzip-compressed and base64-encoded (4.8 MB → 1.9 MB), unpacked in the browser
    with ``DecompressionStream``; then every figure's script runs. Still one self-contained file."""
    import base64
    import gzip

    import plotly.offline

    packed = base64.b64encode(gzip.compress(plotly.offline.get_plotlyjs().encode("utf-8"), 9, mtime=0)).decode("ascii")
    return ("<script>(async () => {"
            f"const packed = await fetch('data:application/gzip;base64,{packed}');"
            "const js = await new Response(packed.body.pipeThrough(new DecompressionStream('gzip'))).text();"
            "(0, eval)(js);"
            "for (const s of document.querySelectorAll('script[type=\"text/x-rwb-plot\"]')) (0, eval)(s.textContent);"
            "document.documentElement.dataset.plotsReady = '1';"
            "})();</script>")


def _intent_figure(evaluation: Evaluation):
    import plotly.graph_objects as go

    intents = list(next(iter(evaluation.per_intent.values())))
    counts = {i: sum(1 for q in evaluation.query_ids if evaluation.intents[q] == i) for i in intents}
    labels = [f"{i} ({counts[i]})" for i in intents]
    first = evaluation.metrics[0]
    fig = go.Figure([go.Bar(name=p, x=labels, y=[evaluation.per_intent[p][i][first] for i in intents])
                     for p in evaluation.per_intent])
    buttons = [dict(label=m, method="update",
                    args=[{"y": [[evaluation.per_intent[p][i][m] for i in intents] for p in evaluation.per_intent]},
                          {"yaxis.title.text": m}])
               for m in evaluation.metrics]
    fig.update_layout(barmode="group", title="Per intent (queries per intent in brackets)",
                      yaxis_title=first, yaxis_range=[0, 1],
                      updatemenus=[dict(buttons=buttons, direction="down", x=1.0, xanchor="right", y=1.0,
                                        yanchor="bottom", pad=dict(b=6))])
    return fig


def _wtl_figure(evaluation: Evaluation, significance: Significance, metric: str):
    import plotly.graph_objects as go

    labels = list(significance.cells)
    cells = [significance.cells[p][metric] for p in labels]
    fig = go.Figure([
        go.Bar(name="wins", y=labels, x=[c.wins for c in cells], orientation="h", marker_color="#2ca02c"),
        go.Bar(name="ties", y=labels, x=[c.ties for c in cells], orientation="h", marker_color="#c7c7c7"),
        go.Bar(name="losses", y=labels, x=[c.losses for c in cells], orientation="h", marker_color="#d62728"),
    ])
    fig.update_layout(barmode="stack", title=f"Per query vs {significance.baseline} ({metric}): wins / ties / losses",
                      xaxis_title="queries", yaxis_autorange="reversed", legend_traceorder="normal")
    return fig


def _delta_figure(evaluation: Evaluation, baseline: str, metric: str):
    import plotly.graph_objects as go

    base = evaluation.values(baseline, metric)
    order = np.argsort(-base, kind="stable")
    labels = [p for p in evaluation.results if p != baseline]
    z = [list((evaluation.values(p, metric) - base)[order]) for p in labels]
    queries = [evaluation.query_ids[i] for i in order]
    fig = go.Figure(go.Heatmap(z=z, x=queries, y=labels, zmin=-1, zmax=1, colorscale="RdBu",
                               colorbar=dict(title="Δ"),
                               hovertemplate="%{y} · %{x}<br>Δ " + metric + " = %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"Per-query Δ{metric} vs {baseline} (queries sorted by the baseline's score)",
                      xaxis=dict(showticklabels=len(queries) <= 40, title="query"), yaxis_autorange="reversed")
    return fig


def _confusion_figure(router: RouterEvaluation):
    import plotly.graph_objects as go

    profiles = list(router.profiles)
    z = [[router.confusion[e][r] for r in profiles] for e in profiles]
    fig = go.Figure(go.Heatmap(z=z, x=profiles, y=profiles, colorscale="Blues", text=z, texttemplate="%{text}",
                               hovertemplate="expected %{y} → routed %{x}: %{z}<extra></extra>"))
    fig.update_layout(title=f"Intent router: expected (labels) vs routed — accuracy {router.accuracy:.1%}",
                      xaxis_title="routed profile", yaxis_title="expected profile", yaxis_autorange="reversed")
    return fig


def _sweep_figure(result: SweepResult):
    import plotly.graph_objects as go

    names = result.space.names
    if len(names) == 1:
        order = np.argsort(result.points[:, 0], kind="stable")
        fig = go.Figure(go.Scatter(x=result.points[order, 0], y=result.scores[order], mode="lines+markers",
                                   name=result.metric))
        fig.add_hline(y=result.base_score, line_dash="dot", annotation_text=f"{result.base.name} as shipped")
        fig.add_trace(go.Scatter(x=[result.points[result.best_index, 0]], y=[result.best_score], mode="markers",
                                 marker=dict(symbol="star", size=14), name="best"))
        fig.update_layout(title=f"Sweep of {result.base.name}: {result.metric} over {names[0]} (all queries)",
                          xaxis_title=names[0], yaxis_title=result.metric)
        return fig
    xs, ys = np.unique(result.points[:, 0]), np.unique(result.points[:, 1])
    z = np.full((len(ys), len(xs)), np.nan)
    xi = np.searchsorted(xs, result.points[:, 0])
    yi = np.searchsorted(ys, result.points[:, 1])
    for a, b, s in zip(yi, xi, result.scores):
        z[a, b] = s if np.isnan(z[a, b]) else max(z[a, b], s)
    note = "" if len(names) == 2 else f" (best over {', '.join(names[2:])})"
    fig = go.Figure(go.Heatmap(z=z.tolist(), x=xs.tolist(), y=ys.tolist(), colorscale="Viridis",
                               colorbar=dict(title=result.metric),
                               hovertemplate=f"{names[0]}=%{{x}}<br>{names[1]}=%{{y}}<br>{result.metric}=%{{z:.4f}}"
                                             "<extra></extra>"))
    best = result.points[result.best_index]
    fig.add_trace(go.Scatter(x=[best[0]], y=[best[1]], mode="markers", name="best on all queries",
                             marker=dict(symbol="star", size=16, color="white", line=dict(color="black", width=1.5)),
                             hovertemplate=f"best: {result.best_score:.4f}<extra></extra>"))
    fig.update_layout(title=f"Sweep of {result.base.name}: {result.metric}{note} — ☆ best on all queries",
                      xaxis_title=names[0], yaxis_title=names[1], showlegend=False)
    return fig


# ---- writers -------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1300px;
color:#222;padding:0 16px}
h1{font-size:1.6em;margin-bottom:4px}h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:10px 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.up{color:#1a7f37;font-weight:600}.down{color:#c62828;font-weight:600}
.muted{color:#666;font-size:.9em}pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:.85em}
code{background:#f2f2f2;padding:1px 4px;border-radius:3px}
"""


def _esc(value) -> str:
    return html.escape(str(value))


def _html_table(header, rows, numeric_from: int = 1) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(
            f"<td class=\"num\">{v}</td>" if i >= numeric_from else f"<td>{v}</td>" for i, v in enumerate(r)
        ) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _metric_html_rows(evaluation: Evaluation, significance: Significance | None) -> list[list[str]]:
    rows = []
    for label in evaluation.results:
        is_base = significance is not None and label == significance.baseline
        row = [f"<b>{_esc(label)}</b>" + (" <span class=\"muted\">(baseline)</span>" if is_base else "")]
        for m in evaluation.metrics:
            value = fmt_value(evaluation.results[label][m])
            cell = significance.cells.get(label, {}).get(m) if significance else None
            if cell is None:
                row.append(value)
                continue
            mark = f"<span class=\"{'up' if cell.mark == UP else 'down'}\">{cell.mark}</span>" if cell.mark else ""
            row.append(f"{value}{mark}<br><span class=\"muted\">p={_esc(fmt_p(cell.p_adjusted))} · "
                       f"{cell.wins}/{cell.ties}/{cell.losses}</span>")
        rows.append(row)
    return rows


def write_report(out_dir: str | Path, evaluation: Evaluation, significance: Significance | None,
                 budget: dict[str, BudgetScore] | None = None, router: RouterEvaluation | None = None,
                 sweep: SweepResult | None = None, title: str | None = None) -> dict[str, Path]:
    """Write report.json, report.md and report.html into ``out_dir``; return their paths."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    created = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    title = title or f"rwb evaluation report — {evaluation.dataset}"
    data = eval_summary(evaluation, significance, budget, router)
    data = {"report_version": REPORT_VERSION, "created_at": created, **data}
    if sweep is not None:
        data["sweep"] = _clean(sweep.to_json())
    primary = evaluation.metrics[0]
    fp = data["fingerprint"]
    header = ["pipeline", *evaluation.metrics]

    # -- markdown
    md = [f"# {title}", "",
          f"{evaluation.n_queries} judged queries · dataset `{evaluation.dataset}` · model `{evaluation.embedder}` · "
          f"analyzer `{ANALYZER_VERSION}` · pool depth {evaluation.pool_depth} · {created}", "",
          "## Metrics", "", md_table(header, metric_rows(evaluation, significance)), "", legend(significance), ""]
    intents = list(next(iter(evaluation.per_intent.values())))
    md += ["## Per intent", "", f"{primary} by labelled intent:", "",
           md_table(["pipeline", *intents], [[p, *(f"{evaluation.per_intent[p][i][primary]:.4f}" for i in intents)]
                                             for p in evaluation.per_intent]), ""]
    if significance:
        md += [f"## Per query vs {significance.baseline} ({primary})", "",
               md_table(["pipeline", "wins", "ties", "losses", f"Δ{primary}"],
                        [[p, c[primary].wins, c[primary].ties, c[primary].losses, fmt_delta(c[primary].delta)]
                         for p, c in significance.cells.items()]), ""]
    if budget:
        md += ["## Token budget", "", _budget_note(budget), "",
               md_table(["pipeline", "budget recall", "ceiling", "mean tokens"],
                        [[p, f"{b.mean:.4f}", f"{b.ceiling:.4f}", f"{b.mean_tokens:.0f}"] for p, b in budget.items()]),
               ""]
    if router:
        md += ["## Intent router", "", _router_note(router), "",
               md_table(["expected \\ routed", *router.profiles],
                        [[e, *(router.confusion[e][r] for r in router.profiles)] for e in router.profiles]), ""]
    if sweep is not None:
        md += ["## Sweep", "", _sweep_note(sweep), "", md_table(SWEEP_HEADER, sweep_rows(sweep)), "",
               "Best configuration (usable as `--pipeline FILE`):", "",
               "```toml", sweep.best_toml().rstrip(), "```", ""]
    md += ["## Fingerprint", "", f"- dataset: `{fp['dataset']}` sha256 `{fp['dataset_fingerprint']}`",
           f"- model: `{fp['model']}`", f"- analyzer: `{fp['analyzer']}`", f"- pool depth: {fp['pool_depth']}",
           "- versions: " + ", ".join(f"{k} {v}" for k, v in fp["versions"].items()), ""]
    for name, text in fp["configs"].items():
        md += [f"### {name}", "", "```toml", text.rstrip(), "```", ""]

    # -- html
    figures = [_figure_html(_intent_figure(evaluation), "fig-intents", 420)]
    if significance:
        figures.append(_figure_html(_wtl_figure(evaluation, significance, primary), "fig-wtl",
                                    140 + 36 * len(significance.cells)))
        figures.append(_figure_html(_delta_figure(evaluation, significance.baseline, primary), "fig-delta",
                                    160 + 40 * len(significance.cells)))
    parts = [f"<h1>{_esc(title)}</h1>",
             f"<p class=\"muted\">{evaluation.n_queries} judged queries · dataset <code>{_esc(evaluation.dataset)}"
             f"</code> · model <code>{_esc(evaluation.embedder)}</code> · analyzer <code>{_esc(ANALYZER_VERSION)}"
             f"</code> · pool depth {evaluation.pool_depth} · {_esc(created)}</p>",
             "<h2>Metrics</h2>", _html_table(header, _metric_html_rows(evaluation, significance)),
             f"<p class=\"muted\">{_esc(legend(significance))}</p>",
             "<h2>Per intent</h2>", figures[0]]
    if significance:
        parts += [f"<h2>Per query vs {_esc(significance.baseline)}</h2>", figures[1], figures[2]]
    if budget:
        parts += ["<h2>Token budget</h2>", f"<p>{_esc(_budget_note(budget))}</p>",
                  _html_table(["pipeline", "budget recall", "ceiling", "mean tokens"],
                              [[_esc(p), f"{b.mean:.4f}", f"{b.ceiling:.4f}", f"{b.mean_tokens:.0f}"]
                               for p, b in budget.items()])]
    if router:
        parts += ["<h2>Intent router</h2>", f"<p>{_esc(_router_note(router))}</p>",
                  _figure_html(_confusion_figure(router), "fig-router", 420)]
    if sweep is not None:
        parts += ["<h2>Sweep</h2>", f"<p>{_esc(_sweep_note(sweep))}</p>",
                  _figure_html(_sweep_figure(sweep), "fig-sweep", 460),
                  _html_table(SWEEP_HEADER, [[_esc(v) for v in r] for r in sweep_rows(sweep)], numeric_from=4),
                  f"<details><summary>Best configuration as TOML (usable as <code>--pipeline FILE</code>): "
                  f"{_esc(', '.join(f'{k}={v:g}' for k, v in sweep.best_params.items()))}</summary>"
                  f"<pre>{_esc(sweep.best_toml())}</pre></details>"]
    parts += ["<h2>Fingerprint</h2>",
              _html_table(["field", "value"], [
                  ["dataset", f"<code>{_esc(fp['dataset'])}</code>"],
                  ["dataset sha256", f"<code>{_esc(fp['dataset_fingerprint'])}</code>"],
                  ["model", f"<code>{_esc(fp['model'])}</code>"], ["analyzer", f"<code>{_esc(fp['analyzer'])}</code>"],
                  ["pool depth", str(fp["pool_depth"])],
                  ["versions", _esc(", ".join(f"{k} {v}" for k, v in fp["versions"].items()))]], numeric_from=9)]
    parts += ["<p>Pipeline configurations (TOML, each usable as <code>--pipeline FILE</code>):</p>"]
    parts += [f"<details><summary>{_esc(name)}</summary><pre>{_esc(text)}</pre></details>"
              for name, text in fp["configs"].items()]
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_esc(title)}</title><style>{_CSS}</style>"
            "</head>"
            f"<body>{''.join(parts)}{_plotly_loader()}</body></html>\n")

    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", "utf-8")
    paths["md"].write_text("\n".join(md), "utf-8")
    paths["html"].write_text(page, "utf-8")
    return paths


def _budget_note(budget: dict[str, BudgetScore]) -> str:
    b = next(iter(budget.values()))
    return (f"Share of each query's relevant memories delivered within {b.token_budget} tokens, results pasted in "
            "rank order until the next would exceed the budget; the ceiling is the best any ranking could reach "
            "within that budget.")


def _router_note(router: RouterEvaluation) -> str:
    return (f"route_intent against the labelled intents ({router.n_labelled} labelled queries; {router.mapping_note}). "
            f"Accuracy {router.accuracy:.1%}. {router.metric} over {router.n_queries} judged queries with "
            f"{router.pipeline}'s profiles: routed {router.routed_mean:.4f}, label's profile "
            f"{router.label_mean:.4f}, best profile per query (oracle) {router.oracle_mean:.4f}; mean regret "
            f"{router.regret_mean:.4f}. One profile for all: "
            + ", ".join(f"{p} {v:.4f}" for p, v in router.fixed_means.items()) + ".")


def _sweep_note(result: SweepResult) -> str:
    best = ", ".join(f"{k}={v:g}" for k, v in result.best_params.items())
    constraints = f" with {', '.join(str(c) for c in result.space.constraints)}" if result.space.constraints else ""
    return (f"{result.mode} search over {', '.join(str(s) for s in result.space.specs)}{constraints}: "
            f"{len(result.scores)} configurations of {result.base.name}, objective {result.metric}, "
            f"{len(result.folds)}-fold cross-validation by query (seed {result.seed}). "
            f"Training mean {result.train_mean:.4f}, held-out mean {result.held_out_mean:.4f} "
            f"(the honest estimate); as shipped {result.base_score:.4f}; best on all queries {best} → "
            f"{result.best_score:.4f} (in-sample).")
