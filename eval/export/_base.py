"""What every exporter shares: the registry entry, the refusal, and the checks of the
pipeline stages no supported engine has (routing paths, budgets, floors)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from retrieval.pipeline import PipelineConfig


class NotExpressible(ValueError):
    """The engine has no stage that computes this part of the pipeline."""


@dataclass(frozen=True)
class Exporter:
    engine: str
    summary: str
    export: Callable[[PipelineConfig], str]
    suffix: str


WHY = {  # what a fusion needs that a hybrid query of these engines does not have
    "adaptive": "intent routing between fusion profiles, time/graph features and the "
    "confidence/vitality multipliers F_conf·F_vit",
    "salience": "reinforcement, recency and access terms (memory metadata) added to RRF",
    "weighted": "raw cosine plus a rank- or score-normalised BM25 (OpenClaw's formula)",
    "combmnz": "the CombMNZ multiplier (number of paths that found the document)",
    "vector": "nothing to fuse: run the engine's plain vector search",
    "bm25": "nothing to fuse: run the engine's plain keyword search",
}


def refuse(engine: str, config: PipelineConfig, what: str, instead: str) -> NotExpressible:
    return NotExpressible(f"{engine} cannot express {what} (pipeline {config.name!r}); {instead}")


def refuse_fusion(engine: str, config: PipelineConfig, supported: str) -> NotExpressible:
    reason = WHY.get(config.fusion)
    detail = f"fusion {config.fusion!r}"
    detail += f" — {reason}" if reason else f" with {config.params}"
    return refuse(engine, config, detail, f"{engine} can express: {supported}")


def check_stages(engine: str, config: PipelineConfig, keyword_all: bool = False) -> None:
    """Refuse the stages around the fusion that ``engine``'s hybrid query cannot run."""
    missing = []
    if config.fast_path:
        missing.append("the fast path (fast_path: a query naming a file reads it)")
    if config.timeline_path:
        missing.append("the timeline path (timeline_path: recent journal memories)")
    if config.token_budget is not None:
        missing.append(f"the token budget (token_budget = {config.token_budget})")
    if config.min_score is not None:
        missing.append(f"the score floor (min_score = {config.min_score})")
    if config.min_similarity is not None:
        missing.append(
            f"the similarity floor over both paths (min_similarity = {config.min_similarity})"
        )
    if config.keyword_match == "all" and not keyword_all:
        missing.append("keyword match 'all' (every query word required)")
    if missing:
        raise refuse(engine, config, ", ".join(missing), "remove them to export the fusion alone")
    params = config.params
    if hasattr(params, "w_dense") and hasattr(params, "w_sparse") and not params.w_dense + params.w_sparse > 0:
        raise refuse(engine, config, f"both path weights 0 ({config.fusion}.w_dense = {config.fusion}.w_sparse = 0: "
                     "every document would score 0)", "give at least one path a weight > 0")


def rrf_multiplies(engine: str, config: PipelineConfig) -> None:
    """Refuse an ``rrf`` whose terms ``engine`` cannot compute: its RRF multiplies a term by its
    weight (or has no weights), so ``weighting = 'qdrant'`` is expressible only with both
    weights 1, where the two weightings agree."""
    params = config.params
    if params.weighting != "multiply" and not params.w_dense == params.w_sparse == 1.0:
        raise refuse(engine, config,
                     f"rrf.weighting = {params.weighting!r} with weights {params.w_dense:g} / {params.w_sparse:g} "
                     "(Qdrant's 1 / ((rank + 1) / w + rrf_k); this engine's RRF is w / (rrf_k + rank + 1))",
                     "set rrf.weighting = 'multiply', or both weights to 1")


def share(w_dense: float, w_sparse: float) -> float:
    """The vector share ``w_dense / (w_dense + w_sparse)``: a fusion whose score is a positive
    multiple of another ranks the same."""
    total = w_dense + w_sparse
    if not total > 0:
        raise ValueError("the path weights sum to 0: nothing would be ranked")
    return round(w_dense / total, 12)  # 0.6 / 0.8 is 0.75, not 0.7499999999999999


def shares(engine: str, config: PipelineConfig, digits: int) -> tuple[float, float]:
    """``(sparse share, dense share)`` of the path weights rounded to ``digits`` as the engine
    is given them; refused when a weight > 0 rounds to 0 (the engine would drop that path)."""
    params = config.params
    dense = round(share(params.w_dense, params.w_sparse), digits)
    sparse = round(1.0 - dense, digits)
    for name, weight, given in (("w_dense", params.w_dense, dense), ("w_sparse", params.w_sparse, sparse)):
        if weight > 0 and given == 0:
            raise refuse(engine, config,
                         f"{config.fusion}.{name} = {weight:g}, a share that rounds to 0 in the engine's "
                         f"weights ({digits} decimals): the path would be dropped",
                         f"set {config.fusion}.{name} to 0 or to a share of at least {10 ** -digits:g}")
    return sparse, dense


def fusion_params(config: PipelineConfig) -> dict:
    return {name: getattr(config.params, name) for name in config.params.__dataclass_fields__}
