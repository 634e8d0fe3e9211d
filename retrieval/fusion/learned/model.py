"""Learned fusion models at scoring time: plain data applied to a candidate table's features
(``retrieval.fusion.learned.features``); ``eval.learning`` fits them.

Three kinds:

- ``LinearModel``: ``score = Σ_f w_f · (x_f − mean_f) / scale_f`` over named features (each
  column standardised with the training mean and scale). Its weights are the learned
  pipeline's knobs, written inline in the pipeline's TOML.
- ``TreeModel``: a LightGBM LambdaMART ranker (``LGBMRanker(objective="lambdarank")``), kept as
  LightGBM's own model text and applied with ``lightgbm.Booster(model_str=…).predict``. A
  correction (``meta`` ``base`` and ``base_scale``) was boosted on top of a fixed pipeline's
  score: its score is ``base_scale · x_base + the trees' sum`` (LightGBM's ``init_score`` at
  training time, the base margin the trees correct).
- ``MoEModel``: seed 001 §6's "trainable MoE" — a model from query features to the adaptive
  profile's weights. For each query it predicts the value of every point of a grid of
  ``(w_dense, w_sparse, w_time, strength)`` (a ridge regression per point, one shared input:
  the standardised ``retrieval.fusion.learned.features.QUERY_FEATURES``) and applies the point with the highest
  predicted value (the first on a tie): ``S = (w_dense·S_dense + w_sparse·S_sparse +
  w_time·S_time) × F_conf(C) × F_vit(V)``, the ``S`` of ``retrieval.fusion.adaptive.signals``
  (half-life 30 days), and each factor ``F = 1 + strength · (F_strong − 1)`` with ``F_strong``
  seed 001 §2.2's strong penalty (``retrieval.profiles.PENALTIES["strong"]``): strength 1 is
  the seed's factors (C < 0.6 → 0.5, V > 80 → 1.2 …), 0 none.

A tree or MoE model is stored as a JSON file (``save_model`` / ``load_model``) beside the
pipeline TOML that names it; a tree model's LightGBM text carries its sha256 and is checked
(``retrieval.lightgbm_text``) before LightGBM parses it. Every model records the feature set of
the pool it was trained on (``feature_names``, ``feature_set``); ``check_feature_set`` refuses
to score a table whose feature set differs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.candidate_table import Candidates
import retrieval.fusion.learned.features as feats
from retrieval.files import atomic_write_text, resolve_inside
from retrieval.limits import clip
from retrieval.fusion.adaptive import quality_multiplier, signals
from retrieval.lightgbm_text import BoosterTextError, check_booster
from retrieval.profiles import PENALTIES

FORMAT = "rwb-learned-model"
VERSION = 1
KINDS = ("linear", "lambdamart", "moe")
MOE_HALF_LIFE = 30.0


def check_feature_set(
    c: Candidates, names: tuple[str, ...], recorded: str, what: str
) -> tuple[str, ...]:
    """The table's feature names when ``recorded`` (a ``retrieval.fusion.learned.features.feature_set_id``)
    is theirs; else a
    ``ValueError`` saying what differs. An empty ``recorded`` checks nothing."""
    have = feats.feature_names(c)
    if recorded and feats.feature_set_id(have) != recorded:
        missing = [n for n in names if n not in have]
        extra = [n for n in have if n not in names]
        detail = "; ".join(
            part
            for part in (
                f"missing {missing[:6]}" if missing else "",
                f"not in the model {extra[:6]}" if extra else "",
            )
            if part
        )
        raise ValueError(
            f"{what} was trained on feature set {recorded} ({len(names)} features) but this "
            "candidate "
            f"table gives {feats.feature_set_id(have)} ({len(have)} features"
            f"{': ' + detail if detail else ''}); rerun rwb learn on this dataset"
        )
    return have


@dataclass(frozen=True, eq=False)
class TreeModel:
    feature_names: tuple[str, ...]
    feature_set: str
    booster: str  # LightGBM's model text (Booster.model_to_string)
    meta: dict

    kind = "lambdamart"

    def predict(self, x: np.ndarray) -> np.ndarray:
        out = _booster(self).predict(x, num_threads=1)
        base = self.meta.get("base")
        if base:
            out = out + float(self.meta["base_scale"]) * x[:, self.feature_names.index(base)]
        return out


_BOOSTERS: dict[int, object] = {}


def _booster(model: TreeModel):
    key = id(model)
    hit = _BOOSTERS.get(key)
    if hit is None or hit[0] is not model:
        import lightgbm

        if len(_BOOSTERS) > 16:
            _BOOSTERS.clear()
        try:
            booster = lightgbm.Booster(model_str=model.booster)
        except lightgbm.basic.LightGBMError as error:  # text check_booster let through
            first = (str(error).splitlines() or [""])[0][:200]
            raise ValueError(f"the learned model's booster is not one LightGBM reads: {first}") \
                from None
        hit = _BOOSTERS[key] = (model, booster)
    return hit[1]


@dataclass(frozen=True, eq=False)
class MoEModel:
    feature_names: tuple[str, ...]
    feature_set: str
    grid: np.ndarray  # (points, 4): w_dense, w_sparse, w_time, strength
    coef: np.ndarray  # (points, query features)
    intercept: np.ndarray  # (points,)
    mean: np.ndarray  # (query features,)
    scale: np.ndarray
    meta: dict

    kind = "moe"

    def weights(self, c: Candidates, depth: int) -> np.ndarray:
        """(queries, 4): the grid point each query gets."""
        z = (feats.query_features(c, depth) - self.mean) / self.scale
        predicted = z @ self.coef.T + self.intercept
        return self.grid[np.argmax(predicted, axis=1)]


def moe_inputs(
    c: Candidates, visible: np.ndarray, depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What every MoE score of a table is made of, per row: ``(S_dense, S_sparse, S_time,
    F_conf, F_vit)``, the factors at full strength (seed 001's strong penalty)."""
    s_dense, s_sparse, s_time, _ = signals(c, visible, depth, MOE_HALF_LIFE)
    fc, fv = quality_multiplier(c.confidence, c.vitality, PENALTIES["strong"])
    return s_dense, s_sparse, s_time, fc, fv


def moe_parts(
    c: Candidates, visible: np.ndarray, depth: int, per_query: np.ndarray
) -> dict[str, np.ndarray]:
    """The MoE score's components per row (they sum to it) for per-query ``(w_dense, w_sparse,
    w_time, strength)``; also the factors, under ``x confidence`` and ``x vitality``."""
    s_dense, s_sparse, s_time, fc, fv = moe_inputs(c, visible, depth)
    w = per_query[c.query_idx]
    f_conf = 1.0 + w[:, 3] * (fc - 1.0)
    f_vit = 1.0 + w[:, 3] * (fv - 1.0)
    m = f_conf * f_vit
    return {
        "dense": w[:, 0] * s_dense * m,
        "sparse": w[:, 1] * s_sparse * m,
        "time": w[:, 2] * s_time * m,
        "x confidence": f_conf,
        "x vitality": f_vit,
    }


def moe_point_scores(c: Candidates, visible: np.ndarray, depth: int, grid: np.ndarray):
    """For each point of ``grid`` in turn, the MoE score per row with every query at that point
    (−inf outside ``visible``): the sum of ``moe_parts``' components, computed as they are, bit
    for bit, from inputs shared by every point (each strength's factors once)."""
    s_dense, s_sparse, s_time, fc, fv = moe_inputs(c, visible, depth)
    factor: dict[float, np.ndarray] = {}
    for point in np.asarray(grid, dtype=np.float64):
        w_dense, w_sparse, w_time, strength = point  # float64 scalars, as moe_parts' columns
        m = factor.get(float(strength))
        if m is None:
            m = factor[float(strength)] = (1.0 + strength * (fc - 1.0)) * (
                1.0 + strength * (fv - 1.0)
            )
        total = w_dense * s_dense * m + w_sparse * s_sparse * m + w_time * s_time * m
        yield np.where(visible, total, -np.inf)


def _array(data: dict, key: str, shape_ndim: int) -> np.ndarray:
    value = np.asarray(data.get(key), dtype=np.float64)
    if value.ndim != shape_ndim or not np.all(np.isfinite(value)):
        raise ValueError(f"{key} must be a finite {shape_ndim}-d array")
    return value


def booster_digest(booster: str) -> str:
    """The sha256 of a booster's text, written beside it in the model's JSON."""
    return hashlib.sha256(booster.encode("utf-8", "surrogatepass")).hexdigest()


def model_from_json(data: dict, where: str) -> TreeModel | MoEModel:
    """A model from its JSON form; ``ValueError`` naming ``where`` when it is not one. A tree
    model's booster text is checked against the sha256 written at save time (a model without
    it is refused) and by
    ``retrieval.lightgbm_text.check_booster`` before LightGBM ever parses it (LightGBM's reader
    trusts its input: damaged text could crash the process)."""
    try:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not an rwb learned model (format {FORMAT!r})")
        if data.get("version") != VERSION:
            raise ValueError(
                f"model version {data.get('version')!r}; this rwb reads version {VERSION}"
            )
        names = tuple(data.get("feature_names") or ())
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError("feature_names must be a list of names")
        feature_set = data.get("feature_set")
        if feature_set != feats.feature_set_id(names):
            raise ValueError("feature_set does not match feature_names")
        meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
        kind = data.get("kind")
        if kind == "lambdamart":
            booster = data.get("booster")
            if not isinstance(booster, str) or not booster.startswith("tree"):
                raise ValueError("booster must be LightGBM model text")
            recorded = data.get("booster_sha256")
            if recorded is None:  # never used unchecked: an edited booster may drop its checksum too
                raise ValueError("the booster has no booster_sha256 (rwb learn writes it beside the "
                                 "booster); the model cannot be checked — rerun rwb learn")
            if recorded != booster_digest(booster):
                raise ValueError("booster text damaged (its sha256 differs from the one rwb "
                                 "learn wrote beside it); rerun rwb learn")
            try:
                check_booster(booster, len(names))
            except BoosterTextError as error:
                raise ValueError(f"booster is not a model rwb can load: {error}") from None
            base, scale = meta.get("base"), meta.get("base_scale")
            if base is not None and (
                base not in names or isinstance(scale, bool) or not isinstance(scale, (int, float))
                or not np.isfinite(scale)
            ):
                raise ValueError("meta.base must name one of the features and meta.base_scale "
                                 "be a finite number")
            return TreeModel(names, feature_set, booster, meta)
        if kind == "moe":
            grid, coef = _array(data, "grid", 2), _array(data, "coef", 2)
            intercept, mean, scale = (
                _array(data, "intercept", 1),
                _array(data, "mean", 1),
                _array(data, "scale", 1),
            )
            width = len(feats.QUERY_FEATURES)
            if tuple(data.get("query_features") or ()) != feats.QUERY_FEATURES:
                raise ValueError("query_features differ from this rwb's")
            if (
                grid.shape[1] != 4
                or coef.shape != (len(grid), width)
                or intercept.shape != (len(grid),)
                or mean.shape != (width,)
                or scale.shape != (width,)
                or np.any(scale <= 0)
                or np.any(grid < 0)
            ):
                raise ValueError(
                    "grid, coef, intercept, mean and scale have inconsistent shapes or values"
                )
            return MoEModel(names, feature_set, grid, coef, intercept, mean, scale, meta)
        raise ValueError(f"kind must be 'lambdamart' or 'moe', got {kind!r}")
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


def model_to_json(model: TreeModel | MoEModel) -> dict:
    out = {
        "format": FORMAT,
        "version": VERSION,
        "kind": model.kind,
        "feature_names": list(model.feature_names),
        "feature_set": model.feature_set,
        "meta": model.meta,
    }
    if isinstance(model, TreeModel):
        out["booster"] = model.booster
        out["booster_sha256"] = booster_digest(model.booster)
    else:
        out.update(
            query_features=list(feats.QUERY_FEATURES),
            grid=model.grid.tolist(),
            coef=model.coef.tolist(),
            intercept=model.intercept.tolist(),
            mean=model.mean.tolist(),
            scale=model.scale.tolist(),
        )
    return out


def save_model(model: TreeModel | MoEModel, path: Path) -> None:
    """Write the model's JSON atomically."""
    atomic_write_text(Path(path), json.dumps(model_to_json(model)) + "\n")


_LOADED: dict[str, tuple[tuple, TreeModel | MoEModel]] = {}


def load_model(path: str | Path) -> TreeModel | MoEModel:
    """The model stored at ``path``, read once per file version (path, size, modification time)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError:
        raise ValueError(
            f"learned model file {str(path)!r} does not exist "
            "(written by rwb learn beside its TOML)"
        ) from None
    key = (stat.st_size, stat.st_mtime_ns)
    hit = _LOADED.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"learned model file {str(path)!r} cannot be read: {error}") from None
    model = model_from_json(data, str(path))
    if len(_LOADED) > 16:
        _LOADED.clear()
    _LOADED[str(path)] = (key, model)
    return model


def resolve_beside(file: str, base_dir: str | os.PathLike | None) -> Path:
    """The model file a pipeline names: a relative path inside ``base_dir``, the folder of the
    TOML naming it (the working folder when there is none), never outside it (``..`` or a
    symlink leaving it is refused). An absolute path is taken only from a configuration built
    in code (no ``base_dir``) or when it names one of the workbench's own models under
    ``$RWB_HOME/learned`` (``eval.stores.learned`` writes those); any other absolute path in a
    TOML is refused with the same line whether or not the file exists."""
    if os.path.isabs(file):
        if base_dir is None:
            return Path(file)
        from retrieval.index import rwb_home

        store = rwb_home() / "learned"
        try:
            return resolve_inside(store, os.path.relpath(file, store))
        except ValueError:
            raise ValueError(
                f"[learned] file = {clip(file)}: an absolute path is refused; give the model "
                "file's path relative to the TOML's folder"
            ) from None
    return resolve_inside(Path(base_dir or "."), file)
