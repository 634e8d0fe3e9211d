"""Replay evaluation: a query set answered in ``reference_time`` order with seed 000's write-backs.

Seed 000 (§4 访问频率): "每次搜索结果返回时自动 +1" — every memory a search returns has its
``access_count`` incremented, and salience's access term ``log(access_count+1)/log(max+2)``
reads the new count on the next search. The default evaluation is frozen: every query sees
the corpus's stored counts. A replay instead answers the queries one at a time in
``reference_time`` order (ties: the query set's order), and after each query adds 1 to the
``access_count`` of every memory it returned (a fast-path file: each of its memories) before
the next query is scored. Candidates are not re-retrieved: the write-back changes a feature
of the stored pool, not what the indexes return.

``replay(c, config, order)`` gives a ``PipelineRun`` whose ranking holds each query's answer
as the replay produced it; it is scored like any other run (``eval.metrics.measure``, equal to ranx).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

import numpy as np

from eval.metrics.measure import judge, mean_metrics
from eval.stores.configs import resolve_config
from retrieval.candidate_table import Candidates
from retrieval.dataset import Dataset
from retrieval.fusion import Scored
from retrieval.pipeline import PipelineConfig, PipelineRun, run_pipeline
from retrieval.ranking import Ranking


def replay_order(c: Candidates, dataset: Dataset) -> list[int]:
    """Query positions of ``c`` in ``reference_time`` order (a query without one takes the
    dataset's); equal times keep the table's order."""
    by_id = {q.id: q for q in dataset.queries}

    def when(qi: int) -> datetime:
        query = by_id.get(c.query_ids[qi])
        return dataset.query_reference_time(query) if query is not None else dataset.reference_time

    return sorted(range(c.n_queries), key=lambda qi: (when(qi), qi))


def _one_query(c: Candidates, qi: int, access: np.ndarray) -> Candidates:
    """Query ``qi``'s rows alone, with ``access_count`` read from the running per-document counts."""
    lo, hi = int(c.offsets[qi]), int(c.offsets[qi + 1])
    cols = {name: values[lo:hi] for name, values in c.cols.items()}
    cols["query_idx"] = np.zeros(hi - lo, dtype=c.query_idx.dtype)
    cols["access_count"] = access[cols["doc_idx"]].astype(c.access_count.dtype)
    return dataclasses.replace(
        c, query_ids=(c.query_ids[qi],), query_texts=(c.query_texts[qi],),
        offsets=np.array([0, hi - lo], dtype=np.int64), fast_target=(c.fast_target[qi],),
        timeline=c.timeline[qi:qi + 1], intent_route=(c.intent_route[qi],), window=(c.window[qi],),
        degraded=(c.degraded[qi],), cols=cols, query_kinds=c.query_kinds[qi:qi + 1])


@dataclass(frozen=True, eq=False)
class Replay:
    run: PipelineRun
    order: tuple[int, ...]         # query positions in the order they were answered
    write_backs: int               # access_count increments applied in all
    access_count: np.ndarray       # per document (``c.doc_ids`` order) after the replay


def replay(c: Candidates, config: PipelineConfig | str, order: Sequence[int]) -> Replay:
    """Answer the queries of ``c`` in ``order``, incrementing ``access_count`` of each returned
    memory before the next one; the ranking is in ``c``'s query order, as ``run_pipeline``'s."""
    config = resolve_config(config)
    order = list(order)
    if sorted(order) != list(range(c.n_queries)):
        raise ValueError("the replay order must list every query of the table once")
    # the stored count of every document (a document no query retrieved keeps 0: never read)
    access = np.zeros(len(c.doc_ids), dtype=np.float64)
    access[c.doc_idx] = c.access_count
    rows, query_idx, rank, score, total = [], [], [], [], np.zeros(c.n_queries, dtype=np.int64)
    route, profile = [""] * c.n_queries, [""] * c.n_queries
    full_score = np.full(c.n_rows, -np.inf)
    writes = 0
    for qi in order:
        one = _one_query(c, qi, access)
        run = run_pipeline(one, config)
        kept = run.ranking.rows
        rows.append(kept + int(c.offsets[qi]))
        query_idx.append(np.full(len(kept), qi, dtype=c.query_idx.dtype))
        rank.append(run.ranking.rank)
        score.append(run.ranking.score)
        total[qi] = int(run.ranking.total_tokens[0])
        route[qi], profile[qi] = run.route[0], run.profile[0]
        full_score[int(c.offsets[qi]) + kept] = run.ranking.score
        returned = one.doc_idx[kept]
        access[returned] += 1.0           # seed 000: each returned memory's access_count + 1
        writes += len(returned)
    by_query = np.argsort(np.concatenate(query_idx) if query_idx else np.empty(0), kind="stable")

    def cat(parts, dtype):
        return (np.concatenate(parts) if parts else np.empty(0, dtype=dtype))[by_query]

    ranking = Ranking(cat(rows, np.int64), cat(query_idx, c.query_idx.dtype), cat(rank, np.int64),
                      cat(score, np.float64), total)
    run = PipelineRun(config, ranking, Scored(full_score, {}), tuple(route), tuple(profile))
    return Replay(run, tuple(order), writes, access)


def replay_metrics(c: Candidates, dataset: Dataset, configs: dict[str, PipelineConfig],
                   metrics: Sequence[str], qrels: dict[str, dict[str, int]] | None = None) -> dict[str, dict]:
    """Per pipeline: the frozen evaluation's means, the replay's, and the write-backs applied."""
    qrels = dataset.qrels if qrels is None else qrels
    judged = judge(c, qrels)
    order = replay_order(c, dataset)
    out = {}
    for label, config in configs.items():
        frozen = mean_metrics(c, judged, run_pipeline(c, config).ranking, metrics)
        replayed = replay(c, config, order)
        out[label] = {"frozen": frozen, "replay": mean_metrics(c, judged, replayed.run.ranking, metrics),
                      "write_backs": replayed.write_backs}
    return out


def replay_table(results: dict[str, dict], metrics: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: each metric as ``frozen → replay (Δ)``, then the write-backs applied."""
    header = ["pipeline", *metrics, "write-backs"]
    rows = []
    for label, r in results.items():
        cells = [f"{r['frozen'][m]:.4f} → {r['replay'][m]:.4f} ({r['replay'][m] - r['frozen'][m]:+.4f})"
                 for m in metrics]
        rows.append([label, *cells, str(r["write_backs"])])
    return header, rows


# ---- seed 003: replaying a query log through the retriever's caches --------------------

@dataclass(frozen=True)
class LogReplay:
    """Seed 003's retriever over a query log, answered in ``reference_time`` order."""

    contexts: tuple                 # retrieval.seed003.Context per query, in replay order
    query_ids: tuple[str, ...]
    l1: dict
    l2: dict
    wall_s: float                   # time the replay took (caches on)
    records: dict | None = None     # pattern records read through L2 by id (the warm-up's entries)

    @property
    def l2_hit_rate(self) -> float:
        asked = self.l2["hits"] + self.l2["misses"]
        return self.l2["hits"] / asked if asked else 0.0

    def to_json(self) -> dict:
        return {"queries": len(self.query_ids), "l1": self.l1, "l2": self.l2, "l2_hit_rate": self.l2_hit_rate,
                "records": self.records,
                "time_saved_s": self.l2["saved_s"], "wall_s": self.wall_s,
                "contexts": {q: c.to_json() for q, c in zip(self.query_ids, self.contexts)}}


def replay_log(retriever, dataset: Dataset, queries=None) -> LogReplay:
    """Answer ``queries`` (default: the dataset's) in ``reference_time`` order, the L2 clock
    reading each query's reference time, so entries expire as they would have live."""
    import time

    queries = list(dataset.queries if queries is None else queries)
    order = sorted(range(len(queries)), key=lambda i: (dataset.query_reference_time(queries[i]), i))
    l1, records = {"hits": 0, "misses": 0}, {"hits": 0, "misses": 0}
    l2 = {"hits": 0, "misses": 0, "saved_s": 0.0}
    contexts = []
    started = time.perf_counter()
    for i in order:
        query = queries[i]
        context = retriever.retrieve(query.text, dataset.query_reference_time(query).timestamp())
        contexts.append(context)
        for total, counts in ((l1, context.cache["l1"]), (l2, context.cache["l2"]),
                              (records, context.cache.get("records", {"hits": 0, "misses": 0}))):
            total["hits"] += counts["hits"]
            total["misses"] += counts["misses"]
        l2["saved_s"] += context.cache["l2"]["saved_s"]
    return LogReplay(tuple(contexts), tuple(queries[i].id for i in order), l1, l2,
                     time.perf_counter() - started, records)
