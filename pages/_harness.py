"""Glue to the harness (``eval``): cached ranx evaluations, significance, sweeps, reports, imports.

The pages call these instead of composing harness steps themselves. Tune's live p-value is
the paired t-test (cheap enough for every knob move); Fisher's randomization test runs on
demand and is cached per configuration. Both are raw p: correction is across systems per
metric, as in ``rwb eval``, and a live comparison holds one system.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import streamlit as st

from eval.statistics.significance import Significance, compare_pair
from eval.metrics.ranx_eval import Evaluation
from eval.experiments.experiment import Experiment, ExperimentOptions, run_experiment
from eval.reports.report import fmt_p
from eval.search.sweep import ParamSpec, Space, SweepResult
from eval.search.sweep import sweep as harness_sweep
from eval.experiments.live import LiveRun
from pages._state import METRICS, Workspace, get_dataset, get_judged, get_pool, metric_label
from retrieval.index import rwb_home
from retrieval.pipeline import PipelineConfig, get_param

__all__ = ["fmt_p", "ParamSpec", "SweepResult", "Evaluation", "Significance", "Experiment", "ExperimentOptions"]
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
        return subprocess.Popen([sys.executable, "-c", "import os; os.nice(19)\nfrom eval.metrics.ranx_io import warm_up; warm_up()"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=Path(__file__).parent.parent)
    except OSError:  # a warm-up only; the real evaluation reports its own errors
        return None


# ---- live significance (Tune, Sweep) ------------------------------------------------------------

def compare_live(base: LiveRun, cand: LiveRun, metrics: Sequence[str] = METRICS, test: str = "t") -> list[dict]:
    """Per metric: value, baseline, delta and p of ``cand`` against ``base`` (``eval.statistics.significance.compare_pair``:
    the paired t-test, or Fisher's randomization test; one system compared, so no correction)."""
    ps = compare_pair({m: base.counted(m) for m in metrics}, {m: cand.counted(m) for m in metrics}, test,
                      PERMUTATIONS, seed=42)
    rows = []
    for name in metrics:
        row = {"metric": name, "label": metric_label(name), "value": cand.means[name], "baseline": base.means[name],
               "delta": cand.means[name] - base.means[name], "n": len(base.counted(name)), "p": ps[name]}
        row["p_text"] = fmt_p(row["p"]) if np.isfinite(row["p"]) else "n/a"
        rows.append(row)
    return rows


@st.cache_resource(max_entries=256, show_spinner="Fisher's randomization test (10,000 permutations per metric)…")
def fisher_cached(path: str, stamp: tuple, embedder: str, qrels_rev: tuple, base: PipelineConfig,
                  cand: PipelineConfig) -> dict[str, float]:
    from pages._state import cached_evaluation

    a = cached_evaluation(path, stamp, embedder, qrels_rev, base)
    b = cached_evaluation(path, stamp, embedder, qrels_rev, cand)
    return {row["metric"]: row["p"] for row in compare_live(a, b, METRICS, "fisher")}


# ---- the harness's ranx evaluation and significance ----------------------------------------------

@st.cache_resource(max_entries=16, show_spinner="Evaluating with ranx, testing significance, bootstrapping…")
def harness_experiment(path: str, stamp: tuple, embedder: str, qrels_rev: tuple,
                       configs: tuple[tuple[str, PipelineConfig], ...], baseline: PipelineConfig,
                       options: ExperimentOptions) -> Experiment:
    """``eval.experiments.experiment.run_experiment`` (the one composition ``rwb eval`` and ``rwb report``
    use) on the pool, with the workbench's merged qrels."""
    dataset = get_dataset(path, stamp)
    qrels, _ = get_judged(path, stamp, embedder, qrels_rev)
    return run_experiment(get_pool(path, stamp, embedder), dataset, dict(configs), baseline, options, qrels=qrels)


def experiment_for(ws: Workspace, labelled: dict[str, PipelineConfig],
                   options: ExperimentOptions | None = None) -> Experiment:
    """The baseline (first, under its own name) and ``labelled`` configs, as ``rwb eval`` runs them."""
    return harness_experiment(ws.path, ws.stamp, ws.embedder, ws.qrels_rev, tuple(labelled.items()), ws.baseline,
                              options or ExperimentOptions())


# ---- Sweep: the harness's grid/random search with cross-validation (eval.search.sweep) ----------------

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
    """``eval.search.sweep.sweep`` on the pool with the workbench's merged qrels."""
    qrels, _ = ws.judged()
    return harness_sweep(ws.pool(), qrels, base, Space(tuple(specs)), metric, random, folds, seed, progress)


def start_value(config: PipelineConfig, path: str) -> float:
    return float(get_param(config, path))


# ---- reports and imports ---------------------------------------------------------------------------

def build_report(ws: Workspace, labelled: dict[str, PipelineConfig], sweep: SweepResult | None = None,
                 options: ExperimentOptions | None = None) -> dict[str, Path]:
    """The harness's offline report (report.html, .md, .json) of the chosen pipelines against the
    baseline, written under ``$RWB_HOME/reports/`` (``Experiment.write_report``, as ``rwb report``)."""
    out = rwb_home() / "reports" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', ws.dataset.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    return experiment_for(ws, labelled, options).write_report(out, sweep)


IMPORT_KINDS = {
    "beir": "BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)",
    "locomo": "LoCoMo locomo10.json",
    "trec-qrels": "TREC qrels file + an existing dataset's corpus",
    "markdown": "Markdown memory workspace (a folder of .md files)",
}


def import_dataset(kind: str, source: str, dest: str, *, force: bool = False, name: str = "",
                   corpus: str = "", queries: str = ""):
    """Call the harness importer for ``kind`` (``eval.importers.formats``); returns its ImportResult."""
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
