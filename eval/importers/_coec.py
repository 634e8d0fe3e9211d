"""Click models over UBI events: OpenSearch Search Relevance Workbench's COEC, ported exactly,
our own variant (``coec-rwb``), and the 0–3 grade mapping put on top of either.

``srw_coec`` is SRW's ``CoecClickModel`` (opensearch-project/search-relevance,
``src/main/java/org/opensearch/searchrelevance/judgments/clickmodel/coec/CoecClickModel.java``,
``calculateJudgments`` → ``getRankAggregatedClickThrough``, ``getClickthroughRate`` /
``processClickthroughSearch``, ``calculateCoecJudgments``; the per-document counts are
``model/ClickthroughRate.java``), step by step:

1. Rank CTR (``getRankAggregatedClickThrough``): over every event whose
   ``event_attributes.position.ordinal ≤ max_rank`` (a range query, ``lte``), a terms
   aggregation on ``action_name`` (OpenSearch's default size: the 10 most frequent names,
   ties by name) with a terms sub-aggregation on the ordinal of size ``max_rank`` (the
   ``max_rank`` most frequent positions, ties by position). A name equal to ``click``
   ignoring case sets the clicks at those positions, one equal to ``impression`` the
   impressions (``put``: a later bucket of the same name in another case replaces an
   earlier one). ``ctr(r) = clicks(r) / impressions(r)`` for ``r`` in ``0 … max_rank − 1``,
   0 where there were no impressions.
2. Per (``user_query``, ``object_id``) over the same events (``processClickthroughSearch``;
   the event's own ``user_query``): a ``click`` adds a click, an ``impression`` an
   impression, and each of them lowers the pair's rank to its ordinal if smaller
   (``ClickthroughRate.logRank``: the best position); an event of another action creates
   the pair with nothing counted.
3. ``rating = clicks / (ctr(rank) × impressions)`` where that product is > 0, else 0
   (``calculateCoecJudgments``; a rank ≥ ``max_rank`` has no CTR, so 0), written as
   ``String.format(Locale.ROOT, "%.3f", rating)``: Java rounds the shortest decimal form of
   the double half-up, as ``java_3f`` does.

So a click on an object the search did not show counts as a click with no impression (its
rating is 0), events beyond ``max_rank`` do not count at all, and ``query_response_hit_ids``
plays no part. What SRW does with the ratings: a document is relevant when its rating is
> 0 (``metrics/calculator/Evaluation.java``), and nDCG takes the rating as the gain.

``rwb_coec`` is our earlier variant, kept for logs without ``impression`` events: a search's
impressions are its ``query_response_hit_ids`` (position = index), else its impression
events; a click on an object the search did not list counts as shown at the click's
ordinal; only positions below ``max_rank`` count; and the expected clicks are summed over
the impressions, ``COEC = clicks / Σ ctr(position of each impression)`` (Cheng & Cantú-Paz,
WSDM 2010, summed per impression).

``grade_of`` maps a COEC value to the integer grades qrels hold (named ``coec-0-3``):
0 when the value is 0 (as SRW rounds it: SRW's "not relevant"), 1 below 1 (fewer clicks than
expected), 2 from 1 to 2, 3 above 2. Relevant (grade > 0) is exactly SRW's relevant (rating
> 0), so binary metrics agree with SRW's on the same judgments; nDCG's gains are the grades.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

OPENSEARCH_TERMS_SIZE = 10  # a terms aggregation's default size (the "actions" aggregation)
_NO_RANK = 2**31 - 1  # ClickthroughRate's initial rank, Integer.MAX_VALUE
GRADE_MAPPING = "coec-0-3"


@dataclass(frozen=True)
class Event:
    """One UBI event as the click models read it (``user_query``: the event's own, else the
    text its ``query_id`` has in the queries log, else None)."""

    action: str
    query_id: str | None
    user_query: str | None
    object_id: str | None
    ordinal: int | None


def equals_ignore_case(a: str, b: str) -> bool:
    """Java's ``String.equalsIgnoreCase``: same length, each char equal by upper or lower case."""
    return len(a) == len(b) and all(
        x == y or x.upper() == y.upper() or x.lower() == y.lower() for x, y in zip(a, b)
    )


def java_3f(value: float) -> str:
    """``String.format(Locale.ROOT, "%.3f", value)``: the shortest decimal of the double,
    rounded half-up to 3 places."""
    return str(Decimal(repr(float(value))).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def _terms(counts: Counter, size: int) -> list:
    """A terms aggregation's buckets: the ``size`` most frequent keys, ties by key."""
    return sorted(counts, key=lambda key: (-counts[key], key))[:size]


def srw_rank_ctr(events: list[Event], max_rank: int) -> dict[int, float]:
    """Step 1: ``{rank: ctr}`` for ranks ``0 … max_rank − 1`` (module docstring)."""
    in_range = [e for e in events if e.ordinal is not None and e.ordinal <= max_rank]
    clicks: dict[int, int] = {}
    impressions: dict[int, int] = {}
    for action in _terms(Counter(e.action for e in in_range), OPENSEARCH_TERMS_SIZE):
        positions = Counter(e.ordinal for e in in_range if e.action == action)
        target = (
            clicks
            if equals_ignore_case(action, "click")
            else impressions
            if equals_ignore_case(action, "impression")
            else None
        )
        if target is not None:
            for position in _terms(positions, max_rank):
                target[position] = positions[position]
    return {
        rank: (clicks.get(rank, 0) / impressions[rank] if impressions.get(rank, 0) > 0 else 0.0)
        for rank in range(max_rank)
    }


def srw_coec(events: list[Event], max_rank: int) -> dict[str, dict[str, str]]:
    """SRW's ratings ``{user_query: {object_id: "%.3f"}}`` (module docstring, steps 1–3)."""
    ctr = srw_rank_ctr(events, max_rank)
    pairs: dict[str, dict[str, list[int]]] = defaultdict(dict)  # [clicks, impressions, rank]
    for e in events:
        if e.ordinal is None or e.ordinal > max_rank or e.user_query is None or not e.object_id:
            continue
        pair = pairs[e.user_query].setdefault(e.object_id, [0, 0, _NO_RANK])
        if equals_ignore_case(e.action, "click"):
            pair[0] += 1
        elif equals_ignore_case(e.action, "impression"):
            pair[1] += 1
        else:
            continue
        pair[2] = min(pair[2], e.ordinal)
    out: dict[str, dict[str, str]] = {}
    for text, docs in pairs.items():
        ratings = {}
        for object_id, (n_clicks, n_shown, rank) in docs.items():
            expected = ctr.get(rank, 0.0) * n_shown
            ratings[object_id] = java_3f(n_clicks / expected if expected > 0 else 0.0)
        out[text] = ratings
    return out


def rwb_coec(
    searches: dict[str, tuple[str, list | None]],
    events: list[Event],
    clicks: tuple[str, ...],
    max_rank: int,
) -> dict[str, dict[str, float]]:
    """Our variant ``{user_query: {object_id: COEC}}`` (module docstring); ``searches``:
    ``{query_id: (user_query, shown ids or None)}``, ``clicks``: the click actions."""
    own: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.query_id in searches and e.object_id:
            own[e.query_id].append(e)
    shown: dict[str, list[tuple[str, int]]] = {}
    clicked: dict[str, list[tuple[str, int]]] = {}
    for query_id, (_, hits) in searches.items():
        logged = own.get(query_id, [])
        if hits is not None:
            impressions = [(d, p) for p, d in enumerate(hits)]
        else:
            impressions = [
                (e.object_id, e.ordinal)
                for e in logged
                if e.action == "impression" and e.ordinal is not None
            ]
        position: dict[str, int] = {}
        for d, p in impressions:
            position.setdefault(d, p)
        found = []
        for e in logged:
            if e.action not in clicks:
                continue
            p = position.get(e.object_id, e.ordinal)
            if p is None:
                continue
            if e.object_id not in position:
                impressions.append((e.object_id, p))
                position[e.object_id] = p
            found.append((e.object_id, p))
        shown[query_id] = [(d, p) for d, p in impressions if p < max_rank]
        clicked[query_id] = [(d, p) for d, p in found if p < max_rank]
    n_shown = Counter(p for pairs in shown.values() for _, p in pairs)
    n_clicked = Counter(p for pairs in clicked.values() for _, p in pairs)
    ctr = {p: n_clicked[p] / n for p, n in n_shown.items()}
    expected: dict[str, Counter] = defaultdict(Counter)
    clicks_of: dict[str, Counter] = defaultdict(Counter)
    for query_id, (text, _) in searches.items():
        for d, p in shown[query_id]:
            expected[text][d] += ctr[p]
        for d, _ in clicked[query_id]:
            clicks_of[text][d] += 1
    return {
        text: {d: (clicks_of[text][d] / e if e > 0 else 0.0) for d, e in docs.items()}
        for text, docs in expected.items()
    }


def grade_of(coec: float | str) -> int:
    """The ``coec-0-3`` mapping: 0 for 0 (never clicked, or SRW's 0.000), 1 below 1, 2 up to
    2, 3 above."""
    value = float(coec)
    if value <= 0:
        return 0
    return 1 if value < 1 else 2 if value <= 2 else 3
