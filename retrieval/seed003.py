"""Seed 003's ``MemoryRetriever``: three lookups in parallel feeding one memory context, cached.

Over the memories of a dataset tagged by ``memory_type`` (seed 003's collections):

- **similar patterns** (``find_similar_patterns``): ``memory_type`` ``pattern`` — vector top
  ``top_k`` = 3 with cosine ≥ ``threshold`` = 0.85;
- **site profile** (``get_site_profile``): ``memory_type`` ``site-profile``, keyed by its ``title``
  — the exact key (the first host name in the query, e.g. ``shop.example.com``), else its
  parent domain (``accounts.example.com`` → ``example.com``); at most one;
- **known failures** (``find_relevant_failures``): ``memory_type`` ``error-fix`` or ``failure`` —
  vector top ``failure_top_k`` = 5 with cosine ≥ ``failure_threshold`` = 0.8, only solutions that
  work (the seed's ``success_rate > 0.5``: here ``confidence > min_success`` = 0.5).

The query is embedded once; the three lookups run in a thread pool (the seed's
``asyncio.gather``) and the context is patterns, then the profile, then failures. Caches
(``retrieval.cache``): L1 per request (the embedding and each profile key); L2 with a 300 s TTL,
keyed by the lookup and — as the seed keys it, ``f"pattern:{hash(tuple(embedding[:10]))}"`` —
the first ``EMBEDDING_KEY_VALUES`` = 10 values of the query's embedding (``cache_key =
"embedding"``; the query is embedded first, as the seed's ``retrieve_context`` does), or by the
query text (``cache_key = "text"``: a hit also skips the embedding, but a query differing only in
case or spacing misses); the site profile by its key. The seed's code caches the pattern lookup;
the failure lookup is cached the same way here (the seed's hot cache holds "热点查询结果").
Every response carries its L1 and L2 hits and misses.

Warm-up (seed 003 预热策略, ``warm_up``): the ``WARM_LIMIT`` = 100 pattern memories of highest
``access_count`` are stored in L2 by id for ``WARM_TTL_S`` = 3600 s (the seed's
``memory:pattern:{id}``, ``ex=3600``); a returned pattern's record is read through that entry
(its hits and misses are counted apart, as ``records``), else from the memory store (L3).

Vector lookups are exact cosine over the typed memories (``IndexHandle.vectors``, the same
vectors LanceDB holds). Source: seed 003 (检索器实现, 向量相似度检索, 站点画像检索, 失败知识检索, 缓存策略).
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from retrieval.cache import SEED_TTL_S, RequestCache, Stats, TTLCache
from retrieval.params import Params, choice, integer, number

PATTERN_TYPES = ("pattern",)
PROFILE_TYPES = ("site-profile",)
FAILURE_TYPES = ("error-fix", "failure")
CACHE_KEYS = ("embedding", "text")
EMBEDDING_KEY_VALUES = 10
WARM_LIMIT = 100
WARM_TTL_S = 3600.0
_HOST = re.compile(r"\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}\b", re.IGNORECASE)


@dataclass(frozen=True)
class Seed003Params(Params):
    threshold: float = number(0.85, "pattern threshold", "cosine a similar pattern must reach (seed 003: 0.85)",
                              lo=0.0, hi=1.0, step=0.01, min=-1.0, max=1.0)
    top_k: int = integer(3, "patterns", "similar patterns returned (seed 003: 3)", lo=1, hi=20, min=1, max=1000)
    failure_threshold: float = number(0.8, "failure threshold", "cosine a known failure must reach (seed 003: 0.8)",
                                      lo=0.0, hi=1.0, step=0.01, min=-1.0, max=1.0)
    failure_top_k: int = integer(5, "failures", "known failures returned (seed 003: 5)", lo=1, hi=20, min=1,
                                 max=1000)
    min_success: float = number(0.5, "min success", "a failure's solution counts when confidence > this "
                                "(seed 003: success_rate > 0.5)", lo=0.0, hi=1.0, step=0.05, min=0.0, max=1.0)
    ttl_s: float = number(SEED_TTL_S, "L2 TTL (s)", "hot-cache lifetime (seed 003: 300 s)", lo=0.0, hi=3600.0,
                          step=30.0, min=0.0, max=1e9, sweepable=False)
    cache_key: str = choice("embedding", CACHE_KEYS, "L2 key",
                            "embedding = the first 10 values of the query's embedding "
                            "(seed 003); text = the query text")


def host_key(text: str) -> str:
    """The first host name in ``text``, lower-cased ("" when none)."""
    match = _HOST.search(text)
    return match.group(0).lower() if match else ""


def parent_domain(key: str) -> str:
    """One label up (``a.b.example.com`` → ``b.example.com``); "" for a registrable domain."""
    parts = key.split(".")
    return ".".join(parts[1:]) if len(parts) > 2 else ""


@dataclass(frozen=True)
class Hit:
    id: str
    score: float
    text: str


@dataclass(frozen=True)
class Context:
    """Seed 003's ``MemoryContext`` plus what the caches did for this request."""

    query: str
    similar_tasks: list[Hit]
    site_key: str
    site_profile: Hit | None
    known_issues: list[Hit]
    cache: dict = field(default_factory=dict)   # {"l1": {...}, "l2": {...}, "records": {...}}
    threshold: float = 0.85

    @property
    def ids(self) -> list[str]:
        """The context's memories in order (patterns, profile, failures), each once."""
        hits = [*self.similar_tasks, *([self.site_profile] if self.site_profile else []), *self.known_issues]
        return list(dict.fromkeys(h.id for h in hits))

    def to_json(self) -> dict:
        return {**asdict(self), "ids": self.ids}


class MemoryRetriever:
    """One retriever per index; its L2 cache is shared by every request it answers."""

    def __init__(self, handle, params: Seed003Params | None = None):
        if handle.embedder is None or handle.vectors is None:
            raise ValueError("seed 003's retriever needs vectors: the index has no embedder")
        self.handle = handle
        self.params = params or Seed003Params()
        self.l2 = TTLCache(self.params.ttl_s)
        docs = handle.dataset.documents
        position = {doc_id: i for i, doc_id in enumerate(handle.doc_ids)}
        self._docs = {d.id: d for d in docs}

        def rows(types, keep=lambda d: True) -> np.ndarray:
            return np.array(sorted(position[d.id] for d in docs if d.memory_type in types and keep(d)),
                            dtype=np.int64)

        self._patterns = rows(PATTERN_TYPES)
        self._failures = rows(FAILURE_TYPES, lambda d: d.confidence > self.params.min_success)
        self._profiles: dict[str, str] = {}
        for d in sorted(docs, key=lambda d: d.id):
            if d.memory_type in PROFILE_TYPES and d.title:
                self._profiles.setdefault(d.title.strip().lower(), d.id)

    def _top(self, vector: np.ndarray, rows: np.ndarray, k: int, threshold: float,
             read=None) -> list[Hit]:
        if not len(rows):
            return []
        sims = self.handle.vectors[rows] @ vector
        ids = [self.handle.doc_ids[r] for r in rows]
        order = sorted((i for i in range(len(rows)) if sims[i] >= threshold), key=lambda i: (-sims[i], ids[i]))
        read = read or self._docs.__getitem__
        return [Hit(ids[i], float(sims[i]), read(ids[i]).text) for i in order[:k]]

    def warm_up(self, now: float | None = None) -> list[str]:
        """Seed 003's 预热: the ``WARM_LIMIT`` patterns of highest ``access_count`` (ties: id) into
        L2 by id for ``WARM_TTL_S``; returns their ids."""
        now = time.time() if now is None else float(now)
        patterns = [self._docs[self.handle.doc_ids[r]] for r in self._patterns]
        hot = sorted(patterns, key=lambda d: (-d.access_count, d.id))[:WARM_LIMIT]
        for doc in hot:
            self.l2.put(("pattern-id", doc.id), now, doc, WARM_TTL_S)
        return [d.id for d in hot]

    def _profile(self, key: str, l1: RequestCache) -> Hit | None:
        for candidate in (key, parent_domain(key)):
            if candidate:
                doc_id = l1.get(("site", candidate), lambda c=candidate: self._profiles.get(c))
                if doc_id:
                    return Hit(doc_id, 1.0 if candidate == key else 0.5, self._docs[doc_id].text)
        return None

    def retrieve(self, text: str, now: float | None = None) -> Context:
        """The memory context of one request; ``now`` (seconds) is the L2 clock (default: wall clock)."""
        now = time.time() if now is None else float(now)
        p = self.params
        l1, request_l2, records = RequestCache(), Stats(), Stats()
        key = host_key(text)

        def embedding() -> np.ndarray:
            return l1.get(("embed", text), lambda: self.handle.embedder.encode([text])[0])

        # seed 003: embed first, key the hot cache by the embedding's first values
        query_key = text if p.cache_key == "text" else \
            tuple(float(x) for x in embedding()[:EMBEDDING_KEY_VALUES])

        def record(doc_id: str):
            return self.l2.get(("pattern-id", doc_id), now, lambda: self._docs[doc_id], records,
                               WARM_TTL_S)

        def patterns() -> list[Hit]:
            return self.l2.get(("pattern", query_key), now,
                               lambda: self._top(embedding(), self._patterns, p.top_k, p.threshold,
                                                 record),
                               request_l2)

        def profile() -> Hit | None:
            return self.l2.get(("site", key), now, lambda: self._profile(key, l1), request_l2) if key else None

        def failures() -> list[Hit]:
            return self.l2.get(("failure", query_key), now,
                               lambda: self._top(embedding(), self._failures, p.failure_top_k, p.failure_threshold),
                               request_l2)

        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = [pool.submit(f) for f in (patterns, profile, failures)]
            similar, site, known = (f.result() for f in futures)
        return Context(text, similar, key, site, known,
                       {"l1": l1.stats.to_json(), "l2": request_l2.to_json(),
                        "records": records.to_json()},
                       p.threshold)
