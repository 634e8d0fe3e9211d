"""OpenSearch: a search pipeline (normalization or score-ranker processor) and the hybrid
query that uses it.

Expressible: ``rrf`` with a whole ``rrf_k`` in 1…10,000 → ``score-ranker-processor``
(``rank_constant = rrf_k``: OpenSearch scores ``1 / (rank_constant + rank)``, 1-based; unequal
path weights as ``combination.parameters.weights``); ``mean`` with ``norm = minmax`` →
``normalization-processor`` (``min_max`` and the arithmetic, geometric or harmonic mean, the
weights as shares summing to 1). Our ``mean`` follows OpenSearch's processor (the 0.001 floor
of a returned document), except that a path that missed a document counts as the floor in
the geometric and harmonic means where OpenSearch leaves it out (``retrieval/fusion/mean.py``).
Keyword match ``all`` is the match query's ``operator: and``. The query order is fixed:
``queries[0]`` the keyword match, ``queries[1]`` the k-NN, so ``weights`` are [BM25, vector].
Sources: OpenSearch documentation, "Normalization processor", "Score ranker processor",
"Hybrid query" (``pagination_depth``, 2.19)."""

from __future__ import annotations

import json

from eval.export._base import Exporter, check_stages, refuse, refuse_fusion, share
from retrieval.pipeline import PipelineConfig

SUPPORTED = "rrf (whole rrf_k from 1 to 10,000); mean with norm = minmax"
QUERY_TEXT, QUERY_VECTOR = "<query text>", "<query vector>"


def _weights(w_dense: float, w_sparse: float) -> list[float]:
    dense = round(share(w_dense, w_sparse), 6)
    return [round(1.0 - dense, 6), dense]


def processor(config: PipelineConfig) -> dict:
    """The phase-results processor computing ``config``'s fusion."""
    params = config.params
    if config.fusion == "rrf":
        if params.rrf_k != int(params.rrf_k) or not 1 <= params.rrf_k <= 10_000:
            raise refuse(
                "opensearch",
                config,
                f"rrf_k = {params.rrf_k:g}",
                "rank_constant is a whole number from 1 to 10,000",
            )
        combination: dict = {"technique": "rrf", "rank_constant": int(params.rrf_k)}
        if params.w_dense != params.w_sparse:
            combination["parameters"] = {"weights": _weights(params.w_dense, params.w_sparse)}
        return {"score-ranker-processor": {"combination": combination}}
    if config.fusion == "mean" and params.norm == "minmax":
        return {
            "normalization-processor": {
                "normalization": {"technique": "min_max"},
                "combination": {
                    "technique": f"{params.mean}_mean",
                    "parameters": {"weights": _weights(params.w_dense, params.w_sparse)},
                },
            }
        }
    raise refuse_fusion("opensearch", config, SUPPORTED)


def export(config: PipelineConfig) -> str:
    check_stages("opensearch", config, keyword_all=True)
    pipeline_id = "rwb-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in config.name)
    match = {"query": QUERY_TEXT}
    if config.keyword_match == "all":
        match["operator"] = "and"
    body = {
        "search_pipeline": {
            "request": f"PUT /_search/pipeline/{pipeline_id}",
            "body": {
                "description": f"rwb pipeline {config.name!r} ({config.fusion})",
                "phase_results_processors": [processor(config)],
            },
        },
        "search": {
            "request": f"GET /<index>/_search?search_pipeline={pipeline_id}",
            "body": {
                "size": config.max_results,
                "query": {
                    "hybrid": {
                        "pagination_depth": config.path_depth,
                        "queries": [
                            {"match": {"text": match}},
                            {"knn": {"vector": {"vector": QUERY_VECTOR, "k": config.path_depth}}},
                        ],
                    }
                },
            },
        },
        "notes": [
            "queries[0] is the keyword path, queries[1] the vector path (the weights' order)",
            "field names 'text' and 'vector' are placeholders for your index's fields",
            "pagination_depth needs OpenSearch 2.19 or later (the per-path depth)",
        ],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


EXPORTER = Exporter(
    "opensearch",
    "JSON: a search pipeline (normalization / score-ranker processor) and its hybrid query",
    export,
    ".json",
)
