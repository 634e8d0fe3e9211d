"""The learned intent router at query time: a linear model over a query's embedding and a few
simple features, applied with NumPy (the model is plain data; ``eval.learning.router`` fits it).

Features of a query, in ``FEATURES`` order after its embedding (when the model has one):
the rule router's choice one-hot (``route:debug`` … ``route:concept``, ``retrieval.routing``),
whether the timeline trigger fires, whether the query names a memory file (fast path),
``log(1 + tokens)``, whether it holds a digit, its share of CJK characters, and whether it
ends with a question mark. Each column is standardised with the training mean and scale.

Prediction: scores ``z·Wᵀ + b`` per profile; the profile with the highest score (the first
in ``classes`` order on a tie). A two-class model holds one row ``w`` (scikit-learn's
binary form): the second class when ``z·w + b > 0``. A model trained on one class predicts it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from retrieval.routing import INTENTS, fast_path_target, route_intent, triggers_timeline

FEATURES = tuple(f"route:{name}" for name in INTENTS) + (
    "timeline_trigger", "fast_path", "log_tokens", "has_digit", "cjk_share", "question")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_TOKEN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]|[A-Za-z0-9_]+")


def simple_features(texts: Sequence[str]) -> np.ndarray:
    """(len(texts), len(FEATURES)) float array; see the module docstring."""
    out = np.zeros((len(texts), len(FEATURES)))
    for i, text in enumerate(texts):
        route = route_intent(text)
        out[i, INTENTS.index(route)] = 1.0
        n = len(INTENTS)
        out[i, n] = float(triggers_timeline(text))
        out[i, n + 1] = float(fast_path_target(text) is not None)
        out[i, n + 2] = math.log1p(len(_TOKEN.findall(text)))
        out[i, n + 3] = float(any(ch.isdigit() for ch in text))
        out[i, n + 4] = len(_CJK.findall(text)) / max(1, len(text.strip()))
        out[i, n + 5] = float(text.rstrip().endswith(("?", "？")))
    return out


def design(texts: Sequence[str], vectors: np.ndarray | None) -> np.ndarray:
    """The model's input: the embedding (if given) then the simple features."""
    simple = simple_features(texts)
    if vectors is None:
        return simple
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.shape[0] != len(texts):
        raise ValueError(f"{vectors.shape[0]} query vectors for {len(texts)} queries")
    return np.hstack([vectors, simple])


@dataclass(frozen=True, eq=False)
class RouterModel:
    """A fitted linear router (data only)."""

    classes: tuple[str, ...]      # profile names, the model's output order
    coef: np.ndarray              # (n_classes, n_inputs), or (1, n_inputs) for two classes
    intercept: np.ndarray         # (n_classes,) or (1,)
    mean: np.ndarray              # (n_inputs,) standardisation
    scale: np.ndarray             # (n_inputs,)
    embedder: str                 # model id of the query vectors it takes ("" = none)
    dim: int                      # embedding width (0 = simple features only)
    n_train: int

    def check(self, vectors: np.ndarray | None, n: int) -> np.ndarray | None:
        if self.dim == 0:
            return None
        if vectors is None:
            raise ValueError(f"the learned router needs {self.embedder} query vectors")
        vectors = np.asarray(vectors)
        if vectors.shape != (n, self.dim):
            raise ValueError(f"the learned router takes {self.dim}-d {self.embedder} vectors, got shape "
                             f"{vectors.shape}")
        return vectors


def apply_router(model: RouterModel, texts: Sequence[str], vectors: np.ndarray | None = None) -> tuple[str, ...]:
    """The profile the model picks for each query."""
    if not texts:
        return ()
    if len(model.classes) == 1:
        return (model.classes[0],) * len(texts)
    x = (design(texts, model.check(vectors, len(texts))) - model.mean) / model.scale
    scores = x @ model.coef.T + model.intercept
    if len(model.classes) == 2 and scores.shape[1] == 1:
        picked = (scores[:, 0] > 0).astype(np.int64)
    else:
        picked = np.argmax(scores, axis=1)  # first maximum: ties go to the earlier class
    return tuple(model.classes[i] for i in picked)
