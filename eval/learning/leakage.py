"""Which queries a model could learn about from each other: queries that share a group field or
a relevant document, and the folds ``rwb learn`` and ``rwb tune`` use by default because of them.

A learned model scored on a query whose relevant passage it was trained on (through another
question about the same passage) looks better than it will on a new passage: it memorised the
passage (issue 30, CMRC2018: about five questions per passage). Two sources say which queries
belong together:

- the queries' ``group`` field (``queries.jsonl``: a conversation, a user, a passage);
- shared relevant documents: two queries with a relevant judgment (grade > 0) on the same
  document are linked, and the groups are the connected components of those links
  (``shared_relevance_groups``).

``fold_groups`` decides the folds: an explicit ``--fold-by FIELD`` wins, ``--fold-by none`` folds
by query; by default the ``group`` field where most queries carry one and it forms enough
groups, else the shared-relevance components where they are clear (at least 5% of the queries
share a relevant document, at least twice as many groups as folds, none larger than a fold).
Otherwise folds go by query, and where queries do share documents their components are still
given to the memorisation check (``eval.learning.nested.memorisation_check``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from eval.search.sweep import query_groups

MIN_SHARED = 0.05  # share of the queries in a shared-relevance group for it to count as clear
NONE = "none"


def shared_relevance_groups(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, str]:
    """Query id → ``shared:<first query id of its group>`` for every query with a relevant
    judgment: queries linked (directly or through others) by a relevant document share a group
    (union-find over the documents)."""
    parent: dict[str, str] = {}

    def find(q: str) -> str:
        while parent[q] != q:
            parent[q] = parent[parent[q]]
            q = parent[q]
        return q

    first_of_doc: dict[str, str] = {}
    for q in sorted(qrels):
        relevant = [d for d, g in qrels[q].items() if g > 0]
        if not relevant:
            continue
        parent.setdefault(q, q)
        for d in relevant:
            other = first_of_doc.setdefault(d, q)
            a, b = find(q), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return {q: f"shared:{find(q)}" for q in parent}


@dataclass(frozen=True)
class FoldGroups:
    fold_by: dict[str, str] | None  # query id → group for the folds; None: folds by query
    check: dict[str, str] | None  # the groups the memorisation check compares with (by query)
    note: str  # what was found and what the folds do, for the command's output ("" if nothing)


def _sizes(groups: Mapping[str, str]) -> list[int]:
    count: dict[str, int] = {}
    for g in groups.values():
        count[g] = count.get(g, 0) + 1
    return sorted(count.values(), reverse=True)


def fold_groups(queries, qrels: Mapping[str, Mapping[str, int]], folds: int,
                requested: str | None) -> FoldGroups:
    """The folds' groups for ``--fold-by requested`` (None: the default, above)."""
    counted = {q for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    queries = [q for q in queries if q.id in counted]
    n = len(queries)
    shared = {q: g for q, g in shared_relevance_groups(qrels).items() if q in counted}
    sizes = _sizes(shared)
    linked = sum(s for s in sizes if s > 1)
    shared_note = (
        f"{linked} of {n} judged queries share a relevant document with another "
        f"({sum(1 for s in sizes if s > 1)} such groups, the largest {sizes[0]} queries)"
        if linked else ""
    )
    # a group larger than a fold would leave one fold with most queries: no fair comparison
    check = shared if linked and len(sizes) >= 2 and sizes[0] <= n / max(folds, 2) else None
    if requested is not None and requested.strip().lower() == NONE:
        note = (f"{shared_note}; folds by query (--fold-by none): a model may be scored on a "
                "query whose relevant document it was trained on") if shared_note else ""
        return FoldGroups(None, check, note)
    if requested:
        return FoldGroups(query_groups(queries, requested), check, "")
    with_group = {q.id: f"group={q.group}" for q in queries if getattr(q, "group", "")}
    group_sizes = _sizes(with_group)
    if (with_group and len(with_group) * 2 >= n and len(group_sizes) >= 2 * folds
            and group_sizes[0] <= n / folds):
        return FoldGroups(with_group, check,
                          f"the queries carry a group field ({len(group_sizes)} groups): folds keep "
                          "each group whole (--fold-by group; --fold-by none to fold by query)")
    if linked and linked >= MIN_SHARED * n and len(sizes) >= 2 * folds and sizes[0] <= n / folds:
        return FoldGroups(shared, check,
                          f"{shared_note}: folds keep each such group whole, so no model is scored "
                          "on a query whose relevant document it was trained on (--fold-by none to "
                          "fold by query)")
    if shared_note:
        return FoldGroups(None, check, f"{shared_note}; too few or too large groups to fold by "
                                       "them, folds by query")
    return FoldGroups(None, None, "")


AUTO = "auto"


def fold_choices(queries) -> list[str]:
    """The ``--fold-by`` values a page offers for these queries: ``auto`` (the default above),
    ``none`` (folds by query) and every query field at least one query carries a value for."""
    from eval.search.sweep import QUERY_FIELDS

    fields = [f for f in QUERY_FIELDS if any(getattr(q, f, "") for q in queries)]
    extra = sorted({k for q in queries for k, v in (q.extra or {}).items()
                    if v not in (None, "") and isinstance(v, (str, int))} - set(fields))
    return [AUTO, NONE, *fields, *extra]
