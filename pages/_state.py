"""Session state and cached handles: the workspace a page works on.

Heavy objects (dataset, index, candidate pool, judgments) load once per process with
``st.cache_resource`` and are never mutated; their keys are plain strings plus a cheap
*stamp* (mtime and size of the dataset files or of the judgment store), so an edited
dataset or a new judgment is picked up at once. Whole-query-set evaluations are kept in one
small LRU keyed by the frozen configuration itself (``live_evaluation``), under a lock: every
session's script runs on its own thread of the one server process. Every page initialises the shared keys
with ``init_shared_state`` and so also runs on its own.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import streamlit as st

from eval.stores.configs import resolve_config
from eval.metrics.measure import DEFAULT_METRICS, Judged, judge
from eval.experiments.live import LiveRun, LiveRuns, evaluate_config
from eval.metrics.definitions import metric_label  # noqa: F401 (pages read it here)
from eval.experiments.views import display_label as format_label  # noqa: F401
from eval.stores.pool import load_pool
from eval.stores.experiments import ExperimentStore
from eval.stores.inputs import inputs_of, pipeline_hash
from eval.stores.judgments import (Judgments, JudgmentStore, default_rater, effective_qrels, judgment_sources,  # noqa: F401
                                   judgments_version)
from retrieval.bm25 import ANALYZERS, DEFAULT_ANALYZER
from retrieval.candidates import DEFAULT_POOL_DEPTH, Candidates, build_candidates, doc_quality  # noqa: F401
from retrieval.dataset import Dataset, DatasetError, Query, folder_stamp, load_dataset
from retrieval.embedders import EMBEDDERS as REGISTERED_EMBEDDERS
from retrieval.index import IndexHandle, open_index, rwb_home
from retrieval.pipeline import PipelineConfig, from_toml


ROOT = Path(__file__).resolve().parent.parent
DATASETS_DIR = ROOT / "datasets"
DEFAULT_DATASET = "datasets/devmem"
EMBEDDERS = tuple(REGISTERED_EMBEDDERS)   # the registry's order: minilm first, the fallback
ANALYZER_NAMES = tuple(ANALYZERS)             # the BM25 analyzers (retrieval.bm25): bigram, unigram, jieba
METRICS: tuple[str, ...] = tuple(DEFAULT_METRICS)       # ndcg@5, recall@5, mrr@5, precision@5, hit_rate@5
PRIMARY = "ndcg@5"
OTHER_PATH = "Other folder…"
GRADES = (0, 1, 2, 3)
GRADE_LABELS = {0: "0 · not relevant", 1: "1 · related", 2: "2 · relevant", 3: "3 · exact answer"}

# shared (sidebar) session keys
K_DATASET = "rwb_dataset"
K_DATASET_TYPED = "rwb_dataset_typed"
K_EMBEDDER = "rwb_embedder"
K_EMBEDDER_OF = "rwb_embedder_of"        # dataset path → the embedder last chosen for it
K_EMBEDDER_FOR = "rwb_embedder_for"      # the dataset path K_EMBEDDER is the choice of
K_ANALYZER = "rwb_analyzer"              # the BM25 analyzer: each has its own index and pool
K_ANALYZER_OF = "rwb_analyzer_of"        # dataset path → the analyzer last chosen for it
K_ANALYZER_FOR = "rwb_analyzer_for"      # the dataset path K_ANALYZER is the choice of
K_BASELINE = "rwb_baseline"
K_JUDGMENTS = "rwb_judgments"     # explicit | implicit | both (eval.stores.judgments.SOURCES)
K_RUN_STARTED = "rwb_run_started"
K_RATER = "rwb_rater"             # who grades on the pages: each grade's rater (default the OS user)
TUNE_KNOB_PREFIX = "tune_k_"
TUNE_KNOBS_DRAWN = "tune_knobs_drawn"     # knob paths the last run drew (pages/_knobs.render)


# ---- datasets and sidebar state ------------------------------------------------------------

def env_dataset() -> str:
    return os.environ.get("RWB_DATASET", DEFAULT_DATASET)


def resolve_path(path: str) -> Path:
    """A dataset path as typed: absolute, relative to the working folder, or to the repository
    (inside RWB_DATA_ROOT when remote use is allowed: ``retrieval.access.confine``)."""
    from retrieval.access import confine

    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return confine(candidate)
    return confine(ROOT / candidate)


def dataset_choices() -> list[str]:
    """The env default first, then every folder under ``datasets/`` holding a corpus, then every
    imported one (``pages._preparing.imported_datasets``: ``$RWB_HOME/imported``)."""
    from pages._preparing import imported_datasets

    found = []
    if DATASETS_DIR.is_dir():
        found = sorted(f"datasets/{p.name}" for p in DATASETS_DIR.iterdir() if (p / "corpus.jsonl").is_file())
    return list(dict.fromkeys([env_dataset(), *found, *imported_datasets()]))


def init_shared_state() -> None:
    """Defaults for the sidebar keys, so every page also runs on its own."""
    from pages._navigation import ensure_navigation
    from pages._url import restore_workspace

    ensure_navigation()
    restore_workspace()                          # a link names the workspace (pages/_url.py writes it)
    st.session_state.setdefault(K_DATASET_TYPED, "")
    st.session_state.setdefault(K_EMBEDDER, EMBEDDERS[0])
    st.session_state.setdefault(K_ANALYZER, DEFAULT_ANALYZER)
    st.session_state.setdefault(K_BASELINE, "vector")
    st.session_state.setdefault(K_JUDGMENTS, "explicit")
    st.session_state.setdefault(K_RATER, default_rater())


def rater() -> str | None:
    """The rater the pages grade as (the Data page's picker; the OS user until one is typed)."""
    return (st.session_state.get(K_RATER) or "").strip() or None


def _sync_choice(path: str, key: str, of_key: str, for_key: str, choices: tuple[str, ...],
                 default: Callable[[], str]) -> None:
    """Make ``key`` the choice of the dataset at ``path``: the one last chosen for it in this
    session (``of_key``: path → choice), else ``default()``, so one dataset's choice is never
    carried to the next (``for_key``: the path ``key`` is the choice of)."""
    chosen = st.session_state.setdefault(of_key, {})
    if st.session_state.get(for_key) != path:
        name = chosen.get(path)
        if name is None:
            try:
                name = default()
            except (DatasetError, OSError, ValueError):  # the page shows the problem itself
                name = choices[0]
        st.session_state[key] = name if name in choices else choices[0]
        st.session_state[for_key] = path
    chosen[path] = st.session_state[key]


def sync_embedder(path: str) -> None:
    """Make ``K_EMBEDDER`` the embedder of the dataset at ``path``: the one last chosen for it in
    this session, else its default (``retrieval.embedders.default_embedder``: the dataset's
    language). Called before the sidebar's picker is drawn (and by ``workspace``, for a page
    run on its own)."""
    _sync_choice(path, K_EMBEDDER, K_EMBEDDER_OF, K_EMBEDDER_FOR, EMBEDDERS, lambda: embedder_of(path))


def sync_analyzer(path: str) -> None:
    """Make ``K_ANALYZER`` the BM25 analyzer of the dataset at ``path``: the one last chosen for
    it in this session, else the command line's default (``DEFAULT_ANALYZER``, as ``rwb index``
    and ``rwb eval`` without ``--analyzer``). Called beside ``sync_embedder``."""
    _sync_choice(path, K_ANALYZER, K_ANALYZER_OF, K_ANALYZER_FOR, ANALYZER_NAMES, lambda: DEFAULT_ANALYZER)


def embedder_of(path: str) -> str:
    """The embedder the dataset at ``path`` gets on the pages: the one chosen for it in this
    session, else its default (``retrieval.embedders.default_embedder``). An import or a
    Prepare builds with it, so opening the dataset afterwards encodes nothing again."""
    from retrieval.embedders import default_embedder

    name = st.session_state.get(K_EMBEDDER_OF, {}).get(path)
    if name is None:
        try:
            name = default_embedder(get_dataset(path, dataset_stamp(path)))
        except (DatasetError, OSError, ValueError):  # the page shows the problem itself
            name = EMBEDDERS[0]
    return name if name in EMBEDDERS else EMBEDDERS[0]


def dataset_path() -> str:
    init_shared_state()
    pick = st.session_state[K_DATASET]
    if pick == OTHER_PATH:
        return st.session_state[K_DATASET_TYPED].strip() or env_dataset()
    return pick


def dataset_stamp(path: str) -> tuple:
    return folder_stamp(resolve_path(path))


def mark_run_start() -> None:
    """Called first thing in app.py: the footer of Tune reports the whole rerun from here."""
    st.session_state[K_RUN_STARTED] = time.perf_counter()
    st.session_state[TUNE_KNOBS_DRAWN] = set()     # a full run redraws every knob with its value


# ---- cached resources ------------------------------------------------------------------------

def _freeze_heap() -> None:
    """Move everything loaded so far out of the garbage collector's reach (``gc.freeze``):
    later collections no longer walk the model, the pool and the dataset (ENV-NOTES)."""
    gc.collect()
    gc.freeze()


@st.cache_resource(max_entries=8, show_spinner="Loading dataset…")
def get_dataset(path: str, stamp: tuple) -> Dataset:
    return load_dataset(resolve_path(path))


@st.cache_resource(max_entries=4, show_spinner="Opening the index (the embedding model loads once)…")
def get_index(path: str, stamp: tuple, embedder: str, analyzer: str = DEFAULT_ANALYZER) -> IndexHandle:
    handle = open_index(get_dataset(path, stamp), embedder, analyzer=analyzer)
    _freeze_heap()
    return handle


@st.cache_resource(max_entries=4, show_spinner="Retrieving candidates for the query set (once per dataset)…")
def get_pool(path: str, stamp: tuple, embedder: str, analyzer: str = DEFAULT_ANALYZER) -> Candidates:
    pool = load_pool(get_dataset(path, stamp), embedder, DEFAULT_POOL_DEPTH, analyzer=analyzer)
    _freeze_heap()
    return pool


@st.cache_resource(max_entries=4, show_spinner="Fitting the learned intent router (cross-validated over the labelled queries)…")
def get_learned_routes(path: str, stamp: tuple, embedder: str, analyzer: str) -> tuple[str, ...] | None:
    """The pool's cross-validated learned routes (``eval.learning.router.learned_routes``): each
    labelled query routed by a model not trained on it; None when nothing is labelled."""
    from eval.learning.router import LEARNED_PIPELINE, learned_routes

    return learned_routes(get_pool(path, stamp, embedder, analyzer), get_dataset(path, stamp).queries,
                          [LEARNED_PIPELINE], embedder)


def routes_for(path: str, stamp: tuple, embedder: str, analyzer: str,
               config: PipelineConfig) -> tuple[str, ...] | None:
    """The learned routes ``config`` is scored with (``retrieval.pipeline.fuse``'s ``routes``):
    the pool's when it follows the learned router, else None."""
    from eval.learning.router import uses_learned_router

    return get_learned_routes(path, stamp, embedder, analyzer) if uses_learned_router(config) else None


@st.cache_resource(max_entries=16, show_spinner=False)
def get_inputs(path: str, stamp: tuple, embedder: str, analyzer: str, qrels_rev: tuple) -> dict:
    """The content hashes of the workspace's inputs, the pipeline's left "" (``eval.stores.inputs``)."""
    pool = get_pool(path, stamp, embedder, analyzer)
    qrels = get_judged(path, stamp, embedder, analyzer, qrels_rev)[0]
    return inputs_of(get_dataset(path, stamp), qrels, None, pool.embedder, pool.analyzer).to_json()


@st.cache_resource(max_entries=16, show_spinner=False)
def get_judged(path: str, stamp: tuple, embedder: str, analyzer: str, qrels_rev: tuple) -> tuple[dict, Judged]:
    """The judgments every command uses (``effective_qrels``, from the source ``qrels_rev``
    names: ``Workspace.qrels_rev``) and their alignment with the pool."""
    dataset = get_dataset(path, stamp)
    qrels = effective_qrels(dataset, source=qrels_rev[0]).qrels
    return qrels, judge(get_pool(path, stamp, embedder, analyzer), qrels)


@st.cache_resource(max_entries=16, show_spinner=False)
def judgment_count(path: str, stamp: tuple, qrels_rev: tuple) -> int:
    """How many judgments the figures use (the source ``qrels_rev`` names), for the sidebar."""
    return effective_qrels(get_dataset(path, stamp), source=qrels_rev[0]).count


@st.cache_resource(max_entries=32, show_spinner="Retrieving candidates for the free-text query…")
def free_text_candidates(path: str, stamp: tuple, embedder: str, analyzer: str, text: str) -> Candidates:
    handle = get_index(path, stamp, embedder, analyzer)
    return build_candidates(handle, [Query(id="free-text", text=text)], pool_depth=DEFAULT_POOL_DEPTH)


_LIVE = LiveRuns(64)   # every session's script runs on its own thread of this one process


def live_evaluation(path: str, stamp: tuple, embedder: str, analyzer: str, qrels_rev: tuple,
                    config: PipelineConfig) -> LiveRun:
    """A whole query set's evaluation of ``config``, kept in ``_LIVE`` keyed by the frozen config
    itself (Streamlit's argument hashing would pickle the whole config on every call)."""
    def compute() -> LiveRun:
        _, judged = get_judged(path, stamp, embedder, analyzer, qrels_rev)
        return evaluate_config(get_pool(path, stamp, embedder, analyzer), judged, config,
                               routes=routes_for(path, stamp, embedder, analyzer, config))
    return _LIVE.get((path, stamp, embedder, analyzer, qrels_rev, config), compute)


# ---- the workspace: what a page works on ----------------------------------------------------

@dataclass(frozen=True, eq=False)
class Workspace:
    path: str
    stamp: tuple
    embedder: str
    dataset: Dataset
    baseline_label: str
    source: str = "explicit"          # the judgments every figure uses (the sidebar's choice)
    analyzer: str = DEFAULT_ANALYZER  # the BM25 analyzer of the index and pool (the sidebar's choice)

    @property
    def judgments(self) -> JudgmentStore:
        """The one store grades are written to (explicit judgments)."""
        return JudgmentStore(self.dataset)

    @property
    def qrels_rev(self) -> tuple:
        return judgments_version(self.dataset, self.source)

    def judgments_used(self) -> Judgments:
        """The judgments every figure uses; ``.label`` says which they are."""
        return effective_qrels(self.dataset, source=self.source)

    @property
    def baseline(self) -> PipelineConfig:
        return config_or_stop(self.baseline_label)

    @property
    def has_queries(self) -> bool:
        return bool(self.dataset.queries)

    def pool(self) -> Candidates:
        return get_pool(self.path, self.stamp, self.embedder, self.analyzer)

    def judged(self) -> tuple[dict, Judged]:
        return get_judged(self.path, self.stamp, self.embedder, self.analyzer, self.qrels_rev)

    def qrels(self) -> dict:
        return self.judgments_used().qrels

    def log_experiment(self, config: PipelineConfig, means: dict[str, float], source: str,
                       baseline_means: dict[str, float] | None = None) -> dict:
        """Store ``config``'s means on this dataset (and the baseline's) in the experiment log;
        a log that cannot be written (full or read-only ``RWB_HOME``, damaged) is one error."""
        try:
            return ExperimentStore().log(config, means, source, self.dataset, self.path, self.embedder,
                                         self.judged()[1].n_judged, self.baseline, baseline_means,
                                         self.inputs(config))
        except ValueError as error:
            from pages._markup import md

            st.error(f"Experiment not logged: {md(one_line(error))}", icon=":material/error:")
            st.stop()

    def evaluation(self, config: PipelineConfig) -> LiveRun:
        """Kept (``live_evaluation``): for baselines and lists of pipelines."""
        return live_evaluation(self.path, self.stamp, self.embedder, self.analyzer, self.qrels_rev, config)

    def free_text(self, text: str) -> Candidates:
        return free_text_candidates(self.path, self.stamp, self.embedder, self.analyzer, text)

    def fingerprint(self) -> str:
        return self.dataset.fingerprint

    def inputs(self, config: PipelineConfig | None = None) -> dict:
        """The content hashes of what ``config``'s figures here are computed from
        (``eval.stores.inputs``): corpus, queries, judgments, pipeline, embedder, index."""
        base = get_inputs(self.path, self.stamp, self.embedder, self.analyzer, self.qrels_rev)
        return {**base, "pipeline": pipeline_hash(config) if config is not None else ""}


def workspace() -> Workspace:
    """The dataset chosen in the sidebar, loaded; shows the problems and stops when it cannot be."""
    from pages._markup import md

    init_shared_state()
    path = dataset_path()
    try:
        stamp = dataset_stamp(path)
        dataset = get_dataset(path, stamp)
    except DatasetError as error:
        st.error(f"**Cannot load dataset {md(path)}** — {len(error.problems)} problem(s):")
        st.code("\n".join(error.problems[:30]), language=None)
        st.stop()
    except (OSError, ValueError) as error:  # unreadable, or outside RWB_DATA_ROOT in remote use
        st.error(f"Cannot read dataset {md(path)}: {md(one_line(error))}")
        st.stop()
    source = st.session_state[K_JUDGMENTS]
    sync_embedder(path)
    sync_analyzer(path)
    ws = Workspace(path, stamp, st.session_state[K_EMBEDDER], dataset, st.session_state[K_BASELINE],
                   source if source in judgment_sources(dataset) else "explicit", st.session_state[K_ANALYZER])
    try:  # a damaged judgments file (a grade stored as "3") is named once here, not in every widget
        ws.judgments.history()
    except (OSError, ValueError) as error:
        st.error(f"Cannot read the workbench's judgments: {md(one_line(error))}")
        st.stop()
    return ws


def one_line(error: BaseException) -> str:
    """An exception as one line for ``st.error`` (its first line, or its type)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(error).__name__


def config_or_stop(label) -> PipelineConfig:
    """``resolve_config(label)``, or one error line and ``st.stop()`` (a damaged saved profile,
    one whose base loops, a read-only store): every page's picker goes through it."""
    from pages._markup import md

    try:
        return resolve_config(label)
    except (OSError, ValueError) as error:
        st.error(f"Cannot load {md(label)}: {md(one_line(error))}", icon=":material/error:")
        st.stop()


def home_dir() -> Path:
    return rwb_home()


# ---- configs: pipelines, profiles, saved -----------------------------------------------------

def parse_toml(text: str) -> PipelineConfig:
    return from_toml(text, "edited profile")
