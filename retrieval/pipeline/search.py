"""One free-text query answered by a pipeline: the response a user (or an agent) sees.

``search(handle, text, config)`` retrieves and scores one query; a query the fast or timeline
path answers is read from the memory store without any search (seed 000), and a fast-path
answer is one result, the whole file (``whole_file``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import numpy as np

from retrieval.bm25 import Filters
from retrieval.candidates import (Candidates, build_candidates, doc_table, doc_types, query_rows,
                                  recent_journal)
from retrieval.dataset import Query, scrub_text
from retrieval.pipeline.config import PipelineConfig
from retrieval.pipeline.scoring import ROUTES, PipelineRun, run_pipeline
from retrieval.pipeline.toml_form import get_pipeline
from retrieval.routing import fast_path_target, route_intent, triggers_timeline


@dataclass(frozen=True)
class Result:
    """One result, with every field the seeds' result types name: seed 000's ``SearchResult``
    (chunk_id = ``id``, uri = ``path``, content = ``text``, score, memory_type, section,
    reinforcement, token_count) and seed 002's snippet (text, filePath = ``path``, lineRange =
    ``line_start``–``line_end``, score, provider/model = ``model``). ``section`` is the heading the
    memory sits under: its ``section`` field where the corpus gives one, else its title."""

    id: str
    rank: int
    score: float
    components: dict[str, float]
    path: str
    text: str
    title: str = ""
    token_count: int = 0
    members: tuple[str, ...] = ()  # a whole-file result (fast path): its memories in line order
    memory_type: str = ""
    section: str = ""
    reinforcement: int = 0
    line_start: int = 0
    line_end: int = 0
    model: str = ""                # the embedder that answered ("none …" when no vector was used)


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
    empty_reason: str = ""   # why nothing came back (silent to an agent, stated for a person)

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
                              int(c.token_count[row]), (), doc.memory_type, section_of(doc),
                              doc.reinforcement, doc.line_start, doc.line_end, model_of(c, qi)))
    total = int(run.ranking.total_tokens[qi])
    budget = run.config.token_budget
    degraded = list(c.degraded[qi])
    params = run.config.params
    if getattr(params, "router", None) == "learned" and params.intent_router and run.routes is None:
        # the learned router is fitted on a labelled query set (eval.learning.router); a table
        # without its routes (a free-text query, a set without intents) follows the rules
        degraded.append("learned router not fitted for this query: seed 001's rule router chose the profile")
    return Response(
        query=c.query_texts[qi], pipeline=run.config.name, route=run.route[qi], profile=run.profile[qi],
        degraded=degraded, total_tokens=total,
        budget_remaining=(budget - total) if budget is not None else None, results=results,
        empty_reason="" if results else empty_reason(c, run.config, qi),
    )


def section_of(doc) -> str:
    """The heading a memory sits under: the corpus's ``section`` field, else its title."""
    section = doc.extra.get("section")
    return section if isinstance(section, str) and section else doc.title


def model_of(c: Candidates, qi: int) -> str:
    """The embedder behind a query's results; "none (keyword-only)" when it had no vector."""
    if any(note.endswith("keyword-only") for note in c.degraded[qi]):
        return "none (keyword-only)"
    return c.embedder


def empty_reason(c: Candidates, config: PipelineConfig, qi: int) -> str:
    """Why query ``qi`` got no result: which path found nothing, or what dropped what it found."""
    lo, hi = int(c.offsets[qi]), int(c.offsets[qi + 1])
    depth = config.path_depth
    keyword = c.with_keyword_match(config.keyword_match).bm25_rank[lo:hi]
    n_keyword = int(((keyword >= 0) & (keyword < depth)).sum())
    n_vector = int(((c.dense_rank[lo:hi] >= 0) & (c.dense_rank[lo:hi] < depth)).sum())
    path = f"the keyword path ({config.keyword_match} terms)"
    if any(note.endswith("keyword-only") for note in c.degraded[qi]):
        return f"keyword-only (no query vector): {path} matched nothing"
    if not n_keyword and not n_vector:
        return "nothing found by either path"
    if not n_keyword and config.min_similarity is not None:
        return (f"{path} matched nothing, and none of the {n_vector} memories the vector path "
                f"found reaches cosine {config.min_similarity:g}")
    if config.min_score is not None:
        return f"every candidate scored below min score {config.min_score:g}"
    return "nothing found"


def whole_file(response: Response) -> Response:
    """A fast-path response as seed 000 returns it: ONE result, the whole target file (its
    memories in line order, joined by newlines) with its token count; other routes unchanged."""
    if response.route != ROUTES[0] or not response.results:
        return response
    first, members = response.results[0], response.results
    tokens = sum(r.token_count for r in members)
    text = "\n".join(r.text for r in members)
    result = Result(first.path, 0, 1.0, {"fast": 1.0}, first.path, text, "", tokens,
                    tuple(r.id for r in members), first.memory_type, "",
                    max(r.reinforcement for r in members), min(r.line_start for r in members),
                    max(r.line_end for r in members), first.model)
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
    via_fast = (table.path == target) & allowed if target else np.zeros(len(allowed), dtype=bool)
    if timeline and not via_fast.any():  # when the fast path answered, stop there
        via_timeline = recent_journal(table, now) & allowed
    else:
        via_timeline = np.zeros(len(allowed), dtype=bool)
    idx = np.flatnonzero(via_fast | via_timeline)
    if not len(idx):
        return None
    n = len(idx)
    cols = query_rows(table, 0, idx, now, via_fast[idx], via_timeline[idx])
    return Candidates(
        dataset=dataset.name, fingerprint=dataset.fingerprint, embedder="none (no search)",
        pool_depth=config.path_depth, doc_ids=tuple(handle.doc_ids), query_ids=(query.id,),
        query_texts=(query.text,), offsets=np.array([0, n], dtype=np.int64), fast_target=(target or "",),
        timeline=np.array([timeline]), intent_route=(route_intent(query.text),), window=("",),
        degraded=(tuple(handle.degraded),), cols=cols,
        doc_types=doc_types(dataset))


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
                             project=project, matches=("any", config.keyword_match))
    return whole_file(response_for(c, run_pipeline(c, config), 0, handle.dataset.documents))
