"""Retrieve a query set's candidate pool in shards on Ray workers: the pool of
``rwb index DATASET --executor ray``.

Only the searches move. ``ray_retrieval`` is a block inside which
``retrieval.candidates.build_candidates`` hands its path lists (``path_lists``: per query the
dense list and the BM25 ``any`` / ``all`` / ``technical`` lists) to a ``RayRetriever``; the
query vectors (encoded as in a local run, on Ray too inside ``retrieval.ray_index``'s block),
the cosines, the fast and timeline paths, every feature and the table are computed in this
process as always. A query's lists depend on that query and the index alone, so the shards'
lists put back in query order are the local run's, and so is the table, bit for bit.

Each worker is a Ray actor (one CPU) that opens the index once, for searching only
(``retrieval.index.open_for_search``: no model, every file checked against the manifest of
the build this process opened); it must see that build — the same machine, a shared
filesystem, or an ``s3://`` ``RWB_HOME`` from which it downloads the published build (and
refuses a build other than this process's). A dataset folder must exist at the same path on
every node. Workers are ``retrieval.ray_actors``'s: one that dies is restarted and its shards
retried; shards are pure, so a retried one gives the same lists.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from retrieval.candidates import path_lists, retrieving_with
from retrieval.dataset import Query, load_dataset
from retrieval.index import open_for_search, open_index
from retrieval.object_store import is_s3
from retrieval.ray_actors import run_tasks, start_actors, stop_actors

SHARDS_PER_WORKER = 4
MAX_SHARD = 512
"""Default shard: about ``SHARDS_PER_WORKER`` shards per worker, at most ``MAX_SHARD`` queries."""


def shard_size(n_queries: int, workers: int, size: int | None = None) -> int:
    """Queries per shard: ``size`` when given (a positive integer), else about
    ``SHARDS_PER_WORKER`` shards per worker, at most ``MAX_SHARD``."""
    if size is not None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"queries per shard must be a positive integer, got {size!r}")
        return size
    return max(1, min(MAX_SHARD, -(-n_queries // (workers * SHARDS_PER_WORKER))))


class _RetrieveWorker:
    """A Ray actor: the dataset and the driver's index build opened once, for searching only.
    A problem opening them is raised by ``retrieve`` (as a task's own error: one line for the
    user), not by the constructor (Ray would restart the actor on it)."""

    def __init__(self, root: str, embedder_name: str, analyzer: str, build: str, manifest: dict,
                 fingerprint: str, home: str | None):
        try:
            self.handle, self.error = self._open(root, embedder_name, analyzer, build, manifest, fingerprint, home), None
        except Exception as error:  # noqa: BLE001 - raised again by every retrieve
            self.handle, self.error = None, error

    @staticmethod
    def _open(root: str, embedder_name: str, analyzer: str, build: str, manifest: dict, fingerprint: str,
              home: str | None):
        dataset = load_dataset(root)
        if dataset.fingerprint != fingerprint:
            raise ValueError(f"the dataset at {root} on this Ray node is not the one being indexed "
                             f"(fingerprint {dataset.fingerprint[:12]}, not {fingerprint[:12]})")
        if Path(build).is_dir():  # this machine, or a shared filesystem
            return open_for_search(dataset, embedder_name, Path(build), manifest)
        if is_s3(home):  # the published build, downloaded here
            os.environ["RWB_HOME"] = home
            handle = open_index(dataset, embedder_name, analyzer=analyzer)
            if handle.manifest != manifest:
                raise ValueError(f"the index published at {home} is not the build being retrieved from "
                                 "(rebuilt meanwhile?); run again")
            return handle
        raise FileNotFoundError(f"the index build {build} is not on this Ray node: use a home every node "
                                "sees (a shared filesystem, or RWB_HOME=s3://…)")

    def retrieve(self, queries: list[Query], qvecs: np.ndarray | None, filters: list, pool_depth: int,
                 matches: tuple[str, ...]) -> tuple[tuple[list, list, list, list], list[str]]:
        if self.error is not None:
            raise self.error
        degraded: list[str] = []
        return path_lists(self.handle, queries, qvecs, filters, pool_depth, matches, degraded), degraded

    def pid(self) -> int:
        return os.getpid()


class RayRetriever:
    """``retrieval.candidates.path_lists`` over shards of the query set on ``workers`` Ray
    actors, its lists exactly (see the module docstring). Each call starts its actors on the
    index it is given and stops them when it returns."""

    def __init__(self, workers: int | None = None, shard: int | None = None,
                 on_start: Callable[[str], None] | None = None):
        import ray

        self._ray = ray
        self.workers, self.shard = workers, shard
        if shard is not None:
            shard_size(1, 1, shard)
        self.on_start = on_start
        self.actors: list = []
        self.retrieved = 0  # queries retrieved on the workers
        self.shards = 0

    def start(self, handle) -> None:
        dataset = handle.dataset
        if dataset.root is None:
            raise ValueError("a candidate pool is retrieved on Ray only for a dataset read from a folder")
        args = (str(Path(dataset.root).resolve()), handle.embedder_name, handle.analyzer, str(handle.path),
                handle.manifest, dataset.fingerprint, os.environ.get("RWB_HOME"))
        self.actors = start_actors(_RetrieveWorker, args, self.workers)
        self.workers = len(self.actors)

    def pids(self) -> list[int]:
        """The workers' process ids (for tests that kill one)."""
        return self._ray.get([actor.pid.remote() for actor in self.actors])

    def __call__(self, handle, queries: Sequence[Query], qvecs: np.ndarray | None, filters: list,
                 pool_depth: int, matches: tuple[str, ...], degraded: list[str]):
        if not queries:
            return [], [], [], []
        self.start(handle)
        size = shard_size(len(queries), self.workers, self.shard)
        shards = [range(s, min(s + size, len(queries))) for s in range(0, len(queries), size)]
        if self.on_start:
            self.on_start(f"retrieving {len(queries):,} queries' candidates on Ray: {self.workers} "
                          f"worker{'s' * (self.workers != 1)}, {len(shards)} shard{'s' * (len(shards) != 1)} "
                          f"of up to {size} queries")
        results: list = [None] * len(shards)

        def submit(actor, i: int):
            part = shards[i]
            return actor.retrieve.remote([queries[j] for j in part],
                                         None if qvecs is None else qvecs[part.start:part.stop],
                                         [filters[j] for j in part], pool_depth, matches)

        try:
            run_tasks(self.actors, len(shards), submit, results.__setitem__, "retrieval")
        finally:  # the workers' CPUs are free for what comes next
            self.close()
        lists: tuple[list, list, list, list] = ([], [], [], [])
        for parts, notes in results:  # in query order, as path_lists gives them
            for whole, part in zip(lists, parts):
                whole.extend(part)
            degraded.extend(notes)
        self.retrieved += len(queries)
        self.shards += len(shards)
        return lists

    def close(self) -> None:
        stop_actors(self.actors)
        self.actors = []


@contextmanager
def ray_retrieval(workers: int | None = None, shard: int | None = None,
                  on_start: Callable[[str], None] | None = None):
    """Inside this block, candidate pools built in this thread retrieve their path lists in
    shards of ``shard`` queries (default: about ``SHARDS_PER_WORKER`` per worker) on Ray
    (``RayRetriever``); yields the retriever. Ray must be started (``ray.init``), or it starts a local cluster with Ray's defaults."""
    retriever = RayRetriever(workers, shard, on_start)
    try:
        with retrieving_with(retriever):
            yield retriever
    finally:
        retriever.close()
