"""Shared fixtures for the engine tests.

- ``rwb_home``: a session-wide ``RWB_HOME`` under pytest's tmp dir (indexes and the
  embedding cache of the whole session live there, never in the repository).
- ``tiny`` / ``tiny_index``: the tiny fixture dataset and ONE index of it (real Tantivy,
  real LanceDB, the bundled MiniLM model), built once per session and shared.
- ``make_candidates``: a hand-built candidate table for pure scoring tests (no index).
- ``rwb_here``: the command line run in this process (``eval.cli.main``), as a finished
  process: for tests of what a command does, not of how a process starts or ends.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from retrieval.candidate_table import ROW_COLUMNS, Candidates

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")

# defaults of a hand-built candidate row: a document both paths missed, with neutral metadata
ROW_DEFAULTS = {
    "dense_sim": 0.0, "dense_rank": -1, "bm25_score": 0.0, "bm25_rank": -1, "bm25_all_score": 0.0, "bm25_all_rank": -1,
    "bm25_tech_score": 0.0, "bm25_tech_rank": -1,
    "via_fast": False, "via_timeline": False, "age_days": 0.0, "created_age": 0.0, "in_window": float("nan"), "graph": 0.0,
    "confidence": 1.0, "vitality": 50.0, "reinforcement": 0, "access_count": 0, "token_count": 10,
    "line_start": 0,
}
# dtypes as build_candidates produces them, so hand-built tables behave like real ones
ROW_DTYPES = {
    "query_idx": np.int32, "doc_idx": np.int32, "dense_sim": np.float32, "dense_rank": np.int32,
    "bm25_score": np.float32, "bm25_rank": np.int32, "bm25_all_score": np.float32, "bm25_all_rank": np.int32,
    "bm25_tech_score": np.float32, "bm25_tech_rank": np.int32,
    "via_fast": bool, "via_timeline": bool,
    "age_days": np.float32, "created_age": np.float32, "in_window": np.float32, "graph": np.float32, "confidence": np.float32,
    "vitality": np.float32, "reinforcement": np.float32, "access_count": np.float32,
    "token_count": np.int32, "tie_key": np.int32, "line_start": np.int32,
}


def everything_visible(c):
    return np.ones(c.n_rows, dtype=bool)


def make_candidates(queries: list[list[dict]], pool_depth: int = 50, query_texts: list[str] | None = None,
                    intent_route: list[str] | None = None, timeline: list[bool] | None = None,
                    query_kinds: list[str] | None = None) -> Candidates:
    """A ``Candidates`` table from rows given as dicts, one list per query.

    Each row names its document with ``id`` and may set any feature of ``ROW_COLUMNS``;
    the rest take ``ROW_DEFAULTS``. Ranks are 0-based, -1 when a path missed the document.
    ``tie_key`` orders documents by id, as ``build_candidates`` does."""
    doc_ids = sorted({row["id"] for rows in queries for row in rows})
    position = {doc_id: i for i, doc_id in enumerate(doc_ids)}
    cols: dict[str, list] = {name: [] for name in ROW_COLUMNS}
    offsets = [0]
    for qi, rows in enumerate(queries):
        ids = [row["id"] for row in rows]
        if len(set(ids)) != len(ids):
            raise ValueError(f"query {qi}: a document appears twice: {ids}")
        for row in rows:
            unknown = set(row) - set(ROW_DEFAULTS) - {"id"}
            if unknown:
                raise ValueError(f"unknown candidate column(s) {sorted(unknown)}")
            cols["query_idx"].append(qi)
            cols["doc_idx"].append(position[row["id"]])
            cols["tie_key"].append(position[row["id"]])
            for name, default in ROW_DEFAULTS.items():
                cols[name].append(row.get(name, default))
        offsets.append(offsets[-1] + len(rows))
    n = len(queries)
    return Candidates(
        dataset="hand-built", fingerprint="", embedder="none", pool_depth=pool_depth,
        doc_ids=tuple(doc_ids), query_ids=tuple(f"q{i}" for i in range(n)),
        query_texts=tuple(query_texts or [f"query {i}" for i in range(n)]),
        offsets=np.asarray(offsets, dtype=np.int64), fast_target=("",) * n,
        timeline=np.asarray(timeline or [False] * n, dtype=bool),
        intent_route=tuple(intent_route or ["concept"] * n), window=("",) * n,
        degraded=((),) * n,
        cols={name: np.asarray(values, dtype=ROW_DTYPES[name]) for name, values in cols.items()},
        query_kinds=tuple(query_kinds or ()),
    )


def score_of(candidates: Candidates, score: np.ndarray, doc_id: str, qi: int = 0) -> float:
    """The score of ``doc_id``'s row in query ``qi``."""
    rows = np.flatnonzero((candidates.query_idx == qi) &
                          (candidates.doc_idx == candidates.doc_ids.index(doc_id)))
    if len(rows) != 1:
        raise KeyError(f"{doc_id} is not a candidate of query {qi}")
    return float(score[rows[0]])


def ranked_ids(candidates: Candidates, ranking, qi: int = 0) -> list[str]:
    """Document ids of query ``qi`` in rank order."""
    return [candidates.doc_ids[int(candidates.doc_idx[row])] for row in ranking.for_query(qi)]


def rwb_here(home: Path, *args: str) -> subprocess.CompletedProcess:
    """``rwb ARGS`` with ``RWB_HOME=home``, run in this process by ``eval.cli.main`` (what the
    ``rwb`` script calls), its exit status and output as a ``CompletedProcess``'s. It spares a
    test the 2–3 s of a new Python importing torch and LanceDB per command; tests of signals,
    exit paths or a process's start keep a real subprocess."""
    from eval.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        patch.setenv("RWB_HOME", str(home))
        try:
            status = main([str(a) for a in args])
        except SystemExit as done:  # argparse's own usage errors
            status = done.code if isinstance(done.code, int) else 2
    return subprocess.CompletedProcess(["rwb", *map(str, args)], status, out.getvalue(), err.getvalue())


@pytest.fixture(scope="session")
def rwb_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("rwb_home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(home))
        yield home


@pytest.fixture(scope="session")
def tiny(rwb_home):
    from retrieval.dataset import load_dataset

    return load_dataset(TINY)


@pytest.fixture(scope="session")
def tiny_index(tiny, rwb_home):
    """The one shared index of the tiny dataset. Tests must not modify it: use
    ``dataclasses.replace(tiny_index, ...)`` for a variant."""
    from retrieval.index import open_index

    return open_index(tiny)


@pytest.fixture
def tiny_copy(tmp_path) -> Path:
    """A private, writable copy of the tiny dataset folder."""
    target = tmp_path / "tiny"
    shutil.copytree(TINY, target)
    return target


def two_path_table():
    """One query, the score-fusion tests' table: dense returns A 0.75, B 0.5, C 0.25; BM25 returns
    B 10, D 6, A 2 (C only dense, D only BM25)."""
    return make_candidates([[
        {"id": "A", "dense_rank": 0, "dense_sim": 0.75, "bm25_rank": 2, "bm25_score": 2.0},
        {"id": "B", "dense_rank": 1, "dense_sim": 0.5, "bm25_rank": 0, "bm25_score": 10.0},
        {"id": "C", "dense_rank": 2, "dense_sim": 0.25},
        {"id": "D", "dense_sim": 0.125, "bm25_rank": 1, "bm25_score": 6.0},
    ]])


def random_two_path_table(seed: int, n_queries: int = 4, n_rows: int = 40):
    """Queries of random rows: ranks −1 … 49 on each path, cosines and BM25 scores with ties,
    one query the vector path never answered (keyword-only)."""
    rng = np.random.default_rng(seed)
    queries = []
    for qi in range(n_queries):
        rows = []
        for i in range(n_rows):
            dense = -1 if qi == 0 else int(rng.integers(-1, 50))
            sparse = int(rng.integers(-1, 50))
            rows.append({"id": f"d{i}", "dense_rank": dense, "dense_sim": float(rng.integers(0, 5)) / 4 if dense >= 0 else 0.0,
                         "bm25_rank": sparse, "bm25_score": float(rng.integers(0, 8)) if sparse >= 0 else 0.0})
        queries.append(rows)
    return make_candidates(queries)
