"""Qdrant: a Query API request, one prefetch per path fused by ``rrf`` or ``dbsf``.

Expressible: ``rrf`` with a whole ``rrf_k`` → ``{"rrf": {"k": rrf_k + 1}}`` (Qdrant scores
``w / (k + rank)`` with 0-based ranks, ours ``w / (rrf_k + rank + 1)``; unequal path weights
as ``weights``, Qdrant's weighted RRF); ``combsum`` with ``norm = dbsf`` → ``{"fusion":
"dbsf"}`` (the sum of mean ± 3σ normalised scores; we clip each to [0, 1], Qdrant does not,
which can only matter for a hit more than 3σ from its list's mean — impossible below 11
hits). The sparse prefetch is whatever sparse vector the collection holds (BM25, SPLADE…),
not our Tantivy BM25. Source: Qdrant documentation, "Hybrid and Multi-Stage Queries" and the
``Rrf`` schema (``k``, ``weights``); ``lib/segment/src/common/score_fusion.rs``."""

from __future__ import annotations

import json

from eval.export._base import Exporter, check_stages, refuse, refuse_fusion
from retrieval.pipeline import PipelineConfig

SUPPORTED = "rrf (whole rrf_k); combsum with norm = dbsf"


def fusion_query(config: PipelineConfig) -> dict:
    params = config.params
    if config.fusion == "rrf":
        if params.rrf_k != int(params.rrf_k) or params.rrf_k < 0:
            raise refuse(
                "qdrant", config, f"rrf_k = {params.rrf_k:g}", "Qdrant's k is a whole number ≥ 1"
            )
        rrf: dict = {"k": int(params.rrf_k) + 1}
        if params.w_dense != params.w_sparse:
            rrf["weights"] = [params.w_dense, params.w_sparse]
        return {"rrf": rrf}
    if config.fusion == "combsum" and params.norm == "dbsf":
        return {"fusion": "dbsf"}
    raise refuse_fusion("qdrant", config, SUPPORTED)


def export(config: PipelineConfig) -> str:
    check_stages("qdrant", config)
    depth = config.path_depth
    body = {
        "request": "POST /collections/<collection>/points/query",
        "body": {
            "prefetch": [
                {"query": "<dense query vector>", "using": "dense", "limit": depth},
                {
                    "query": {"indices": "<sparse indices>", "values": "<sparse values>"},
                    "using": "sparse",
                    "limit": depth,
                },
            ],
            "query": fusion_query(config),
            "limit": config.max_results,
            "with_payload": True,
        },
        "notes": [
            f"rwb pipeline {config.name!r} ({config.fusion})",
            "prefetch[0] is the dense path, prefetch[1] the sparse path (the weights' order)",
            "'dense' and 'sparse' are placeholders for your collection's named vectors",
        ],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


EXPORTER = Exporter(
    "qdrant", "JSON: a Query API request with prefetch + fusion (rrf / dbsf)", export, ".json"
)
