"""Weaviate: hybrid search arguments (``alpha`` and ``fusionType``).

Expressible: ``relative_score`` (``alpha``), ``wsum`` and ``combsum`` with min-max →
``relativeScoreFusion`` with ``alpha`` the vector share (``relative_score`` follows Weaviate's
``FusionRelativeScore``: min-max per path, a tie or single hit gets the full weight, a miss
0); ``rrf`` with ``rrf_k = 59`` → ``rankedFusion`` with ``alpha`` the vector share (Weaviate
scores ``weight / (60 + rank)`` with 0-based ranks and a fixed constant: ours with rrf_k 59).
Weaviate picks its sub-searches' depth itself. Source: Weaviate
``usecases/traverser/hybrid/hybrid_fusion.go`` (``FusionRanked``, ``FusionRelativeScore``);
documentation, "Hybrid search" (``alpha``, ``fusionType``)."""

from __future__ import annotations

import json

from eval.export._base import Exporter, check_stages, refuse, refuse_fusion, share
from retrieval.pipeline import PipelineConfig

SUPPORTED = "relative_score; wsum and combsum with norm = minmax; rrf with rrf_k = 59"
RANKED_CONSTANT = 59  # Weaviate: weight / (i + 60), i 0-based == ours with rrf_k 59


def hybrid_arguments(config: PipelineConfig) -> tuple[float, str]:
    params = config.params
    if config.fusion == "relative_score":
        return params.alpha, "relativeScoreFusion"
    if config.fusion in ("wsum", "combsum") and params.norm == "minmax":
        return (
            share(params.w_dense, params.w_sparse) if config.fusion == "wsum" else 0.5
        ), "relativeScoreFusion"
    if config.fusion == "rrf":
        if params.rrf_k != RANKED_CONSTANT:
            raise refuse(
                "weaviate",
                config,
                f"rrf_k = {params.rrf_k:g}",
                f"rankedFusion's constant is fixed (weight / (60 + rank), 0-based = rrf_k "
                f"{RANKED_CONSTANT} here); set rrf.rrf_k = {RANKED_CONSTANT} or use relative_score",
            )
        return share(params.w_dense, params.w_sparse), "rankedFusion"
    raise refuse_fusion("weaviate", config, SUPPORTED)


def export(config: PipelineConfig) -> str:
    check_stages("weaviate", config)
    alpha, fusion_type = hybrid_arguments(config)
    python_fusion = "RELATIVE_SCORE" if fusion_type == "relativeScoreFusion" else "RANKED"
    body = {
        "hybrid": {
            "query": "<query text>",
            "vector": "<query vector>",
            "alpha": alpha,
            "fusionType": fusion_type,
        },
        "limit": config.max_results,
        "python": (
            f"collection.query.hybrid(query=text, vector=vector, alpha={alpha!r}, "
            f"fusion_type=HybridFusion.{python_fusion}, limit={config.max_results})"
        ),
        "notes": [
            f"rwb pipeline {config.name!r} ({config.fusion})",
            "alpha is the vector share: 1 pure vector, 0 pure keyword",
        ],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


EXPORTER = Exporter(
    "weaviate", "JSON: hybrid alpha + fusionType (and the Python client call)", export, ".json"
)
