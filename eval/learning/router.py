"""A learned intent router: fitted to a query set's labelled intents, cross-validated, compared
with the rule router.

Model: scikit-learn's ``LogisticRegression`` (L2, ``C = 1``, lbfgs; multinomial over the
profiles present) on the query's embedding and the simple features of
``retrieval.learned_router`` (the rule router's choice among them), each column standardised
on the training queries. Targets are profiles: a label maps to a profile as the rule router's
evaluation maps it (``eval.learning.router_eval.INTENT_TO_PROFILE``, preference → concept); other labels
and unlabelled queries are not trained on. The fitted model is plain data
(``retrieval.learned_router.RouterModel``) applied with NumPy.

Query embeddings are the ones retrieval already made: read from the embedding cache
(``$RWB_HOME/embeddings.sqlite``, keyed by the pool's model and the query text), encoded only
when missing there. Without an embedder the model uses the simple features alone.

Honest routes (``cross_val_routes``): the labelled queries are split into ``folds`` seeded
folds (``eval.search.sweep.make_folds``); a labelled query is routed by the model fitted on the
other folds, never by one that saw its label; an unlabelled query by the model fitted on
every labelled one. With fewer than two labelled queries there is nothing to learn from and the
rules route every query (``LearnedRoutes.fallback``). ``learned_routes`` gives these routes for
a set of pipelines, passed as ``routes`` to ``retrieval.pipeline.fuse`` (and the evaluators
over it), which an adaptive pipeline with ``router = "learned"`` follows.
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from eval.learning.router_eval import INTENT_TO_PROFILE, RouterEvaluation, evaluate_routes
from eval.search.sweep import make_folds
from retrieval.candidates import Candidates
from retrieval.learned_router import FEATURES, RouterModel, apply_router, design
from retrieval.pipeline import PIPELINES, PipelineConfig

DEFAULT_FOLDS = 5
C = 1.0
MODEL_NAME = f"logistic regression (scikit-learn, L2, C={C:g})"


def targets(c: Candidates, labels: Mapping[str, str]) -> list[str | None]:
    """Each pool query's profile target, or None (unlabelled or a label outside the map)."""
    return [INTENT_TO_PROFILE.get((labels.get(q) or "").strip()) for q in c.query_ids]


def query_vectors(c: Candidates, embedder: str | None = None) -> np.ndarray | None:
    """The pool's query embeddings, from the embedding cache; the missing ones encoded (with
    ``embedder``, a name ``load_embedder`` takes; by default the pool's own model). None when
    the pool has no embedder or it cannot be loaded."""
    from retrieval.embedders import EMBEDDERS, CachedEmbedder, EmbedderUnavailable, EmbeddingCache, text_hash, \
        load_embedder
    from retrieval.index import rwb_home

    if c.embedder in ("", "none") or not c.query_texts:
        return None
    cache = EmbeddingCache(rwb_home() / "embeddings.sqlite")
    try:
        hashes = [text_hash(t) for t in c.query_texts]
        found = cache.get_many(c.embedder, list(dict.fromkeys(hashes)))
        if all(h in found for h in hashes):
            return np.stack([found[h] for h in hashes]).astype(np.float32)
        name = embedder or (c.embedder if c.embedder in EMBEDDERS else None)
        if name is None:
            return None
        try:
            model = CachedEmbedder(load_embedder(name), cache)
        except EmbedderUnavailable:
            return None
        if model.model_id != c.embedder:
            return None
        return model.encode(list(c.query_texts))
    finally:
        cache.close()


def fit_router(texts: Sequence[str], vectors: np.ndarray | None, profiles: Sequence[str],
               embedder: str = "") -> RouterModel:
    """A ``RouterModel`` fitted to ``profiles`` (one per text)."""
    if len(texts) != len(profiles) or not texts:
        raise ValueError(f"need one profile per query, got {len(profiles)} for {len(texts)} queries")
    x = design(texts, vectors)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    classes = tuple(sorted(set(profiles)))
    dim = 0 if vectors is None else int(np.asarray(vectors).shape[1])
    if len(classes) == 1:
        zero = np.zeros((1, x.shape[1]))
        return RouterModel(classes, zero, np.zeros(1), mean, scale, embedder if dim else "", dim, len(texts))
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=C, max_iter=5000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notices on tiny sets
        model.fit((x - mean) / scale, list(profiles))
    if tuple(model.classes_) != classes:
        raise ValueError(f"classes out of order: {model.classes_}")
    return RouterModel(classes, np.asarray(model.coef_, dtype=np.float64),
                       np.asarray(model.intercept_, dtype=np.float64), mean, scale,
                       embedder if dim else "", dim, len(texts))


@dataclass(frozen=True, eq=False)
class LearnedRoutes:
    routes: tuple[str, ...]        # per pool query
    fold_of: np.ndarray            # per pool query: its CV fold (-1: unlabelled, routed by the full model)
    n_labelled: int
    folds: int
    seed: int
    features: str                  # "minilm embedding + 10 simple features"
    fallback: bool                 # True: no labels to learn from, the rules' routes

    @property
    def note(self) -> str:
        if self.fallback:
            return "no labelled intents to learn from: the rule router's routes"
        return (f"{MODEL_NAME} on {self.features}; {self.folds}-fold cross-validated over {self.n_labelled} "
                f"labelled queries (seed {self.seed}): each labelled query routed by a model not trained on it")


def cross_val_routes(c: Candidates, labels: Mapping[str, str], vectors: np.ndarray | None = None,
                     folds: int = DEFAULT_FOLDS, seed: int = 0) -> LearnedRoutes:
    """Honest learned routes for every pool query; see the module docstring. Kept with the
    table per labels, vectors, folds and seed (``rwb eval`` and the Evaluate page evaluate the
    router once per set of pipelines compared, and its fits do not depend on them)."""
    y = targets(c, labels)
    key = ("learned routes", tuple(y), folds, seed, None if vectors is None else
           hashlib.blake2b(np.ascontiguousarray(vectors).tobytes(), digest_size=16).digest())
    return c.derived(key, lambda: _cross_val_routes(c, y, vectors, folds, seed))


def _cross_val_routes(c: Candidates, y: list[str | None], vectors: np.ndarray | None, folds: int,
                      seed: int) -> LearnedRoutes:
    labelled = np.array([t is not None for t in y])
    n = int(labelled.sum())
    texts = list(c.query_texts)
    what = (f"{c.embedder} embedding + " if vectors is not None else "") + f"{len(FEATURES)} simple features"
    fold_of = np.full(c.n_queries, -1, dtype=np.int64)
    if n < 2:
        return LearnedRoutes(tuple(c.intent_route), fold_of, n, 0, seed, what, True)
    k = min(folds, n)
    at = np.flatnonzero(labelled)
    fold_of[at] = make_folds(n, k, seed)
    routes = list(c.intent_route)

    def fit(rows: np.ndarray) -> RouterModel:
        return fit_router([texts[i] for i in rows], None if vectors is None else vectors[rows],
                          [y[i] for i in rows], c.embedder)

    def route(model: RouterModel, rows: np.ndarray) -> None:
        for i, r in zip(rows, apply_router(model, [texts[i] for i in rows],
                                           None if vectors is None else vectors[rows])):
            routes[i] = r

    for f in range(k):
        route(fit(at[fold_of[at] != f]), at[fold_of[at] == f])
    rest = np.flatnonzero(~labelled)
    if len(rest):
        route(fit(at), rest)
    return LearnedRoutes(tuple(routes), fold_of, n, k, seed, what, False)


LEARNED_PIPELINE = PIPELINES["seed-adaptive-learned"]


def uses_learned_router(config: PipelineConfig) -> bool:
    """Whether ``config`` routes queries with the learned router (an adaptive fusion with the
    intent router on and ``router = "learned"``)."""
    params = config.params
    return config.fusion == "adaptive" and params.intent_router and params.router == "learned"


def labels_of(queries) -> dict[str, str]:
    return {q.id: q.intent for q in queries if q.intent}


def learned_routes(c: Candidates, queries, configs: Mapping[str, PipelineConfig] | Sequence[PipelineConfig],
                   embedder: str | None = None, folds: int = DEFAULT_FOLDS, seed: int = 0) -> tuple[str, ...] | None:
    """The cross-validated learned routes of ``c``'s queries (``cross_val_routes``) when some
    pipeline of ``configs`` follows the learned router and there are labels to learn from; None
    otherwise (the rules route). Passed to ``retrieval.pipeline.fuse`` and the evaluators as
    ``routes``, over the one table."""
    items = configs.values() if isinstance(configs, Mapping) else configs
    if not any(uses_learned_router(cfg) for cfg in items):
        return None
    learned = cross_val_routes(c, labels_of(queries), query_vectors(c, embedder), folds, seed)
    return None if learned.fallback else learned.routes


def evaluate_learned_router(c: Candidates, qrels: dict[str, dict[str, int]], labels: Mapping[str, str],
                            vectors: np.ndarray | None = None, pipeline: PipelineConfig | str = "seed-adaptive",
                            metric: str = "ndcg@5", folds: int = DEFAULT_FOLDS, seed: int = 0
                            ) -> RouterEvaluation | None:
    """Accuracy, confusion matrix and regret of the learned router's cross-validated routes
    (``eval.learning.router_eval.evaluate_routes``); None when no query is labelled."""
    learned = cross_val_routes(c, labels, vectors, folds, seed)
    if learned.fallback:
        return None
    return evaluate_routes(c, qrels, labels, learned.routes, pipeline, metric, "learned", learned.note)
