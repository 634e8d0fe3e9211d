"""One free-text query answered by a pipeline: the response a user (or an agent) sees.

``search(handle, text, config)`` retrieves and scores one query; a query the fast or timeline
path answers is read from the memory store without any search (seed 000), and a fast-path
answer is one result, the whole file (``whole_file``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from retrieval.bm25 import Filters
from retrieval.candidates import ROW_COLUMNS, Candidates, build_candidates, doc_table
from retrieval.dataset import Query, scrub_text
from retrieval.pipeline.config import PipelineConfig
from retrieval.pipeline.scoring import ROUTES, PipelineRun, run_pipeline
from retrieval.pipeline.toml_form import get_pipeline
from retrieval.routing import TIMELINE_DAYS, fast_path_target, route_intent, triggers_timeline


@dataclass(frozen=True)
class Result:
    id: str
    rank: int
    score: float
    components: dict[str, float]
    path: str
    text: str
    title: str = ""
    token_count: int = 0
    members: tuple[str, ...] = ()  # a whole-file result (fast path): its memories in line order


@dataclass(frozen=True)
class Response:
    query: str
    pipeline: str
    route: str
    profile: str
    degraded: list[str]
    total_tokens: int
    budget_remaining: int | None
    results: list[Result]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def response_for(c: Candidates, run: PipelineRun, qi: int, documents) -> Response:
    """The response a user sees for query ``qi`` of a candidate table."""
    rows = run.ranking.for_query(qi)
    results = []
    for rank, row in enumerate(rows):
        doc = documents[int(c.doc_idx[row])]
        parts = {k: float(v[row]) for k, v in run.scored.components.items() if v[row] != 0.0}
        parts.update({f"x {k}": float(v[row]) for k, v in run.scored.multipliers.items()})
        results.append(Result(doc.id, rank, float(run.scored.score[row]), parts, doc.path, doc.text, doc.title,
                              int(c.token_count[row])))
    total = int(run.ranking.total_tokens[qi])
    budget = run.config.token_budget
    degraded = list(c.degraded[qi])
    params = run.config.params
    if getattr(params, "router", None) == "learned" and params.intent_router and c.learned_route is None:
        # the learned router is fitted on a labelled query set (eval.learning.router); a table
        # without its routes (a free-text query, a set without intents) follows the rules
        degraded.append("learned router not fitted for this query: seed 001's rule router chose the profile")
    return Response(
        query=c.query_texts[qi], pipeline=run.config.name, route=run.route[qi], profile=run.profile[qi],
        degraded=degraded, total_tokens=total,
        budget_remaining=(budget - total) if budget is not None else None, results=results,
    )


def whole_file(response: Response) -> Response:
    """A fast-path response as seed 000 returns it: ONE result, the whole target file (its
    memories in line order, joined by newlines) with its token count; other routes unchanged."""
    if response.route != ROUTES[0] or not response.results:
        return response
    first = response.results[0]
    tokens = sum(r.token_count for r in response.results)
    result = Result(first.path, 0, 1.0, {"fast": 1.0}, first.path, "\n".join(r.text for r in response.results),
                    "", tokens, tuple(r.id for r in response.results))
    return dataclasses.replace(response, results=[result])


def _routed_without_search(handle, query: Query, config: PipelineConfig, scope: str, group: str,
                           project: str) -> Candidates | None:
    """The candidate table of a query the fast or timeline path answers, built from the memory
    store alone — no embedding, no vector or BM25 search (seed 000: "零搜索开销", "不触发向量搜索").
    None when neither path applies, so the query is searched."""
    target = fast_path_target(query.text) if config.fast_path else None
    timeline = config.timeline_path and triggers_timeline(query.text)
    if not target and not timeline:
        return None
    dataset = handle.dataset
    table = doc_table(dataset)
    allowed = table.allowed(Filters(scope or query.scope, project, group or query.group))
    now = dataset.query_reference_time(query)
    created = table.features["created_ts"]
    via_fast = (table.path == target) & allowed if target else np.zeros(len(allowed), dtype=bool)
    since = (now - timedelta(days=TIMELINE_DAYS)).timestamp()
    via_timeline = (table.journal & (created >= since) & (created <= now.timestamp()) & allowed
                    if timeline else np.zeros(len(allowed), dtype=bool))
    if via_fast.any():
        via_timeline = np.zeros(len(allowed), dtype=bool)  # the fast path answered: stop there
    idx = np.flatnonzero(via_fast | via_timeline)
    if not len(idx):
        return None
    n, f = len(idx), table.features
    known = {
        "query_idx": np.zeros(n, np.int32), "doc_idx": idx.astype(np.int32),
        "dense_rank": np.full(n, -1, np.int32), "bm25_rank": np.full(n, -1, np.int32),
        "via_fast": via_fast[idx], "via_timeline": via_timeline[idx],
        "age_days": np.maximum(0.0, (now.timestamp() - f["updated_ts"][idx]) / 86400.0).astype(np.float32),
        "created_age": np.maximum(0.0, (now.timestamp() - created[idx]) / 86400.0).astype(np.float32),
        "in_window": np.full(n, np.nan, np.float32),
        **{name: f[name][idx] for name in ("confidence", "vitality", "reinforcement", "access_count",
                                           "token_count", "tie_key", "line_start")},
    }
    cols = {name: known.get(name, np.full(n, -1, np.int32) if name.endswith("_rank") else np.zeros(n, np.float32))
            for name in ROW_COLUMNS}
    return Candidates(
        dataset=dataset.name, fingerprint=dataset.fingerprint, embedder="none (no search)",
        pool_depth=config.path_depth, doc_ids=tuple(handle.doc_ids), query_ids=(query.id,),
        query_texts=(query.text,), offsets=np.array([0, n], dtype=np.int64), fast_target=(target or "",),
        timeline=np.array([timeline]), intent_route=(route_intent(query.text),), window=("",),
        degraded=(tuple(handle.degraded),), cols=cols,
        doc_types=tuple(d.memory_type for d in dataset.documents))


def search(handle, text: str, config: PipelineConfig | str = "rrf", scope: str = "", group: str = "",
           project: str = "") -> Response:
    """Answer one free-text query with a pipeline (retrieval + scoring).

    A query the fast or timeline path answers is read from the memory store without any
    search; a fast-path answer is one result, the whole file (``whole_file``)."""
    config = get_pipeline(config)
    query = Query(id="query", text=scrub_text(text))
    c = _routed_without_search(handle, query, config, scope, group, project)
    if c is None:
        c = build_candidates(handle, [query], pool_depth=config.path_depth, scope=scope, group=group,
                             project=project)
    return whole_file(response_for(c, run_pipeline(c, config), 0, handle.dataset.documents))
