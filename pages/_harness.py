"""Glue to the harness (``eval``): cached ranx evaluations, significance, sweeps, reports, imports.

Pages call these rather than composing harness steps themselves; the Tune page evaluates its
runs (``pages._state.live_evaluation``) and takes everything it shows of them (comparison rows,
grades, missed-relevant results, badges) from ``eval.experiments.views.tune_view``.
Tune's live p-value is the paired t-test (cheap enough for every knob move); Fisher's
randomization test runs on demand and is cached per configuration. Both are raw p: correction
is across systems per metric, as in ``rwb eval``, and a live comparison holds one system.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable, Sequence

import streamlit as st

from eval.statistics.significance import Significance, fmt_p
from eval.metrics.ranx_eval import Evaluation
from eval.experiments.experiment import Experiment, ExperimentOptions, run_experiment
from eval.stores.history import CheckHistory
from eval.stores.judgments import effective_qrels
from eval.search.space import ParamSpec, Space, spaced
from eval.search.sweep import SweepResult
from eval.search.sweep import sweep as harness_sweep
from eval.experiments import views
from eval.experiments.live import LiveRun
from eval.reports.report import fixed_note, write_experiment_report
from pages._state import METRICS, Workspace, get_dataset, get_pool
from retrieval.index import rwb_home
from retrieval.pipeline import PipelineConfig

__all__ = ["fixed_note", "fmt_p", "ParamSpec", "SweepResult", "Evaluation", "Significance", "Experiment", "ExperimentOptions"]
PERMUTATIONS = views.PERMUTATIONS


@st.cache_resource(show_spinner=False)
def warm_in_server() -> object:
    """Compile ranx's numba code in this server process (the part numba keeps on disk and its
    typed dictionaries and lists, which it keeps nowhere: seconds on the first Evaluate
    otherwise), on a daemon thread started once: by the app after its first run's preparation
    (``pages._first_run.prepare``), before the page; a page that needs ranx before it finished
    waits for it, saying so (``ranx_ready``); ranx calls take ``RANX_LOCK`` too. Skipped under
    AppTest."""
    import threading

    from streamlit import config

    if config.get_option("global.appTest"):
        return None

    def warm() -> None:
        try:
            from eval.experiments import experiment  # noqa: F401 (scipy, statsmodels: imported once)
            from eval.metrics.ranx_io import warm_up

            warm_up()
        except Exception:  # a warm-up only; the real evaluation reports its own errors
            pass

    thread = threading.Thread(target=warm, name="rwb-warm-ranx", daemon=True)
    thread.start()
    return thread


def ranx_ready() -> None:
    """Wait for ``warm_in_server``'s thread where it is still at work, saying what it prepares (the
    first Evaluate after a server start: ranx's import and numba compilation, seconds)."""
    thread = warm_in_server()
    if thread is not None and thread.is_alive():
        with st.spinner("Preparing ranx, which these figures come from: importing it and compiling its "
                        "metrics (once per server start)…", show_time=True):
            thread.join()


# ---- live significance (Tune, Sweep) ------------------------------------------------------------

def compare_live(base: LiveRun, cand: LiveRun, metrics: Sequence[str] = METRICS, test: str = "t") -> list[dict]:
    """``eval.experiments.views.compare_live`` over the workbench's metrics."""
    return views.compare_live(base, cand, metrics, test)


@st.cache_resource(max_entries=256, show_spinner="Fisher's randomization test (10,000 permutations per metric)…")
def fisher_cached(path: str, stamp: tuple, embedder: str, analyzer: str, qrels_rev: tuple, base: PipelineConfig,
                  cand: PipelineConfig) -> dict[str, float]:
    from pages._state import live_evaluation

    a = live_evaluation(path, stamp, embedder, analyzer, qrels_rev, base)
    b = live_evaluation(path, stamp, embedder, analyzer, qrels_rev, cand)
    return {row["metric"]: row["p"] for row in compare_live(a, b, METRICS, "fisher")}


# ---- the harness's ranx evaluation and significance ----------------------------------------------

@st.cache_resource(max_entries=16, show_spinner="Evaluating with ranx: every pipeline on every query, significance "
                   "tests, bootstrap intervals, judgment bias…")
def harness_experiment(path: str, stamp: tuple, embedder: str, analyzer: str, qrels_rev: tuple,
                       configs: tuple[tuple[str, PipelineConfig], ...], baseline: PipelineConfig,
                       options: ExperimentOptions) -> Experiment:
    """``eval.experiments.experiment.run_experiment`` (the one composition ``rwb eval`` and ``rwb report``
    use) on the pool, with the judgments ``qrels_rev`` names (``Workspace.qrels_rev``)."""
    dataset = get_dataset(path, stamp)
    used = effective_qrels(dataset, source=qrels_rev[0])
    pool = get_pool(path, stamp, embedder, analyzer)
    return run_experiment(pool, dataset, dict(configs), baseline, options, qrels=used.qrels,
                          judgments=used.to_json())


@st.cache_resource(max_entries=16, show_spinner=False)
def judgments_label(path: str, stamp: tuple, qrels_rev: tuple) -> str:
    """Which judgments a figure used (``Judgments.label``), for the version ``qrels_rev`` names."""
    return effective_qrels(get_dataset(path, stamp), source=qrels_rev[0]).label


def experiment_for(ws: Workspace, labelled: dict[str, PipelineConfig],
                   options: ExperimentOptions | None = None) -> Experiment:
    """The baseline (first, under its own name) and ``labelled`` configs, as ``rwb eval`` runs them."""
    ranx_ready()
    return harness_experiment(ws.path, ws.stamp, ws.embedder, ws.analyzer, ws.qrels_rev, tuple(labelled.items()),
                              ws.baseline, options or ExperimentOptions())


# ---- Sweep: the harness's grid/random search with cross-validation (eval.search.sweep) ----------------

def param_spec(config: PipelineConfig, name: str, lo: float, hi: float, steps: int, integer: bool) -> ParamSpec:
    """``lo … hi`` in ``steps`` evenly spaced values (``eval.search.space.spaced``)."""
    return spaced(name, lo, hi, steps, integer)


def run_sweep(ws: Workspace, base: PipelineConfig, specs: Sequence[ParamSpec], metric: str,
              random: int | None, folds: int, seed: int = 0,
              progress: Callable[[int, int], None] | None = None, grid_alone: bool = False) -> SweepResult:
    """``eval.search.sweep.sweep`` on the pool with the workbench's merged qrels; ``grid_alone``:
    without the fixed pipelines (a curve, which offers only its own best value)."""
    qrels, _ = ws.judged()
    return harness_sweep(ws.pool(), qrels, base, Space(tuple(specs)), metric, random, folds, seed, progress,
                         fixed={} if grid_alone else None)


def sweep_key(ws: Workspace, base: PipelineConfig, specs: Sequence[ParamSpec], metric: str, random: int | None,
              folds: int, curve: bool) -> str:
    """The key the Sweep page keeps a sweep under (``eval.stores.sweeps.settings_key``): its
    settings and the workspace's inputs (corpus, queries, judgments, embedder, index)."""
    import dataclasses

    from eval.stores.sweeps import settings_key
    from retrieval.pipeline import to_toml

    return settings_key({"pipeline": to_toml(base), "specs": [dataclasses.asdict(s) for s in specs],
                         "metric": metric, "random": random, "folds": folds, "curve": curve,
                         "inputs": ws.inputs()})


def kept_sweep(ws: Workspace, key: str, base: PipelineConfig) -> tuple[SweepResult, SweepResult | None] | None:
    """The sweep (and its curve) kept under ``key`` (``keep_sweep``), or None (none, or unreadable)."""
    from eval.search.sweep import from_record
    from eval.stores.sweeps import SweepStore

    try:
        entry = SweepStore(ws.dataset).get(key)
        if entry is None:
            return None
        curve = entry.get("curve")
        return from_record(entry["result"], base), (from_record(curve, base) if curve else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep_sweep(ws: Workspace, key: str, result: SweepResult, curve: SweepResult | None) -> str | None:
    """Keep a sweep (and its curve) for a reload of the same settings; why not, when it was not."""
    from eval.stores.sweeps import MAX_CONFIGS, SweepStore

    try:
        if SweepStore(ws.dataset).put(key, result.to_record(), curve.to_record() if curve is not None else None):
            return None
        return f"more than {MAX_CONFIGS:,} settings"
    except (OSError, ValueError) as error:
        return str(error).splitlines()[0][:200]


# ---- reports and imports ---------------------------------------------------------------------------

def build_report(ws: Workspace, labelled: dict[str, PipelineConfig], sweep: SweepResult | None = None,
                 options: ExperimentOptions | None = None) -> dict[str, Path]:
    """The harness's offline report (report.html, .md, .json) of the chosen pipelines against the
    baseline, written under ``$RWB_HOME/reports/`` (``Experiment.write_report``, as ``rwb report``)."""
    out = rwb_home() / "reports" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', ws.dataset.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    return write_experiment_report(experiment_for(ws, labelled, options), out, sweep,
                                   history=CheckHistory(ws.dataset).entries())


def import_kinds() -> dict:
    """The registered importers (``eval.importers.IMPORTERS``): the Data page's import formats."""
    from eval.importers import IMPORTERS

    return IMPORTERS


def import_dataset(kind: str, source: str, dest: str, *, force: bool = False, name: str = "",
                   **options):
    """Run the registered importer ``kind`` with the form's values (empty fields left out;
    every path confined to the data root); returns its ImportResult."""
    from eval.importers import get_importer
    from retrieval.access import confine  # remote use: every path stays inside RWB_DATA_ROOT

    importer = get_importer(kind)

    def confined(value: str) -> str:
        label, sep, path = value.rpartition("=")
        return f"{label}{sep}{confine(path)}"

    values = {}
    for option in importer.options:
        value = options.get(option.key)
        if value in (None, "", [], False):
            continue
        if option.path:
            value = [confined(v) for v in value] if option.many else str(confine(value))
        values[option.key] = value
    source = str(confine(source)) if importer.source is not None else None
    return importer(source, str(confine(dest)), force=force, name=name or None, **values)
