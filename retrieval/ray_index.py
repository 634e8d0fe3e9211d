"""Encode an index's documents on Ray workers: ``rwb index DATASET --executor ray``.

Only the encoding moves. ``ray_encoding`` is a block inside which ``retrieval.index`` hands the
texts missing from the embedding cache to a ``RayEncoder`` instead of the model; everything
else is the local build, unchanged: the same embedding cache (keyed by model and text, so a
later local run reuses what Ray encoded and the other way round), BM25, ``vectors.npy``, the
LanceDB table written by ``VectorStore.build``, the manifest, the checks and the atomic
publish of ``retrieval.index``. An interrupted or failed Ray run therefore leaves the
published index as it was, exactly as a local one does.

Bit for bit: a vector's bits depend on the batch the model encoded it in (padding changes the
kernels' shapes; on MiniLM a text encoded alone differs from the same text in its batch of 64
by up to 2e-7). The encoder cuts the local encode order (``retrieval.embedders.encode_order``:
longest first) into tasks of a multiple of ``BATCH_SIZE`` texts, so each task's model batches
are the local run's batches, and a worker's ``encode`` of a task (which sorts it again,
stably, into the same order) gives the local vectors. The thread count changes them too (on
MiniLM, a few short texts encoded on one thread differ in their last bits from two threads;
some batches of 64 do not), so a worker runs torch on the driver's thread count, whatever CPUs Ray gave it;
equal bits also assume the same CPU kind on every node. The vectors come back to
this process in order and are written by the local writer: the process that opens the index
holds every vector anyway (``retrieval.index.IndexHandle.vectors``), so a distributed writer
(Ray Data ``write_lance``, which would also need ``pylance``) would not lift a limit, and the
one writer keeps the build's checksums and checks on one code path.

Workers are Ray actors (one CPU each, ``retrieval.ray_actors``) holding the model, loaded once
per actor by ``retrieval.embedders.load_embedder``. A worker that dies (its process killed, its
node lost) is restarted and its tasks retried; tasks are pure, so a retried task gives the same
vectors. A model named by a path must exist at that path on every node. The query set's
candidate pool is retrieved in shards on Ray by ``retrieval.ray_pool``.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Callable, Sequence

import numpy as np

from retrieval.embedders import BATCH_SIZE, Embedder, Progress, encode_order, load_embedder
from retrieval.ray_actors import idle, run_tasks, start_actors, stop_actors

MAX_TASK_TEXTS = 16 * BATCH_SIZE
TASKS_PER_WORKER = 4
"""Default task size: about this many tasks per worker (for balance), at most ``MAX_TASK_TEXTS``."""


def check_batch_size(value: int | None) -> int | None:
    """``--batch-size``: texts per Ray task, a positive multiple of ``BATCH_SIZE`` (else the
    model's batches, and so the vectors' bits, would differ from a local run's)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < BATCH_SIZE or value % BATCH_SIZE:
        raise ValueError(f"--batch-size must be a positive multiple of {BATCH_SIZE} (the model's batch, so the "
                         f"vectors are the local run's bit for bit), got {value!r}")
    return value


def task_size(n_texts: int, workers: int, batch_size: int | None = None) -> int:
    """Texts per task: ``batch_size`` when given, else about ``TASKS_PER_WORKER`` tasks per
    worker, rounded up to a multiple of ``BATCH_SIZE``, at most ``MAX_TASK_TEXTS``."""
    if batch_size is not None:
        return batch_size
    batches = -(-max(n_texts, 1) // (BATCH_SIZE * workers * TASKS_PER_WORKER))
    return min(MAX_TASK_TEXTS, BATCH_SIZE * batches)


def _torch_threads() -> int | None:
    """This process's torch thread count, when torch is loaded (the models that run on it)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


class _EncodeWorker:
    """A Ray actor: the model, loaded once, run on the driver's torch thread count; ``encode``
    is the model's own."""

    def __init__(self, name: str, threads: int | None):
        self.model = load_embedder(name)
        torch = sys.modules.get("torch")
        if threads and torch is not None:
            torch.set_num_threads(threads)  # a reduction split over other threads sums in another order

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts)

    def pid(self) -> int:
        return os.getpid()


class RayEncoder:
    """``encode`` of ``model`` (registered as ``name``) on ``workers`` Ray actors, vectors equal
    to ``model.encode``'s bit for bit (see the module docstring). Actors start at the first
    encode and wait between encodes as idle (``retrieval.ray_actors.idle``: stopped when another
    stage, the pool's retrieval workers, asks for CPUs; the next encode starts them again);
    they stop at ``close``, after which it encodes here, with the model itself (a handle kept
    past its block still works)."""

    def __init__(self, model: Embedder, name: str, workers: int | None = None, batch_size: int | None = None,
                 on_start: Callable[[str], None] | None = None):
        import ray

        self._ray = ray
        self.model, self.name = model, name
        self.model_id, self.dim = model.model_id, model.dim
        self.workers, self.batch_size = workers, check_batch_size(batch_size)
        self.on_start = on_start
        self.actors: list = []
        self.closed = False
        self.encoded = 0  # texts encoded on the workers

    def start(self) -> None:
        if not self.actors:
            self.actors = start_actors(_EncodeWorker, (self.name, _torch_threads()), self.workers)
            self.workers = len(self.actors)

    def pids(self) -> list[int]:
        """The workers' process ids (for tests that kill one)."""
        return self._ray.get([actor.pid.remote() for actor in self.actors])

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        if self.closed or not texts:
            return self.model.encode(texts, progress)
        self.start()
        order = encode_order(texts)
        size = task_size(len(texts), self.workers, self.batch_size)
        tasks = [order[s:s + size] for s in range(0, len(order), size)]
        if self.on_start:
            self.on_start(f"encoding {len(texts):,} texts on Ray: {self.workers} worker{'s' * (self.workers != 1)}, "
                          f"{len(tasks)} task{'s' * (len(tasks) != 1)} of up to {size} texts")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        done = 0

        def on_result(i: int, vectors: np.ndarray) -> None:
            nonlocal done
            out[tasks[i]] = vectors
            done += len(tasks[i])
            if progress:
                progress(done, len(texts))

        idle(self, None)
        try:
            run_tasks(self.actors, len(tasks), lambda actor, i: actor.encode.remote([texts[j] for j in tasks[i]]),
                      on_result, "encoding")
        finally:  # kept for the next encode, unless another stage's workers need the CPUs
            idle(self, self.stop)
        self.encoded += len(texts)
        return out

    def stop(self) -> None:
        """Stop the workers (the next ``encode`` starts new ones)."""
        idle(self, None)
        stop_actors(self.actors)
        self.actors = []

    def close(self) -> None:
        self.stop()
        self.closed = True


@contextmanager
def ray_encoding(workers: int | None = None, batch_size: int | None = None,
                 on_start: Callable[[str], None] | None = None):
    """Inside this block, indexes built in this thread encode on Ray (``RayEncoder``); yields the
    list of encoders made (one per model), whose workers stop when the block ends. Ray must be
    started (``ray.init``), or it starts a local cluster with Ray's defaults. Every index opened
    in the block with the same model shares one encoder and its workers."""
    from retrieval.index import encoding_with  # here: a worker imports this module, and needs only the model

    check_batch_size(batch_size)
    encoders: list[RayEncoder] = []

    def wrap(model: Embedder, name: str) -> RayEncoder:
        for encoder in encoders:  # one set of workers per model in a block (the index, then the pool's queries)
            if encoder.name == name:
                return encoder
        encoders.append(RayEncoder(model, name, workers, batch_size, on_start))
        return encoders[-1]

    try:
        with encoding_with(wrap):
            yield encoders
    finally:
        for encoder in encoders:
            encoder.close()
