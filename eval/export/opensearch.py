"""OpenSearch: a search pipeline (normalization or score-ranker processor) and the hybrid
query that uses it.

Expressible, exactly as neural-search computes it:

- ``rrf`` with a whole ``rrf_k`` in 1…10,000 → ``score-ranker-processor`` with ``rank_constant
  = rrf_k``: OpenSearch scores ``1 / (rank_constant + position + 1)``, position 0-based
  (``RRFNormalizationTechnique.calculateNormalizedScore``), and sums ``weight · score``
  (``RRFScoreCombinationTechnique.combine``): ours under ``rrf.weighting = 'multiply'``, unequal
  weights written as shares summing to 1 (``ScoreCombinationUtil.validateWeights``);
- ``mean`` with ``norm = minmax`` and ``mean.semantics = 'opensearch'`` →
  ``normalization-processor``: ``min_max`` (``MinMaxScoreNormalizationTechnique``: an exact 0
  becomes 0.001, equal scores 1.0) and the weighted ``arithmetic_mean`` / ``geometric_mean`` /
  ``harmonic_mean`` (``*MeanScoreCombinationTechnique.combine``: a missed sub-query scores 0,
  counted in the arithmetic mean, left out of the other two); ``norm = l2`` →
  ``l2`` (``L2ScoreNormalizationTechnique``: score / √Σ score² per sub-query, no floor; l2 is not
  shift-invariant, so ours takes the vector leg's score as OpenSearch's ``cosinesimil`` k-NN
  score (1 + cos) / 2, and the export says the vector field must use that space). Under ``semantics = 'rwb'`` (every
  hit floored at 0.001, a miss counted as 0.001) the export is refused, naming the difference.

Weights are rounded to 6 decimals; a weight > 0 whose share rounds to 0 is refused.
Keyword match ``all`` is the match query's ``operator: and``. The query order is fixed:
``queries[0]`` the keyword match, ``queries[1]`` the k-NN, so ``weights`` are [BM25, vector].
The keyword leg's analyzer (``rwb export --analyzer``, the one the pipeline was tuned with) is
written as the text field's custom analyzer ``rwb_text``: ``unigram`` → the ``standard``
tokenizer (Lucene's UAX #29 tokenizer emits each Han character as a token) and ``lowercase``;
``bigram`` → the same plus a ``cjk_bigram`` filter with ``output_unigrams: true`` (each Han
character and each adjacent pair; OpenSearch documentation, "CJK bigram token filter").
Han text is cut into rwb's terms; Latin text into UAX #29 words, which keep ``user_id`` whole
where rwb also splits it. ``jieba`` is refused: OpenSearch's Chinese word segmenters are the
``analysis-smartcn`` plugin (Lucene's Smart Chinese, its own probabilistic dictionary) and the
third-party IK plugin (``ik_smart`` / ``ik_max_word``, its own dictionary), which cut other words
than jieba's dictionary.
Sources: neural-search ``processor/normalization/`` and ``processor/combination/`` (the
classes named above); OpenSearch documentation, "Normalization processor", "Score ranker
processor", "Hybrid query" (``pagination_depth``, 2.19). ``tests/opensearch_port.py`` ports
these functions as the test oracle."""

from __future__ import annotations

import json

from eval.export._base import Exporter, refuse, refuse_fusion, rrf_multiplies, shares
from retrieval.pipeline import PipelineConfig

SUPPORTED = "rrf (whole rrf_k from 1 to 10,000); mean with norm = minmax or l2 and semantics = opensearch"
TECHNIQUES = {"minmax": "min_max", "l2": "l2"}  # our norm → OpenSearch's normalization technique
QUERY_TEXT, QUERY_VECTOR = "<query text>", "<query vector>"


WEIGHT_DIGITS = 6


def _weights(config: PipelineConfig) -> list[float]:
    return list(shares("opensearch", config, WEIGHT_DIGITS))


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
        rrf_multiplies("opensearch", config)
        combination: dict = {"technique": "rrf", "rank_constant": int(params.rrf_k)}
        if params.w_dense != params.w_sparse:
            combination["parameters"] = {"weights": _weights(config)}
        return {"score-ranker-processor": {"combination": combination}}
    if config.fusion == "mean" and params.norm in TECHNIQUES:
        if params.semantics != "opensearch":
            raise refuse(
                "opensearch",
                config,
                f"mean.semantics = {params.semantics!r} (every hit floored at 0.001 and, in the "
                "geometric and harmonic means, a missed path counted as 0.001; OpenSearch replaces "
                "only a 0 by 0.001 and leaves a missed path out)",
                "set mean.semantics = 'opensearch' to tune the function OpenSearch runs",
            )
        return {
            "normalization-processor": {
                "normalization": {"technique": TECHNIQUES[params.norm]},
                "combination": {
                    "technique": f"{params.mean}_mean",
                    "parameters": {"weights": _weights(config)},
                },
            }
        }
    raise refuse_fusion("opensearch", config, SUPPORTED)


ANALYSIS = {  # rwb analyzer → the filters after the standard tokenizer that cut Han text alike
    "unigram": ["lowercase"],
    "bigram": ["lowercase", "rwb_cjk_bigram"],
}
FILTERS = {"rwb_cjk_bigram": {"type": "cjk_bigram", "output_unigrams": True}}
NO_ANALYZER = {
    "jieba": "OpenSearch has no jieba analyzer: smartcn (analysis-smartcn plugin) and IK (ik_smart / "
    "ik_max_word, third-party) segment with other dictionaries",
}


def index_body(analyzer: str) -> dict:
    """The index settings and mapping that give the text field rwb's ``analyzer`` (one of
    ``ANALYSIS``; the others are refused before this is called)."""
    filters = ANALYSIS[analyzer]
    analysis: dict = {"analyzer": {"rwb_text": {"type": "custom", "tokenizer": "standard", "filter": filters}}}
    used = {name: FILTERS[name] for name in filters if name in FILTERS}
    if used:
        analysis["filter"] = used
    return {"settings": {"analysis": analysis},
            "mappings": {"properties": {"text": {"type": "text", "analyzer": "rwb_text"}}}}


def export(config: PipelineConfig, analyzer: str | None = None) -> str:
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
    if analyzer is not None:
        body["index"] = {"request": "PUT /<index>", "body": index_body(analyzer)}
        body["notes"].append(f"the keyword leg analyses text as rwb's {analyzer!r} analyzer: create the index "
                             "with 'index' (analyzer rwb_text on the text field)")
    else:
        body["notes"].append("the BM25 analyzer is not part of this export: pass --analyzer (the one the "
                             "pipeline was tuned with) to have the index's analyzer written")
    if config.fusion == "mean" and config.params.norm == "l2":
        body["notes"].append("l2 normalisation: the vector field's space_type must be cosinesimil "
                             "(k-NN score (1 + cos) / 2, k-NN 2.19 or later), the score rwb's l2 normalises")
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


EXPORTER = Exporter(
    "opensearch",
    "JSON: a search pipeline (normalization / score-ranker processor) and its hybrid query",
    export,
    ".json",
    SUPPORTED,
    reads={"rrf": frozenset({"rrf_k", "w_dense", "w_sparse", "weighting"}), "mean": frozenset({"w_dense", "w_sparse", "norm", "mean", "semantics"})},
    stages=frozenset({"keyword_match=all"}),  # the match query's operator "and"
    analyzers={"unigram": "standard tokenizer", "bigram": "standard + cjk_bigram, output_unigrams"},
    no_analyzer=NO_ANALYZER,
)
