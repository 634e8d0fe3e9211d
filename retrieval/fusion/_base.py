"""What every fusion module shares: the ``Scored`` result, the registry entry ``Fusion``,
and the per-query helpers over a candidate table (rows grouped by query)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from numba import njit

from retrieval.candidate_table import Candidates
from retrieval.params import Params

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Scored:
    """The score of every row (−inf for rows the pipeline does not see), its additive
    components (they sum to the score) and any multipliers applied."""

    score: np.ndarray
    components: Mapping[str, np.ndarray]
    multipliers: dict[str, np.ndarray] = field(default_factory=dict)


class LazyComponents(Mapping):
    """Components built on first read: re-scoring a query set never reads them, a page reads
    them for the one query it shows."""

    def __init__(self, build: Callable[[], dict[str, np.ndarray]]):
        self._build: Callable[[], dict[str, np.ndarray]] | None = build
        self._data: dict[str, np.ndarray] | None = None

    def _get(self) -> dict[str, np.ndarray]:
        if self._data is None:
            self._data, self._build = self._build(), None
        return self._data

    def __getitem__(self, key: str) -> np.ndarray:
        return self._get()[key]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


@dataclass(frozen=True)
class NoParams(Params):
    """A fusion without parameters (the single-path baselines)."""


@dataclass(frozen=True)
class Fusion:
    """A registry entry: one per module of ``retrieval.fusion``.

    ``score(c, visible, depth, params) -> Scored`` is pure and vectorised; ``params`` is the
    frozen class holding (and validating) the method's parameters and knobs; ``paths`` the
    retrieval paths it reads (a route is reported as vector / keyword / hybrid from it);
    ``variants`` further parameter sets the shared conformance suite runs;
    ``profile_names(c, params, routes)`` names the profile applied per query, where that applies;
    ``routed``: ``score`` and ``profile_names`` also take ``routes``, the learned router's profile
    per query (``retrieval.pipeline.fuse``'s argument; None: the rules route); ``nested``:
    ``score`` also takes ``fixed``, the fixed pipelines' columns
    (``retrieval.pipeline.fixed_pipeline_features``), which the pipeline computes for it."""

    name: str
    params: type[Params]
    score: Callable[..., Scored]
    summary: str
    source: str
    paths: tuple[str, ...] = ("dense", "sparse")
    variants: tuple[Params, ...] = ()
    profile_names: Callable[..., tuple[str, ...]] | None = None
    routed: bool = False
    nested: bool = False

    @property
    def route(self) -> str:
        return {("dense",): "vector", ("sparse",): "keyword"}.get(self.paths, "hybrid")


def in_path(ranks: np.ndarray, depth: int) -> np.ndarray:
    """Rows a path returned within its top ``depth`` (ranks are 0-based, −1 = not returned)."""
    return (ranks >= 0) & (ranks < depth)


def _segment_reduce(c: Candidates, values: np.ndarray, visible: np.ndarray, ufunc: np.ufunc,
                    fill: float) -> np.ndarray:
    """``ufunc`` (maximum / minimum) of ``values`` over the visible rows of each query, per row;
    0 for a query without visible rows. A table's rows are grouped by query (``offsets``), so
    one ``reduceat`` over the non-empty groups does it (faster than ``ufunc.at``; BENCHMARKS.md,
    "Figures moved from docstrings")."""
    masked = np.where(visible, values, fill)
    out = np.full(c.n_queries, fill)
    starts = c.offsets[:-1]
    nonempty = c.offsets[1:] > starts
    if nonempty.any():
        out[nonempty] = ufunc.reduceat(masked, starts[nonempty])
    out[~np.isfinite(out)] = 0.0
    return out[c.query_idx]


def segment_max(c: Candidates, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Per-row maximum of ``values`` over the visible rows of the same query (0 if none)."""
    return _segment_reduce(c, values, visible, np.maximum, -np.inf)


def segment_min(c: Candidates, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
    """Per-row minimum of ``values`` over the visible rows of the same query (0 if none)."""
    return _segment_reduce(c, values, visible, np.minimum, np.inf)


def recency_decay(age_days: np.ndarray, half_life_days: float) -> np.ndarray:
    """``exp(−ln2 / half_life · age)`` (seed 000: 7 d → 0.851, 30 d → 0.5); undated → 0."""
    decay = np.exp(-(LN2 / half_life_days) * np.asarray(age_days, dtype=np.float64))
    return np.where(np.isnan(decay), 0.0, decay)


def visible_index(c: Candidates, visible: np.ndarray) -> np.ndarray:
    """The indexes of the visible rows (``flatnonzero``; the table's own at a depth when
    ``visible`` is its mask, ``Candidates.at_depth``): a compiled score fills only these and
    leaves the rest at −inf."""
    seen = c.depth_of(visible)
    return seen.index if seen is not None else np.flatnonzero(visible)


def unseen(n: int) -> np.ndarray:
    """A score array of ``n`` rows, every row −inf (not seen) until a fusion fills it."""
    return np.full(n, -np.inf)


@njit(cache=True, nogil=True)
def _linear(dense, w_dense, sparse, w_sparse, w_alone, alone, use_alone, rows, score):
    for r in rows:
        w = w_alone if use_alone and alone[r] else w_sparse
        score[r] = w_dense * dense[r] + w * sparse[r]


_NONE = np.zeros(0, dtype=np.bool_)


def linear_score(c: Candidates, visible: np.ndarray, dense: np.ndarray, w_dense: float, sparse: np.ndarray, w_sparse: float,
                 alone: np.ndarray | None = None, w_alone: float = 0.0) -> np.ndarray:
    """``w_dense · dense + w · sparse`` per row, ``w`` = ``w_alone`` where ``alone`` marks the row
    else ``w_sparse``; −inf where not visible. One compiled pass with the same floating-point
    operations as the NumPy expression (products, then their sum), so equal to it bit for bit;
    the score-fusion modules build their components from the same products, lazily."""
    score = unseen(len(visible))
    _linear(dense, float(w_dense), sparse, float(w_sparse), float(w_alone), _NONE if alone is None else alone,
            alone is not None, visible_index(c, visible), score)
    return score


def finish(score: np.ndarray, visible: np.ndarray, components: dict, multipliers: dict | None = None) -> Scored:
    """Hide unseen rows behind −inf; components are left as computed (only a ranked, hence
    visible, row's components are ever read), which keeps every knob move cheap."""
    return Scored(np.where(visible, score, -np.inf), components, multipliers or {})


# ---- per-path score normalisation (the score-fusion modules share it) -------------------

NORM_TEXT = {"minmax": "(s−min)/(max−min)", "l2": "s/√Σs² as OpenSearch (vector s = (1+cos)/2)", "zscore": "(s−mean)/σ", "dbsf": "Qdrant, (s − (μ − 3σ)) / 6σ",
             "rank": "1/(1+rank) as OpenClaw", "rank_linear": "1 − rank/n as ranx"}
NORMS = tuple(NORM_TEXT)


def norm_help(norms: tuple[str, ...] = NORMS) -> str:
    """The help text of a ``norm`` choice offering ``norms``."""
    return " · ".join(f"{n}: {NORM_TEXT[n]}" for n in norms)


DBSF_SIGMAS = 3.0


def path_hits(c: Candidates, visible: np.ndarray, depth: int, path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(raw score, 0-based rank, hit)`` of one path: ``dense`` (cosine) or ``sparse`` (BM25);
    ``hit`` marks the visible rows the path returned within its top ``depth``."""
    if path == "dense":
        raw, rank = c.dense_sim, c.dense_rank
    elif path == "sparse":
        raw, rank = c.bm25_score, c.bm25_rank
    else:
        raise ValueError(f"path must be 'dense' or 'sparse', got {path!r}")
    return raw.astype(np.float64), rank, visible & in_path(rank, depth)


def normalise(c: Candidates, visible: np.ndarray, depth: int, path: str, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """``_normalise`` (below), computed once per table, visible mask, depth, path and norm."""
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {list(NORMS)}, got {norm!r}")
    return c.derived(("normalise", depth, path, norm), lambda: _normalise(c, visible, depth, path, norm),
                     along=visible)


def _normalise(c: Candidates, visible: np.ndarray, depth: int, path: str, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """``(value, hit)``: each row's normalised score on ``path``, computed per query over the
    rows that path returned (``hit``), and the value a row the path missed takes.

    ``minmax``  (s − min) / (max − min) (ranx ``min-max``, Weaviate, OpenSearch ``min_max``).
    ``zscore``  (s − mean) / σ, σ the population standard deviation (ranx ``zmuv``).
    ``dbsf``    (s − (μ − 3σ)) / 6σ, σ the sample (n − 1) standard deviation, not clipped: what
                Qdrant computes (server ``lib/segment/src/common/score_fusion.rs`` ``distr_norm``;
                qdrant-client ``hybrid/fusion.py`` ``distribution_based_score_fusion``), so that
                the ``dbsf`` pipeline ranks as ``rwb export --to qdrant`` does. A hit more than 3σ
                from its list's mean (possible from 11 hits on) lies outside [0, 1]; one more than
                3σ below it scores under a miss (0), as in Qdrant.
    ``l2``      s / √(Σ s²), the sum over the path's hits for the query (OpenSearch ``l2``:
                neural-search ``processor/normalization/L2ScoreNormalizationTechnique.java``,
                ``getL2Norm`` and ``normalizeSingleScore``; a norm of 0 gives 0, its
                ``MIN_SCORE``). l2 is not shift-invariant, so ``s`` is the score OpenSearch
                hands the processor: BM25 as it is, and on the vector path the k-NN score of
                space ``cosinesimil``, (1 + cos) / 2 (every engine since k-NN 2.19; OpenSearch
                documentation, "Spaces"); hence every value lies in [0, 1].
    ``rank``    1 / (1 + rank) (OpenClaw ``bm25RankToScore``), rank 0-based.
    ``rank_linear``  1 − rank / n, n the hits of that path for the query (ranx ``rank``;
                Lee, SIGIR 1997: 1 − (rank − 1)/n with 1-based ranks).

    Edge cases, decided once: when every hit of a path ties (a single hit included),
    ``minmax`` gives each 1.0 (OpenSearch ``SINGLE_RESULT_SCORE``, Weaviate: the full weight;
    ranx gives 0 and Qdrant 0.5 — 1.0 keeps a hit above a miss), ``zscore`` 0 (as ranx) and
    ``dbsf`` 0.5 (as Qdrant). A missed row takes 0, except under ``zscore``, where it takes
    the lowest z of the path's hits (ranx gives 0, the mean, so a below-average hit would
    score under a miss): under every norm but ``dbsf`` (above) a miss never beats a hit. A
    path that found nothing for a query gives all its rows 0."""
    raw, rank, hit = path_hits(c, visible, depth, path)
    q = c.query_idx
    lo, hi = segment_min(c, raw, hit), segment_max(c, raw, hit)
    span = hi - lo
    tied = ~(span > 0)
    miss = np.zeros(c.n_rows)
    if norm == "minmax":
        out = np.where(tied, 1.0, (raw - lo) / np.where(tied, 1.0, span))
    elif norm in ("zscore", "dbsf"):
        n = np.bincount(q[hit], minlength=c.n_queries).astype(np.float64)
        total = np.bincount(q[hit], weights=raw[hit], minlength=c.n_queries).astype(np.float64)
        mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)[q]
        dev = raw - mean
        sq = np.bincount(q[hit], weights=dev[hit] ** 2, minlength=c.n_queries).astype(np.float64)
        dof = n - (1.0 if norm == "dbsf" else 0.0)
        std = np.sqrt(np.divide(sq, dof, out=np.zeros_like(sq), where=dof > 0))[q]
        safe = np.where(tied | ~(std > 0), 1.0, std)
        if norm == "zscore":
            out = np.where(tied, 0.0, dev / safe)
            miss = segment_min(c, out, hit)
        else:
            out = np.where(tied, 0.5, (dev + DBSF_SIGMAS * safe) / (2 * DBSF_SIGMAS * safe))
    elif norm == "l2":
        if path == "dense":
            raw = (1.0 + raw) / 2.0  # OpenSearch's cosinesimil score
        norm2 = np.sqrt(np.bincount(q[hit], weights=raw[hit] ** 2, minlength=c.n_queries))[q]
        out = np.where(norm2 > 0, raw / np.where(norm2 > 0, norm2, 1.0), 0.0)
    elif norm == "rank":
        out = 1.0 / (1.0 + np.maximum(0, rank))
    elif norm == "rank_linear":
        n = np.bincount(q[hit], minlength=c.n_queries)[q]
        out = 1.0 - np.maximum(0, rank) / np.maximum(n, 1)
    else:
        raise ValueError(f"norm must be one of {list(NORMS)}, got {norm!r}")
    return np.where(hit, out, miss), hit
