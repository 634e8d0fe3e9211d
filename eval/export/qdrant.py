"""Qdrant: a Query API request, one prefetch per path fused by ``rrf`` or ``dbsf``.

Expressible, exactly as Qdrant computes it:

- ``rrf`` with a whole ``rrf_k`` → ``{"rrf": {"k": rrf_k + 1}}``: Qdrant scores a prefetch's
  0-based position ``pos`` as ``1 / ((pos + 1) / w + k − 1)`` (qdrant-client ``hybrid/fusion.py``
  ``reciprocal_rank_fusion``; server ``lib/segment/src/common/reciprocal_rank_fusion.rs``),
  which is ours with ``k = rrf_k + 1``. Qdrant's weight divides the rank, so unequal weights
  are written (``weights``, [dense, sparse]) only under ``rrf.weighting = 'qdrant'``, which
  computes that term; under ``multiply`` (ours, ``w / (rrf_k + rank + 1)``) equal weights give
  the unweighted request and unequal ones are refused.
- ``combsum`` with ``norm = dbsf`` → ``{"fusion": "dbsf"}``: each prefetch's scores mapped by
  ``(s − (μ − 3σ)) / 6σ`` (sample σ; a lone hit or equal scores 0.5; not clipped) and summed
  (server ``lib/segment/src/common/score_fusion.rs`` ``distr_norm``, qdrant-client
  ``distribution_based_score_fusion``), as our ``dbsf`` norm.

Both prefetches take the pipeline's path depth as ``limit``. The sparse prefetch is whatever
sparse vector the collection holds (BM25, SPLADE…), not our Tantivy BM25: re-tune on Qdrant's
own lists (``rwb import runs``) for the engine you run. With ``--analyzer`` the export says to
build the sparse vectors from that analyzer's terms (any analyzer: the request carries
client-given sparse ``indices``/``values``, which Qdrant scores as given without analysing any
text). ``verify`` runs the request in
qdrant-client's local mode, Qdrant's own fusion code."""

from __future__ import annotations

import json
from dataclasses import dataclass

from eval.export._base import Exporter, refuse, refuse_fusion
from retrieval.bm25 import ANALYZERS
from retrieval.pipeline import PipelineConfig

SUPPORTED = "rrf (whole rrf_k; weights under rrf.weighting = 'qdrant'); combsum with norm = dbsf"
DENSE, SPARSE = "<dense query vector>", {"indices": "<sparse indices>", "values": "<sparse values>"}


def fusion_query(config: PipelineConfig) -> dict:
    params = config.params
    if config.fusion == "rrf":
        if params.rrf_k != int(params.rrf_k) or params.rrf_k < 1:
            raise refuse(
                "qdrant", config, f"rrf_k = {params.rrf_k:g}", "Qdrant's k (rrf_k + 1) is a whole number ≥ 2"
            )
        rrf: dict = {"k": int(params.rrf_k) + 1}
        if params.weighting == "qdrant":
            if not params.w_dense == params.w_sparse == 1.0:
                rrf["weights"] = [params.w_dense, params.w_sparse]
        elif params.w_dense != params.w_sparse:
            raise refuse(
                "qdrant",
                config,
                f"per-path RRF weights {params.w_dense:g} / {params.w_sparse:g} under rrf.weighting = "
                "'multiply' (w / (rrf_k + rank + 1); Qdrant's weight divides the rank: "
                "1 / ((rank + 1) / w + k − 1))",
                "set rrf.weighting = 'qdrant' to tune the function Qdrant runs, or equal weights",
            )
        return {"rrf": rrf}
    if config.fusion == "combsum" and params.norm == "dbsf":
        return {"fusion": "dbsf"}
    raise refuse_fusion("qdrant", config, SUPPORTED)


def rrf_k_note(config: PipelineConfig) -> list[str]:
    """Why an ``rrf`` request's ``k`` is ``rrf_k + 1`` (the server's ``position_score``)."""
    if config.fusion != "rrf":
        return []
    rrf_k = int(config.params.rrf_k)
    return [f"k = {rrf_k + 1} is rrf_k {rrf_k} + 1, not a typo: Qdrant scores a prefetch's 0-based position p "
            f"as 1 / ((p + 1) / w + k - 1), i.e. 1 / (p + k) at weight 1 (lib/segment/src/common/"
            f"reciprocal_rank_fusion.rs, position_score), and rwb as 1 / (rrf_k + p + 1) at weight 1: the "
            f"same term when k = rrf_k + 1"]


def export(config: PipelineConfig, analyzer: str | None = None) -> str:
    depth = config.path_depth
    body = {
        "request": "POST /collections/<collection>/points/query",
        "body": {
            "prefetch": [
                {"query": DENSE, "using": "dense", "limit": depth},
                {"query": dict(SPARSE), "using": "sparse", "limit": depth},
            ],
            "query": fusion_query(config),
            "limit": config.max_results,
            "with_payload": True,
        },
        "notes": [
            f"rwb pipeline {config.name!r} ({config.fusion})",
            "prefetch[0] is the dense path, prefetch[1] the sparse path (the weights' order)",
            "'dense' and 'sparse' are placeholders for your collection's named vectors",
            *rrf_k_note(config),
        ],
    }
    if analyzer is not None:  # Qdrant scores the sparse vectors it is given; the client analyses the text
        body["notes"].append(f"encode documents and queries into the sparse vectors with rwb's {analyzer!r} "
                             "analyzer's terms (retrieval.bm25.query_terms): Qdrant does not analyse them")
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


EXPORTER = Exporter(
    "qdrant", "JSON: a Query API request with prefetch + fusion (rrf / dbsf)", export, ".json", SUPPORTED,
    reads={"rrf": frozenset({"rrf_k", "w_dense", "w_sparse", "weighting"}), "combsum": frozenset({"norm"})},
    analyzers={name: "the client encodes the sparse vectors with its terms" for name in ANALYZERS},
)


# ---- verification: the exported request run by Qdrant's own code (qdrant-client local mode) ----

TIE_TOLERANCE = 1e-5  # Qdrant keeps scores as float32 (a sparse dot product, a cosine); closer is a tie


@dataclass(frozen=True)
class Agreement:
    """How Qdrant's answer to the exported request compares with our fusion of the very lists
    its two prefetches returned, query by query (top ``max_results``)."""

    queries: int
    same: int  # the same ids in the same order
    tie_order: int  # differing only where scores tie (our fused scores within TIE_TOLERANCE)
    differ: tuple[str, ...] = ()  # query ids that differ beyond ties


def run_in_qdrant(request: str, doc_vectors, query_vectors, sparse_lists: list[list[tuple[int, float]]]):
    """Run the exported ``request`` (its JSON text, placeholders filled) for each query in
    ``QdrantClient(":memory:")``: points 0…n−1 carry ``doc_vectors`` as the named cosine vector
    ``dense`` and a sparse vector ``sparse`` whose coordinate ``q`` is the document's score in
    ``sparse_lists[q]`` (``(doc row, score)`` per query), so that the sparse query ``{q: 1}``
    returns exactly that list. Returns, per query, ``(fused, dense prefetch, sparse prefetch)``
    as lists of ``(doc row, score)``, each prefetch run alone with its own ``limit``."""
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    client.create_collection(
        "rwb",
        vectors_config={"dense": models.VectorParams(size=int(doc_vectors.shape[1]), distance=models.Distance.COSINE)},
        sparse_vectors_config={"sparse": models.SparseVectorParams()},
    )
    coordinates: dict[int, tuple[list[int], list[float]]] = {i: ([], []) for i in range(len(doc_vectors))}
    for q, hits in enumerate(sparse_lists):
        for row, score in hits:
            coordinates[row][0].append(q)
            coordinates[row][1].append(float(score))
    points = []
    for i, vector in enumerate(doc_vectors):
        vectors = {"dense": [float(x) for x in vector]}
        if coordinates[i][0]:
            vectors["sparse"] = models.SparseVector(indices=coordinates[i][0], values=coordinates[i][1])
        points.append(models.PointStruct(id=i, vector=vectors))
    client.upsert("rwb", points)
    template = json.loads(request)["body"]
    out = []
    for q, vector in enumerate(query_vectors):
        body = json.loads(json.dumps(template))
        body["prefetch"][0]["query"] = [float(x) for x in vector]
        body["prefetch"][1]["query"] = {"indices": [q], "values": [1.0]}
        fused = client.query_batch_points("rwb", [models.QueryRequest.model_validate(body)])[0].points
        legs = [
            client.query_batch_points("rwb", [models.QueryRequest.model_validate(p)])[0].points
            for p in body["prefetch"]
        ]
        out.append(tuple([(int(p.id), float(p.score)) for p in points] for points in (fused, *legs)))
    client.close()
    return out


def verify(dataset, embedder: str, config: PipelineConfig, vectors=None, pool=None,
           ours: PipelineConfig | None = None) -> Agreement:
    """Run ``export(config)`` in qdrant-client's local mode on ``dataset``'s indexed vectors
    (dense prefetch: Qdrant's own cosine search) and our BM25 lists (sparse prefetch, see
    ``run_in_qdrant``), and compare each query's result with our fusion (``run_pipeline``) of
    the two lists Qdrant's prefetches returned. ``vectors``: ``(doc vectors, query vectors)``
    instead of the index's; ``pool``: the candidate table the BM25 lists come from (default
    ``load_pool(dataset, embedder)``); ``ours``: the pipeline our side runs on those lists
    (default ``config``; another one measures how far it is from what Qdrant runs)."""
    import numpy as np

    from eval.stores.pool import load_pool
    from retrieval.candidates import candidates_from_runs
    from retrieval.index import open_index
    from retrieval.pipeline import run_pipeline

    docs = [d.id for d in dataset.documents]
    if vectors is None:
        handle = open_index(dataset, embedder)
        by_query = getattr(handle.embedder, "encode_queries", None)
        qvecs = by_query(dataset.queries) if by_query else handle.embedder.encode([q.text for q in dataset.queries])
        vectors = (handle.vectors, qvecs)
    pool = load_pool(dataset, embedder) if pool is None else pool
    depth = config.path_depth
    row_of = {d: i for i, d in enumerate(docs)}
    sparse_lists = []
    for query in dataset.queries:
        qi = pool.query_ids.index(query.id)
        lo, hi = pool.offsets[qi], pool.offsets[qi + 1]
        hits = [(int(r), float(pool.bm25_score[r]), int(pool.bm25_rank[r])) for r in range(lo, hi)
                if 0 <= pool.bm25_rank[r] < depth]
        sparse_lists.append([(row_of[pool.doc_ids[pool.doc_idx[r]]], s) for r, s, _ in sorted(hits, key=lambda h: h[2])])
    answers = run_in_qdrant(export(config), np.asarray(vectors[0]), np.asarray(vectors[1]), sparse_lists)
    dense = {q.id: [(docs[i], s) for i, s in a[1]] for q, a in zip(dataset.queries, answers)}
    sparse = {q.id: [(docs[i], s) for i, s in a[2]] for q, a in zip(dataset.queries, answers)}
    lists = candidates_from_runs(dataset, dense, sparse, depth, "qdrant")
    fused = run_pipeline(lists, config if ours is None else ours)
    same = ties = 0
    differ = []
    for qi, (query, answer) in enumerate(zip(dataset.queries, answers)):
        theirs = [docs[i] for i, _ in answer[0]]
        rows = fused.ranking.for_query(qi)
        mine = [lists.doc_ids[lists.doc_idx[r]] for r in rows]
        if theirs == mine:
            same += 1
            continue
        score = {lists.doc_ids[lists.doc_idx[r]]: float(fused.scored.score[r]) for r in rows}
        full = {lists.doc_ids[lists.doc_idx[r]]: float(fused.scored.score[r])
                for r in range(lists.offsets[qi], lists.offsets[qi + 1])}
        if len(theirs) == len(mine) and all(
            abs(full.get(a, -np.inf) - score[b]) <= TIE_TOLERANCE * max(1.0, abs(score[b]))
            for a, b in zip(theirs, mine)
        ):
            ties += 1
        else:
            differ.append(query.id)
    return Agreement(len(answers), same, ties, tuple(differ))
