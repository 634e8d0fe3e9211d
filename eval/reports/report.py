"""Evaluation reports: ``report.json`` (everything, machine-readable), ``report.md`` and a
self-contained ``report.html`` (plotly's JavaScript inlined once; opens with no network).

Contents: how the numbers were computed (nDCG gain, tie-break, test, correction, bootstrap),
the fingerprint that reproduces the result (dataset sha256, model, analyzer, pool depth, every
pipeline's TOML), the means of every metric with significance marks against the baseline, the
statistics of every metric (mean and its 95% CI, difference to the baseline and its CI, raw and
corrected p, wins/ties/losses), pipelines returning fewer than k results, per-intent table and
bars, per-query wins and losses against the baseline, the token-budget metric, the intent
router's confusion matrix and regret, and — when a sweep was run — its curve (one parameter) or
heatmap (two or more: the best score over the others) with the cross-validation table
(training vs held-out means).

The text helpers (``means_rows``, ``detail_rows``, ``intent_rows``, ``short_notes``,
``method_lines``) are shared by ``rwb eval`` and the report.
"""

from __future__ import annotations

import html
import json
import math
import platform
import re
from collections import Counter
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

import numpy as np

from eval.statistics.bootstrap import Intervals
from eval.metrics.budget import BudgetScore
from eval.statistics.significance import CORRECTION_NAMES, DOWN, UP, Significance, fmt_p
from eval.statistics.provenance import TAG
from eval.metrics.ranx_eval import Evaluation
from eval.learning.router_eval import RouterEvaluation
from eval.search.sweep import SweepResult
from retrieval.bm25 import ANALYZERS
from eval.reports.history_chart import history_figure, history_points
from eval.reports.markup import plain_figure
from eval.reports.sections import Block, Bullets, Chart, Code, Para, Section, Table, to_html, to_markdown
from eval.stores.inputs import NAMES as INPUT_NAMES
from retrieval.files import atomic_write_files
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


def _analyzer(evaluation: Evaluation) -> str:
    """The versioned name of the BM25 analyzer of the pool the evaluation re-scored."""
    return ANALYZERS[evaluation.candidates.analyzer].version


def fingerprint(evaluation: Evaluation) -> dict:
    """What reproduces the numbers: data, model, analyzer, pool and configs."""
    return {
        "dataset": evaluation.dataset,
        "dataset_fingerprint": evaluation.fingerprint,
        "model": evaluation.embedder,
        "analyzer": _analyzer(evaluation),
        "pool_depth": evaluation.pool_depth,
        "configs": {name: to_toml(config) for name, config in evaluation.configs.items()},
        "versions": {"rwb": _version("retrieval-workbench"), "ranx": _version("ranx"), "numpy": _version("numpy"),
                     "python": platform.python_version()},
    }


def eval_summary(evaluation: Evaluation, significance: Significance | None,
                 budget: dict[str, BudgetScore] | None = None, router: RouterEvaluation | None = None,
                 intervals: Intervals | None = None, settings: dict | None = None) -> dict:
    """The ``rwb eval --json`` document (also the core of ``report.json``)."""
    deltas = intervals.deltas if intervals else {}
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
                "delta_ci": list(deltas[label][m]) if m in deltas.get(label, {}) else None,
            } for m, cell in cells.items()}
            for label, cells in (significance.cells.items() if significance else ())
        },
        "significance_test": significance.to_json() if significance else None,
        "intervals": intervals.to_json() if intervals else None,
        "settings": settings,
        "fewer_than_k": {p: {str(k): n for k, n in short.items()} for p, short in evaluation.short_of().items()},
        "n_results": evaluation.n_results,
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


def fmt_ci(ci: tuple[float, float] | None, signed: bool = False, digits: int = 3) -> str:
    """A confidence interval ``[0.451, 0.573]`` (``[+0.010, +0.065]`` for a difference)."""
    if ci is None:
        return "–"
    f = fmt_delta if signed else fmt_value
    return f"[{f(ci[0], digits)}, {f(ci[1], digits)}]"


def p_header(significance: Significance | None) -> str:
    """The corrected p column's name: ``p (holm)``, ``p (bonferroni)``; ``p`` without correction."""
    if significance is None or significance.correction == "none":
        return "p (uncorrected)"
    return f"p ({significance.correction})"


def means_rows(evaluation: Evaluation, significance: Significance | None,
               in_sample=()) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the means table: one row per metric, one column per pipeline, each
    cell the mean with ▲/▼ where significantly better/worse than the baseline after correction;
    a pipeline in ``in_sample`` (chosen or fitted on these queries) is headed "· in-sample"."""
    labels = list(evaluation.results)
    base = significance.baseline if significance else None
    header = ["metric", *((f"{p} (baseline)" if p == base else p) + (f" · {TAG}" if p in in_sample else "")
                          for p in labels)]
    rows = []
    for m in evaluation.metrics:
        row = [m]
        for p in labels:
            cell = significance.cells.get(p, {}).get(m) if significance else None
            row.append(fmt_value(evaluation.results[p][m]) + (cell.mark if cell and cell.mark else ""))
        rows.append(row)
    return header, rows


def detail_header(significance: Significance | None, intervals: Intervals | None) -> list[str]:
    level = f"{intervals.level:.0%} CI" if intervals else "95% CI"
    return ["pipeline", "mean", level, "Δ vs " + (significance.baseline if significance else "baseline"),
            f"{level} of Δ", "p (raw)", p_header(significance), "W/T/L"]


def detail_rows(evaluation: Evaluation, significance: Significance | None, intervals: Intervals | None,
                metric: str) -> list[list[str]]:
    """One metric's statistics, one row per pipeline (see ``detail_header``)."""
    rows = []
    for p in evaluation.results:
        ci = intervals.means.get(p, {}).get(metric) if intervals else None
        cell = significance.cells.get(p, {}).get(metric) if significance else None
        name = p + (" (baseline)" if significance and p == significance.baseline else "")
        row = [name, fmt_value(evaluation.results[p][metric]) + (cell.mark if cell and cell.mark else ""),
               fmt_ci(ci)]
        if cell is None:
            row += ["", "", "", "", ""]
        else:
            dci = intervals.deltas.get(p, {}).get(metric) if intervals else None
            row += [fmt_delta(cell.delta), fmt_ci(dci, signed=True), fmt_p(cell.p_value), fmt_p(cell.p_adjusted),
                    f"{cell.wins}/{cell.ties}/{cell.losses}"]
        rows.append(row)
    return rows


def intent_counts(evaluation: Evaluation) -> dict[str, int]:
    intents = list(next(iter(evaluation.per_intent.values())))
    return {i: sum(1 for q in evaluation.query_ids if evaluation.intents[q] == i) for i in intents}


def intent_rows(evaluation: Evaluation, metric: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-intent table: one row per pipeline, one column per labelled
    intent (its number of judged queries in brackets), each cell the intent's mean of ``metric``."""
    counts = intent_counts(evaluation)
    header = ["pipeline", *(f"{i} ({n})" for i, n in counts.items())]
    rows = [[p, *(fmt_value(evaluation.per_intent[p][i][metric]) for i in counts)] for p in evaluation.per_intent]
    return header, rows


IN_SAMPLE_NOTE = (f"{TAG}: these pipelines were chosen or fitted on the queries scored here, so their figures "
                  "here are optimistic; the held-out figure of the procedure that chose them is the one to trust.")

SHORT_NOTE = ("Fewer than k results: judged queries a pipeline answers with fewer than k results, per cutoff k "
              "(k=1: none at all). They are scored as they are: the missing ranks count as non-relevant, and "
              "precision@k still divides by k.")


def short_notes(evaluation: Evaluation) -> list[str]:
    """One line per pipeline that returns fewer than k results for some judged queries:
    ``openclaw: k=5: 94, k=10: 120 of 120 queries``."""
    n = evaluation.n_queries
    return [f"{p}: " + ", ".join(f"k={k}: {q}" for k, q in short.items()) + f" of {n} queries"
            for p, short in evaluation.short_of().items()]


def method_lines(settings: dict | None, significance: Significance | None = None,
                 intervals: Intervals | None = None) -> list[str]:
    """How the numbers were computed, one statement a line."""
    lines = []
    if settings:
        if settings.get("judgments"):
            lines.append(f"Judgments: {settings['judgments']}")
        lines.append(f"nDCG: {settings['gain_formula']}")
        lines.append(f"Ties in a ranking: {settings['tie_break']}")
        lines.append(f"Cutoffs: {', '.join(str(k) for k in settings['cutoffs'])}; MAP (map) is over the whole "
                     f"returned ranking; primary metric {settings['primary_metric']}")
    if intervals:
        lines.append(intervals.describe()[0].upper() + intervals.describe()[1:])
    if significance:
        lines.append("Significance: " + significance.describe())
    return lines


def text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def legend(significance: Significance | None) -> str:
    if significance is None:
        return ""
    corrected = ("the same p-value (no correction)" if significance.correction == "none" else
                 f"after {CORRECTION_NAMES[significance.correction]} correction per metric across the "
                 f"{significance.family_size} pipeline(s) compared")
    return (f"Cells: mean over the judged queries; {UP}/{DOWN} significantly better/worse than "
            f"{significance.baseline} at α = {significance.alpha:g} after correction; p (raw) = the "
            f"{significance.test} test's p-value, {p_header(significance)} = {corrected}; W/T/L = queries where "
            "the pipeline wins/ties/loses against the baseline.")


def sweep_rows(result: SweepResult) -> list[list[str]]:
    rows = [[str(f.fold + 1), str(f.n_train), str(f.n_test), f.choice, f"{f.train_mean:.4f}", f"{f.test_mean:.4f}"]
            for f in result.folds]
    rows.append(["mean", "", "", "", f"{result.train_mean:.4f}", f"{result.held_out_mean:.4f}"])
    return rows


SWEEP_HEADER = ["fold", "train q", "held-out q", "best on training", "train mean", "held-out mean"]


# ---- figures -------------------------------------------------------------------------------

def _figure_html(fig, div_id: str, height: int) -> str:
    plain_figure(fig)  # names, labels and titles from data shown as text, not plotly markup
    fig.update_layout(height=height, margin=dict(l=60, r=20, t=70, b=60), template="plotly_white")
    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, default_height=f"{height}px",
                       default_width="100%", config={"displaylogo": False, "responsive": True})
    # drawn once plotly.js is unpacked (see _plotly_loader), not while the page parses
    return re.sub(r'<script(?: type="text/javascript")?>', '<script type="text/x-rwb-plot">', html)


PLOTLY_BUNDLE = Path(__file__).with_name("assets") / "plotly-cartesian.min.js"
"""plotly.js's cartesian partial bundle (bar, scatter, heatmap, …: every trace the report draws),
the same plotly.js version as the ``plotly`` package's full bundle (eval/reports/assets/README.md)."""


def _plotly_loader() -> str:
    """plotly.js once — the cartesian bundle, gzip-compressed and base64-encoded (1.5 MB → 0.66 MB;
    the full 4.8 MB bundle packed this way was 1.96 MB) — unpacked in the browser with
    ``DecompressionStream``; then every figure's script runs. Still one self-contained file."""
    import base64
    import gzip

    packed = base64.b64encode(gzip.compress(PLOTLY_BUNDLE.read_bytes(), 9, mtime=0)).decode("ascii")
    return ("<script>(async () => {"
            f"const packed = await fetch('data:application/gzip;base64,{packed}');"
            "const js = await new Response(packed.body.pipeThrough(new DecompressionStream('gzip'))).text();"
            "(0, eval)(js);"
            "for (const s of document.querySelectorAll('script[type=\"text/x-rwb-plot\"]')) (0, eval)(s.textContent);"
            "document.documentElement.dataset.plotsReady = '1';"
            "})();</script>")


def _intent_figure(evaluation: Evaluation, first: str | None = None):
    import plotly.graph_objects as go

    intents = list(next(iter(evaluation.per_intent.values())))
    counts = {i: sum(1 for q in evaluation.query_ids if evaluation.intents[q] == i) for i in intents}
    labels = [f"{i} ({counts[i]})" for i in intents]
    first = first or evaluation.metrics[0]
    fig = go.Figure([go.Bar(name=p, x=labels, y=[evaluation.per_intent[p][i][first] for i in intents])
                     for p in evaluation.per_intent])
    buttons = [dict(label=m, method="update",
                    args=[{"y": [[evaluation.per_intent[p][i][m] for i in intents] for p in evaluation.per_intent]},
                          {"yaxis.title.text": m}])
               for m in evaluation.metrics]
    fig.update_layout(barmode="group", title="Per intent (queries per intent in brackets)",
                      yaxis_title=first, yaxis_range=[0, 1],
                      updatemenus=[dict(buttons=buttons, direction="down", x=1.0, xanchor="right", y=1.0,
                                        yanchor="bottom", pad=dict(b=6),
                                        active=list(evaluation.metrics).index(first)  # the menu names
                                        if first in evaluation.metrics else 0)])      # what is plotted
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


CLIP_PERCENTILE = 10
TEXT_CELLS = 144   # a grid up to 12 × 12 shows each cell's value as text


def colour_range(values) -> tuple[float | None, float | None, bool]:
    """``(zmin, zmax, clipped)`` of a heatmap's colour scale over the values it shows.

    The top is the largest value; the bottom is the ``CLIP_PERCENTILE``-th percentile, so that a
    few degenerate settings (every weight 0) take the darkest colour instead of flattening the
    rest into one hue; ``clipped`` says whether any value lies below it. ``(None, None, False)``
    (the plotting library's own range) when no value is finite or all are equal."""
    z = np.asarray(values, dtype=np.float64)
    finite = z[np.isfinite(z)]
    if finite.size == 0:
        return None, None, False
    low, high = float(np.percentile(finite, CLIP_PERCENTILE)), float(finite.max())
    if not high > low:
        low = float(finite.min())
    if not high > low:
        return None, None, False
    return low, high, bool((finite < low).any())


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
    low, high, clipped = colour_range(z)
    scale = result.metric + (f"<br>(≤ {low:.3f}:<br>darkest)" if clipped else "")
    best = result.points[result.best_index]
    text = {}
    if z.size <= TEXT_CELLS:  # each value written in its cell, the best one starred
        labels = np.array([[f"{v:.3f}" if np.isfinite(v) else "" for v in row] for row in z],
                          dtype=object)
        labels[yi[result.best_index], xi[result.best_index]] = f"☆ {result.best_score:.3f}"
        text = dict(text=labels.tolist(), texttemplate="%{text}", textfont=dict(size=11))
    fig = go.Figure(go.Heatmap(z=z.tolist(), x=xs.tolist(), y=ys.tolist(), colorscale="Viridis",
                               zmin=low, zmax=high, colorbar=dict(title=scale), xgap=1, ygap=1,
                               **text,
                               hovertemplate=f"{names[0]}=%{{x}}<br>{names[1]}=%{{y}}<br>{result.metric}=%{{z:.4f}}"
                                             "<extra></extra>"))
    if not text:
        star = dict(symbol="star", size=16, color="white", line=dict(color="black", width=1.5))
        fig.add_trace(go.Scatter(x=[best[0]], y=[best[1]], mode="markers",
                                 name="best on all queries", marker=star,
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


def write_report(out_dir: str | Path, evaluation: Evaluation, significance: Significance | None,
                 budget: dict[str, BudgetScore] | None = None, router: RouterEvaluation | None = None,
                 sweep: SweepResult | None = None, title: str | None = None, *,
                 intervals: Intervals | None = None, settings: dict | None = None,
                 bias=(), inputs: dict | None = None, history=(), unjudged=None) -> dict[str, Path]:
    """Write report.json, report.md and report.html into ``out_dir``; return their paths.
    ``settings``: ``Experiment.settings()`` (the method section and the primary metric); ``bias``:
    ``eval.statistics.judged_below.bias_table``'s rows (judged@k, nDCG'@k, bpref); ``inputs``: the
    content hashes of the inputs (``Experiment.inputs``); ``history``: the dataset's ``rwb check``
    entries (``eval.stores.history.CheckHistory``); ``unjudged``: pipeline → whether its verdict
    against the baseline survives the unjudged documents (``eval.statistics.unjudged.Bounds``). The two documents are rendered from one list
    of sections (``eval.reports.sections``)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    created = datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    title = title or f"rwb evaluation report — {evaluation.dataset}"
    data = eval_summary(evaluation, significance, budget, router, intervals, settings)
    data = {"report_version": REPORT_VERSION, "created_at": created, **data}
    if sweep is not None:
        data["sweep"] = _clean(sweep.to_json())
    if bias:
        data["judgment_bias"] = _clean([row.to_json() for row in bias])
    if inputs:
        data["inputs"] = _clean(inputs)
    if history:
        data["check_history"] = _clean(list(history))
    primary = (settings or {}).get("primary_metric") or evaluation.metrics[0]
    sections = [Section(title, (Para((f"{evaluation.n_queries} judged queries · dataset ", Code(evaluation.dataset),
                                      " · model ", Code(evaluation.embedder), " · analyzer ",
                                      Code(_analyzer(evaluation)),
                                      f" · pool depth {evaluation.pool_depth} · {created}"), muted=True),), 1),
                *_result_sections(evaluation, significance, settings, intervals, bias, primary),
                *_unjudged_sections(unjudged, significance),
                *_extra_sections(evaluation, significance, budget, router, sweep, primary),
                *_input_sections(data["fingerprint"], inputs, history, primary)]
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
            "</head>"
            f"<body>{to_html(sections)}{_plotly_loader()}</body></html>\n")

    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    # one output: all three files are complete before any replaces its predecessor
    summary = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    atomic_write_files({paths["json"]: summary.encode("utf-8"),
                        paths["md"]: to_markdown(sections).encode("utf-8"),
                        paths["html"]: page.encode("utf-8")})
    return paths


def _result_sections(evaluation: Evaluation, significance: Significance | None, settings: dict | None,
                     intervals: Intervals | None, bias, primary: str) -> list[Section]:
    """Method, metrics, statistics, judgment bias and the per-intent table."""
    from eval.statistics.judged_below import bias_lines
    sections = []
    method = method_lines(settings, significance, intervals)
    if method:
        sections.append(Section("Method", (Bullets(tuple(method)),)))
    in_sample = (settings or {}).get("in_sample") or {}
    means_header, means = means_rows(evaluation, significance, in_sample)
    notes = short_notes(evaluation)
    sections.append(Section("Metrics", (Table(tuple(means_header), tuple(means), 1, marked=True),
                                        Para(legend(significance), muted=True),
                                        *((Para(IN_SAMPLE_NOTE), Bullets(tuple(
                                            f"{label}: {note}" for label, note in in_sample.items())))
                                          if in_sample else ()),
                                        *((Para(SHORT_NOTE), Bullets(tuple(notes))) if notes else ()))))
    stats = [[m if i == 0 else "", *row] for m in evaluation.metrics
             for i, row in enumerate(detail_rows(evaluation, significance, intervals, m))]
    against = significance.baseline if significance else "the baseline"
    sections.append(Section(f"Statistics against {against}", (
        Table(("metric", *detail_header(significance, intervals)), tuple(stats), 3, marked=True),)))
    bias_header, bias_rows, bias_notes = bias_lines(list(bias), (settings or {}).get("alpha", 0.05))
    if bias_rows:
        sections.append(Section("Judgment bias", (Para(BIAS_NOTE), Table(tuple(bias_header), tuple(bias_rows)),
                                                  *((Bullets(tuple(f"note: {line}" for line in bias_notes)),)
                                                    if bias_notes else ()))))
    intent_header, intent_table = intent_rows(evaluation, primary)
    sections.append(Section("Per intent", (
        Para(f"{primary} by labelled intent (judged queries in brackets):"),
        Table(tuple(intent_header), tuple(intent_table)),
        Chart(_figure_html(_intent_figure(evaluation, primary), "fig-intents", 420)))))
    return sections


def _unjudged_sections(unjudged, significance: Significance | None) -> list[Section]:
    """Whether each pipeline's verdict against the baseline survives its unjudged documents."""
    if not unjudged:
        return []
    against = significance.baseline if significance else "the baseline"
    return [Section("Unjudged documents", (
        Para(f"Each pipeline against {against}, recomputed with the unjudged documents of the two top k "
             "graded for one side, then for the other:"),
        Bullets(tuple(f"{label}: {bounds.text()}" for label, bounds in unjudged.items()))))]


def _extra_sections(evaluation: Evaluation, significance: Significance | None, budget, router, sweep,
                    primary: str) -> list[Section]:
    """Per query against the baseline, the token budget, the intent router and the sweep."""
    sections = []
    if significance:
        wtl = Table(("pipeline", "wins", "ties", "losses", f"Δ{primary}"),
                    tuple((p, c[primary].wins, c[primary].ties, c[primary].losses, fmt_delta(c[primary].delta))
                          for p, c in significance.cells.items()))
        sections.append(Section(f"Per query vs {significance.baseline} ({primary})", (
            Chart(_figure_html(_wtl_figure(evaluation, significance, primary), "fig-wtl",
                               140 + 36 * len(significance.cells)), wtl),
            Chart(_figure_html(_delta_figure(evaluation, significance.baseline, primary), "fig-delta",
                               160 + 40 * len(significance.cells))))))
    if budget:
        sections.append(Section("Token budget", (Para(_budget_note(budget)), Table(
            ("pipeline", "budget recall", "ceiling", "mean tokens"),
            tuple((p, f"{b.mean:.4f}", f"{b.ceiling:.4f}", f"{b.mean_tokens:.0f}") for p, b in budget.items())))))
    if router:
        confusion = Table(("expected \\ routed", *router.profiles),
                          tuple((e, *(router.confusion[e][r] for r in router.profiles)) for e in router.profiles))
        sections.append(Section("Intent router", (
            Para(_router_note(router)), Chart(_figure_html(_confusion_figure(router), "fig-router", 420), confusion))))
    if sweep is not None:
        best = sweep.chosen_fixed or ", ".join(f"{k}={v:g}" for k, v in sweep.best_params.items())
        sections.append(Section("Sweep", (
            Para(_sweep_note(sweep)), Chart(_figure_html(_sweep_figure(sweep), "fig-sweep", 460)),
            Table(tuple(SWEEP_HEADER), tuple(sweep_rows(sweep)), numeric_from=4),
            Block(("Best configuration as TOML (usable as ", Code("--pipeline FILE"), f"): {best}"),
                  sweep.best_toml()))))
    return sections


def _input_sections(fp: dict, inputs: dict | None, history, primary: str) -> list[Section]:
    """The fingerprint and every pipeline's TOML, the inputs' content hashes and the check history."""
    fingerprint = Table(("field", "value"), (
        ("dataset", Code(fp["dataset"])), ("dataset sha256", Code(fp["dataset_fingerprint"])),
        ("model", Code(fp["model"])), ("analyzer", Code(fp["analyzer"])), ("pool depth", str(fp["pool_depth"])),
        ("versions", ", ".join(f"{k} {v}" for k, v in fp["versions"].items()))), numeric_from=9)
    sections = [Section("Fingerprint", (
        fingerprint, Para(("Pipeline configurations (TOML, each usable as ", Code("--pipeline FILE"), "):")),
        *(Block((name,), text) for name, text in fp["configs"].items())))]
    if inputs:
        rows = []
        for name in INPUT_NAMES:
            value = inputs.get(name)
            if isinstance(value, dict):  # the pipeline hash, per pipeline
                rows += [(f"{name}: {label}", Code(digest)) for label, digest in value.items()]
            elif value:
                rows.append((name, Code(value)))
        sections.append(Section("Inputs", (
            Para("Content hashes of what these results were computed from (a document's or query's order "
                 "in its file is not part of its hash): a check against a snapshot names the ones that differ."),
            Table(("input", "sha256 (short)"), tuple(rows), numeric_from=9))))
    if history:
        sections.append(Section("Check history", _history_items(list(history), primary)))
    return sections


def _history_items(entries: list[dict], primary: str) -> tuple:
    """The dataset's ``rwb check`` runs: a chart of one metric in HTML (``primary`` where the
    checks gated it), a table of every check in Markdown."""
    metrics = list(dict.fromkeys(m for e in entries for m in (e.get("metrics") or {})))
    metric = primary if primary in metrics else (metrics[0] if metrics else primary)
    rows = []
    for point in history_points(entries, metric):
        frozen = point["frozen"]
        rows.append((point["time"], point["pipeline"], point["snapshot"], f"{point['value']:.4f}",
                     f"{frozen:.4f}" if isinstance(frozen, (int, float)) else "",
                     "passed" if point["passed"] else "FAILED",
                     ", ".join(point["changed"]) or "—"))
    table = Table(("time", "pipeline", "snapshot", metric, "snapshot's", "verdict", "changed inputs"),
                  tuple(rows), numeric_from=3)
    return (Para((f"{len(entries)} ", Code("rwb check"), f" runs on this dataset; {metric} at each (changed "
                  "inputs: since the pipeline's previous check).")),
            Chart(_figure_html(history_figure(entries, metric), "fig-history", 320), table))


BIAS_NOTE = ("judged@k: share of the top k with any judgment (unjudged documents count as "
             "non-relevant in every other metric); nDCG'@k: nDCG on the ranking with unjudged "
             "documents removed (Sakai 2007); bpref: Buckley & Voorhees 2004 as trec_eval; p: "
             "Fisher's randomization test of judged@k against the baseline, Holm-corrected; "
             "clearly below = a lower mean and p < alpha")


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
            f"{result.best_score:.4f} (in-sample). " + fixed_note(result))


def fixed_note(result: SweepResult) -> str:
    """What the sweep's folds and its recommendation took from the fixed pipelines it chose among."""
    if not result.fixed:
        return "The folds chose among the grid's settings alone."
    best = max(range(len(result.fixed)), key=lambda i: result.fixed_scores[i])
    counts = Counter(f.fixed for f in result.folds if f.fixed)
    kept = (f"{result.fixed_folds} of {len(result.folds)} folds kept a fixed pipeline over every setting "
            f"({', '.join(f'{name} in {k}' for name, k in counts.items())})" if counts
            else "every fold picked a setting over them")
    head = (f"Each fold also chose among {len(result.fixed)} fixed pipelines (the start and the named presets; "
            f"the best on all queries {result.fixed[best].name} {result.fixed_scores[best]:.4f}): {kept}. ")
    if result.chosen_fixed:
        return head + (f"Recommended: the fixed pipeline {result.chosen_fixed}, which scores at least as high "
                       "as every setting on all queries (in-sample).")
    return head + "Recommended: the best setting."


def experiment_summary(experiment) -> dict:
    """The ``rwb eval --json`` document of an ``eval.experiments.experiment.Experiment`` (also
    the core of ``report.json``)."""
    out = eval_summary(experiment.evaluation, experiment.significance, experiment.budget, experiment.router,
                       experiment.intervals, experiment.settings())
    if experiment.learned_router is not None:
        out["learned_router"] = experiment.learned_router.to_json()
    out["judgments"] = experiment.judgments
    if experiment.bias:
        out["judgment_bias"] = [row.to_json() for row in experiment.bias]
    if getattr(experiment, "unjudged", None):
        out["unjudged_verdicts"] = {label: b.to_json() for label, b in experiment.unjudged.items()}
    return out


def write_experiment_report(experiment, out_dir: str | Path, sweep: SweepResult | None = None,
                            title: str | None = None, history=()) -> dict[str, Path]:
    """report.json, report.md and report.html of an experiment in ``out_dir`` (``sweep``: an
    optional ``eval.search.sweep.SweepResult`` to include; ``history``: the dataset's ``rwb
    check`` entries); their paths by kind."""
    return write_report(out_dir, experiment.evaluation, experiment.significance, experiment.budget,
                        experiment.router, sweep, title, intervals=experiment.intervals,
                        settings=experiment.settings(), bias=experiment.bias, inputs=experiment.inputs,
                        history=history, unjudged=experiment.unjudged)
