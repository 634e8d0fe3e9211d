"""Pure tasks on a fixed set of Ray actors: what ``retrieval.ray_index`` (encoding) and
``retrieval.ray_pool`` (retrieval) share.

Actors take one CPU each, are restarted when their process dies (``MAX_RESTARTS``) and retry
their tasks (``max_task_retries=-1``), so a task must be pure: a retried one gives the same
result. Tasks go out in order, ``IN_FLIGHT`` queued on each actor (the next waits there while
one runs); results are handed back by task number as they come.

A set of actors kept between its calls (the encoders: the documents, then the pool's queries)
registers as idle (``idle``); ``start_actors`` stops every idle set before it asks Ray for new
actors, so one stage's workers never wait for CPUs that another stage's idle workers hold.
"""

from __future__ import annotations

import logging
import signal
import threading
import warnings
from collections import deque
from typing import Callable

_IDLE: dict[int, Callable[[], None]] = {}

MAX_RESTARTS = 3
"""Restarts of one worker before its death is an error."""
IN_FLIGHT = 2
"""Tasks queued on each worker at once."""


def start_actors(cls: type, args: tuple, workers: int | None) -> list:
    """``workers`` (default: the cluster's CPUs) actors of ``cls(*args)``, one CPU each; Ray
    is started with its defaults when it is not running."""
    import ray

    for stop in list(_IDLE.values()):  # their CPUs for these
        stop()
    start_ray()
    cpus = int(ray.cluster_resources().get("CPU", 0))
    workers = workers or max(1, cpus)
    if workers > cpus:  # an actor of one CPU more than the cluster has would wait forever
        raise ValueError(f"--workers {workers} exceeds the Ray cluster's {cpus} CPUs")
    remote = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=-1)(cls)
    return [remote.remote(*args) for _ in range(workers)]


def start_ray(**options) -> None:
    """Start Ray with its defaults (and ``options`` for ``ray.init``; its own log lines below
    ERROR kept quiet) when it is not running. ``ray.init`` replaces the process's
    SIGTERM handler with its own (``sys.exit(15)``: a silent exit 15): the handlers in force
    before are put back, so the command's own (``eval.cli.interrupts``) still end it with 143 and
    one line. Ray's Python warnings are held until it has started: a failed start is its one
    error line alone."""
    import ray

    if ray.is_initialized():
        return
    ours = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)} if ours else {}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ray.init(**{"include_dashboard": False, "logging_level": logging.ERROR, **options})
    finally:
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
    for warning in caught:
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def idle(owner: object, stop: Callable[[], None] | None) -> None:
    """Register ``owner``'s actors as idle, stopped by ``stop`` when another set starts
    (``None``: busy again, or stopped)."""
    if stop is None:
        _IDLE.pop(id(owner), None)
    else:
        _IDLE[id(owner)] = stop


def run_tasks(actors: list, n_tasks: int, submit: Callable[[object, int], object],
              on_result: Callable[[int, object], None], what: str) -> None:
    """Run tasks ``0 … n_tasks-1``: ``submit(actor, i)`` sends task ``i`` to ``actor`` and
    returns its object ref; ``on_result(i, value)`` gets each result. An interrupt or an error
    cancels the tasks still queued. ``what`` names the workers in errors."""
    import ray

    queue, pending = deque(range(n_tasks)), {}

    def send(actor) -> None:
        i = queue.popleft()
        pending[submit(actor, i)] = (i, actor)

    try:
        for actor in actors:
            for _ in range(IN_FLIGHT):
                if queue:
                    send(actor)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i, actor = pending.pop(ref)
                on_result(i, get(ref, what))
                if queue:
                    send(actor)
    except BaseException:
        for ref in pending:  # an interrupted run: its queued tasks are dropped
            try:
                ray.cancel(ref)
            except Exception:  # already finished, or its worker gone: nothing to drop
                pass
        raise


def get(ref, what: str):
    """``ray.get``; a task's own exception is raised as itself, a worker dead past its
    restarts as a RuntimeError naming ``what``."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:
        cause = getattr(error, "cause", None)
        raise (cause if isinstance(cause, Exception) else RuntimeError(str(error).splitlines()[0])) from None
    except ray.exceptions.RayActorError as error:
        raise RuntimeError(f"a Ray {what} worker died and could not be restarted (up to {MAX_RESTARTS} "
                           f"restarts): {str(error).splitlines()[0][:200]}") from None


def stop_actors(actors: list) -> None:
    """Kill ``actors`` (not restarted)."""
    import ray

    if ray.is_initialized():
        for actor in actors:
            ray.kill(actor, no_restart=True)
