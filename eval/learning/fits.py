"""The fits of one ``rwb learn`` run on a pool of threads, counted where the caller waits."""

from __future__ import annotations

import queue
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from eval.search.nested import Choice, Plan

class Fits:
    """Fits on ``workers`` threads, at most ``workers`` at a time; each finished fit is counted
    (``run``, ``drain``) in the thread that waits, so progress is reported there."""

    def __init__(self, workers: int):
        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.events: queue.SimpleQueue = queue.SimpleQueue()

    def submit(self, fn, *args, count: bool = True):
        def job():
            out = fn(*args)
            if count:
                self.events.put(None)  # before the result is seen: a finished fit is counted
            return out
        return self.pool.submit(job)

    def run(self, search: Callable[[Plan], Choice], plans, tick: Callable[[], None]) -> list[Choice]:
        """``search`` on every plan at once, each on a thread of its own that submits its fits
        here; the fits are counted (``tick``) as they finish. An error in one search stops the
        rest: queued fits are dropped, running ones finish."""
        def one(k: int):
            try:
                return search(plans[k])
            finally:
                self.events.put(k)

        with ThreadPoolExecutor(max_workers=len(plans)) as searches:
            futures = [searches.submit(one, k) for k in range(len(plans))]
            try:
                left = len(plans)
                while left:
                    event = self.events.get()
                    if event is None:
                        tick()
                        continue
                    left -= 1
                    futures[event].result()  # its error, at once
            except BaseException:
                self.pool.shutdown(wait=False, cancel_futures=True)
                raise
        return [f.result() for f in futures]

    def drain(self, tick: Callable[[], None]) -> None:
        """Count the fits finished since the last ``run``."""
        while True:
            try:
                self.events.get_nowait()
            except queue.Empty:
                return
            tick()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.pool.shutdown(wait=True, cancel_futures=exc[0] is not None)
