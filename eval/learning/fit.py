"""Fitting the learned fusion's models (``retrieval.fusion.learned.model``) on some queries of a pool.

``Training`` holds what every fit shares: the feature matrix of the visible rows
(``retrieval.fusion.learned.features.feature_matrix``), their grades (``eval.metrics.measure.judge``, the
labels every command uses), and — for the MoE — each query's value under every point of the
MoE grid (``retrieval.fusion.learned.model.moe_point_scores``: the signals and each strength's factors
computed once for the whole grid). A ``Spec`` names a model and its hyper-parameters;
``fit(spec, training, queries)`` fits it on the rows of ``queries`` only, and
``scores(model, training, queries)`` scores the rows of ``queries`` (every visible row by
default).

- ``linear``: scikit-learn ``LogisticRegression`` (L2, inverse strength ``C``, lbfgs) pointwise
  on "grade > 0" over the standardised row features (query features, equal on every row of a
  query, cannot order a query's documents and are left out), each column standardised with the
  training rows' mean and population standard deviation (1 where it is 0).
- ``lambdamart``: LightGBM ``LGBMRanker(objective="lambdarank")`` on the graded labels, one
  group per query, fixed settings (``LAMBDAMART``: 200 trees, 15 leaves, learning rate 0.05,
  at least 10 rows a leaf, one thread, ``deterministic``, seeded) over every feature.
- ``moe``: a ridge regression (``alpha``) per grid point from the standardised query features
  to the query's nDCG@k under that point (``retrieval.fusion.learned.model.MoEModel``).
- ``correction`` (asked for by name, not in ``auto``): LambdaMART (``LAMBDAMART`` with
  ``CORRECTION``'s fewer trees) boosted on top of the default pipeline: LightGBM's
  ``init_score`` (the base margin) is ``scale`` × the default's min-max score (the
  ``fixed:<default>`` column, ``Training.base``), so with no tree the ranking is the default's
  and the trees learn a correction to it; the ``TreeModel`` records the base and adds it when
  it scores.
"""

from __future__ import annotations

import itertools
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from eval.metrics.measure import Judged, fused_values
from retrieval.candidates import Candidates
from retrieval.fusion.learned.features import (
    QUERY_FEATURES,
    feature_matrix,
    feature_names,
    feature_set_id,
    query_features,
)
from retrieval.fusion import Scored
from retrieval.fusion.learned import FeatureWeight, standardised_sum
from retrieval.fusion.learned.model import MoEModel, TreeModel, moe_parts, moe_point_scores
from retrieval.pipeline import Fused, PipelineConfig, all_hybrid, fixed_pipeline_features

MODELS = ("linear", "lambdamart", "moe", "correction")
CORRECTION_SCALE = (1.0, 4.0)  # the base margin: this × the default's min-max score
CORRECTION = dict(n_estimators=100)  # LAMBDAMART's settings otherwise
LINEAR_C = (0.01, 0.1, 1.0)
MOE_ALPHA = (1.0, 10.0, 100.0)
LAMBDAMART = dict(
    objective="lambdarank",
    n_estimators=200,
    num_leaves=15,
    learning_rate=0.05,
    min_child_samples=10,
    num_threads=1,
    deterministic=True,
    force_row_wise=True,
    verbose=-1,
)
MOE_STEPS = (0.0, 0.25, 0.5, 0.75, 1.0)
MOE_STRENGTHS = (0.0, 0.5, 1.0)


def moe_grid() -> np.ndarray:
    """(points, 4): every ``(w_dense, w_sparse, w_time)`` on ``MOE_STEPS`` but all zeros, with each
    penalty strength of ``MOE_STRENGTHS``."""
    points = [
        (d, s, t, p)
        for d, s, t in itertools.product(MOE_STEPS, repeat=3)
        if d + s + t > 0
        for p in MOE_STRENGTHS
    ]
    return np.array(points, dtype=np.float64)


@dataclass(frozen=True)
class Spec:
    """A model and its hyper-parameters."""

    model: str
    value: float | None = None  # C (linear) or alpha (moe)

    def __str__(self) -> str:
        if self.model == "linear":
            return f"linear C={self.value:g}"
        if self.model == "moe":
            return f"moe alpha={self.value:g}"
        if self.model == "correction":
            return f"correction scale={self.value:g}"
        return "lambdamart"


def specs(model: str) -> tuple[Spec, ...]:
    """The candidates a ``--model`` choice searches in the inner folds (``auto``: all of them)."""
    out = {
        "linear": tuple(Spec("linear", c) for c in LINEAR_C),
        "lambdamart": (Spec("lambdamart"),),
        "moe": tuple(Spec("moe", a) for a in MOE_ALPHA),
        "correction": tuple(Spec("correction", a) for a in CORRECTION_SCALE),
    }
    if model == "auto":
        return out["linear"] + out["lambdamart"] + out["moe"]
    if model not in out:
        raise ValueError(f"--model must be one of {['auto', *MODELS]}, got {model!r}")
    return out[model]


@dataclass(eq=False)
class Training:
    """A pool, its labels and its features at one depth, shared by every fit."""

    c: Candidates
    judged: Judged
    config: PipelineConfig  # the learned pipeline's ranking settings (max results, depth)
    metric: str
    seed: int = 0
    base: str = "fixed:seed-adaptive"  # a correction's base margin: the default's score column
    visible: np.ndarray = field(init=False)
    x: np.ndarray = field(init=False)
    names: tuple[str, ...] = field(init=False)
    _moe: np.ndarray | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self):
        self.visible = self.c.visible(self.config.path_depth)
        self.x = feature_matrix(self.c, self.visible, self.config.path_depth, fixed_pipeline_features(self.c))
        self.names = feature_names(self.c)

    @property
    def depth(self) -> int:
        return self.config.path_depth

    def rows_of(self, queries: np.ndarray) -> np.ndarray:
        """The visible rows of pool queries ``queries`` (in table order: grouped by query)."""
        member = np.zeros(self.c.n_queries, dtype=bool)
        member[queries] = True
        return np.flatnonzero(self.visible & member[self.c.query_idx])

    def values(self, score: np.ndarray) -> np.ndarray:
        """Per pool query: ``metric`` of the ranking of ``score`` (NaN where the query does not
        count)."""
        fused = Fused(
            self.config,
            self.c,
            Scored(score, {}),
            all_hybrid(self.c),
            self.config.max_results,
            None,
            None,
            None,
            self.depth,
        )
        return fused_values(self.judged, [fused], (self.metric,))[self.metric][0]

    def moe_values(self) -> np.ndarray:
        """(pool queries, grid points): the metric under each MoE grid point, computed once."""
        with self._lock:
            if self._moe is None:
                grid = moe_grid()
                out = np.empty((self.c.n_queries, len(grid)))
                points = moe_point_scores(self.c, self.visible, self.depth, grid)
                for g, score in enumerate(points):
                    out[:, g] = self.values(score)
                self._moe = np.nan_to_num(out)
        return self._moe


def _moe_score(t: Training, per_query: np.ndarray) -> np.ndarray:
    parts = moe_parts(t.c, t.visible, t.depth, per_query)
    total = parts["dense"] + parts["sparse"] + parts["time"]
    return np.where(t.visible, total, -np.inf)


def _standardise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale > 1e-12, scale, 1.0)


LINEAR_COLUMNS = len(QUERY_FEATURES)


@contextmanager
def quiet():
    """The fitting libraries' warnings (a solver's convergence notes, LightGBM's) silenced.
    Warning filters are the process's, not a thread's: enter it once around fits that run on
    several threads, never inside each (nested entries and exits on two threads can leave the
    filters of one behind)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def fit(spec: Spec, t: Training, queries: np.ndarray, meta: dict | None = None):
    """``spec`` fitted on the visible rows of pool queries ``queries``: a tuple of
    ``FeatureWeight`` (linear), a ``TreeModel`` or a ``MoEModel``. Run it inside ``quiet()`` to
    silence the libraries' warnings; it sets no warning filter itself (that is not
    thread-safe)."""
    meta = dict(meta or {})
    feature_set = feature_set_id(t.names)
    if spec.model == "moe":
        from sklearn.linear_model import Ridge

        z_all = query_features(t.c, t.depth)
        mean, scale = _standardise(z_all[queries])
        model = Ridge(alpha=float(spec.value)).fit(
            (z_all[queries] - mean) / scale, t.moe_values()[queries]
        )
        return MoEModel(
            t.names,
            feature_set,
            moe_grid(),
            np.asarray(model.coef_, dtype=np.float64),
            np.asarray(model.intercept_, dtype=np.float64),
            mean,
            scale,
            meta,
        )
    rows = t.rows_of(queries)
    y = t.judged.grade[rows]
    if spec.model == "linear":
        from sklearn.linear_model import LogisticRegression

        width = len(t.names) - LINEAR_COLUMNS
        x = t.x[rows, :width]
        mean, scale = _standardise(x) if len(x) else (np.zeros(width), np.ones(width))
        target = (y > 0).astype(int)
        if len(set(target.tolist())) < 2:  # no row, or one class: nothing to separate, weights 0
            coef = np.zeros(width)
        else:
            model = LogisticRegression(C=float(spec.value), max_iter=2000)
            model.fit((x - mean) / scale, target)
            coef = model.coef_[0]
        return tuple(
            FeatureWeight(name, float(f"{w:.6g}"), float(f"{m:.6g}"), float(f"{s:.6g}"))
            for name, w, m, s in zip(t.names[:width], coef, mean, scale)
        )
    import lightgbm

    if not len(rows):
        raise ValueError("no candidate rows to train LambdaMART on")
    groups = np.bincount(t.c.query_idx[rows], minlength=t.c.n_queries)
    groups = groups[groups > 0]
    if spec.model == "correction":
        if t.base not in t.names:
            raise ValueError(f"a correction needs the default's score as a feature ({t.base!r} "
                             "is none of the table's)")
        base = float(spec.value) * t.x[rows, t.names.index(t.base)]
        ranker = lightgbm.LGBMRanker(random_state=t.seed, **{**LAMBDAMART, **CORRECTION})
        ranker.fit(t.x[rows], y.astype(np.int64), group=groups, init_score=base)
        meta = {**meta, "base": t.base, "base_scale": float(spec.value)}
        return TreeModel(t.names, feature_set, ranker.booster_.model_to_string(), meta)
    ranker = lightgbm.LGBMRanker(random_state=t.seed, **LAMBDAMART)
    ranker.fit(t.x[rows], y.astype(np.int64), group=groups)
    return TreeModel(t.names, feature_set, ranker.booster_.model_to_string(), meta)


def scores(model, t: Training, queries: np.ndarray | None = None) -> np.ndarray:
    """Every visible row's score under a fitted model (−inf elsewhere); with ``queries`` (pool
    query indices), only their rows' (−inf on the others' rows). A row's score is the same
    either way and the same as the learned fusion gives it: a tree predicts each row alone, the
    linear formula (``standardised_sum``) adds each row's own terms, and the MoE's per-query
    weights and per-row products are computed on the whole table, as the fusion computes them."""
    rows = np.flatnonzero(t.visible) if queries is None else t.rows_of(queries)
    out = np.full(t.c.n_rows, -np.inf)
    if isinstance(model, tuple):
        at = {name: j for j, name in enumerate(t.names)}
        out[rows] = standardised_sum(t.x[rows], [at[w.name] for w in model], model)
    elif isinstance(model, MoEModel):
        out[rows] = _moe_score(t, model.weights(t.c, t.depth))[rows]
    else:
        out[rows] = model.predict(t.x[rows])  # a correction adds its base margin itself
    return out
