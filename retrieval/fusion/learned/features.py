"""The learned fusion's inputs: a feature matrix over a candidate table, and per-query features.

``feature_matrix(c, visible, depth, fixed)`` gives one row per candidate row and one column per
name in ``feature_names(c)``, computed from the table alone (nothing fitted), so the same pool gives
the same matrix at training time (``eval.learning``) and at scoring time
(``retrieval.fusion.learned``). A path's signals count only where that path returned the
document within ``depth``; per-query normalisations are taken over those hits (``normalise``
in ``retrieval.fusion._base``, the score fusions' own). Columns, in order:

- dense path: ``dense_sim`` (cosine, every row), ``dense_hit`` (1/0), ``dense_rrank``
  (1/(1+rank), 0 on a miss), ``dense_minmax``, ``dense_z`` (per-query min-max and z-score),
  ``dense_gap`` (cosine − the query's best visible cosine);
- BM25 path (OR query): ``bm25_score`` (0 on a miss), ``bm25_hit``, ``bm25_rrank``,
  ``bm25_minmax``, ``bm25_z``, ``bm25_ratio`` (score / the query's best, as seed 001's S_sparse);
  the AND query: ``bm25_all_hit``, ``bm25_all_rrank``;
- fusion of the two: ``both`` (found by both paths), ``rrf`` (Σ 1/(60 + rank + 1) over the paths);
- time: ``in_window`` (1 inside the window the query names, else 0), ``out_window`` (1 when the
  query names a window and the memory lies outside it), ``recency`` (exp(−ln2/30·age), 0 when
  undated), ``log_age`` (log(1 + age in days), 0 when undated), ``undated``, ``log_created_age``,
  ``via_timeline``, ``via_fast``;
- memory metadata: ``confidence``, ``conf_low`` (C < 0.6), ``conf_high`` (C ≥ 0.9),
  ``vitality`` / 100, ``vit_high`` (V > 80), ``vit_low`` (V < 30), ``log_reinforcement``,
  ``log_access`` (log(1 + count)), ``log_tokens``, ``graph`` (linked to a top-3 hit);
- the fixed pipelines a learned model must not lose to (``FIXED_PIPELINES``: seed-adaptive,
  rrf, wsum, at their own presets; the single paths are the dense and BM25 columns above):
  ``fixed:<name>`` (the pipeline's own score, min-max per query over the rows it scores, 0 on
  the others) and ``fixed_rrank:<name>`` (1/(1 + its rank) in that pipeline's own ranking, 0
  where it does not rank the row), so a model can reproduce a fixed pipeline and learn a
  correction on top of it — computed by the pipeline (``retrieval.pipeline.fixed_pipeline_features``)
  and passed in, since a fusion cannot run the pipeline that runs it;
- ``type:<memory_type>``: one-hot of the memory's type, one column per type of the dataset
  (sorted; none when the table carries no types, as a hand-built one);
- query features, equal on every row of a query (``query_features``): the rule router's
  choice one-hot, the timeline trigger, the fast path, log tokens, a digit, the CJK share, a
  question mark (``retrieval.learned_router.FEATURES``), ``names_window``, and the pool's
  view of the query: ``q_dense_max`` (best cosine), ``q_bm25_max`` (log(1 + best BM25)),
  ``q_overlap`` (share of the dense top 5 also in the BM25 top 5), ``q_bm25_hits`` (BM25 hits
  / depth).

A feature set is its list of names; ``feature_set_id`` is the first 16 hex digits of the
sha256 of the names joined by newlines. A model records it; scoring a table whose feature
set differs (another dataset's memory types, an older layout) is refused, never guessed.
"""

from __future__ import annotations

import hashlib

import numpy as np

from retrieval.candidate_table import Candidates
from retrieval.fusion._base import in_path, normalise, recency_decay, segment_max
from retrieval.learned_router import FEATURES as QUERY_TEXT_FEATURES
from retrieval.learned_router import simple_features

ROW_FEATURE_MEANINGS: dict[str, str] = {
    "dense_sim": "cosine similarity of the memory to the query (every row)",
    "dense_hit": "1 when the vector path returned the memory within the depth, else 0",
    "dense_rrank": "1/(1 + rank) in the vector path, 0 where it missed",
    "dense_minmax": "cosine min-max normalised over the query's vector hits",
    "dense_z": "cosine as a z-score over the query's vector hits",
    "dense_gap": "cosine minus the query's best visible cosine (0 for the best)",
    "bm25_score": "BM25 score of the OR query, 0 where BM25 missed",
    "bm25_hit": "1 when the BM25 path (OR query) returned the memory within the depth",
    "bm25_rrank": "1/(1 + rank) in the BM25 path, 0 where it missed",
    "bm25_minmax": "BM25 score min-max normalised over the query's BM25 hits",
    "bm25_z": "BM25 score as a z-score over the query's BM25 hits",
    "bm25_ratio": "BM25 score / the query's best BM25 score (seed 001's S_sparse)",
    "bm25_all_hit": "1 when the AND query (every term) returned the memory",
    "bm25_all_rrank": "1/(1 + rank) in the AND query, 0 where it missed",
    "both": "1 when both the vector and the BM25 path found the memory",
    "rrf": "reciprocal-rank fusion Σ 1/(60 + rank + 1) over the two paths",
    "in_window": "1 when the query names a time window and the memory lies inside it",
    "out_window": "1 when the query names a time window and the memory lies outside it",
    "recency": "exp(−ln 2 / 30 · age in days): 1 today, ½ after 30 days, 0 undated",
    "log_age": "log(1 + age in days) of the memory's last update, 0 when undated",
    "undated": "1 when the memory carries no date",
    "log_created_age": "log(1 + days since the memory was created)",
    "via_timeline": "1 when the timeline path (recent journal) brought the memory",
    "via_fast": "1 when the fast path (the file the query names) brought the memory",
    "confidence": "the memory's confidence C (0–1)",
    "conf_low": "1 when confidence < 0.6 (seed 001's low band)",
    "conf_high": "1 when confidence ≥ 0.9 (seed 001's high band)",
    "vitality": "the memory's vitality V / 100",
    "vit_high": "1 when vitality > 80",
    "vit_low": "1 when vitality < 30",
    "log_reinforcement": "log(1 + times the memory was reinforced)",
    "log_access": "log(1 + times the memory was read)",
    "log_tokens": "log(1 + the memory's length in tokens)",
    "graph": "1 when the memory is linked to one of the paths' top-3 hits",
}
"""Every row feature, in column order, with its meaning (the glossary the Learn page shows)."""
ROW_FEATURES = tuple(ROW_FEATURE_MEANINGS)
FIXED_PIPELINES = ("seed-adaptive", "rrf", "wsum")
FIXED_FEATURES = tuple(f"fixed:{name}" for name in FIXED_PIPELINES) + tuple(
    f"fixed_rrank:{name}" for name in FIXED_PIPELINES
)
POOL_QUERY_FEATURES = ("q_dense_max", "q_bm25_max", "q_overlap", "q_bm25_hits")
QUERY_FEATURES = (
    tuple(f"q_{name}" for name in QUERY_TEXT_FEATURES) + ("q_names_window",) + POOL_QUERY_FEATURES
)
POOL_QUERY_MEANINGS = {
    "q_dense_max": "the query's best cosine over its vector hits",
    "q_bm25_max": "log(1 + the query's best BM25 score)",
    "q_overlap": "share of the vector top 5 also in the BM25 top 5",
    "q_bm25_hits": "BM25 hits of the query / the depth",
}
QUERY_TEXT_MEANINGS = {
    "timeline_trigger": "1 when the query triggers the timeline path ('recent', '最近' …)",
    "fast_path": "1 when the query names a file (the fast path)",
    "log_tokens": "log(1 + the query's tokens)",
    "has_digit": "1 when the query holds a digit",
    "cjk_share": "share of the query's characters that are Chinese",
    "question": "1 when the query ends with a question mark",
    "names_window": "1 when the query names a time window",
}
RECENCY_HALF_LIFE = 30.0
RRF_K = 60.0
OVERLAP_TOP = 5


def type_names(c: Candidates) -> tuple[str, ...]:
    """The ``type:<memory_type>`` columns of a table: one per type of its documents, sorted."""
    return tuple(f"type:{t}" for t in sorted(set(c.doc_types)))


def feature_names(c: Candidates) -> tuple[str, ...]:
    """The columns of ``feature_matrix(c, …)``, in order."""
    return ROW_FEATURES + FIXED_FEATURES + type_names(c) + QUERY_FEATURES


def describe_feature(name: str) -> str:
    """One line saying what feature ``name`` (a column of ``feature_names``) measures."""
    if name in ROW_FEATURE_MEANINGS:
        return ROW_FEATURE_MEANINGS[name]
    if name in POOL_QUERY_MEANINGS:
        return f"query feature (same on every row): {POOL_QUERY_MEANINGS[name]}"
    head, _, tail = name.partition(":")
    if head == "fixed":
        return f"the {tail} pipeline's own score, min-max per query (0 where it does not score the row)"
    if head == "fixed_rrank":
        return f"1/(1 + rank) in the {tail} pipeline's own ranking (0 where it does not rank the row)"
    if head == "type":
        return f"1 when the memory's type is {tail}"
    if head == "q_route":
        return f"query feature: 1 when the rule router sends the query to the {tail} profile"
    if name.startswith("q_") and name[2:] in QUERY_TEXT_MEANINGS:
        return f"query feature: {QUERY_TEXT_MEANINGS[name[2:]]}"
    raise KeyError(f"unknown feature {name!r}")


def feature_set_id(names) -> str:
    """The fingerprint of a feature set: 16 hex digits of sha256 over the names, one per line."""
    return hashlib.sha256("\n".join(names).encode("utf-8")).hexdigest()[:16]


def query_features(c: Candidates, depth: int) -> np.ndarray:
    """(queries, ``QUERY_FEATURES``): what is known of each query before any document is scored."""

    def build():
        text = simple_features(c.query_texts)
        window = np.array([1.0 if w else 0.0 for w in c.window]).reshape(-1, 1)
        dense_hit = in_path(c.dense_rank, depth)
        bm25_hit = in_path(c.bm25_rank, depth)
        q = c.query_idx
        n_q = c.n_queries
        dense_max = np.zeros(n_q)
        np.maximum.at(dense_max, q[dense_hit], c.dense_sim[dense_hit].astype(np.float64))
        bm25_max = np.zeros(n_q)
        np.maximum.at(bm25_max, q[bm25_hit], c.bm25_score[bm25_hit].astype(np.float64))
        top_dense = in_path(c.dense_rank, min(depth, OVERLAP_TOP))
        top_both = top_dense & in_path(c.bm25_rank, min(depth, OVERLAP_TOP))
        n_top = np.bincount(q[top_dense], minlength=n_q)
        overlap = np.bincount(q[top_both], minlength=n_q) / np.maximum(n_top, 1)
        hits = np.bincount(q[bm25_hit], minlength=n_q) / float(depth)
        pool = np.column_stack([dense_max, np.log1p(bm25_max), overlap, hits])
        return np.hstack([text, window, pool]).astype(np.float64)

    return c.derived(("learned query features", depth), build)


def feature_matrix(c: Candidates, visible: np.ndarray, depth: int, fixed: np.ndarray) -> np.ndarray:
    """(rows, ``feature_names(c)``) float64; see the module docstring. Rows outside ``visible``
    are computed too (a model scores only the visible ones). ``fixed``: the (rows,
    ``FIXED_FEATURES``) columns, ``retrieval.pipeline.fixed_pipeline_features(c)`` — given, not
    computed here, as the pipeline that runs a learned fusion computes them."""
    q = c.query_idx
    dense_hit = visible & in_path(c.dense_rank, depth)
    bm25_hit = visible & in_path(c.bm25_rank, depth)
    all_hit = visible & in_path(c.bm25_all_rank, depth)
    dense_sim = c.dense_sim.astype(np.float64)
    bm25 = np.where(bm25_hit, c.bm25_score.astype(np.float64), 0.0)
    dense_rrank = np.where(dense_hit, 1.0 / (1.0 + np.maximum(c.dense_rank, 0)), 0.0)
    bm25_rrank = np.where(bm25_hit, 1.0 / (1.0 + np.maximum(c.bm25_rank, 0)), 0.0)
    all_rrank = np.where(all_hit, 1.0 / (1.0 + np.maximum(c.bm25_all_rank, 0)), 0.0)
    best_dense = segment_max(c, dense_sim, visible)
    best_bm25 = segment_max(c, bm25, bm25_hit)
    ratio = np.where(
        bm25_hit & (best_bm25 > 0), bm25 / np.where(best_bm25 > 0, best_bm25, 1.0), 0.0
    )
    rrf = np.where(dense_hit, 1.0 / (RRF_K + np.maximum(c.dense_rank, 0) + 1.0), 0.0) + np.where(
        bm25_hit, 1.0 / (RRF_K + np.maximum(c.bm25_rank, 0) + 1.0), 0.0
    )
    window = c.in_window.astype(np.float64)
    named = ~np.isnan(window)
    age = c.age_days.astype(np.float64)
    undated = np.isnan(age)
    created = c.created_age.astype(np.float64)
    confidence = c.confidence.astype(np.float64)
    vitality = c.vitality.astype(np.float64)
    columns = [
        dense_sim,
        dense_hit,
        dense_rrank,
        normalise(c, visible, depth, "dense", "minmax")[0],
        normalise(c, visible, depth, "dense", "zscore")[0],
        dense_sim - best_dense,
        bm25,
        bm25_hit,
        bm25_rrank,
        normalise(c, visible, depth, "sparse", "minmax")[0],
        normalise(c, visible, depth, "sparse", "zscore")[0],
        ratio,
        all_hit,
        all_rrank,
        dense_hit & bm25_hit,
        rrf,
        np.where(named, window, 0.0),
        np.where(named, 1.0 - window, 0.0),
        recency_decay(age, RECENCY_HALF_LIFE),
        np.where(undated, 0.0, np.log1p(np.nan_to_num(age))),
        undated,
        np.where(np.isnan(created), 0.0, np.log1p(np.nan_to_num(created))),
        c.via_timeline,
        c.via_fast,
        confidence,
        confidence < 0.6,
        confidence >= 0.9,
        vitality / 100.0,
        vitality > 80,
        vitality < 30,
        np.log1p(np.maximum(c.reinforcement.astype(np.float64), 0.0)),
        np.log1p(np.maximum(c.access_count.astype(np.float64), 0.0)),
        np.log1p(np.maximum(c.token_count.astype(np.float64), 0.0)),
        c.graph,
    ]
    types = type_names(c)
    head = len(ROW_FEATURES) + len(FIXED_FEATURES)
    out = np.empty((c.n_rows, head + len(types) + len(QUERY_FEATURES)))
    for j, column in enumerate(columns):
        out[:, j] = column
    out[:, len(ROW_FEATURES) : head] = fixed
    if types:
        doc_type = np.asarray(c.doc_types, dtype=object)[c.doc_idx]
        for j, name in enumerate(types):
            out[:, head + j] = doc_type == name[len("type:") :]
    out[:, head + len(types) :] = query_features(c, depth)[q]
    out[~np.isfinite(out)] = 0.0
    return out
