"""A similarity threshold calibrated on labelled queries, next to a seed's literal one.

Seed 003 keeps a similar memory when its cosine is ≥ 0.85 — a value for OpenAI's
text-embedding-3-small. Cosine scales differ by model (all-MiniLM-L6-v2 rarely passes 0.85), so
``calibrate`` shows, per embedder: the distribution of each query's best cosine, of the cosines
of relevant (query, memory) pairs and of unjudged ones among each query's top ``depth``; and the
threshold that maximises F1 of "cosine ≥ t" as a relevance test over those top-``depth`` pairs
(relevant = graded > 0; ties: the larger t). Queries answered (≥ 1 memory over t) are reported at
the seed's threshold and at the calibrated one.

Seed 003's own thresholds, 0.85 (similar patterns) and 0.8 (known failures), are every command's
default (``choose_threshold``). A calibrated threshold is opt-in (``--threshold calibrated``) and
is never scored on the labels it was fitted on: where contexts are scored (``rwb context
--replay``, ``rwb eval --context``) it is **cross-fitted** (``cross_fit``): the labelled queries
are split into ``DEFAULT_FOLDS`` seeded folds (``eval.search.sweep.make_folds``); each fold's
queries are answered with the threshold calibrated on the other folds' labels. A single free
query (``rwb context QUERY``) is not scored, so there it is fitted on every label.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval.search.sweep import make_folds

QUANTILES = (0, 10, 25, 50, 75, 90, 100)


@dataclass(frozen=True)
class Calibration:
    embedder: str
    n_queries: int
    best: dict[str, float]            # percentile → cosine of each query's best memory
    relevant: dict[str, float]        # … of relevant pairs within the top depth
    other: dict[str, float]           # … of the other pairs within the top depth
    seed_threshold: float
    threshold: float                  # calibrated
    f1: dict[str, float]              # "seed" / "calibrated" → F1
    answered: dict[str, int]          # "seed" / "calibrated" → queries with ≥ 1 memory over it

    def to_json(self) -> dict:
        return self.__dict__.copy()


def _percentiles(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {}
    return {f"p{q}": round(float(v), 4) for q, v in zip(QUANTILES, np.percentile(values, QUANTILES))}


def _f1(sims: np.ndarray, relevant: np.ndarray, t: float) -> float:
    predicted = sims >= t
    tp = float((predicted & relevant).sum())
    if tp == 0:
        return 0.0
    return 2 * tp / (predicted.sum() + relevant.sum())


def calibrate(handle, queries, qrels: dict[str, dict[str, int]], seed_threshold: float = 0.85,
              depth: int = 10) -> Calibration:
    """The calibration above for one index (its embedder and vectors); only judged queries count."""
    if handle.embedder is None or handle.vectors is None:
        raise ValueError("calibration needs vectors: the index has no embedder")
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q.id, {}).values())]
    if not judged:
        raise ValueError("no query has a relevant judgment: nothing to calibrate on")
    vectors = handle.embedder.encode([q.text for q in judged])
    sims_all = vectors @ handle.vectors.T                              # (queries, memories)
    top = np.argsort(-sims_all, axis=1, kind="stable")[:, :depth]
    pair_sims = np.take_along_axis(sims_all, top, axis=1)
    relevant = np.array([[qrels[q.id].get(handle.doc_ids[d], 0) > 0 for d in row] for q, row in zip(judged, top)])
    best = sims_all.max(axis=1)
    flat_sims, flat_rel = pair_sims.ravel(), relevant.ravel()
    candidates = np.unique(np.round(flat_sims, 4))
    scores = [(_f1(flat_sims, flat_rel, t), t) for t in candidates]
    f1, threshold = max(scores) if scores else (0.0, seed_threshold)
    return Calibration(
        embedder=handle.embedder.model_id, n_queries=len(judged), best=_percentiles(best),
        relevant=_percentiles(flat_sims[flat_rel]), other=_percentiles(flat_sims[~flat_rel]),
        seed_threshold=seed_threshold, threshold=round(float(threshold), 4),
        f1={"seed": round(float(_f1(flat_sims, flat_rel, seed_threshold)), 4), "calibrated": round(float(f1), 4)},
        answered={"seed": int((best >= seed_threshold).sum()), "calibrated": int((best >= threshold).sum())},
    )


SEED_EMBEDDERS = ("text-embedding-3-small",)
"""The embedder seed 003's thresholds (0.85 patterns, 0.8 failures) were set for (its 嵌入模型)."""
SEED_FAILURE_THRESHOLD = 0.8


THRESHOLD_CHOICES = ("seed", "calibrated")
"""``--threshold``: ``seed`` (the default; ``literal`` is accepted for it) or ``calibrated``, or a number."""
DEFAULT_FOLDS = 5


@dataclass(frozen=True)
class ThresholdChoice:
    threshold: float                  # similar patterns
    failure_threshold: float          # known failures
    how: str                          # in words, for every output


SEED = ThresholdChoice(0.85, SEED_FAILURE_THRESHOLD, "seed 003's 0.85 (patterns) / 0.8 (failures)")


def parse_threshold(choice: str) -> ThresholdChoice | str:
    """``--threshold``'s value checked where it is defined: the seed's choice, a given number
    (the pattern threshold; failures keep 0.8) or ``"calibrated"`` (fitted by the caller)."""
    if choice in ("seed", "literal"):
        return SEED
    if choice == "calibrated":
        return choice
    try:
        value = float(choice)
    except (TypeError, ValueError):
        raise ValueError("--threshold must be seed, calibrated or a number, "
                         f"got {choice!r}") from None
    if not -1.0 <= value <= 1.0:
        raise ValueError(f"--threshold must lie in [-1, 1], got {value:g}")
    return ThresholdChoice(value, SEED_FAILURE_THRESHOLD, f"{value:g} (given) / 0.8 (seed 003)")


def choose_threshold(handle, queries, qrels: dict[str, dict[str, int]],
                     choice: str = "seed") -> ThresholdChoice:
    """One threshold pair for answering a query that is not scored: ``seed`` (0.85 / 0.8, the
    default), a number, or ``calibrated`` — ``calibrate``'s threshold for both lookups, fitted on
    every labelled query (never use it to score those queries: ``cross_fit`` does that)."""
    parsed = parse_threshold(choice)
    if isinstance(parsed, ThresholdChoice):
        return parsed
    cal = calibrate(handle, queries, qrels)
    model = handle.embedder.model_id if handle.embedder is not None else "-"
    return ThresholdChoice(cal.threshold, cal.threshold,
                           f"calibrated {cal.threshold:.4f} for {model} on {cal.n_queries} labelled "
                           "queries, both lookups (the seed's 0.85 / 0.8: --threshold seed)")


@dataclass(frozen=True)
class CrossFit:
    """Per fold: the threshold calibrated on the other folds' labels, and the query ids it answers."""

    folds: tuple[tuple[float, tuple[str, ...]], ...]
    how: str

    def threshold_of(self) -> dict[str, float]:
        return {q: t for t, ids in self.folds for q in ids}


def cross_fit(handle, queries, qrels: dict[str, dict[str, int]], folds: int = DEFAULT_FOLDS,
              seed: int = 0) -> CrossFit:
    """``calibrate`` cross-fitted: the labelled queries in ``min(folds, their number)`` seeded
    folds; fold k's threshold is calibrated on the labelled queries outside fold k only."""
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q.id, {}).values())]
    if len(judged) < 2:
        raise ValueError("--threshold calibrated needs at least 2 labelled queries to cross-fit "
                         f"(found {len(judged)}); use --threshold seed")
    k = min(folds, len(judged))
    fold = make_folds(len(judged), k, seed)
    out = []
    for f in range(k):
        train = [q for q, x in zip(judged, fold) if x != f]
        out.append((calibrate(handle, train, qrels).threshold, tuple(q.id for q, x in zip(judged, fold) if x == f)))
    model = handle.embedder.model_id if handle.embedder is not None else "-"
    values = ", ".join(f"{t:.4f}" for t, _ in out)
    return CrossFit(tuple(out), f"calibrated for {model}, cross-fitted over {k} folds of {len(judged)} "
                                f"labelled queries (each fold answered with the threshold fitted on the "
                                f"others: {values}), both lookups")
