"""The named pipelines: every strategy of the five seeds and the field's fusions, as configs."""

from __future__ import annotations

from retrieval.fusion import get_fusion
from retrieval.params import Params
from retrieval.profiles import PRESETS
from retrieval.pipeline.config import PipelineConfig


def _adaptive(**changes) -> Params:
    return get_fusion("adaptive").params(**changes)


PIPELINES: dict[str, PipelineConfig] = {p.name: p for p in (
    PipelineConfig("vector", "vector", "Vector-only baseline (cosine, LanceDB)."),
    PipelineConfig("bm25", "bm25", "BM25-only baseline (Tantivy)."),
    PipelineConfig("rrf", "rrf", "Seed 000 hybrid search: RRF k=60 over vector and BM25, 2× candidates."),
    PipelineConfig("weighted", "weighted", "Weighted union 0.7 vector / 0.3 text, BM25 rank → 1/(1+rank)."),
    PipelineConfig("adaptive", "adaptive", "Seed 001 fusion with one fixed profile (concept)."),
    PipelineConfig(
        "seed-salience", "salience",
        "Seed 000: a file-naming query gets that whole file (one result); a 'recent' query the journal of the "
        "last 7 days, newest date first, up to 1500 tokens (no search); else hybrid RRF → salience → top 10 "
        "within 1500 tokens.",
        fast_path=True, timeline_path=True, token_budget=1500),
    PipelineConfig(
        "seed-adaptive", "adaptive",
        "Seed 001: intent router picks debug/concept/timeline/brainstorm; (Σ w·S) × F_conf × F_vit with "
        "strong/weak/medium/none penalties (see penalty strengths).",
        candidate_multiplier=3.0, params=_adaptive(intent_router=True)),
    PipelineConfig(
        "seed-adaptive-learned", "adaptive",
        "Seed 001 fusion, profile chosen by a learned intent router (logistic regression on the query "
        "embedding, cross-validated on labelled intents; the rules where nothing is labelled).",
        candidate_multiplier=3.0, params=_adaptive(intent_router=True, router="learned")),
    PipelineConfig(
        "openclaw", "weighted",
        "OpenClaw: 0.7 vector / 0.3 BM25-rank, candidate multiplier 4, min score 0.35, max 6.",
        max_results=6, candidate_multiplier=4.0, min_score=0.35, keyword_match="all"),
    PipelineConfig(
        "vector-threshold", "vector",
        "Seed 003's similar-pattern lookup alone, over every memory: vector top-3 at cosine ≥ 0.85.",
        max_results=3, candidate_multiplier=1.0, min_score=0.85),
    PipelineConfig(
        "lingxi", "weighted",
        "Lingxi (seed 004): 10 candidates per path, union scored 0.7 × cosine + 0.3 × "
        "1/(1+keyword rank) (seed 004 F2's formula), sorted by it, top 0–3; the keyword path "
        "is a grep for the query's technical terms (error codes weighted most, identifiers, "
        "paths, versions, technical names in any language; Han bigrams only re-rank; a purely "
        "Chinese message with no technical word has no keyword path); a memory only the "
        "vector path found must reach cosine 0.3, a keyword hit always stays (nothing found "
        "by either → empty); keyword-only when vectors fail. The seed leaves open which words "
        "are technical and how an answer comes out empty: both are our choices. The knob "
        "keyword_first (off) departs from F2: every keyword hit above every vector-only "
        "memory, for an embedder that cannot read the store's language (MiniLM on Chinese).",
        max_results=3, depth=10, min_similarity=0.3, keyword_match="technical"),
    PipelineConfig("wsum", "wsum", "ranx wsum: 0.5·minmax(cos) + 0.5·minmax(BM25), each path normalised per query."),
    PipelineConfig("combsum", "combsum", "CombSUM (Fox & Shaw): minmax(cos) + minmax(BM25)."),
    PipelineConfig("combmnz", "combmnz", "CombMNZ (Fox & Shaw): (minmax(cos) + minmax(BM25)) × paths that found it."),
    PipelineConfig("dbsf", "combsum", "Qdrant DBSF: each path's (s − (μ − 3σ)) / 6σ, then summed.",
                   params=get_fusion("combsum").params(norm="dbsf")),
    PipelineConfig("opensearch", "mean", "OpenSearch normalization processor: min-max, arithmetic mean 0.5/0.5 "
                   "(OpenSearch's semantics: only a 0 becomes 0.001).",
                   params=get_fusion("mean").params(semantics="opensearch")),
    PipelineConfig("relative-score", "relative_score",
                   "Weaviate relative score fusion: 0.75·minmax(cos) + 0.25·minmax(BM25)."),
)}


def profile_pipeline(name: str) -> PipelineConfig:
    """One of seed 001's presets as a pipeline: adaptive fusion with that fixed profile."""
    profile = next((p for p in PRESETS if p.name == name), None)
    if profile is None:
        raise ValueError(f"unknown profile {name!r}; choose from {[p.name for p in PRESETS]}")
    return PipelineConfig(f"profile-{name}", "adaptive", f"Adaptive fusion with the {name} profile.",
                          params=get_fusion("adaptive").params(profile=profile))
