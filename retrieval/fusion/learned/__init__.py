"""Learned fusion: a model fitted to the judgments (``rwb learn``) scores each candidate from
its features.

``model = "linear"``:  ``score(d) = Σ_f w_f · (x_f(d) − mean_f) / scale_f`` over the named
features of ``retrieval.fusion.learned.features`` (per-path scores, ranks and per-query normalisations,
found-by-both, time, memory metadata and type, query features); the weights are knobs
(``learned.weights.<feature>.weight``), written inline in the TOML, so a user can learn them
and then move them by hand.
``model = "lambdamart"``: LightGBM's LambdaMART (``LGBMRanker(objective="lambdarank")``, Burges
2010, "From RankNet to LambdaRank to LambdaMART") over the same features, stored in ``file``.
``model = "moe"``: seed 001 §6 "可学习的 MoE": a model from query features to the profile's
weights per query, ``S = (w_dense·S_dense + w_sparse·S_sparse + w_time·S_time) × F_conf × F_vit``
with the penalty strength also predicted (``retrieval.fusion.learned.model.MoEModel``), stored in ``file``.

``file`` is relative to the folder of the TOML that names it (``rwb learn`` writes it there) and
may not leave it. ``feature_set`` is the fingerprint of the feature set the model was trained on
(``retrieval.fusion.learned.features.feature_set_id``): a candidate table whose features differ is refused with
a ``ValueError``, never scored. The defaults (no file, no fingerprint) are an untrained linear
model, ``minmax(cos) + minmax(BM25)`` (CombSUM), so the fusion is usable before any learning.
Source: seed 001 §6 (trainable MoE); Liu 2009, "Learning to Rank for Information Retrieval"
(pointwise linear models); Burges 2010 (LambdaMART); LightGBM ``LGBMRanker``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion.learned import features as feats
from retrieval.fusion._base import Fusion, LazyComponents, Scored, unseen
from retrieval.fusion.learned.model import (
    KINDS,
    MoEModel,
    TreeModel,
    check_feature_set,
    load_model,
    moe_parts,
    resolve_beside,
)
from retrieval.params import Params, number, read_from


@dataclass(frozen=True)
class FeatureWeight(Params):
    """One feature's weight in a linear model, over the standardised feature."""

    name: str = "dense_minmax"
    weight: float = number(
        0.0,
        "weight",
        "weight of the standardised feature (x − mean) / scale",
        lo=-3.0,
        hi=3.0,
        step=0.05,
        min=-1e6,
        max=1e6,
    )
    mean: float = 0.0
    scale: float = 1.0

    def check(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"feature name must be a non-empty string, got {self.name!r}")
        for key in ("mean", "scale"):
            value = getattr(self, key)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not np.isfinite(value)
            ):
                raise ValueError(f"{self.name}.{key} must be a finite number, got {value!r}")
            object.__setattr__(self, key, float(value))
        if not self.scale > 0:
            raise ValueError(f"{self.name}.scale must be > 0, got {self.scale!r}")


DEFAULT_WEIGHTS = (FeatureWeight("dense_minmax", 1.0), FeatureWeight("bm25_minmax", 1.0))


def _weights(raw) -> tuple[FeatureWeight, ...]:
    """Weights from code (FeatureWeight), a TOML array of tables, or a table {name: weight}."""
    if isinstance(raw, dict):
        raw = [{"name": k, **(v if isinstance(v, dict) else {"weight": v})} for k, v in raw.items()]
    if not isinstance(raw, (list, tuple)):
        raise ValueError(
            f"weights must be an array of tables (name, weight, mean, scale), got {raw!r}"
        )
    out = []
    for i, item in enumerate(raw):
        if isinstance(item, FeatureWeight):
            out.append(item)
        elif isinstance(item, dict):
            unknown = sorted(set(item) - {"name", "weight", "mean", "scale"})
            if unknown:
                raise ValueError(
                    f"weights[{i}]: unknown key(s) {unknown}; allowed: name, weight, mean, scale"
                )
            try:
                out.append(FeatureWeight(**item))
            except ValueError as error:
                raise ValueError(f"weights[{i}]: {error}") from None
        else:
            raise ValueError(f"weights[{i}] must be a table, got {item!r}")
    names = [w.name for w in out]
    if len(set(names)) != len(names):
        raise ValueError(f"a feature is weighted twice: {names}")
    return tuple(out)


@dataclass(frozen=True)
class LearnedParams(Params):
    model: str = "linear"
    file: str = ""
    feature_set: str = ""
    weights: tuple[FeatureWeight, ...] = DEFAULT_WEIGHTS
    # the kinds of query (labelled intents) the model was trained on, and the fixed pipeline a
    # query of any other labelled kind gets instead (``retrieval.pipeline.scoring.fuse``);
    # empty: the model scores every query
    kinds: tuple[str, ...] = ()
    fallback: str = ""
    # the folder of the TOML these were read from, which ``file`` is relative to: part of the
    # configuration's identity (the same TOML in two folders names two models), never written
    folder: str = read_from()

    def check(self) -> None:
        if self.model not in KINDS:
            raise ValueError(f"model must be one of {list(KINDS)}, got {self.model!r}")
        for key in ("file", "feature_set"):
            if not isinstance(getattr(self, key), str):
                raise ValueError(f"{key} must be a string, got {getattr(self, key)!r}")
        object.__setattr__(self, "weights", _weights(self.weights))
        kinds = self.kinds
        if not isinstance(kinds, (list, tuple)) or not all(isinstance(k, str) and k for k in kinds):
            raise ValueError(f"kinds must be a list of non-empty strings, got {kinds!r}")
        object.__setattr__(self, "kinds", tuple(sorted(set(kinds))))
        if not isinstance(self.fallback, str):
            raise ValueError(f"fallback must be a pipeline name, got {self.fallback!r}")
        if self.kinds and not self.fallback:
            raise ValueError("a model restricted to kinds needs the fallback pipeline the other kinds get")
        if self.model != "linear" and not self.file:
            raise ValueError(f"a {self.model} model needs file = the model file rwb learn wrote")
        if self.model == "linear" and not self.weights:
            raise ValueError("a linear model needs at least one weight")

    def active(self, name: str) -> bool:
        """Weights are the linear model's knobs; the other models have none. The kind routing
        (``kinds``, ``fallback``) is recorded by ``rwb learn``, not a knob."""
        if name in ("kinds", "fallback", "folder"):
            return False
        return name != "weights" or self.model == "linear"

    def in_folder(self, folder) -> "LearnedParams":
        """These parameters read from a TOML in ``folder``: a new configuration whose ``file``
        is relative to it (unchanged when they name no file)."""
        return dataclasses.replace(self, folder=str(folder)) if self.file else self

    def model_path(self):
        """The model file ``file`` names (``resolve_beside``: inside the TOML's folder)."""
        return resolve_beside(self.file, self.folder or None)

    def stored_model(self) -> TreeModel | MoEModel:
        return load_model(self.model_path())


def standardised_sum(
    x: np.ndarray, cols: np.ndarray, weights: tuple[FeatureWeight, ...]
) -> np.ndarray:
    """``Σ_f w_f · (x_f − mean_f) / scale_f`` for each row of ``x`` (feature ``f`` in column
    ``cols[f]``), added feature by feature in ``weights`` order: a row's score is computed from
    that row alone, the same whichever other rows share the call and however many BLAS threads
    run (a matrix product's sums are not), and equal to its components added in order."""
    out = np.zeros(len(x))
    for j, w in zip(cols, weights):
        out += (x[:, j] - w.mean) / w.scale * w.weight
    return out


def feature_weights(model) -> list[tuple[str, float]]:
    """A linear model's ``(feature name, weight)`` pairs, largest |weight| first (the name on a
    tie): ``model`` is a ``LearnedParams`` (a learned pipeline's parameters) or its tuple of
    ``FeatureWeight``. Each weight multiplies the standardised feature (x − mean) / scale, so
    their sizes compare across features. Empty for a stored (LambdaMART, MoE) model."""
    if isinstance(model, LearnedParams):
        if model.model != "linear":
            return []
        model = model.weights
    pairs = [(w.name, float(w.weight)) for w in model]
    return sorted(pairs, key=lambda p: (-abs(p[1]), p[0]))


def linear_scores(
    c: Candidates,
    visible: np.ndarray,
    depth: int,
    weights: tuple[FeatureWeight, ...],
    fixed: np.ndarray,
    feature_set: str = "",
) -> Scored:
    """``Σ w·(x − mean)/scale`` on the visible rows (−inf elsewhere); a component per feature.
    ``fixed``: as ``retrieval.fusion.learned.features.feature_matrix``'s."""
    names = check_feature_set(c, tuple(w.name for w in weights), feature_set, "the linear model")
    at = {name: j for j, name in enumerate(names)}
    unknown = [w.name for w in weights if w.name not in at]
    if unknown:
        raise ValueError(
            f"the linear model weights feature(s) {unknown} this candidate table does not have; "
            f"features: {', '.join(names)}"
        )
    x = feats.feature_matrix(c, visible, depth, fixed)
    cols = np.array([at[w.name] for w in weights], dtype=np.int64)
    score = np.where(visible, standardised_sum(x, cols, weights), -np.inf)
    return Scored(
        score,
        LazyComponents(
            lambda: {
                w.name: (x[:, j] - w.mean) / w.scale * w.weight for j, w in zip(cols, weights)
            }
        ),
    )


def model_scores(
    c: Candidates, visible: np.ndarray, depth: int, model: TreeModel | MoEModel, fixed: np.ndarray
) -> Scored:
    """A stored model's scores on the visible rows (−inf elsewhere); ``fixed``: as
    ``retrieval.fusion.learned.features.feature_matrix``'s (a MoE model does not read them)."""
    names = check_feature_set(c, model.feature_names, model.feature_set, f"the {model.kind} model")
    if tuple(names) != model.feature_names:
        raise ValueError(f"the {model.kind} model's features differ from this table's")
    score = unseen(c.n_rows)
    if isinstance(model, TreeModel):
        rows = np.flatnonzero(visible)
        if len(rows):
            score[rows] = model.predict(feats.feature_matrix(c, visible, depth, fixed)[rows])
        return Scored(score, {"model": np.where(visible, score, 0.0)})
    parts = moe_parts(c, visible, depth, model.weights(c, depth))
    total = parts["dense"] + parts["sparse"] + parts["time"]
    score[visible] = total[visible]
    return Scored(
        score,
        {k: parts[k] for k in ("dense", "sparse", "time")},
        {"confidence": parts["x confidence"], "vitality": parts["x vitality"]},
    )


def learned(
    c: Candidates, visible: np.ndarray, depth: int, params: LearnedParams = LearnedParams(), *,
    fixed: np.ndarray,
) -> Scored:
    """The learned model's score of every visible row; ``fixed``: the fixed pipelines' columns
    (``retrieval.pipeline.fixed_pipeline_features``), which the pipeline passes in."""
    if params.model == "linear":
        return linear_scores(c, visible, depth, params.weights, fixed, params.feature_set)
    return model_scores(c, visible, depth, params.stored_model(), fixed)


FUSION = Fusion(
    "learned",
    LearnedParams,
    learned,
    "a model fitted to the judgments (rwb learn): linear, LambdaMART or seed 001's MoE",
    "seed 001 §6; Liu 2009; Burges 2010; LightGBM",
    variants=(LearnedParams(weights=(FeatureWeight("rrf", 1.0), FeatureWeight("both", 0.5))),),
    nested=True,
)

__all__ = [
    "FUSION",
    "FeatureWeight",
    "LearnedParams",
    "feature_weights",
    "linear_scores",
    "model_scores",
    "standardised_sum",
]
