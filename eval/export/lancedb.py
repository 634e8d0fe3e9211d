"""LanceDB: a hybrid query (vector + LanceDB's native full-text search) with its reranker.

Expressible: ``rrf`` with equal path weights and a whole ``rrf_k`` → ``RRFReranker(K=rrf_k)``
(LanceDB scores ``1 / (K + rank)`` with 1-based ranks, ours ``1 / (rrf_k + rank + 1)`` with
0-based ones; under ``rrf.weighting = 'qdrant'`` only with both weights 1); ``relative_score`` (``alpha``), ``wsum`` and ``combsum`` with min-max →
``LinearCombinationReranker(weight=w, fill=1.0)`` with ``normalize="score"`` (LanceDB min-max
normalises the cosine distances and the FTS scores per query, a missed path counts 0:
``w·minmax(cos) + (1 − w)·minmax(fts)``; ``w`` = the vector share ``w_dense / (w_dense +
w_sparse)``, which ranks as the weighted sum does). One edge differs: when every FTS hit of
a query ties (one hit included) LanceDB normalises them to 0, we to 1.
Analyzer (``rwb export --analyzer``): ``jieba`` → the native FTS index with ``base_tokenizer
"jieba/default"`` (lance ``tokenizer/jieba.rs``: jieba-rs over jieba's dictionary, the
``dict.txt`` that ``python -m lance.download jieba`` fetches; it cuts in jieba's search mode,
which adds the dictionary words inside a long word, and keeps no single characters, where rwb
indexes each Han character and jieba's default cut); ``unigram`` and ``bigram`` are refused:
LanceDB's base tokenizers keep a Han run whole (``simple``, ``whitespace``), segment it into
words with a dictionary (``icu``, ``lindera/*``, ``jieba/*``) or n-gram Latin words too
(``ngram``), none into single characters or adjacent pairs alone (lance
``InvertedIndexParams::build_base_tokenizer``; documentation, "Full-Text Search Index").
Depth: LanceDB's sub-queries take the query's ``limit``, so the snippet asks for the path
depth and keeps the first ``max_results``. The sparse path is LanceDB's own BM25, not our
Tantivy analyzer. Source: ``lancedb/rerankers/rrf.py``, ``linear_combination.py`` and
``LanceHybridQueryBuilder._combine_hybrid_results`` (lancedb 0.40).
The generated file is fixed code plus numbers; the pipeline's name and parameters reach it only
as one JSON string literal (``json.dumps``: quotes, backslashes and control characters
escaped), read by ``json.loads``, so no value from a TOML is ever run as code (issue 35)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from eval.export._base import Exporter, fusion_params, refuse, refuse_fusion, rrf_multiplies, shares
from retrieval.pipeline import PipelineConfig

SUPPORTED = (
    "rrf (equal path weights, whole rrf_k; weighting = qdrant only with both weights 1); "
    "relative_score; wsum and combsum with norm = minmax"
)

# The generated file holds only fixed code, numbers and one JSON string literal (json.dumps:
# every quote, backslash and control character escaped); no value from the pipeline's TOML
# (name, description, parameters) is ever written as code.
TEMPLATE = '''"""LanceDB hybrid search for an rwb pipeline (PIPELINE below: its name, fusion and parameters).

Exported by `rwb export`. The table needs a vector column (cosine) and LanceDB's native
full-text index on the text column: {fts_index}.
"""

import json

from lancedb.rerankers import {reranker_class}

PIPELINE = json.loads({pipeline})
RERANKER = {reranker}
NORMALIZE = "score"
DEPTH = {depth}  # candidates per path (rwb: max_results x candidate_multiplier, or depth)
TOP_K = {top_k}  # results returned (rwb: max_results)


def search(table, text, vector, vector_column="vector", text_column="text"):
    """The TOP_K best rows of the hybrid query (each with ``_relevance_score``), best first."""
    query = (table.search(query_type="hybrid", vector_column_name=vector_column,
                          fts_columns=text_column)
             .vector(vector).text(text).distance_type("cosine")
             .rerank(RERANKER, normalize=NORMALIZE).limit(DEPTH))
    return query.to_list()[:TOP_K]
'''


def reranker_of(config: PipelineConfig) -> tuple[str, str]:
    """``(class name, constructor call)`` of the LanceDB reranker computing ``config``'s fusion;
    the call holds only a number formatted here (``int`` / ``float`` repr)."""
    params = config.params
    if config.fusion == "rrf":
        rrf_multiplies("lancedb", config)
        if params.w_dense != params.w_sparse:
            raise refuse(
                "lancedb",
                config,
                f"per-path RRF weights ({params.w_dense:g} / {params.w_sparse:g})",
                "LanceDB's RRFReranker weighs both paths equally; set w_dense = w_sparse",
            )
        if params.rrf_k != int(params.rrf_k) or params.rrf_k < 1:
            raise refuse(
                "lancedb",
                config,
                f"rrf_k = {params.rrf_k:g}",
                "RRFReranker's K is a whole number ≥ 1",
            )
        return "RRFReranker", f"RRFReranker(K={int(params.rrf_k)})"
    if config.fusion == "relative_score":
        weight = params.alpha
    elif config.fusion == "wsum" and params.norm == "minmax":
        weight = shares("lancedb", config, 12)[1]
    elif config.fusion == "combsum" and params.norm == "minmax":
        weight = 0.5
    else:
        raise refuse_fusion("lancedb", config, SUPPORTED)
    return "LinearCombinationReranker", f"LinearCombinationReranker(weight={float(weight)!r}, fill=1.0)"


FTS_INDEX = {  # rwb analyzer → the native FTS index that cuts Han text into (nearly) the same words
    None: 'e.g. ``table.create_fts_index("text")``',
    "jieba": ('``table.create_fts_index("text", base_tokenizer="jieba/default")`` after '
              '``python -m lance.download jieba`` (rwb analyzer jieba: jieba-rs with jieba\'s dictionary; '
              'rwb also indexes each Han character, LanceDB only the words)'),
}
NO_ANALYZER = {
    name: "LanceDB's tokenizers keep a Han run whole (simple, whitespace), segment it into dictionary words "
    "(icu, lindera, jieba) or n-gram Latin words too (ngram)"
    for name in ("unigram", "bigram")
}


def export(config: PipelineConfig, analyzer: str | None = None) -> str:
    reranker_class, reranker = reranker_of(config)
    pipeline = {"name": config.name, "fusion": config.fusion, "params": fusion_params(config)}
    return TEMPLATE.format(
        pipeline=json.dumps(json.dumps(pipeline, ensure_ascii=False)),
        reranker_class=reranker_class,
        reranker=reranker,
        depth=int(config.path_depth),
        top_k=int(config.max_results),
        fts_index=FTS_INDEX[analyzer],
    )


EXPORTER = Exporter(
    "lancedb",
    "a Python snippet: hybrid query + RRFReranker / LinearCombinationReranker",
    export,
    ".py",
    SUPPORTED,
    reads={"rrf": frozenset({"rrf_k", "w_dense", "w_sparse", "weighting"}), "relative_score": frozenset({"alpha"}),
           "wsum": frozenset({"w_dense", "w_sparse", "norm"}), "combsum": frozenset({"norm"})},
    analyzers={"jieba": 'FTS base_tokenizer "jieba/default"'},
    no_analyzer=NO_ANALYZER,
)


# ---- verification: the exported snippet run against LanceDB itself ----------------------------

TIE_TOLERANCE = 1e-6  # float32 carries ~7 digits; scores closer than this are a tie


@dataclass(frozen=True)
class Agreement:
    """How the exported LanceDB query's top ``k`` compares, query by query."""

    queries: int
    same_inputs: int  # equal to our fusion of LanceDB's own two lists (same ids, same order)
    tie_order: int  # differing only in the order of results LanceDB scores equal (float32)
    tied_path: int  # differing where every FTS hit ties (one hit included): LanceDB's min-max
    #                      gives them 0, ours 1 (documented above; the linear rerankers only)
    same_as_search: int  # equal to `rwb search` (our dense path + Tantivy BM25)
    overlap_search: float  # mean share of `rwb search`'s top k that LanceDB also returns
    failed: tuple[str, ...] = ()  # queries LanceDB refused (e.g. its FTS query parser)


def _only_tie_order(lance: list[tuple[str, float]], ours: list[tuple[str, float]]) -> bool:
    """The lists differ only where the scores tie: position by position the two score
    sequences agree to float32 precision (LanceDB computes in float32, from distances) once
    ours is scaled to LanceDB's (combsum's sum is twice LanceDB's 0.5/0.5 mean), and every
    document in both lists has the same score (a tie group may span the cut at k)."""
    if ours and lance and ours[0][1] != 0:
        scale = lance[0][1] / ours[0][1]
        ours = [(d, s * scale) for d, s in ours]

    def close(a: float, b: float) -> bool:
        return abs(a - b) <= TIE_TOLERANCE * max(1.0, abs(a), abs(b))

    if len(lance) != len(ours) or not all(close(a, b) for (_, a), (_, b) in zip(lance, ours)):
        return False
    mine = dict(ours)
    return all(close(mine[d], s) for d, s in lance if d in mine)


def verify(dataset, embedder: str, config: PipelineConfig, workdir) -> Agreement:
    """Run ``export(config)`` as written against a LanceDB table holding ``dataset``'s indexed
    vectors and texts (with LanceDB's native FTS index), and compare each query's results with
    (a) our fusion of the very lists LanceDB's two sub-queries returned and (b) `rwb search`."""
    from pathlib import Path

    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    from eval.stores.pool import load_pool
    from retrieval.candidates import candidates_from_runs
    from retrieval.index import index_text, open_index
    from retrieval.pipeline import run_pipeline

    namespace: dict = {}
    exec(compile(export(config), f"<rwb export {config.name} --to lancedb>", "exec"), namespace)
    search, depth, top_k = namespace["search"], namespace["DEPTH"], namespace["TOP_K"]
    handle = open_index(dataset, embedder)
    docs = dataset.documents
    vectors = handle.vectors
    table = lancedb.connect(str(Path(workdir) / "lance")).create_table(
        "export_check",
        pa.table(
            {
                "id": [d.id for d in docs],
                "text": [index_text(d) for d in docs],
                "vector": pa.array(list(vectors), type=pa.list_(pa.float32(), vectors.shape[1])),
            }
        ),
        mode="overwrite",
    )
    table.create_index("text", config=FTS())
    by_query = getattr(handle.embedder, "encode_queries", None)
    qvecs = (
        by_query(dataset.queries)
        if by_query
        else handle.embedder.encode([q.text for q in dataset.queries])
    )
    lance, dense, sparse, failed = {}, {}, {}, []
    for query, vector in zip(dataset.queries, qvecs):
        try:
            rows = search(table, query.text, vector)
            fts = (
                table.search(query.text, query_type="fts", fts_columns="text")
                .limit(depth)
                .to_list()
            )
        except Exception as error:  # LanceDB's FTS parser refuses some texts; counted, not hidden
            failed.append(f"{query.id}: {type(error).__name__}")
            continue
        lance[query.id] = [(r["id"], float(r["_relevance_score"])) for r in rows]
        knn = (
            table.search(vector, vector_column_name="vector")
            .distance_type("cosine")
            .limit(depth)
            .to_list()
        )
        dense[query.id] = [(r["id"], 1.0 - float(r["_distance"])) for r in knn]
        sparse[query.id] = [(r["id"], float(r["_score"])) for r in fts]
    lists = candidates_from_runs(dataset, dense, sparse, depth, "lancedb")
    fused = run_pipeline(lists, config)
    pool = load_pool(dataset, embedder)
    ours_search = run_pipeline(pool, config)

    def top(c, run, qi: int) -> list[tuple[str, float]]:
        lo, hi = np.searchsorted(run.ranking.query_idx, [qi, qi + 1])
        rows, scores = run.ranking.rows[lo:hi][:top_k], run.ranking.score[lo:hi][:top_k]
        return [(c.doc_ids[c.doc_idx[r]], float(s)) for r, s in zip(rows, scores)]

    same = ties = tied = same_search = 0
    linear = reranker_of(config)[0] == "LinearCombinationReranker"
    overlap = []
    for qi, query in enumerate(dataset.queries):
        if query.id not in lance:
            continue
        got = lance[query.id]
        ranked = top(lists, fused, qi)
        ids, mine = [i for i, _ in got], [i for i, _ in ranked]
        same += ids == mine
        tie_order = ids != mine and _only_tie_order(got, ranked)
        ties += tie_order
        tied += (
            ids != mine and not tie_order and linear and len({s for _, s in sparse[query.id]}) == 1
        )
        theirs = [i for i, _ in top(pool, ours_search, pool.query_ids.index(query.id))]
        same_search += ids == theirs
        overlap.append(len(set(ids) & set(theirs)) / max(1, len(theirs)))
    return Agreement(
        len(lance),
        same,
        ties,
        tied,
        same_search,
        sum(overlap) / max(1, len(overlap)),
        tuple(failed),
    )
