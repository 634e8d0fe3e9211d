"""Seed 003's memory contexts scored like a pipeline's rankings, against the qrels.

Each lookup of a context (``patterns``, ``profile``, ``failures``) and the merged ``context``
(patterns, then the profile, then failures, each memory once: ``Context.ids``) is a ranked list.
Per counted query (≥ 1 relevant judgment, as ``eval.metrics.ranx_io``) and list ``L`` of size n:

- ``ndcg@size`` and ``recall@size``: ranx ``ndcg@n`` / ``recall@n`` of ``L`` (the ideal ranking
  cut at the list's own size; linear gain); an empty list scores 0;
- ``ndcg@budget`` and ``recall@budget``: the same for ``L`` cut where its token count would pass
  the budget (seed 000's budget loop: stop at the first memory that does not fit);
- ``ndcg@5``: ranx ``ndcg@5``, the figure the pipelines are compared on;
- ``size`` and ``tokens``: the list's length and token count (``retrieval.candidates.token_count``).

Means are over the counted queries; ``answered`` counts those whose list is not empty.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping, Sequence

from eval.metrics.ranx_io import judged_query_ids, ranx_per_query

LISTS = ("patterns", "profile", "failures", "context")
MEASURES = ("ndcg@size", "recall@size", "ndcg@budget", "recall@budget", "ndcg@5", "size", "tokens")


@dataclass(frozen=True)
class ContextScores:
    n_queries: int                                  # counted queries
    token_budget: int
    means: dict[str, dict[str, float]]              # list → measure → mean
    answered: dict[str, int]                        # list → counted queries with a non-empty list
    per_query: dict[str, dict[str, dict[str, float]]]   # list → query id → measure → value

    def to_json(self) -> dict:
        return {"n_queries": self.n_queries, "token_budget": self.token_budget, "means": self.means,
                "answered": self.answered, "per_query": self.per_query}


def lists_of(context) -> dict[str, list[str]]:
    """The ranked lists of one ``retrieval.seed003.Context``."""
    return {"patterns": [h.id for h in context.similar_tasks],
            "profile": [context.site_profile.id] if context.site_profile else [],
            "failures": [h.id for h in context.known_issues], "context": context.ids}


def _within(ids: list[str], tokens: Mapping[str, int], budget: int) -> list[str]:
    kept, spent = [], 0
    for doc_id in ids:
        spent += tokens[doc_id]
        if spent > budget:
            break
        kept.append(doc_id)
    return kept


def _ranx_at_size(qrels: dict, lists: dict[str, list[str]], metric: str) -> dict[str, float]:
    """ranx ``<metric>@n`` of each query's list, n its own length (0 for an empty list)."""
    from ranx import Qrels, Run

    out = {q: 0.0 for q in lists}
    by_size: dict[int, list[str]] = defaultdict(list)
    for q, ids in lists.items():
        if ids:
            by_size[len(ids)].append(q)
    for n, queries in by_size.items():
        run = Run({q: {d: float(n - r) for r, d in enumerate(lists[q])} for q in queries})
        name = f"{metric}@{n}"
        out.update(ranx_per_query(Qrels({q: qrels[q] for q in queries}), run, [name])[name])
    return out


def score_contexts(contexts: Sequence, query_ids: Sequence[str], qrels: dict[str, dict[str, int]],
                   doc_tokens: Mapping[str, int], token_budget: int = 1500) -> ContextScores:
    """Score ``contexts`` (one per query id) against ``qrels``; see the module docstring."""
    if not isinstance(token_budget, int) or token_budget < 1:
        raise ValueError(f"token budget must be an integer ≥ 1, got {token_budget!r}")
    by_query = dict(zip(query_ids, contexts))
    counted = judged_query_ids(qrels, [q for q in query_ids])
    if not counted:
        raise ValueError("no replayed query has a relevant judgment (grade > 0): nothing to score")
    judged = {q: {d: int(g) for d, g in qrels[q].items()} for q in counted}
    means, answered, per_query = {}, {}, {}
    for name in LISTS:
        full = {q: lists_of(by_query[q])[name] for q in counted}
        cut = {q: _within(ids, doc_tokens, token_budget) for q, ids in full.items()}
        values = {"ndcg@size": _ranx_at_size(judged, full, "ndcg"),
                  "recall@size": _ranx_at_size(judged, full, "recall"),
                  "ndcg@budget": _ranx_at_size(judged, cut, "ndcg"),
                  "recall@budget": _ranx_at_size(judged, cut, "recall"),
                  "ndcg@5": _at_five(judged, full),
                  "size": {q: float(len(ids)) for q, ids in full.items()},
                  "tokens": {q: float(sum(doc_tokens[d] for d in ids)) for q, ids in full.items()}}
        means[name] = {m: sum(values[m].values()) / len(counted) for m in MEASURES}
        answered[name] = sum(1 for ids in full.values() if ids)
        per_query[name] = {q: {m: values[m][q] for m in MEASURES} for q in counted}
    return ContextScores(len(counted), token_budget, means, answered, per_query)


def _at_five(qrels: dict, lists: dict[str, list[str]]) -> dict[str, float]:
    from ranx import Qrels, Run

    out = {q: 0.0 for q in lists}
    filled = [q for q, ids in lists.items() if ids]
    if filled:
        run = Run({q: {d: float(len(lists[q]) - r) for r, d in enumerate(lists[q])}
                   for q in filled})
        out.update(ranx_per_query(Qrels({q: qrels[q] for q in filled}), run, ["ndcg@5"])["ndcg@5"])
    return out


def score_table(scores: ContextScores) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per list, each measure's mean, then the queries answered."""
    header = ["list", *MEASURES, "answered"]
    rows = [[name, *(f"{scores.means[name][m]:.4f}" if m not in ("size", "tokens")
                     else f"{scores.means[name][m]:.1f}" for m in MEASURES),
             f"{scores.answered[name]}/{scores.n_queries}"] for name in LISTS]
    return header, rows


VARIANT_DELAY_S = 1.0


def case_space_variants(dataset) -> list:
    """Every query of ``dataset`` followed, ``VARIANT_DELAY_S`` later on the replay clock, by a
    repeat differing only in case and spacing (upper-cased, words two spaces apart, a trailing
    space; id ``<id>~v``, judged as the original)."""
    import dataclasses
    from datetime import timedelta

    queries = []
    for query in dataset.queries:
        when = dataset.query_reference_time(query) + timedelta(seconds=VARIANT_DELAY_S)
        queries += [query, dataclasses.replace(query, id=f"{query.id}~v", reference_time=when,
                                               text="  ".join(query.text.upper().split()) + " ")]
    return queries


def _log_queries(dataset, qrels: dict, variants: bool) -> tuple[list, dict]:
    queries = list(dataset.queries)
    if variants:
        queries = case_space_variants(dataset)
        qrels = {**qrels, **{f"{q}~v": d for q, d in qrels.items()}}
    return queries, qrels


def _replay(retriever, dataset, queries: list, warm_up: bool):
    from eval.experiments.replay import replay_log

    if warm_up and queries:
        retriever.warm_up(min(dataset.query_reference_time(q) for q in queries).timestamp())
    return replay_log(retriever, dataset, queries)


def _scores(log, dataset, qrels: dict, token_budget: int) -> ContextScores:
    from eval.metrics.budget import document_tokens

    return score_contexts(log.contexts, log.query_ids, qrels, document_tokens(dataset.documents), token_budget)


def evaluate_contexts(retriever, dataset, qrels: dict[str, dict[str, int]],
                      token_budget: int = 1500, variants: bool = False, warm_up: bool = False):
    """Replay the dataset's queries through seed 003's retriever (``replay.replay_log``)
    and score their contexts: (``LogReplay``, ``ContextScores``). ``variants``: each query is
    repeated in another case and spacing (``case_space_variants``); ``warm_up``: the retriever's
    warm-up runs first, at the earliest query's time."""
    queries, qrels = _log_queries(dataset, qrels, variants)
    log = _replay(retriever, dataset, queries, warm_up)
    return log, _scores(log, dataset, qrels, token_budget)


def evaluate_contexts_cross_fitted(make_retriever, cross, dataset, qrels: dict[str, dict[str, int]],
                                   token_budget: int = 1500, variants: bool = False,
                                   warm_up: bool = False):
    """``evaluate_contexts`` with a cross-fitted threshold (``calibration.cross_fit``): the whole
    log is replayed once per fold, by ``make_retriever(threshold)`` with that fold's threshold,
    and each query's context (its repeat's too) is taken from its own fold's replay, so no
    scored context was answered with a threshold fitted on its labels; a query without labels
    (not scored) from the first fold's. The cache counts are those of the contexts taken; the
    wall time is the replays' mean."""
    from eval.experiments.replay import LogReplay

    queries, qrels = _log_queries(dataset, qrels, variants)
    logs = [_replay(make_retriever(threshold), dataset, queries, warm_up) for threshold, _ in cross.folds]
    owner = {q: i for i, (_, ids) in enumerate(cross.folds) for q in ids}
    order = logs[0].query_ids
    picked = tuple(logs[owner.get(q.removesuffix("~v"), 0)].contexts[i] for i, q in enumerate(order))
    totals = {name: {"hits": 0, "misses": 0} for name in ("l1", "l2", "records")}
    totals["l2"]["saved_s"] = 0.0
    for context in picked:
        for name in totals:
            counts = context.cache.get(name, {"hits": 0, "misses": 0})
            totals[name]["hits"] += counts["hits"]
            totals[name]["misses"] += counts["misses"]
        totals["l2"]["saved_s"] += context.cache["l2"]["saved_s"]
    log = LogReplay(picked, order, totals["l1"], totals["l2"], sum(x.wall_s for x in logs) / len(logs),
                    totals["records"])
    return log, _scores(log, dataset, qrels, token_budget)
