"""Weaviate: hybrid search arguments (``alpha`` and ``fusionType``) and the server setting
that fixes each leg's depth.

Expressible: ``relative_score`` (``alpha``), ``wsum`` and ``combsum`` with min-max →
``relativeScoreFusion`` with ``alpha`` the vector share (Weaviate's ``FusionRelativeScore``:
min-max per leg, a tie or single hit gets the full weight, a miss 0 — ours); ``rrf`` with
``rrf_k = 59`` under ``rrf.weighting = 'multiply'`` → ``rankedFusion`` with ``alpha`` the vector
share (``FusionRanked`` scores ``weight / (i + 60)``, ``i`` 0-based, a fixed constant: ours with
rrf_k 59). Weights: ``[1 − alpha, alpha]`` for [keyword, vector] (``hybrid/searcher.go``).

Depth: Weaviate fetches each leg ``max(QUERY_HYBRID_MAXIMUM_RESULTS, limit)`` deep
(``usecases/traverser/explorer_hybrid.go``, the vector and keyword ``Pagination.Limit``), the
setting an environment variable of the server, 100 by default
(``usecases/config/environment.go``, ``DefaultQueryHybridMaximumResults``). Our pipeline fuses
``path depth`` candidates per path, so the export names ``QUERY_HYBRID_MAXIMUM_RESULTS = path
depth``; a path depth below ``max_results`` (which Weaviate would exceed) is refused. The
setting is server-wide: every hybrid query of that server then fetches legs that deep.
With ``alpha`` 0 or 1 Weaviate runs one leg only (``hybrid/searcher.go`` ``Search``: the keyword
search under ``alpha < 1``, the vector search under ``alpha > 0``): a document only the other
path found is not returned at all, where ours ranks it with that path's weight 0; the export
says so in its notes.
The keyword leg's analyzer (``rwb export --analyzer``): Weaviate's tokenizations are ``word``,
``lowercase``, ``whitespace``, ``field``, ``trigram``, ``gse`` / ``gse_ch`` (the gse segmenter
over its own dictionary), ``kagome_ja`` / ``kagome_kr`` (documentation, "Tokenization";
``TokenizeWord`` splits at characters that are neither letters nor digits, so a Han run stays
one token; ``trigram`` joins the words and cuts character trigrams): none cuts Han text into
single characters, adjacent pairs or jieba's words, so every rwb analyzer is refused (text
without Han characters tokenizes alike under every analyzer: leave ``--analyzer`` out).
Source: Weaviate ``usecases/traverser/hybrid/hybrid_fusion.go`` (``FusionRanked``,
``FusionRelativeScore``); documentation, "Hybrid search" (``alpha``, ``fusionType``).
``tests/weaviate_port.py`` ports these functions as the test oracle."""

from __future__ import annotations

import json

from eval.export._base import Exporter, refuse, refuse_fusion, rrf_multiplies, shares
from retrieval.pipeline import PipelineConfig

SUPPORTED = "relative_score; wsum and combsum with norm = minmax; rrf with rrf_k = 59"
RANKED_CONSTANT = 59  # Weaviate: weight / (i + 60), i 0-based == ours with rrf_k 59
DEPTH_SETTING = "QUERY_HYBRID_MAXIMUM_RESULTS"  # the server's leg depth (default 100)
DEFAULT_DEPTH = 100


def hybrid_arguments(config: PipelineConfig) -> tuple[float, str]:
    params = config.params
    if config.fusion == "relative_score":
        return params.alpha, "relativeScoreFusion"
    if config.fusion in ("wsum", "combsum") and params.norm == "minmax":
        return (
            shares("weaviate", config, 12)[1] if config.fusion == "wsum" else 0.5
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
        rrf_multiplies("weaviate", config)
        return shares("weaviate", config, 12)[1], "rankedFusion"
    raise refuse_fusion("weaviate", config, SUPPORTED)


NO_ANALYZER = {
    "unigram": "no tokenization emits single Han characters (word keeps a Han run whole)",
    "bigram": "no character-bigram tokenization (trigram only)",
    "jieba": "gse / gse_ch segment with gse's own dictionary, not jieba's",
}


def export(config: PipelineConfig, analyzer: str | None = None) -> str:
    alpha, fusion_type = hybrid_arguments(config)
    depth = config.path_depth
    if depth < config.max_results:
        raise refuse(
            "weaviate",
            config,
            f"a path depth ({depth}) below max_results ({config.max_results})",
            f"Weaviate fetches each leg max({DEPTH_SETTING}, limit) deep; set depth ≥ max_results",
        )
    python_fusion = "RELATIVE_SCORE" if fusion_type == "relativeScoreFusion" else "RANKED"
    body = {
        "hybrid": {
            "query": "<query text>",
            "vector": "<query vector>",
            "alpha": alpha,
            "fusionType": fusion_type,
        },
        "limit": config.max_results,
        "server": {DEPTH_SETTING: depth},
        "python": (
            f"collection.query.hybrid(query=text, vector=vector, alpha={alpha!r}, "
            f"fusion_type=HybridFusion.{python_fusion}, limit={config.max_results})"
        ),
        "notes": [
            f"rwb pipeline {config.name!r} ({config.fusion})",
            "alpha is the vector share: 1 pure vector, 0 pure keyword",
            f"Weaviate fetches each leg max({DEPTH_SETTING}, limit) deep (default {DEFAULT_DEPTH}); "
            f"this pipeline fuses {depth} per path: start the server with "
            f"{DEPTH_SETTING}={depth} (server-wide)",
        ],
    }
    one_leg = {0.0: "keyword", 1.0: "vector"}.get(float(alpha))
    if one_leg:
        body["notes"].append(f"alpha = {alpha:g}: Weaviate runs the {one_leg} leg only (hybrid/searcher.go), "
                             f"so a document only the other path found is never returned (rwb ranks it "
                             f"with weight 0)")
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


EXPORTER = Exporter(
    "weaviate", "JSON: hybrid alpha + fusionType (and the Python client call)", export, ".json", SUPPORTED,
    reads={"rrf": frozenset({"rrf_k", "w_dense", "w_sparse", "weighting"}), "relative_score": frozenset({"alpha"}),
           "wsum": frozenset({"w_dense", "w_sparse", "norm"}), "combsum": frozenset({"norm"})},
    no_analyzer=NO_ANALYZER,
)
