"""Where a sweep's configurations are scored (and a tuning's searches run): in this process, or
fanned out over Ray workers.

An executor turns chunks of configurations into their per-query metric values, one array of
shape (configurations in the chunk, queries) per chunk, in order — what ``eval.search.sweep.
config_values`` yields. ``eval.search.sweep.sweep`` takes one (``executor=``); everything after the
per-query values (means, folds, the winner) stays in the sweep, so every executor gives the
same result.

- ``LocalExecutor``: ``config_values`` in this process (the default).
- ``RayExecutor``: configurations × query shards over Ray actors. The candidate table and the
  judged qrels go to the object store once (``ray.put``) and each actor holds them for the
  sweep (on one machine the actors map the same shared-memory copy); a task is a slice of a
  chunk's configurations on one query shard, and the coordinator writes each task's values
  into their (configuration, query) cells. Metrics are per query and a query's value depends
  only on its own rows, so a shard's values equal the whole table's bit for bit; the sweep
  then sums each configuration's per-query values in query order, as it does locally — the
  means, folds and winner are identical, not merely close (``tests/eval/search/test_executors.py``).
  Query shards bound what one task holds: a shard has at most ``SHARD_ROWS`` candidate rows.
  Ray is an optional extra (``pip install -e '.[distributed]'``); ``ray.init`` starts a local
  cluster of ``workers`` CPUs, or joins one with ``address``.

``map(fn, shared, items)`` runs independent jobs — ``rwb tune``'s searches, one per outer fold
plus the final one — as ``fn(shared, item)``: in order here, or as Ray tasks (one CPU each)
with ``shared`` (the candidate table and the rest of the job) put in the object store once.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import deque
from dataclasses import fields, replace
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

import numpy as np

from eval.metrics.measure import Judged
from eval.metrics.measure import config_values
from retrieval.candidate_table import Candidates
from retrieval.pipeline import PipelineConfig
from retrieval.ray_actors import start_ray

EXECUTORS = ("local", "ray")
MAX_WORKERS = 1024
SHARD_ROWS = 1_000_000
"""Most candidate rows one query shard holds (a task's table)."""
RAY_MISSING = "--executor ray needs Ray: pip install -e '.[distributed]'"

# how each field of a candidate table is cut into a query shard; a field not named here
# stops sharding (rather than being silently shared across shards)
_PER_QUERY = ("query_ids", "query_texts", "fast_target", "timeline", "intent_route", "window", "degraded",
              "query_kinds")
_SHARED = ("dataset", "fingerprint", "embedder", "pool_depth", "doc_ids", "analyzer", "doc_types")


class Executor(Protocol):
    name: str

    def batches(self, c: Candidates, judged: Judged, chunks: Iterable[Sequence[PipelineConfig]],
                metric: str, routes: tuple[str, ...] | None = None) -> Iterator[np.ndarray]:
        """Per chunk of configurations (in order): their per-query ``metric`` values, rows of
        shape (queries,), NaN where a query does not count — ``config_values``' arrays
        (``routes``: the learned routes, as ``retrieval.pipeline.fuse``)."""
        ...

    def map(self, fn: Callable[[Any, Any], Any], shared: Any, items: Sequence[Any]) -> list:
        """``[fn(shared, item) for item in items]``, in order."""
        ...

    def close(self) -> None:
        ...


def query_shard(c: Candidates, judged: Judged, start: int, stop: int) -> tuple[Candidates, Judged]:
    """Queries ``start … stop − 1`` of a candidate table and its judgments, as a table of their
    own: their rows (copied, in order), offsets and ``query_idx`` counted from 0, per-query
    fields cut, the ideal-grade matrix kept at its full width (so ideal DCG sums the same
    terms). Missing qrels queries stay with the whole table (the sweep pads them)."""
    known = {"offsets", "cols", *_PER_QUERY, *_SHARED}
    unknown = sorted({f.name for f in fields(Candidates)} - known)
    if unknown:
        raise RuntimeError(f"query_shard does not know how to cut Candidates field(s) {unknown}")
    if not 0 <= start < stop <= c.n_queries:
        raise ValueError(f"query shard {start}:{stop} is outside 0:{c.n_queries}")
    lo, hi = int(c.offsets[start]), int(c.offsets[stop])
    cols = {name: np.array(column[lo:hi]) for name, column in c.cols.items()}
    cols["query_idx"] = (cols["query_idx"] - start).astype(c.cols["query_idx"].dtype)
    cut = {name: getattr(c, name)[start:stop] for name in _PER_QUERY if getattr(c, name) is not None}
    shard = replace(c, offsets=np.array(c.offsets[start:stop + 1]) - lo, cols=cols,
                    **{k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in cut.items()})
    shard_judged = Judged(np.array(judged.grade[lo:hi]), np.array(judged.ideal[start:stop]),
                          np.array(judged.n_relevant[start:stop]), np.array(judged.judged[start:stop]), 0)
    return shard, shard_judged


def shard_bounds(c: Candidates, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous query ranges of near-equal row counts (none empty)."""
    n_q = c.n_queries
    shards = max(1, min(shards, n_q))
    cuts = np.searchsorted(np.asarray(c.offsets), np.linspace(0, c.n_rows, shards + 1)[1:-1], side="left")
    edges = sorted({0, n_q, *(int(x) for x in cuts if 0 < x < n_q)})
    return list(zip(edges[:-1], edges[1:]))


class LocalExecutor:
    """``config_values`` in this process."""

    name = "local"
    workers = 1

    def batches(self, c, judged, chunks, metric, routes=None):
        for chunk in chunks:
            yield from config_values(c, judged, chunk, metric, routes)

    def map(self, fn, shared, items):
        return [fn(shared, item) for item in items]

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _ShardWorker:
    """A Ray actor's state: the whole table and judgments (received once), and the query
    shards cut from them as tasks ask for them."""

    def __init__(self, c: Candidates, judged: Judged):
        self.c, self.judged = c, judged
        self.shards: dict[tuple[int, int], tuple[Candidates, Judged]] = {}

    def values(self, configs: Sequence[PipelineConfig], start: int, stop: int, metric: str,
               routes: tuple[str, ...] | None = None) -> np.ndarray:
        if (start, stop) not in self.shards:
            self.shards[start, stop] = query_shard(self.c, self.judged, start, stop)
        shard, judged = self.shards[start, stop]
        return np.concatenate(list(config_values(shard, judged, configs, metric, routes)))


def _same_judgments(a: Judged, b: Judged) -> bool:
    return a is b or all(np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(Judged)
                         if f.compare)


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) that accepts no connection is refused at once:
    ``ray.init`` would retry it for minutes. ``auto`` and other forms are left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        raise ValueError(f"--address {address}: no Ray cluster answers there ({error.strerror or error})") from None


def cluster_address(address: str | None) -> str | None:
    """The cluster to join: ``--address``, else ``$RAY_ADDRESS`` (set by ``ray job submit`` and
    by hand, as Ray documents it), else None (start a local one)."""
    return address or os.environ.get("RAY_ADDRESS", "").strip() or None


def import_ray():
    """The ``ray`` module, or ``ValueError(RAY_MISSING)`` when the extra is not installed."""
    try:
        import ray
    except ImportError:
        raise ValueError(RAY_MISSING) from None
    return ray


class RayExecutor:
    """Configurations × query shards over ``workers`` Ray actors (one CPU each).

    ``address``: an existing cluster (``ray.init(address=…)``; default ``$RAY_ADDRESS``); without
    either a local cluster of
    ``workers`` CPUs is started (and shut down by ``close``). ``workers`` defaults to the
    cluster's CPUs. ``query_shards`` defaults to one shard per ``SHARD_ROWS`` candidate rows.
    Each chunk of configurations is cut into ``workers`` slices; the task for slice ``p`` on
    shard ``s`` goes to actor ``(p · shards + s) mod workers``, so with as many shards as
    workers each actor keeps to one shard."""

    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, query_shards: int | None = None):
        for label, value in (("--workers", workers), ("query_shards", query_shards)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value <= MAX_WORKERS):
                raise ValueError(f"{label} must be a whole number in 1…{MAX_WORKERS}, got {value!r}")
        self._ray = import_ray()
        self.address, self.query_shards = address, query_shards
        self.workers = workers
        self._owns = False
        self._actors: list = []
        self._loaded: tuple | None = None

    def start(self) -> "RayExecutor":
        ray = self._ray
        if not ray.is_initialized():
            options = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
            address = cluster_address(self.address)
            if address:
                check_reachable(address)
                start_ray(address=address, **options)
            else:
                start_ray(num_cpus=self.workers or os.cpu_count() or 1, **options)
            self._owns = True
        cpus = int(ray.cluster_resources().get("CPU", 0))
        self.workers = self.workers or max(1, cpus)
        if self.workers > cpus:
            self.close()
            raise ValueError(f"--workers {self.workers} exceeds the Ray cluster's {cpus} CPUs")
        return self

    def _load(self, c: Candidates, judged: Judged) -> None:
        """Actors holding ``c`` and ``judged``: made once per table and judgments (``ray.put``
        once), kept while later calls pass the same table with equal judgments (each sweep
        judges its pool afresh)."""
        if self._loaded is not None and self._loaded[0] is c and _same_judgments(self._loaded[1], judged):
            return
        if self.workers is None or not self._ray.is_initialized():
            self.start()
        self._kill()
        ray = self._ray
        worker = ray.remote(num_cpus=1)(_ShardWorker)
        table, judgments = ray.put(c), ray.put(judged)
        self._actors = [worker.remote(table, judgments) for _ in range(self.workers)]
        self._loaded = (c, judged)

    def _submit(self, chunk: Sequence[PipelineConfig], bounds, metric: str, routes=None):
        n_pieces = min(self.workers, len(chunk))
        pieces = [(int(p[0]), int(p[-1]) + 1) for p in np.array_split(np.arange(len(chunk)), n_pieces)]
        tasks = []
        for p, (a, b) in enumerate(pieces):
            for s, (q0, q1) in enumerate(bounds):
                actor = self._actors[(p * len(bounds) + s) % len(self._actors)]
                tasks.append((a, b, q0, q1, actor.values.remote(list(chunk[a:b]), q0, q1, metric,
                                                                None if routes is None else routes[q0:q1])))
        return len(chunk), tasks

    def _get(self, refs: list) -> list:
        """``ray.get``; a task's own exception is raised as itself."""
        try:
            return self._ray.get(refs)
        except self._ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            raise (cause if isinstance(cause, Exception) else RuntimeError(str(error).splitlines()[0])) from None

    def map(self, fn, shared, items):
        if self.workers is None or not self._ray.is_initialized():
            self.start()
        task = self._ray.remote(num_cpus=1)(fn)
        ref = self._ray.put(shared)
        return self._get([task.remote(ref, item) for item in items])

    def _gather(self, submitted, n_queries: int) -> np.ndarray:
        size, tasks = submitted
        values = self._get([task[-1] for task in tasks])
        out = np.empty((size, n_queries))
        for (a, b, q0, q1, _), part in zip(tasks, values):
            out[a:b, q0:q1] = part
        return out

    def batches(self, c, judged, chunks, metric, routes=None):
        self._load(c, judged)
        shards = self.query_shards or -(-c.n_rows // SHARD_ROWS)
        bounds = shard_bounds(c, shards)
        pending: deque = deque()
        for chunk in chunks:  # the next chunk's tasks queue while this one's values are gathered
            pending.append(self._submit(chunk, bounds, metric, routes))
            if len(pending) > 1:
                yield self._gather(pending.popleft(), c.n_queries)
        while pending:
            yield self._gather(pending.popleft(), c.n_queries)

    def _kill(self) -> None:
        for actor in self._actors:
            self._ray.kill(actor)
        self._actors, self._loaded = [], None

    def close(self) -> None:
        if self._ray.is_initialized():
            self._kill()
            if self._owns:
                self._ray.shutdown()
        self._actors, self._loaded, self._owns = [], None, False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def make_executor(kind: str = "local", address: str | None = None, workers: int | None = None) -> Executor:
    """The executor ``rwb sweep --executor KIND [--address ADDR] [--workers N]`` asks for."""
    if kind not in EXECUTORS:
        raise ValueError(f"--executor must be one of {list(EXECUTORS)}, got {kind!r}")
    if kind == "local":
        if address or workers is not None:
            raise ValueError("--address and --workers need --executor ray")
        return LocalExecutor()
    return RayExecutor(workers, address)

