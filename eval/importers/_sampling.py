"""Query sets sampled from a UBI queries log, by OpenSearch Search Relevance Workbench's three
samplers (opensearch-project/search-relevance, ``src/main/java/org/opensearch/searchrelevance/
ubi/``; each returns ``{user_query: frequency}``, the frequency being the number of logged
searches of that text):

- ``topn`` (``TopNQuerySampler.buildSearchRequest`` / ``processSearchResponse``): a terms
  aggregation of size N on ``user_query`` over the searches whose text is not ``""``: the N
  most frequent texts, ties by text; then a text that is blank once trimmed (Java's
  ``trim()``: characters ≤ U+0020) is dropped, so the set can hold fewer than N.
- ``random`` (``RandomQuerySampler.buildSearchRequest`` / ``getQuerySet``): every search
  whose text is not ``""`` gets a uniform random score (``random_score``), the hits are
  collapsed on ``user_query`` (a text keeps its best score) and the N best texts are taken;
  a text searched more often has more chances.
- ``pptss`` (``ProbabilityProportionalToSizeQuerySampler.getQuerySet``): probability
  proportional to size, N draws with replacement: a text's weight is its share of all
  searches, each draw ``r`` uniform in [0, 1) picks the first text whose cumulative weight is
  ≥ ``r``, and a text drawn again is kept once, so the set can hold fewer than N.

The random numbers come from ``numpy.random.default_rng(seed)`` (SRW's are not seeded);
``pptss`` walks the texts in the order they first appear in the log (SRW walks a HashMap;
the order changes which draws pick which text, not the probabilities).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

SAMPLERS = ("random", "topn", "pptss")
MAX_SAMPLE = 100_000
"""The largest query set drawn (``--sample``): checked before anything is allocated for the
draws (``pptss`` draws one number per asked query)."""


def java_trim(text: str) -> str:
    """Java's ``String.trim()``: strip characters ≤ U+0020 from both ends."""
    return text.strip("".join(chr(c) for c in range(0x21)))


def top_n(texts: list[str], n: int) -> dict[str, int]:
    """``topn``: the ``n`` most frequent non-empty texts (ties by text), blank ones dropped."""
    counts = Counter(t for t in texts if t != "")
    top = sorted(counts, key=lambda t: (-counts[t], t))[:n]
    return {t: counts[t] for t in top if java_trim(t)}


def random_sample(texts: list[str], n: int, scores: np.ndarray) -> dict[str, int]:
    """``random``: ``scores[i]`` is search ``i``'s random score (searches of ``""`` are
    skipped); each text keeps its best score and the ``n`` best texts are taken."""
    counts = Counter(t for t in texts if t != "")
    best: dict[str, float] = {}
    for text, score in zip(texts, scores):
        if text != "" and score > best.get(text, -1.0):
            best[text] = float(score)
    chosen = sorted(best, key=lambda t: (-best[t], t))[:n]
    return {t: counts[t] for t in chosen}


def pps_sample(texts: list[str], draws: np.ndarray) -> dict[str, int]:
    """``pptss``: one pick per uniform draw in ``draws`` (module docstring), in draw order."""
    counts = Counter(texts)
    total = len(texts)
    cumulative, running = [], 0.0
    for text, weight in counts.items():  # first appearance in the log
        running += weight / total
        cumulative.append((text, running))
    picked: dict[str, int] = {}
    for r in draws:
        for text, edge in cumulative:
            if edge >= r:
                picked.setdefault(text, counts[text])
                break
    return picked


def sample_queries(texts: list[str], n: int, sampler: str, seed: int) -> dict[str, int]:
    """``{user_query: frequency}`` of ``n`` texts drawn from the logged searches' ``texts``."""
    if sampler not in SAMPLERS:
        raise ValueError(f"--sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    if not 1 <= n <= MAX_SAMPLE:
        raise ValueError(f"--sample must be a whole number in 1…{MAX_SAMPLE:,}, got {n:,}")
    rng = np.random.default_rng(seed)
    if sampler == "topn":
        return top_n(texts, n)
    if sampler == "random":
        return random_sample(texts, n, rng.random(len(texts)))
    return pps_sample(texts, rng.random(n))
