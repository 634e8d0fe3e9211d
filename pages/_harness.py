"""Glue to the harness (``eval``): cached ranx evaluations, significance, sweeps, reports, imports.

The pages call these instead of composing harness steps themselves. Tune's live p-value is
the paired t-test (cheap enough for every knob move); Fisher's randomization test runs on
demand and is cached per configuration.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import streamlit as st

from eval.compare import Significance, compare_to_baseline, holm, randomization_test
from eval.evaluate import Evaluation, evaluate_pipelines, intent_of
from eval.report import fmt_p
from eval.sweep import ParamSpec, Space, SweepResult
from eval.sweep import sweep as harness_sweep
from pages._state import (METRICS, PRIMARY, LiveRun, Workspace, get_dataset, get_judged, get_pool, metric_label,
                          resolve_config)
from retrieval.index import rwb_home
from retrieval.pipeline import PipelineConfig, get_param

__all__ = ["fmt_p", "ParamSpec", "SweepResult", "Evaluation", "Significance"]
PERMUTATIONS = 10_000


@st.cache_resource(show_spinner=False)
def warm_harness() -> object:
    """Compile ranx's numba metrics once, in a separate low-priority process that fills numba's
    on-disk cache: a warm-up thread in the server would hold the GIL for seconds and stall the
    first session's knob moves. Skipped under AppTest."""
    import subprocess
    import sys

    from streamlit import config

    if config.get_option("global.appTest"):
        return None
    try:
        return subprocess.Popen([sys.executable, "-c", "import os; os.nice(19)\nfrom eval.runs import warm_up; warm_up()"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=Path(__file__).parent.parent)
    except OSError:  # a warm-up only; the real evaluation reports its own errors
        return None


# ---- live significance (Tune, Sweep) ------------------------------------------------------------

def paired_t(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test p, as scipy's ``ttest_rel``: ``t = mean(d) / (sd(d)/√n)``,
    ``p = 2·P(T_{n−1} ≤ −|t|)``; 1 when the runs do not differ (0.1 ms: it runs on every knob move)."""
    from scipy.special import stdtr

    n = len(a)
    if n < 2:
        return float("nan")
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if not np.any(np.abs(diff) > 1e-12):
        return 1.0
    sd = float(diff.std(ddof=1))
    if sd == 0.0:
        return 0.0
    t = float(diff.mean()) / (sd / math.sqrt(n))
    return float(2.0 * stdtr(n - 1, -abs(t)))


def compare_live(base: LiveRun, cand: LiveRun, metrics: Sequence[str] = METRICS, test: str = "t") -> list[dict]:
    """Per metric: value, baseline, delta and p — the paired t-test (``test="t"``) or Fisher's
    randomization test (``"fisher"``), Holm-corrected over the metrics shown."""
    rows, raw = [], []
    for name in metrics:
        a, b = base.counted(name), cand.counted(name)
        if test == "fisher":
            raw.append(randomization_test(a, b, PERMUTATIONS, seed=42) if len(a) else float("nan"))
        else:
            raw.append(paired_t(a, b))
        rows.append({"metric": name, "label": metric_label(name), "value": cand.means[name],
                     "baseline": base.means[name], "delta": cand.means[name] - base.means[name], "n": len(a)})
    finite = [p for p in raw if np.isfinite(p)]
    adjusted = iter(holm(finite))
    for row, p in zip(rows, raw):
        row["p"] = next(adjusted) if np.isfinite(p) else float("nan")
        row["p_text"] = fmt_p(row["p"]) if np.isfinite(row["p"]) else "n/a"
    return rows


@st.cache_resource(max_entries=256, show_spinner="Fisher's randomization test (10,000 permutations per metric)…")
def fisher_cached(path: str, stamp: tuple, embedder: str, qrels_rev: tuple, base: PipelineConfig,
                  cand: PipelineConfig) -> dict[str, float]:
    from pages._state import cached_evaluation

    a = cached_evaluation(path, stamp, embedder, qrels_rev, base)
    b = cached_evaluation(path, stamp, embedder, qrels_rev, cand)
    return {row["metric"]: row["p"] for row in compare_live(a, b, METRICS, "fisher")}


# ---- the harness's ranx evaluation and significance ----------------------------------------------

@st.cache_resource(max_entries=16, show_spinner="Evaluating with ranx and testing significance…")
def harness_evaluation(path: str, stamp: tuple, embedder: str, qrels_rev: tuple,
                       configs: tuple[tuple[str, PipelineConfig], ...], baseline: str
                       ) -> tuple[Evaluation, Significance | None]:
    """``eval.evaluate.evaluate_pipelines`` + ``eval.compare.compare_to_baseline`` (Fisher, Holm)."""
    dataset = get_dataset(path, stamp)
    qrels, _ = get_judged(path, stamp, embedder, qrels_rev)
    evaluation = evaluate_pipelines(get_pool(path, stamp, embedder), qrels, dict(configs), METRICS,
                                    intent_of(dataset.queries))
    significance = compare_to_baseline(evaluation, qrels, baseline) if len(configs) > 1 else None
    return evaluation, significance


def evaluate_labels(ws: Workspace, labelled: dict[str, PipelineConfig]) -> tuple[Evaluation, Significance | None]:
    """Evaluate the baseline (first, under its own name) and ``labelled`` configs."""
    base = ws.baseline
    configs = {base.name: base}
    for label, config in labelled.items():
        if config != base:
            configs.setdefault(label, config)
    return harness_evaluation(ws.path, ws.stamp, ws.embedder, ws.qrels_rev, tuple(configs.items()), base.name)


# ---- Sweep: the harness's grid/random search with cross-validation (eval.sweep) ----------------

def param_spec(config: PipelineConfig, name: str, lo: float, hi: float, steps: int, integer: bool) -> ParamSpec:
    """``lo … hi`` in ``steps`` evenly spaced values (whole numbers for integer parameters)."""
    lo, hi = (float(min(lo, hi)), float(max(lo, hi)))
    if integer:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
        step = max(1.0, float(round((hi - lo) / max(1, steps - 1))))
    else:
        step = (hi - lo) / (steps - 1) if steps > 1 and hi > lo else 1.0
    return ParamSpec(name, lo, hi, step, integer)


def run_sweep(ws: Workspace, base: PipelineConfig, specs: Sequence[ParamSpec], metric: str,
              random: int | None, folds: int, seed: int = 0,
              progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """``eval.sweep.sweep`` on the pool with the workbench's merged qrels."""
    qrels, _ = ws.judged()
    return harness_sweep(ws.pool(), qrels, base, Space(tuple(specs)), metric, random, folds, seed, progress)


def start_value(config: PipelineConfig, path: str) -> float:
    return float(get_param(config, path))


# ---- reports and imports ---------------------------------------------------------------------------

def build_report(ws: Workspace, labelled: dict[str, PipelineConfig], sweep: SweepResult | None = None
                 ) -> dict[str, Path]:
    """The harness's offline report (report.html, .md, .json) of the chosen pipelines against the
    baseline, written under ``$RWB_HOME/reports/``."""
    out = rwb_home() / "reports" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', ws.dataset.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    qrels, _ = ws.judged()
    from eval.budget import DEFAULT_BUDGET, budget_recall, document_tokens
    from eval.report import write_report
    from eval.router_eval import INTENT_TO_PROFILE, evaluate_router

    evaluation, significance = evaluate_labels(ws, labelled)
    c = ws.pool()
    tokens = document_tokens(ws.dataset.documents)
    budget = {label: budget_recall(c, qrels, run.ranking, DEFAULT_BUDGET, tokens)
              for label, run in evaluation.runs.items()}
    labels = {q.id: q.intent for q in ws.dataset.queries}
    router = None
    if any(i in INTENT_TO_PROFILE for i in labels.values()):
        router = evaluate_router(c, qrels, labels, "seed-adaptive", PRIMARY)
    return write_report(out, evaluation, significance, budget, router, sweep)


IMPORT_KINDS = {
    "beir": "BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)",
    "locomo": "LoCoMo locomo10.json",
    "trec-qrels": "TREC qrels file + an existing dataset's corpus",
    "markdown": "Markdown memory workspace (a folder of .md files)",
}


def import_dataset(kind: str, source: str, dest: str, *, force: bool = False, name: str = "",
                   corpus: str = "", queries: str = ""):
    """Call the harness importer for ``kind`` (``eval.importers``); returns its ImportResult."""
    from eval import importers
    from retrieval.access import confine  # remote use: every path stays inside RWB_DATA_ROOT

    source, dest = str(confine(source)), str(confine(dest))
    corpus, queries = (str(confine(corpus)) if corpus else ""), (str(confine(queries)) if queries else "")
    options = {"force": force, "name": name or None}
    if kind == "beir":
        return importers.import_beir(source, dest, **options)
    if kind == "locomo":
        return importers.import_locomo(source, dest, **options)
    if kind == "trec-qrels":
        if not corpus:
            raise ValueError("a TREC qrels import needs the dataset whose corpus it judges")
        return importers.import_trec_qrels(source, dest, corpus=corpus, queries=queries or None, **options)
    if kind == "markdown":
        return importers.import_markdown(source, dest, **options)
    raise ValueError(f"unknown import kind {kind!r}; choose from {sorted(IMPORT_KINDS)}")


def config_of(label: str) -> PipelineConfig:
    return resolve_config(label)
