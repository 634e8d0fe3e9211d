"""ranx adapters: qrels and rankings of a candidate table as ranx ``Qrels`` / ``Run``.

Decisions made once here (and tested in ``tests/eval/metrics/test_measure.py``):

- **Which queries count.** A query counts when it has at least one relevant judgment
  (grade > 0). Queries whose judgments are all 0 have no ideal ranking (nDCG is 0/0); they
  are left out of both the qrels and every run, in ranx and in ``eval.metrics.measure`` alike.
- **Every counted query is in every run.** ranx asserts that a run and the qrels hold the
  same query ids (a bare ``assert``: under ``python -O`` it is skipped and the per-query
  arrays silently misalign). So a run gets an explicit empty result list for every counted
  query its pipeline answered with nothing, or that the candidate table lacks; ranx scores
  an empty list 0 on every metric. Queries the qrels do not count are dropped from the run.
- **Strictly decreasing scores.** ranx sorts each query with ``argsort`` and orders ties
  arbitrarily, so the run does not carry the pipeline's scores: the result at 0-based rank
  ``r`` of a list of ``n`` gets ``n − r``. The order is the ranking's, whose ties were broken
  by ``(−score, doc id)`` in ``retrieval.ranking.rank_rows``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

import numpy as np

from eval.metrics.definitions import WARM_METRICS
from retrieval.candidate_table import Candidates
from retrieval.ranking import Ranking

if TYPE_CHECKING:  # ranx (numba, scipy) takes seconds to import: only the functions that use it load it
    from ranx import Qrels, Run


# ranx's metrics are numba ``parallel=True`` functions; numba's default threading layer
# aborts the whole process when two threads enter them at once (two app sessions, or a
# warm-up thread and a page). Every ranx call goes through this lock.
RANX_LOCK = threading.RLock()



def warm_up(metrics: Sequence[str] = WARM_METRICS) -> None:
    """Compile ranx's numba code now, as an evaluation goes through it (``to_qrels``, a ``Run``,
    ``ranx_per_query``): seconds on first use in a process, a part of it not kept on disk (numba's
    typed dictionaries and lists are compiled again in every process)."""
    from ranx import Run

    qrels = to_qrels({"q": {"d": 1, "e": 0}, "r": {"f": 2}})
    ranx_per_query(qrels, Run({"q": {"d": 2.0, "e": 1.0}, "r": {"g": 1.0}}, name="warm-up"), metrics)


def judged_query_ids(qrels: dict[str, dict[str, int]], query_ids: Iterable[str] | None = None) -> list[str]:
    """Ids of the queries that count: at least one judgment with grade > 0, in ``query_ids``
    order when given (else sorted)."""
    relevant = {q for q, judgments in qrels.items() if any(g > 0 for g in judgments.values())}
    if query_ids is None:
        return sorted(relevant)
    return [q for q in query_ids if q in relevant]


def to_qrels(qrels: dict[str, dict[str, int]]) -> Qrels:
    """ranx ``Qrels`` of the counted queries (all their judgments, 0 grades included)."""
    from ranx import Qrels

    kept = {q: {d: int(g) for d, g in qrels[q].items()} for q in judged_query_ids(qrels)}
    if not kept:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to evaluate")
    return Qrels(kept)


def ranked_lists(c: Candidates, ranking: Ranking) -> dict[str, list[str]]:
    """Document ids in rank order for every query of the candidate table."""
    doc_ids = c.doc_ids
    out: dict[str, list[str]] = {q: [] for q in c.query_ids}
    for row, qi in zip(ranking.rows.tolist(), ranking.query_idx.tolist()):
        out[c.query_ids[qi]].append(doc_ids[int(c.doc_idx[row])])
    return out


def to_run(c: Candidates, ranking: Ranking, qrels: dict[str, dict[str, int]], name: str) -> Run:
    """A ranx ``Run`` named ``name`` holding exactly the counted queries of ``qrels``.

    Scores are ``n − rank`` (strictly decreasing); a counted query without results, or
    missing from ``c``, gets an empty list (ranx scores it 0)."""
    return lists_run(ranked_lists(c, ranking), qrels, name)


def lists_run(lists: Mapping[str, Sequence[str]], qrels: dict[str, dict[str, int]], name: str) -> Run:
    """``to_run`` of rankings given as document-id lists by query id."""
    from numba.typed import List as TypedList
    from ranx import Run
    from ranx.data_structures.common import create_and_sort

    run: dict[str, dict[str, float]] = {}
    for query_id in judged_query_ids(qrels):
        docs = lists.get(query_id, [])
        n = len(docs)
        run[query_id] = {doc_id: float(n - rank) for rank, doc_id in enumerate(docs)}
    if not run:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to evaluate")
    if any(run.values()):
        return Run(run, name=name)
    # ranx's constructor takes max() over all document ids and fails when every list is empty;
    # build the same structure it would (query ids sorted, empty id and score arrays).
    empty = Run(name=name)
    ids = list(run)
    empty.run = create_and_sort(TypedList(ids), TypedList([np.array([], dtype="<U1") for _ in ids]),
                                TypedList([np.array([], dtype=np.float64) for _ in ids]))
    empty.sorted = True
    return empty


def ranx_per_query(qrels: Qrels, run: Run, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    """``{metric: {query_id: value}}`` from ``ranx.evaluate``, without its pitfalls: the run is
    not written to (``save_results_in_run=False``), the result is always a dict (ranx returns a
    bare array for one metric, and with ``return_mean=False`` and one metric it raises
    ``KeyError``), and query ids are explicit (ranx returns arrays in sorted query-id order)."""
    from ranx import evaluate

    metrics = list(dict.fromkeys(metrics))
    if not metrics:
        raise ValueError("no metrics given")
    asked = metrics if len(metrics) > 1 else metrics * 2  # two names: ranx returns a dict
    with RANX_LOCK:
        scores = evaluate(qrels, run, asked, return_mean=False, save_results_in_run=False)
    query_ids = list(run.get_query_ids())
    if sorted(query_ids) != sorted(qrels.get_query_ids()):
        raise ValueError(f"run {run.name!r} and qrels hold different queries")
    return {m: {q: float(v) for q, v in zip(query_ids, scores[m])} for m in metrics}
