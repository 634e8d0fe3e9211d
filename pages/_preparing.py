"""A dataset's index and candidate pool built on a page, with progress that names each step and
what it builds for (the embedding model and the BM25 analyzer): the pool every page needs
(``require_pool``) and the builds of the Data page's import and Prepare, and where an import goes
by default (``imported_root``: under ``$RWB_HOME``, outside the checkout) and is listed from."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from eval.stores.pool import STEP_NAMES, pool_path, prepare
from pages._markup import md
from pages._state import Workspace, resolve_path
from retrieval.index import rwb_home
from retrieval.bm25 import DEFAULT_ANALYZER
from retrieval.candidates import DEFAULT_POOL_DEPTH, Candidates
from retrieval.dataset import load_dataset
from retrieval.embedders import model_label


def imported_root() -> Path:
    """Where the Data page imports a dataset by default: ``$RWB_HOME/imported/<format>``."""
    return rwb_home() / "imported"


def imported_datasets() -> list[str]:
    """Every dataset folder under ``imported_root`` (the sidebar lists them beside ``datasets/``)."""
    root = imported_root()
    try:
        return sorted(str(p) for p in root.iterdir() if (p / "corpus.jsonl").is_file()) if root.is_dir() else []
    except OSError:                 # an unreadable home: nothing listed (the pages name the problem)
        return []


def require_pool(ws: Workspace) -> Candidates:
    """The candidate pool of the query set, or an explanation and ``st.stop()``.

    When the pool is not on disk yet for this dataset, embedder and analyzer (a new dataset, or
    the embedder or analyzer just switched), it is built here with a progress bar — encoding
    the corpus, indexing it and retrieving every query takes seconds to minutes — instead of
    behind a bare spinner."""
    if not ws.has_queries:
        st.info(f"Dataset **{md(ws.dataset.name)}** has no queries: add a `queries.jsonl` to evaluate it. "
                "The Data page still browses its corpus.")
        st.stop()
    try:
        if not pool_path(ws.dataset, ws.embedder, DEFAULT_POOL_DEPTH, ws.analyzer).is_file():
            holder = st.empty()                  # the status goes once the pool is there
            using = f"{model_label(ws.embedder)} · {ws.analyzer}"
            with holder.status(f"Preparing {md(ws.dataset.name)} for {md(using)}: loading the embedding model…",
                               expanded=True) as status:
                bar = st.progress(0.0)
                prepare_dataset(ws.path, ws.embedder, named_progress(bar, using, status), ws.analyzer)
            holder.empty()
        return ws.pool()
    except (ValueError, RuntimeError, OSError) as error:
        st.error(f"Cannot retrieve candidates for **{md(ws.dataset.name)}**: {md(error)}")
        st.stop()


def named_progress(bar, using: str, status=None) -> Callable[[str, int, int], None]:
    """A progress callback that names the step (``eval.stores.pool.STEP_NAMES``) and what it
    builds for (``using``: the model, ``retrieval.embedders.model_label``, and the analyzer) on
    ``bar`` and in ``status``'s label if given."""
    using = md(using)

    def progress(stage: str, done: int, total: int) -> None:
        step = STEP_NAMES.get(stage, stage)
        if status is not None:
            status.update(label=f"{step}: {done:,}/{total:,} · {using}")
        bar.progress(min(1.0, done / max(1, total)), text=f"{step}: {done:,}/{total:,} · {using}")
    return progress


def prepare_dataset(path: str, embedder: str, progress: Callable[[str, int, int], None],
                    analyzer: str = DEFAULT_ANALYZER) -> Candidates | None:
    """Validate a dataset folder, build its indexes and candidate pool with the BM25 ``analyzer``
    (``eval.stores.pool.prepare``)."""
    return prepare(load_dataset(resolve_path(path)), embedder, progress, analyzer=analyzer, needed_only=True)[1]
