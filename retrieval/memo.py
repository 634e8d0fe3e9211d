"""The one memo of the library: values computed from an object that is never changed in place
(a candidate table, its judgments, a loaded dataset), kept with it.

``memo(owner, key, build)`` calls ``build()`` once per owner and key and keeps the value while
the owner lives (the owner is held by a weak reference, so its values go with it). Arrays,
alone or in a tuple, come back read-only. Past ``SIZE`` values per owner, the owner's are
dropped and built again on demand.

``along``: an array the value is also computed from, matched by identity (the same array
object, held by a weak reference): a visible mask, which ``retrieval.ranking.visible_rows``
keeps per table and depth. A mask made afresh (a routed query set) misses; those values are
kept apart, so they never push out the owner's own.

Every Streamlit session runs on its own thread of one process, so the store is shared by
threads: a hit is read without a lock (each lookup is one dict read, atomic in CPython); a miss
builds outside the lock and stores under it (two threads missing the same key at once may both
build it; both get an equal value).

Which memos exist, and the figure that keeps each, is ``bench/caches.py`` and BENCHMARKS.md
("Caches, measured").
"""

from __future__ import annotations

import threading
import weakref
from typing import Callable, Hashable

import numpy as np

SIZE = 64
"""Values kept per owner (and as many more computed along a mask)."""

_STORE: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
_ALONG = object()  # the owner's slot for values computed along a mask
_MISS = object()
_LOCK = threading.Lock()


def _read_only(value):
    for array in (value if isinstance(value, tuple) else (value,)):
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
    return value


def memo(owner: object, key: Hashable, build: Callable[[], object],
         along: np.ndarray | None = None):
    """``build()`` once per ``owner`` and ``key`` (and ``along``, by identity), kept while
    ``owner`` lives; arrays come back read-only."""
    table = _STORE.get(owner)
    if table is not None:  # a hit reads without the lock: each lookup is one atomic dict read
        if along is None:
            value = table.get(key, _MISS)
        else:
            masks = table.get(_ALONG)
            hit = masks.get(key) if masks is not None else None
            value = hit[1] if hit is not None and hit[0]() is along else _MISS
        if value is not _MISS:
            return value
    value = _read_only(build())
    with _LOCK:  # creating an owner's table, clearing a full one and storing: one step each
        table = _STORE.get(owner)
        if table is None:
            table = _STORE[owner] = {}
        if along is None:
            if len(table) >= SIZE:
                table.clear()
            table[key] = value
        else:
            masks = table.get(_ALONG)
            if masks is None:
                masks = table[_ALONG] = {}
            if len(masks) >= SIZE:
                masks.clear()
            masks[key] = (weakref.ref(along), value)
    return value
