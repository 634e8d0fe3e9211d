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

Workers are Ray actors (one CPU each) holding the model, loaded once per actor by
``retrieval.embedders.load_embedder``. A worker that dies (its process killed, its node lost)
is restarted (``MAX_RESTARTS``) and its tasks retried (``max_task_retries=-1``); tasks are
pure, so a retried task gives the same vectors. A model named by a path must exist at that
path on every node.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from contextlib import contextmanager
from typing import Callable, Sequence

import numpy as np

from retrieval.embedders import BATCH_SIZE, Embedder, Progress, encode_order, load_embedder

MAX_RESTARTS = 3
"""Restarts of one worker before its death is an error."""
MAX_TASK_TEXTS = 16 * BATCH_SIZE
TASKS_PER_WORKER = 4
"""Default task size: about this many tasks per worker (for balance), at most ``MAX_TASK_TEXTS``."""
IN_FLIGHT = 2
"""Tasks queued on each worker at once: the next one waits there while one encodes."""


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
    encode and stop at ``close``; after ``close`` it encodes here, with the model itself (a
    handle kept past its block still works)."""

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
        ray = self._ray
        if self.actors:
            return
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        self.workers = self.workers or max(1, cpus)
        if self.workers > cpus:  # an actor of one CPU more than the cluster has would wait forever
            raise ValueError(f"--workers {self.workers} exceeds the Ray cluster's {cpus} CPUs")
        worker = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=-1)(_EncodeWorker)
        self.actors = [worker.remote(self.name, _torch_threads()) for _ in range(self.workers)]

    def pids(self) -> list[int]:
        """The workers' process ids (for tests that kill one)."""
        return self._ray.get([actor.pid.remote() for actor in self.actors])

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        if self.closed or not texts:
            return self.model.encode(texts, progress)
        self.start()
        ray = self._ray
        order = encode_order(texts)
        size = task_size(len(texts), self.workers, self.batch_size)
        tasks = [order[s:s + size] for s in range(0, len(order), size)]
        if self.on_start:
            self.on_start(f"encoding {len(texts):,} texts on Ray: {self.workers} worker{'s' * (self.workers != 1)}, "
                          f"{len(tasks)} task{'s' * (len(tasks) != 1)} of up to {size} texts")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        queue, pending, done = deque(range(len(tasks))), {}, 0

        def submit(actor) -> None:
            i = queue.popleft()
            pending[actor.encode.remote([texts[j] for j in tasks[i]])] = (i, actor)

        try:
            for actor in self.actors:
                for _ in range(IN_FLIGHT):
                    if queue:
                        submit(actor)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i, actor = pending.pop(ref)
                    out[tasks[i]] = self._get(ref)
                    done += len(tasks[i])
                    if queue:
                        submit(actor)
                    if progress:
                        progress(done, len(texts))
        except BaseException:
            for ref in pending:  # an interrupted build: its queued tasks are dropped
                try:
                    ray.cancel(ref)
                except Exception:  # already finished, or its worker gone: nothing to drop
                    pass
            raise
        self.encoded += len(texts)
        return out

    def _get(self, ref) -> np.ndarray:
        """``ray.get``; a task's own exception is raised as itself, a worker dead past its
        restarts as a RuntimeError."""
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            raise (cause if isinstance(cause, Exception) else RuntimeError(str(error).splitlines()[0])) from None
        except ray.exceptions.RayActorError as error:
            raise RuntimeError(f"a Ray encoding worker died and could not be restarted (up to {MAX_RESTARTS} "
                               f"restarts): {str(error).splitlines()[0][:200]}") from None

    def close(self) -> None:
        if self._ray.is_initialized():
            for actor in self.actors:
                self._ray.kill(actor, no_restart=True)
        self.actors, self.closed = [], True


@contextmanager
def ray_encoding(workers: int | None = None, batch_size: int | None = None,
                 on_start: Callable[[str], None] | None = None):
    """Inside this block, indexes built in this thread encode on Ray (``RayEncoder``); yields the
    list of encoders made (one per index opened), whose workers stop when the block ends. Ray
    must be started (``ray.init``), or it starts a local cluster with Ray's defaults. Every index
    opened in the block with the same model shares one encoder and its workers."""
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
