"""Caches shared by every Streamlit session, under concurrency.

Streamlit runs each browser session's script on its own thread of one server process, so the
shared objects (the prepared pool's per-depth values and its judgments, ``pages._state``'s
live-evaluation LRU, the ``st.cache_resource`` handles) are entered by several sessions at once.
Eight threads evaluate eight different Tune configurations, over and over, with the LRU shrunk so
that runs are evicted all the time, the pool's per-depth values built afresh and the interpreter
switching threads every microsecond; every result must equal a single-threaded evaluation of
the same configuration.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

from tests.conftest import TINY

CONFIGS = [
    ("rrf", {"rrf.rrf_k": 60}),
    ("rrf", {"rrf.rrf_k": 1}),
    ("rrf", {"rrf.rrf_k": 200}),
    ("wsum", {}),
    ("vector", {}),
    ("bm25", {}),
    ("seed-adaptive", {}),
    ("combmnz", {}),
]


def _configs():
    from eval.stores.configs import resolve_config
    from retrieval.pipeline.config import with_params

    return [with_params(resolve_config(label), values) for label, values in CONFIGS]


def _snapshot(run) -> tuple:
    """What a page shows of an evaluation: the per-query values of every metric and the means."""
    return ({name: np.asarray(v).copy() for name, v in run.values.items()}, dict(run.means))


def test_eight_sessions_evaluate_as_one_does(tiny_index, monkeypatch):
    from pages import _state

    path, embedder = str(TINY), "minilm"
    stamp = _state.dataset_stamp(path)
    REV = _state.judgments_version(tiny_index.dataset if hasattr(tiny_index, "dataset") else _state.get_dataset(path, stamp), "explicit")
    _, judged = _state.get_judged(path, stamp, embedder, "bigram", REV)
    configs = _configs()
    pool = _state.get_pool(path, stamp, embedder)
    from eval.experiments.live import evaluate_config

    expected = [_snapshot(evaluate_config(pool, judged, config)) for config in configs]
    assert len({round(e[1]["ndcg@5"], 9) for e in expected}) > 2, "the configurations must differ"

    for view in ("any", "all", "technical"):  # every session races to build the per-depth values
        table = pool.with_keyword_match(view)
        for store in ("_depths", "_masks", "_kept"):
            monkeypatch.setitem(table.__dict__, store, {})
    monkeypatch.setattr(_state._LIVE, "size", 1)
    _state._LIVE.clear()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    failures: list[str] = []
    start = threading.Barrier(8)

    def session(first: int) -> None:
        start.wait()
        try:
            for round_ in range(40):
                i = (first + round_ // 2) % 3 if round_ % 2 else (first + round_) % len(configs)
                got = _snapshot(_state.live_evaluation(path, stamp, embedder, "bigram", REV, configs[i]))
                want = expected[i]
                if got[1] != want[1] or any(not np.array_equal(got[0][m], want[0][m], equal_nan=True)
                                           for m in want[0]):
                    failures.append(f"session {first}, config {CONFIGS[i]}: {got[1]} != {want[1]}")
        except Exception as exc:  # noqa: BLE001 - a crash in one session is the failure we look for
            failures.append(f"session {first}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=session, args=(n,)) for n in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert not failures, "\n".join(failures[:5])


def test_a_hit_evicted_by_another_session_is_still_served(tiny_index, monkeypatch):
    """The interleaving that broke the hand LRU, forced: session A finds its run kept and, before
    it marks the run recent, session B's new run pushes it out (one run kept). A must still get
    its run and B its own."""
    from eval.experiments.live import evaluate_config
    from pages import _state

    path, embedder = str(TINY), "minilm"
    stamp = _state.dataset_stamp(path)
    rev = _state.judgments_version(_state.get_dataset(path, stamp), "explicit")
    first, second = _configs()[:2]
    _, judged = _state.get_judged(path, stamp, embedder, "bigram", rev)
    pool = _state.get_pool(path, stamp, embedder)
    want_a = evaluate_config(pool, judged, first).means
    want_b = evaluate_config(pool, judged, second).means
    monkeypatch.setattr(_state._LIVE, "size", 1)
    _state._LIVE.clear()
    _state.live_evaluation(path, stamp, embedder, "bigram", rev, first)        # A's run is kept
    a_paused, b_done = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def pause_before_marking(frame, event, arg):
        if event == "call":
            code = frame.f_code       # the shared LRU's lookup (eval.experiments.live.LiveRuns.get)
            return pause_before_marking if code.co_name == "get" and code.co_filename.endswith("live.py") else None
        if event == "line" and not a_paused.is_set():
            import linecache

            if "move_to_end" in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
                a_paused.set()
                b_done.wait(timeout=2)      # a lock held here makes B wait instead
        return pause_before_marking

    def session_a():
        sys.settrace(pause_before_marking)
        try:
            results["a"] = _state.live_evaluation(path, stamp, embedder, "bigram", rev, first).means
        except Exception as exc:  # noqa: BLE001
            results["a"] = exc
        finally:
            sys.settrace(None)

    def session_b():
        a_paused.wait(timeout=30)
        try:
            results["b"] = _state.live_evaluation(path, stamp, embedder, "bigram", rev, second).means
        except Exception as exc:  # noqa: BLE001
            results["b"] = exc
        b_done.set()

    threads = [threading.Thread(target=session_a), threading.Thread(target=session_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert a_paused.is_set()
    assert results == {"a": want_a, "b": want_b}
