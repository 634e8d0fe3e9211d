"""The one helper module of the workbench pages.

Cached handles (dataset, index, candidate pool, judgments), session-state helpers, the
knob catalogue of the Tune page, and thin glue to the engine (``retrieval``) and the
harness (``eval``). Pages only wire widgets to the functions here and render.

Heavy objects are loaded once per process with ``st.cache_resource`` and never mutated;
cache keys are plain strings plus a cheap *stamp* (mtime and size of the dataset files,
or of the judgment store), so an edited dataset or a new judgment is picked up at once.

Calls into harness modules that are still being written (``eval.compare``, ``eval.sweep``,
``eval.report``, ``eval.importers``) are isolated in the "harness glue" section below.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from eval.budget import DEFAULT_BUDGET, budget_recall, document_tokens
from eval.compare import Significance, compare_to_baseline, holm, randomization_test
from eval.evaluate import Evaluation as HarnessEvaluation
from eval.evaluate import evaluate_pipelines, intent_of
from eval.fast import DEFAULT_METRICS, Judged, judge, per_query
from eval.pool import load_pool
from eval.report import write_report
from eval.router_eval import INTENT_TO_PROFILE, evaluate_router
from eval.runs import warm_up
from eval.store import ExperimentStore, JudgmentStore, ProfileStore
from eval.sweep import ParamSpec, Space, SweepResult
from eval.sweep import sweep as harness_sweep
from eval.sweep import sweepable_params as harness_sweepable
from retrieval.candidates import DEFAULT_POOL_DEPTH, Candidates, build_candidates
from retrieval.dataset import Dataset, DatasetError, Query, load_dataset, qrels_path
from retrieval.index import IndexHandle, open_index, rwb_home
from retrieval.pipeline import (
    PIPELINES, PipelineConfig, PipelineRun, Response, from_toml, get_param, run_pipeline,
    to_dict, to_toml, with_fusion, with_param,
)
from retrieval.profiles import PRESETS
from retrieval.fusion import FUSIONS
from retrieval.fusion.adaptive import AdaptiveParams
from retrieval.fusion.weighted import TEXT_NORMS

ROOT = Path(__file__).resolve().parent.parent
DATASETS_DIR = ROOT / "datasets"
DEFAULT_DATASET = "datasets/devmem"
EMBEDDERS = ("minilm", "use-multilingual")
METRICS: tuple[str, ...] = tuple(DEFAULT_METRICS)       # ndcg@5, recall@5, mrr@5, precision@5, hit_rate@5
PRIMARY = "ndcg@5"
ALPHA = 0.05
OTHER_PATH = "Other folder…"
GRADES = (0, 1, 2, 3)
GRADE_LABELS = {0: "0 · not relevant", 1: "1 · related", 2: "2 · relevant", 3: "3 · exact answer"}

METRIC_LABELS = {"ndcg": "nDCG", "recall": "Recall", "mrr": "MRR", "precision": "P", "hit_rate": "Hit", "map": "MAP"}
COMPONENT_COLOURS = {
    "dense": "#4C78A8", "sparse": "#F58518", "time": "#54A24B", "graph": "#B279A2",
    "semantic": "#4C78A8", "reinforcement": "#E45756", "recency": "#54A24B", "access": "#9D755D",
    "fast": "#72B7B2", "timeline": "#EECA3B",
}

# shared (sidebar) session keys
K_DATASET = "rwb_dataset"
K_DATASET_TYPED = "rwb_dataset_typed"
K_EMBEDDER = "rwb_embedder"
K_BASELINE = "rwb_baseline"
# Tune's canonical state (other pages hand configs to Tune through these)
TUNE_CONFIG = "tune_config"
TUNE_SOURCE = "tune_source"
TUNE_KNOB_PREFIX = "tune_k_"


def metric_label(name: str) -> str:
    base, _, cutoff = name.partition("@")
    return f"{METRIC_LABELS.get(base, base)}@{cutoff}" if cutoff else METRIC_LABELS.get(base, base)


# ---- datasets and sidebar state ------------------------------------------------------------

def env_dataset() -> str:
    return os.environ.get("RWB_DATASET", DEFAULT_DATASET)


def resolve_path(path: str) -> Path:
    """A dataset path as typed: absolute, relative to the working folder, or to the repository."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return candidate
    return ROOT / candidate


def dataset_choices() -> list[str]:
    """The env default first, then every folder under ``datasets/`` holding a corpus."""
    found = []
    if DATASETS_DIR.is_dir():
        found = sorted(f"datasets/{p.name}" for p in DATASETS_DIR.iterdir() if (p / "corpus.jsonl").is_file())
    return list(dict.fromkeys([env_dataset(), *found]))


def ensure_navigation() -> None:
    """Route through app.py even when the server's first visitor opens a page URL directly.

    Streamlit starts in its legacy "pages/ folder" mode (our pages live in ``pages/``) and
    leaves it only once ``st.navigation`` has run; until then a URL such as ``/sweep`` runs
    the page script alone, without app.py's navigation and sidebar. Leave that mode and
    rerun: the rerun executes app.py, whose ``st.navigation`` opens the requested page.
    """
    try:
        from streamlit import config
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the legacy mode
        return
    # AppTest resets the flag before every run and runs a switched-to page alone, on purpose
    if PagesManager.uses_pages_directory and not config.get_option("global.appTest"):
        PagesManager.uses_pages_directory = False
        st.rerun()


def init_shared_state() -> None:
    """Defaults for the sidebar keys, so every page also runs on its own."""
    ensure_navigation()
    st.session_state.setdefault(K_DATASET, env_dataset())
    st.session_state.setdefault(K_DATASET_TYPED, "")
    st.session_state.setdefault(K_EMBEDDER, EMBEDDERS[0])
    st.session_state.setdefault(K_BASELINE, "vector")


def dataset_path() -> str:
    init_shared_state()
    pick = st.session_state[K_DATASET]
    if pick == OTHER_PATH:
        return st.session_state[K_DATASET_TYPED].strip() or env_dataset()
    return pick


def dataset_stamp(path: str) -> tuple:
    """Cheap change detector for a dataset folder: (name, mtime_ns, size) of its files."""
    root = resolve_path(path)
    files = [root / "corpus.jsonl", root / "queries.jsonl", root / "dataset.toml", qrels_path(root)]
    out = []
    for file in files:
        if file is not None and file.is_file():
            stat = file.stat()
            out.append((file.name, stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def file_stamp(path: Path) -> tuple:
    try:
        stat = path.stat()
        return (stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        return (0, 0)


# ---- cached resources ------------------------------------------------------------------------

@st.cache_resource(max_entries=8, show_spinner="Loading dataset…")
def get_dataset(path: str, stamp: tuple) -> Dataset:
    return load_dataset(resolve_path(path))


@st.cache_resource(max_entries=4, show_spinner="Opening the index (the embedding model loads once)…")
def get_index(path: str, stamp: tuple, embedder: str) -> IndexHandle:
    return open_index(get_dataset(path, stamp), embedder)


@st.cache_resource(max_entries=4, show_spinner="Retrieving candidates for the query set (once per dataset)…")
def get_pool(path: str, stamp: tuple, embedder: str) -> Candidates:
    return load_pool(get_dataset(path, stamp), embedder, DEFAULT_POOL_DEPTH)


@st.cache_resource(max_entries=16, show_spinner=False)
def get_judged(path: str, stamp: tuple, embedder: str, qrels_rev: tuple) -> tuple[dict, Judged]:
    """Merged qrels (dataset + workbench judgments) and their alignment with the pool."""
    dataset = get_dataset(path, stamp)
    qrels = JudgmentStore(dataset).qrels()
    return qrels, judge(get_pool(path, stamp, embedder), qrels)


@st.cache_resource(max_entries=32, show_spinner="Retrieving candidates for the free-text query…")
def free_text_candidates(path: str, stamp: tuple, embedder: str, text: str) -> Candidates:
    handle = get_index(path, stamp, embedder)
    return build_candidates(handle, [Query(id="free-text", text=text)], pool_depth=DEFAULT_POOL_DEPTH)


@dataclass(frozen=True, eq=False)
class LiveRun:
    """One pipeline re-scored over the whole query set with ``eval.fast`` (Tune's hot path)."""

    config: PipelineConfig
    run: PipelineRun
    judged: Judged
    values: dict[str, np.ndarray]   # metric → per-query value (NaN where the query has no judgments)
    means: dict[str, float]         # as eval.fast.mean_metrics: over counted queries
    seconds: float                  # re-score + rank + metrics


def evaluate_config(c: Candidates, judged: Judged, config: PipelineConfig,
                    metrics: Sequence[str] = METRICS) -> LiveRun:
    """Re-score, rank and evaluate a whole query set (timed with ``perf_counter``)."""
    start = time.perf_counter()
    run = run_pipeline(c, config)
    values = per_query(c, judged, run.ranking, tuple(metrics))
    n = judged.n_judged
    means = {name: (float(np.nansum(v)) / n if n else 0.0) for name, v in values.items()}
    return LiveRun(config, run, judged, values, means, time.perf_counter() - start)


@st.cache_resource(max_entries=128, show_spinner=False)
def cached_evaluation(path: str, stamp: tuple, embedder: str, qrels_rev: tuple,
                      config: PipelineConfig) -> LiveRun:
    _, judged = get_judged(path, stamp, embedder, qrels_rev)
    return evaluate_config(get_pool(path, stamp, embedder), judged, config)


@st.cache_resource(show_spinner=False)
def warm_harness() -> threading.Thread | None:
    """Compile ranx's numba metrics once per server process, in the background, so the first
    Evaluate page does not wait for the JIT (seconds). Skipped under AppTest."""
    from streamlit import config

    if config.get_option("global.appTest"):
        return None

    def work() -> None:
        try:
            warm_up()
        except Exception:  # a warm-up only; the real evaluation reports its own errors
            pass

    thread = threading.Thread(target=work, name="rwb-ranx-warmup", daemon=True)
    thread.start()
    return thread


def clear_caches() -> None:
    st.cache_data.clear()
    st.cache_resource.clear()


# ---- the workspace: what a page works on ----------------------------------------------------

@dataclass(frozen=True, eq=False)
class Workspace:
    path: str
    stamp: tuple
    embedder: str
    dataset: Dataset
    baseline_label: str

    @property
    def judgments(self) -> JudgmentStore:
        return JudgmentStore(self.dataset)

    @property
    def qrels_rev(self) -> tuple:
        return file_stamp(self.judgments.path)

    @property
    def baseline(self) -> PipelineConfig:
        return resolve_config(self.baseline_label)

    @property
    def has_queries(self) -> bool:
        return bool(self.dataset.queries)

    def pool(self) -> Candidates:
        return get_pool(self.path, self.stamp, self.embedder)

    def judged(self) -> tuple[dict, Judged]:
        return get_judged(self.path, self.stamp, self.embedder, self.qrels_rev)

    def qrels(self) -> dict:
        return self.judgments.qrels()

    def evaluation(self, config: PipelineConfig) -> LiveRun:
        """Cached: for baselines and lists of pipelines (Tune times its own, uncached)."""
        return cached_evaluation(self.path, self.stamp, self.embedder, self.qrels_rev, config)

    def evaluate_now(self, config: PipelineConfig) -> LiveRun:
        _, judged = self.judged()
        return evaluate_config(self.pool(), judged, config)

    def free_text(self, text: str) -> Candidates:
        return free_text_candidates(self.path, self.stamp, self.embedder, text)

    def fingerprint(self) -> str:
        return self.dataset.fingerprint


def workspace() -> Workspace:
    """The dataset chosen in the sidebar, loaded; shows the problems and stops when it cannot be."""
    init_shared_state()
    path = dataset_path()
    try:
        stamp = dataset_stamp(path)
        dataset = get_dataset(path, stamp)
    except DatasetError as error:
        st.error(f"**Cannot load dataset `{path}`** — {len(error.problems)} problem(s):")
        st.code("\n".join(error.problems[:30]), language=None)
        st.stop()
    except OSError as error:
        st.error(f"Cannot read dataset `{path}`: {error}")
        st.stop()
    return Workspace(path, stamp, st.session_state[K_EMBEDDER], dataset, st.session_state[K_BASELINE])


def require_pool(ws: Workspace) -> Candidates:
    """The candidate pool of the query set, or an explanation and ``st.stop()``."""
    if not ws.has_queries:
        st.info(f"Dataset **{ws.dataset.name}** has no queries: add a `queries.jsonl` to evaluate it. "
                "The Data page still browses its corpus.")
        st.stop()
    try:
        return ws.pool()
    except (ValueError, RuntimeError, OSError) as error:
        st.error(f"Cannot retrieve candidates for **{ws.dataset.name}**: {error}")
        st.stop()


# ---- configs: pipelines, profiles, saved -----------------------------------------------------

def profile_pipeline(name: str) -> PipelineConfig:
    """One of seed 001's presets as a pipeline: adaptive fusion with that fixed profile."""
    profile = next(p for p in PRESETS if p.name == name)
    return PipelineConfig(f"profile-{name}", "adaptive", f"Adaptive fusion with the {name} profile.",
                          params=AdaptiveParams(profile=profile))


def config_labels() -> list[str]:
    """Choices for any "pipeline or profile" picker: built-ins, presets, saved profiles."""
    return [*PIPELINES, *(f"profile:{p.name}" for p in PRESETS), *(f"saved:{n}" for n in ProfileStore().names())]


def resolve_config(label: str) -> PipelineConfig:
    if label.startswith("profile:"):
        return profile_pipeline(label.split(":", 1)[1])
    if label.startswith("saved:"):
        return ProfileStore().load(label.split(":", 1)[1])
    if label in PIPELINES:
        return PIPELINES[label]
    raise ValueError(f"unknown pipeline or profile {label!r}")


def format_label(label: str) -> str:
    if label.startswith("profile:"):
        return f"◆ profile · {label[8:]}"
    if label.startswith("saved:"):
        return f"★ saved · {label[6:]}"
    return f"▸ {label}"


def default_for(config: PipelineConfig) -> PipelineConfig:
    """The built-in a config is compared with: same-named pipeline/profile, else a fresh one."""
    if config.name in PIPELINES:
        return PIPELINES[config.name]
    if config.name.startswith("profile-") and any(p.name == config.name[8:] for p in PRESETS):
        return profile_pipeline(config.name[8:])
    base = config.name.rsplit("-custom", 1)[0]
    if base in PIPELINES:
        return PIPELINES[base]
    return PipelineConfig(config.name, config.fusion)


def flatten_config(config: PipelineConfig) -> dict[str, Any]:
    """Every field by dotted path (profiles addressed by name, as ``with_param`` takes them)."""
    out: dict[str, Any] = {}

    def walk(value, prefix):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{prefix}{k}.")
        elif isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
            for v in value:
                walk({k: x for k, x in v.items() if k != "name"}, f"{prefix}{v['name']}.")
        else:
            out[prefix[:-1]] = value

    walk(to_dict(config), "")
    return out


def diff_configs(base: PipelineConfig, other: PipelineConfig) -> pd.DataFrame:
    """Fields whose values differ (``math.isclose`` for numbers)."""
    a, b = flatten_config(base), flatten_config(other)
    rows = []
    for key in list(dict.fromkeys([*a, *b])):
        x, y = a.get(key), b.get(key)
        same = (isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool)
                and not isinstance(y, bool) and math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)) or x == y
        if not same and key != "name":
            rows.append({"parameter": key, "default": _show(x), "this": _show(y)})
    return pd.DataFrame(rows, columns=["parameter", "default", "this"])


def _show(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def toml_diff(base: PipelineConfig, other: PipelineConfig) -> str:
    return "".join(difflib.unified_diff(to_toml(base).splitlines(True), to_toml(other).splitlines(True),
                                        "default.toml", "this.toml"))


def parse_toml(text: str) -> PipelineConfig:
    return from_toml(text, "edited profile")


# ---- Tune: knobs -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Knob:
    """One widget of the Tune page, bound to a dotted config path."""

    path: str
    label: str
    kind: str            # float | int | opt_float | opt_int | bool | choice
    group: str           # fusion | weights | quality | ranking
    lo: float = 0.0
    hi: float = 1.0
    step: float = 0.05
    options: tuple = ()
    help: str = ""

    @property
    def key(self) -> str:
        return TUNE_KNOB_PREFIX + self.path


KNOB_GROUPS = {
    "fusion": "Fusion",
    "weights": "Path weights",
    "quality": "Confidence & vitality",
    "ranking": "Candidates & ranking",
}


def profile_prefix(config: PipelineConfig, edit_profile: str | None) -> str:
    """Where the adaptive weights live: the fixed profile, or a routed one."""
    names = [p.name for p in config.params.profiles]
    if config.params.intent_router and edit_profile in names:
        return f"adaptive.profiles.{edit_profile}"
    return "adaptive.profile"


def knobs_for(config: PipelineConfig, edit_profile: str | None = None, pool_depth: int = DEFAULT_POOL_DEPTH
              ) -> list[Knob]:
    """Every knob that matters for ``config``'s fusion, mapped to its params."""
    f = config.fusion
    out = [Knob("fusion", "Fusion method", "choice", "fusion", options=tuple(FUSIONS),
                help="vector/bm25: single path · rrf: reciprocal rank · weighted: score union · "
                     "adaptive: seed 001 profiles · salience: seed 000")]
    if f in ("rrf", "salience"):
        out.append(Knob(f"{f}.rrf_k", "rrf_k", "float", "fusion", 1.0, 200.0, 1.0,
                        help="RRF constant: Σ w / (rrf_k + rank + 1)"))
    if f == "weighted":
        out.append(Knob("weighted.text_norm", "BM25 normalisation", "choice", "fusion", options=TEXT_NORMS))
    if f == "adaptive":
        out.append(Knob("adaptive.intent_router", "Intent router (profile per query)", "bool", "fusion"))
        out.append(Knob("adaptive.half_life_days", "Half-life (days)", "float", "fusion", 1.0, 365.0, 1.0,
                        help="Recency decay of S_time when the query names no time window"))
    if f == "salience":
        out.append(Knob("salience.half_life_days", "Half-life (days)", "float", "fusion", 1.0, 365.0, 1.0))
    w = dict(kind="float", group="weights", lo=0.0, step=0.05)
    if f == "rrf":
        out += [Knob("rrf.w_dense", "Dense weight", hi=3.0, **w), Knob("rrf.w_sparse", "Sparse weight", hi=3.0, **w)]
    elif f == "weighted":
        out += [Knob("weighted.vector_weight", "Dense weight", hi=2.0, **w),
                Knob("weighted.text_weight", "Sparse weight", hi=2.0, **w)]
    elif f == "adaptive":
        p = profile_prefix(config, edit_profile)
        out += [Knob(f"{p}.w_dense", "Dense weight", hi=2.0, **w), Knob(f"{p}.w_sparse", "Sparse weight", hi=2.0, **w),
                Knob(f"{p}.w_time", "Time weight", hi=2.0, **w), Knob(f"{p}.w_graph", "Graph weight", hi=2.0, **w)]
        q = f"{p}.quality"
        t = dict(kind="float", group="quality", step=0.05)
        out += [
            Knob(f"{q}.conf_high", "Confidence high ≥", lo=0.0, hi=1.0, **t),
            Knob(f"{q}.conf_low", "Confidence low <", lo=0.0, hi=1.0, **t),
            Knob(f"{q}.conf_high_factor", "× high confidence", lo=0.0, hi=2.0, **t),
            Knob(f"{q}.conf_mid_factor", "× mid confidence", lo=0.0, hi=2.0, **t),
            Knob(f"{q}.conf_low_factor", "× low confidence", lo=0.0, hi=2.0, **t),
            Knob(f"{q}.vit_high", "Vitality high >", "float", "quality", 0.0, 100.0, 1.0),
            Knob(f"{q}.vit_low", "Vitality low <", "float", "quality", 0.0, 100.0, 1.0),
            Knob(f"{q}.vit_high_factor", "× high vitality", lo=0.0, hi=2.0, **t),
            Knob(f"{q}.vit_mid_factor", "× mid vitality", lo=0.0, hi=2.0, **t),
            Knob(f"{q}.vit_low_factor", "× low vitality", lo=0.0, hi=2.0, **t),
        ]
    elif f == "salience":
        out += [Knob("salience.w_semantic", "Semantic weight (RRF)", hi=2.0, **w),
                Knob("salience.w_recency", "Time weight (recency)", hi=2.0, **w),
                Knob("salience.w_reinforcement", "Reinforcement weight", hi=2.0, **w),
                Knob("salience.w_access", "Access weight", hi=2.0, **w)]
    r = "ranking"
    out += [
        Knob("max_results", "Max results", "int", r, 1, 20, 1),
        Knob("candidate_multiplier", "Candidate multiplier", "float", r, 1.0, 10.0, 0.5,
             help=f"per-path depth = ⌈max results × multiplier⌉ (pool holds {pool_depth})"),
        Knob("depth", "Per-path depth (overrides multiplier)", "opt_int", r, 1, pool_depth, 1),
        Knob("min_score", "Min score", "opt_float", r, -1e9, 1e9, 0.01, help="blank = no threshold"),
        Knob("token_budget", "Token budget", "opt_int", r, 1, 1_000_000, 100, help="blank = unlimited"),
        Knob("fast_path", "Fast path (file lookups)", "bool", r),
        Knob("timeline_path", "Timeline path (recent journal)", "bool", r),
    ]
    return out


def knob_value(config: PipelineConfig, knob: Knob):
    if knob.path == "fusion":
        return config.fusion
    value = get_param(config, knob.path)
    if knob.kind == "float":
        return float(value)
    if knob.kind == "int":
        return int(value)
    if knob.kind == "opt_float":
        return None if value is None else float(value)
    return value


def apply_knob(config: PipelineConfig, knob: Knob, value, pool_depth: int) -> PipelineConfig:
    """``config`` with one knob set; ValueError (with the engine's message) when invalid."""
    if knob.kind in ("int", "opt_int") and value is not None:
        value = int(value)
    if knob.kind in ("float", "opt_float") and value is not None:
        value = float(value)
    new = with_fusion(config, value) if knob.path == "fusion" else with_param(config, knob.path, value)
    if new.path_depth > pool_depth:
        raise ValueError(f"per-path depth {new.path_depth} exceeds the candidate pool ({pool_depth}); "
                         "lower max results, the multiplier or the depth")
    return new


def tune_config() -> PipelineConfig:
    st.session_state.setdefault(TUNE_SOURCE, "rrf")
    if TUNE_CONFIG not in st.session_state:
        st.session_state[TUNE_CONFIG] = resolve_config(st.session_state[TUNE_SOURCE])
    return st.session_state[TUNE_CONFIG]


def set_tune_config(config: PipelineConfig, source: str | None = None) -> None:
    """Hand a config to Tune (from Sweep, Profiles, Reports…): knob widgets re-read it."""
    st.session_state[TUNE_CONFIG] = config
    if source is not None:
        st.session_state[TUNE_SOURCE] = source
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(TUNE_KNOB_PREFIX)]:
        del st.session_state[key]


def is_tuned(config: PipelineConfig) -> bool:
    try:
        return config != resolve_config(st.session_state.get(TUNE_SOURCE, config.name))
    except ValueError:
        return True


# ---- rankings, movement and breakdowns --------------------------------------------------------

def movement(doc_ids: Sequence[str], baseline_ids: Sequence[str]) -> list[str]:
    """Rank change of each document against the baseline: ▲2, ▼1, = or new."""
    where = {d: i for i, d in enumerate(baseline_ids)}
    out = []
    for rank, doc in enumerate(doc_ids):
        if doc not in where:
            out.append("new")
        elif where[doc] > rank:
            out.append(f"▲{where[doc] - rank}")
        elif where[doc] < rank:
            out.append(f"▼{rank - where[doc]}")
        else:
            out.append("=")
    return out


def grade_stars(grade) -> str:
    if grade is None:
        return ""
    return "★" * int(grade) if grade > 0 else "✗"


def ranking_frame(response: Response, judgments: dict[str, int] | None,
                  baseline: Response | None = None) -> pd.DataFrame:
    """One row per result: rank, movement, doc, grade, score, multipliers, text, path."""
    judgments = judgments or {}
    ids = [r.id for r in response.results]
    moves = movement(ids, [r.id for r in baseline.results]) if baseline is not None else [""] * len(ids)
    rows = []
    for result, move in zip(response.results, moves):
        row = {
            "#": result.rank + 1,
            "Δ": move,
            "doc": result.id,
            "grade": grade_stars(judgments.get(result.id)),
            "score": result.score,
        }
        for name in ("x confidence", "x vitality"):
            if name in result.components:
                row["×conf" if "conf" in name else "×vit"] = result.components[name]
        row["text"] = (result.title + " — " if result.title else "") + result.text.replace("\n", " ")
        row["path"] = result.path
        rows.append(row)
    columns = ["#", "Δ", "doc", "grade", "score", "×conf", "×vit", "text", "path"]
    frame = pd.DataFrame(rows)
    return frame[[c for c in columns if c in frame.columns]] if rows else pd.DataFrame(columns=columns[:5])


RANKING_COLUMNS = {
    "#": st.column_config.NumberColumn("#", width=36, format="%d"),
    "Δ": st.column_config.TextColumn("Δ", width=52, help="rank change vs the baseline (▲ up, ▼ down, new)"),
    "doc": st.column_config.TextColumn("doc", width="small"),
    "grade": st.column_config.TextColumn("grade", width=56, help="qrels grade (★ per level, ✗ judged not relevant)"),
    "score": st.column_config.NumberColumn("score", format="%.4f", width="small"),
    "×conf": st.column_config.NumberColumn("×conf", format="%.2f", width=56, help="confidence multiplier F_conf"),
    "×vit": st.column_config.NumberColumn("×vit", format="%.2f", width=56, help="vitality multiplier F_vit"),
    "text": st.column_config.TextColumn("text", width="large"),
    "path": st.column_config.TextColumn("path", width="small"),
}


def style_movement(frame: pd.DataFrame):
    """Colour the Δ column: up green, down red, new blue."""
    def colour(value):
        text = str(value)
        if text.startswith("▲"):
            return "color: #1a7f37; font-weight: 600"
        if text.startswith("▼"):
            return "color: #cf222e; font-weight: 600"
        if text == "new":
            return "color: #0969da; font-weight: 600"
        return "color: #8c959f"
    if "Δ" not in frame.columns or frame.empty:
        return frame
    return frame.style.map(colour, subset=["Δ"])


def components_frame(response: Response) -> pd.DataFrame:
    """Long table (label, component, value) of each result's additive score components."""
    rows = []
    for result in response.results:
        label = f"#{result.rank + 1} {result.id}"
        for name, value in result.components.items():
            if not name.startswith("x "):
                rows.append({"result": label, "component": name, "value": value})
    return pd.DataFrame(rows, columns=["result", "component", "value"])


def components_figure(response: Response, height_per_row: int = 26) -> go.Figure:
    """Stacked horizontal bars: each result's score split into its components."""
    frame = components_frame(response)
    order = [f"#{r.rank + 1} {r.id}" for r in response.results]
    fig = go.Figure()
    for name in dict.fromkeys(frame["component"]):
        part = frame[frame["component"] == name]
        fig.add_bar(y=part["result"], x=part["value"], name=name, orientation="h",
                    marker_color=COMPONENT_COLOURS.get(name), hovertemplate=f"{name}: %{{x:.4f}}<extra></extra>")
    fig.update_layout(
        barmode="relative", height=max(160, 60 + height_per_row * len(order)), showlegend=True,
        margin=dict(l=8, r=8, t=8, b=8), legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0),
        yaxis=dict(categoryorder="array", categoryarray=order[::-1]),
        xaxis=dict(title=None, tickformat=".3f"),
    )
    return fig


def query_label(c: Candidates, dataset: Dataset, qi: int) -> str:
    text = c.query_texts[qi]
    return f"{c.query_ids[qi]} · {text[:70]}{'…' if len(text) > 70 else ''}"


# ---- significance (harness: eval.compare) -----------------------------------------------------

TUNE_PERMUTATIONS = 2_000   # per metric on every knob change (the harness default, 10 000, costs ~12 ms each)


def counted_values(ev: LiveRun, metric: str) -> np.ndarray:
    """Per-query values over the counted queries (judged ones, missing ones as 0), as eval.sweep does."""
    values = ev.values[metric][ev.judged.judged]
    return np.concatenate([values, np.zeros(ev.judged.n_missing)]) if ev.judged.n_missing else values


def compare_metrics(base: LiveRun, cand: LiveRun, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Per metric: value, baseline, delta and p — Fisher's randomization test (``eval.compare``),
    Holm-corrected over the metrics shown, as ``rwb eval`` does over its family."""
    rows, raw = [], []
    for name in metrics:
        a, b = counted_values(base, name), counted_values(cand, name)
        raw.append(randomization_test(a, b, TUNE_PERMUTATIONS, seed=42) if len(a) else float("nan"))
        rows.append({"metric": name, "value": cand.means[name], "baseline": base.means[name],
                     "delta": cand.means[name] - base.means[name], "n": len(a)})
    finite = [p for p in raw if np.isfinite(p)]
    adjusted = iter(holm(finite))
    for row, p in zip(rows, raw):
        row["p"] = next(adjusted) if np.isfinite(p) else float("nan")
    return pd.DataFrame(rows, columns=["metric", "value", "baseline", "delta", "p", "n"])


# ---- Evaluate: the harness's ranx evaluation and significance ----------------------------------

@st.cache_resource(max_entries=16, show_spinner="Evaluating with ranx and testing significance…")
def harness_evaluation(path: str, stamp: tuple, embedder: str, qrels_rev: tuple,
                       configs: tuple[tuple[str, PipelineConfig], ...], baseline: str
                       ) -> tuple[HarnessEvaluation, Significance | None]:
    """``eval.evaluate.evaluate_pipelines`` + ``eval.compare.compare_to_baseline`` (Fisher, Holm)."""
    dataset = get_dataset(path, stamp)
    qrels, _ = get_judged(path, stamp, embedder, qrels_rev)
    evaluation = evaluate_pipelines(get_pool(path, stamp, embedder), qrels, dict(configs), METRICS,
                                    intent_of(dataset.queries))
    significance = compare_to_baseline(evaluation, qrels, baseline) if len(configs) > 1 else None
    return evaluation, significance


def evaluate_labels(ws: Workspace, labelled: dict[str, PipelineConfig]) -> tuple[HarnessEvaluation, Significance | None]:
    """Evaluate the baseline (first, under its own name) and ``labelled`` configs."""
    base = ws.baseline
    configs = {base.name: base}
    for label, config in labelled.items():
        if config != base:
            configs.setdefault(label, config)
    return harness_evaluation(ws.path, ws.stamp, ws.embedder, ws.qrels_rev, tuple(configs.items()), base.name)


def fmt_p(p: float) -> str:
    if p is None or not np.isfinite(p):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def metrics_table(evaluation: HarnessEvaluation, significance: Significance | None,
                  metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Rows: pipelines; per metric its mean with ▲/▼ where significantly better/worse; the primary
    metric's delta, corrected p and wins/ties/losses against the baseline."""
    rows = []
    for label, means in evaluation.results.items():
        cells = significance.cells.get(label, {}) if significance else {}
        is_base = significance is not None and label == significance.baseline
        row = {"pipeline": f"{label} (baseline)" if is_base else label}
        for name in metrics:
            cell = cells.get(name)
            row[metric_label(name)] = f"{means[name]:.3f} {cell.mark if cell else ''}".rstrip()
        cell = cells.get(PRIMARY)
        row[f"Δ {metric_label(PRIMARY)}"] = cell.delta if cell else 0.0
        row["p (Holm)"] = fmt_p(cell.p_adjusted) if cell else "—"
        row["W/T/L"] = f"{cell.wins}/{cell.ties}/{cell.losses}" if cell else "—"
        rows.append(row)
    return pd.DataFrame(rows)


def style_marks(frame: pd.DataFrame):
    def colour(value):
        text = str(value)
        if text.endswith("▲"):
            return "color: #1a7f37; font-weight: 600"
        if text.endswith("▼"):
            return "color: #cf222e; font-weight: 600"
        return ""

    def delta_colour(value):
        if isinstance(value, (int, float)) and np.isfinite(value) and abs(value) > 1e-12:
            return "color: #1a7f37" if value > 0 else "color: #cf222e"
        return "color: #8c959f"
    cols = [metric_label(m) for m in METRICS if metric_label(m) in frame.columns]
    styled = frame.style.map(colour, subset=cols)
    delta_col = f"Δ {metric_label(PRIMARY)}"
    if delta_col in frame.columns:
        styled = styled.map(delta_colour, subset=[delta_col])
    return styled


def per_intent_frame(evaluation: HarnessEvaluation, metric: str = PRIMARY) -> pd.DataFrame:
    rows = []
    counts = pd.Series(list(evaluation.intents.values())).value_counts().to_dict()
    for label, by_intent in evaluation.per_intent.items():
        for intent, values in by_intent.items():
            rows.append({"intent": intent, "pipeline": label, metric: values[metric], "queries": counts.get(intent, 0)})
    return pd.DataFrame(rows, columns=["intent", "pipeline", metric, "queries"])


def per_query_frame(evaluation: HarnessEvaluation, baseline: str, candidate: str,
                    metric: str = PRIMARY) -> pd.DataFrame:
    text_of = dict(zip(evaluation.candidates.query_ids, evaluation.candidates.query_texts))
    frame = pd.DataFrame({
        "query": list(evaluation.query_ids), "text": [text_of.get(q, "") for q in evaluation.query_ids],
        "intent": [evaluation.intents[q] for q in evaluation.query_ids],
        "baseline": evaluation.values(baseline, metric), "candidate": evaluation.values(candidate, metric),
    })
    frame["delta"] = frame["candidate"] - frame["baseline"]
    return frame


# ---- Sweep: the harness's grid/random search with cross-validation (eval.sweep) ----------------

def param_spec(config: PipelineConfig, name: str, lo: float, hi: float, steps: int) -> ParamSpec:
    """``lo … hi`` in ``steps`` evenly spaced values (whole numbers for integer parameters)."""
    integer = isinstance(get_param(config, name), int) and not isinstance(get_param(config, name), bool)
    lo, hi = (float(min(lo, hi)), float(max(lo, hi)))
    if integer:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
        step = max(1.0, float(round((hi - lo) / max(1, steps - 1))))
    else:
        step = (hi - lo) / (steps - 1) if steps > 1 and hi > lo else 1.0
    return ParamSpec(name, lo, hi, step, integer)


def run_harness_sweep(ws: Workspace, base: PipelineConfig, specs: Sequence[ParamSpec], metric: str,
                      random: int | None, folds: int, seed: int = 0,
                      progress: Callable[[int, int], None] | None = None) -> SweepResult:
    """``eval.sweep.sweep`` on the pool with the workbench's merged qrels."""
    qrels, _ = ws.judged()
    return harness_sweep(ws.pool(), qrels, base, Space(tuple(specs)), metric, random, folds, seed, progress)


def sweep_frame(result: SweepResult) -> pd.DataFrame:
    frame = pd.DataFrame(result.points, columns=list(result.space.names))
    frame[result.metric] = result.scores
    return frame


def folds_frame(result: SweepResult) -> pd.DataFrame:
    return pd.DataFrame([{"fold": f.fold + 1, "train": f.train_mean, "held-out": f.test_mean,
                          "train queries": f.n_train, "held-out queries": f.n_test,
                          "picked": ", ".join(f"{k}={v:g}" for k, v in f.best.items())} for f in result.folds])


def sweepable_knobs(config: PipelineConfig, edit_profile: str | None = None) -> list[Knob]:
    """Tune's numeric knobs that the harness can sweep (labels and default ranges come from Tune)."""
    allowed = set(harness_sweepable(config))
    return [k for k in knobs_for(config, edit_profile) if k.kind in ("float", "int") and k.path in allowed]


# ---- experiments, profiles, reports (harness glue) --------------------------------------------

def log_experiment(ws: Workspace, config: PipelineConfig, means: dict[str, float], source: str,
                   baseline: PipelineConfig | None = None, baseline_means: dict[str, float] | None = None) -> dict:
    record = {
        "name": config.name, "source": source, "dataset": ws.dataset.name, "dataset_path": ws.path,
        "fingerprint": ws.fingerprint(), "embedder": ws.embedder, "config": to_toml(config),
        "metrics": {k: round(float(v), 6) for k, v in means.items()},
        "queries": int(ws.judged()[1].n_judged),
    }
    if baseline is not None and baseline_means is not None:
        record["baseline"] = baseline.name
        record["baseline_metrics"] = {k: round(float(v), 6) for k, v in baseline_means.items()}
    return ExperimentStore().add(record)


def experiments_frame() -> pd.DataFrame:
    rows = []
    for i, record in enumerate(ExperimentStore().list()):
        row = {"#": i, "time": record.get("time", ""), "name": record.get("name", ""),
               "source": record.get("source", ""), "dataset": record.get("dataset", ""),
               "fingerprint": str(record.get("fingerprint", ""))[:10], "embedder": record.get("embedder", "")}
        for name in METRICS:
            row[metric_label(name)] = (record.get("metrics") or {}).get(name)
        rows.append(row)
    return pd.DataFrame(rows)


def experiment_record(index: int) -> dict:
    return ExperimentStore().list()[index]


def save_profile(name: str, config: PipelineConfig) -> Path:
    """Save under ``name`` (the config is renamed to it)."""
    return ProfileStore().save(name, dataclasses.replace(config, name=name))


def build_report(ws: Workspace, labelled: dict[str, PipelineConfig], sweep: SweepResult | None = None
                 ) -> dict[str, Path]:
    """The harness's offline report (``eval.report.write_report``: report.html, .md, .json) of the
    chosen pipelines against the baseline — with the token-budget metric, the intent router's
    evaluation and, when given, a sweep — written under ``$RWB_HOME/reports/``."""
    evaluation, significance = evaluate_labels(ws, labelled)
    qrels, _ = ws.judged()
    c = ws.pool()
    tokens = document_tokens(ws.dataset.documents)
    budget = {label: budget_recall(c, qrels, run.ranking, DEFAULT_BUDGET, tokens)
              for label, run in evaluation.runs.items()}
    labels = {q.id: q.intent for q in ws.dataset.queries}
    router = None
    if any(i in INTENT_TO_PROFILE for i in labels.values()):
        router = evaluate_router(c, qrels, labels, "seed-adaptive", PRIMARY)
    out = rwb_home() / "reports" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', ws.dataset.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    return write_report(out, evaluation, significance, budget, router, sweep)


def merged_qrels_tsv(qrels: dict[str, dict[str, int]]) -> str:
    lines = ["query-id\tcorpus-id\tscore"]
    for qid in sorted(qrels):
        for did in sorted(qrels[qid]):
            lines.append(f"{qid}\t{did}\t{qrels[qid][did]}")
    return "\n".join(lines) + "\n"


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


def prepare_dataset(path: str, embedder: str, progress: Callable[[str, int, int], None]) -> Candidates | None:
    """Validate a dataset folder, build its indexes and candidate pool (with progress)."""
    dataset = load_dataset(resolve_path(path))
    open_index(dataset, embedder, progress=progress)
    if dataset.queries:
        return load_pool(dataset, embedder, DEFAULT_POOL_DEPTH, progress=progress)
    return None


def home_dir() -> Path:
    return rwb_home()


# ---- data browsing -------------------------------------------------------------------------------

@st.cache_resource(max_entries=8, show_spinner=False)
def corpus_frame(path: str, stamp: tuple) -> pd.DataFrame:
    """One row per document (cached: filter into new frames, never edit in place)."""
    from retrieval.candidates import token_count

    docs = get_dataset(path, stamp).documents
    return pd.DataFrame([{
        "id": d.id, "title": d.title, "text": d.text, "path": d.path, "type": d.memory_type, "scope": d.scope,
        "project": d.project, "group": d.group,
        "created": d.created_at.strftime("%Y-%m-%d %H:%M") if d.created_at else "",
        "updated": d.updated_at.strftime("%Y-%m-%d %H:%M") if d.updated_at else "",
        "confidence": d.confidence, "vitality": d.vitality, "reinforcement": d.reinforcement,
        "access": d.access_count, "tokens": token_count(d.text), "related": ", ".join(d.related),
    } for d in docs])


@st.cache_resource(max_entries=8, show_spinner=False)
def queries_frame(path: str, stamp: tuple) -> pd.DataFrame:
    from retrieval.routing import fast_path_target, route_intent, triggers_timeline

    dataset = get_dataset(path, stamp)
    rows = []
    for q in dataset.queries:
        row = {"id": q.id, "text": q.text, "intent": q.intent, "lang": q.lang,
               "judged": len(dataset.qrels.get(q.id, {})), "routed profile": route_intent(q.text),
               "fast path": fast_path_target(q.text) or "", "timeline": triggers_timeline(q.text)}
        row.update({k: str(v) for k, v in q.extra.items()})
        rows.append(row)
    return pd.DataFrame(rows)


def filter_frame(frame: pd.DataFrame, text: str = "", **equals: Sequence[str]) -> pd.DataFrame:
    """Rows whose text columns contain ``text`` (case-insensitive) and whose columns are in ``equals``."""
    mask = pd.Series(True, index=frame.index)
    if text:
        needle = text.lower()
        hay = frame.select_dtypes(include=["object", "string"]).astype(str).agg(" ".join, axis=1).str.lower()
        mask &= hay.str.contains(needle, regex=False)
    for column, allowed in equals.items():
        if allowed:
            mask &= frame[column].isin(list(allowed))
    return frame[mask]


def judgments_frame(ws: Workspace, query_id: str) -> pd.DataFrame:
    """A query's judgments: dataset grade, workbench grade and the grade in effect."""
    text_of = {d.id: d.text for d in ws.dataset.documents}
    original = ws.dataset.qrels.get(query_id, {})
    merged = ws.qrels().get(query_id, {})
    overlay_docs = {h["doc"] for h in ws.judgments.history() if h["query"] == query_id}
    rows = []
    for doc in sorted(set(original) | set(merged) | overlay_docs):
        rows.append({"doc": doc, "dataset": original.get(doc), "in effect": merged.get(doc, 0),
                     "changed": "✎" if merged.get(doc, 0) != original.get(doc, 0) else "",
                     "text": text_of.get(doc, "")})
    return pd.DataFrame(rows, columns=["doc", "dataset", "in effect", "changed", "text"])


def history_frame(ws: Workspace) -> pd.DataFrame:
    rows = [{"time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(h.get("time", 0))), "query": h["query"],
             "doc": h["doc"], "before": "—" if h["before"] is None else str(h["before"]), "after": str(h["after"]),
             "author": h.get("author", "")} for h in ws.judgments.history()]
    return pd.DataFrame(rows[::-1], columns=["time", "query", "doc", "before", "after", "author"])
