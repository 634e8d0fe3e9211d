"""Seed 003's two cache levels, with their hit and miss counts.

- ``RequestCache`` (L1, "Request-level Cache (内存) — 同一请求内的重复检索, TTL: 请求生命周期"):
  lives for one request; a key asked for twice in it (by parallel lookups too) is computed once.
- ``TTLCache`` (L2, "Hot Cache — 热点查询结果, TTL: 5 分钟"): shared across requests; an entry
  is served while ``now − stored_at < ttl_s`` (300 s in the seed). ``now`` is given by the
  caller — the wall clock live, the query's ``reference_time`` in a replay — so a replay is
  repeatable. Each entry keeps the seconds it took to compute, so a hit reports the time it saved.
  An entry may carry its own lifetime (``put(…, ttl_s=…)``, ``get(…, ttl_s=…)``: the seed's
  warm-up stores the most accessed patterns for an hour, ``ex=3600``).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

SEED_TTL_S = 300.0


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    saved_s: float = 0.0       # compute time the hits did not spend

    def to_json(self) -> dict:
        return {"hits": self.hits, "misses": self.misses, "saved_s": self.saved_s}


@dataclass
class RequestCache:
    """L1: one request's memo (thread-safe: a key is computed once even when asked concurrently)."""

    stats: Stats = field(default_factory=Stats)
    _values: dict = field(default_factory=dict)
    _locks: dict = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._values:
                with self._guard:
                    self.stats.hits += 1
                return self._values[key]
            value = compute()
            self._values[key] = value
            with self._guard:
                self.stats.misses += 1
            return value


@dataclass
class TTLCache:
    """L2: entries expire ``ttl_s`` seconds after they were stored (by the caller's clock)."""

    ttl_s: float = SEED_TTL_S
    stats: Stats = field(default_factory=Stats)
    _entries: dict = field(default_factory=dict)   # key → (stored_at, compute seconds, value, ttl)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: Hashable, now: float, compute: Callable[[], Any],
            request: Stats | None = None, ttl_s: float | None = None) -> Any:
        """The cached value of ``key`` if stored less than its lifetime before ``now``; otherwise
        ``compute()``, stored at ``now`` for ``ttl_s`` (default the cache's). Counts go to this
        cache's ``stats`` and to ``request``."""
        with self._guard:
            entry = self._entries.get(key)
        if entry is not None and now - entry[0] < entry[3]:
            with self._guard:
                for stats in filter(None, (self.stats, request)):
                    stats.hits += 1
                    stats.saved_s += entry[1]
            return entry[2]
        started = time.perf_counter()
        value = compute()
        spent = time.perf_counter() - started
        with self._guard:
            self._entries[key] = (now, spent, value, self.ttl_s if ttl_s is None else ttl_s)
            for stats in filter(None, (self.stats, request)):
                stats.misses += 1
        return value

    def put(self, key: Hashable, now: float, value: Any, ttl_s: float | None = None) -> None:
        """Store ``value`` at ``now`` for ``ttl_s`` seconds (default the cache's): a warm-up."""
        with self._guard:
            self._entries[key] = (now, 0.0, value, self.ttl_s if ttl_s is None else ttl_s)
