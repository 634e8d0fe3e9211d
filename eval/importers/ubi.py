"""Usage logs as judgments: UBI query and event logs → implicit judgments by COEC.

``rwb import ubi DATASET --queries ubi_queries.jsonl --events ubi_events.jsonl`` reads the
two logs of the User Behavior Insights schema (OpenSearch UBI 1.0) as JSON lines:

- a query: ``query_id``, ``user_query`` (the text searched) and ``query_response_hit_ids``
  (the object ids shown, in rank order);
- an event: ``action_name``, ``query_id`` and ``event_attributes.object.object_id`` with
  ``event_attributes.position.ordinal`` (0-based, as OpenSearch's Search Relevance Workbench
  reads it).

Click model: COEC, clicks over expected clicks (Cheng & Cantú-Paz, WSDM 2010), as SRW's
``CoecClickModel``. Chosen because it corrects for position bias (a click at rank 8, where
users rarely click, counts for more than one at rank 1), needs only impressions and clicks —
no session order, as cascade or DBN models do — and gives the judgments an OpenSearch user's
SRW would. With ``ctr(p)`` = clicks at position ``p`` / impressions at ``p`` over the whole
log (positions below ``max_rank``):

    COEC(q, d) = clicks(q, d) / Σ_{impressions of d for q} ctr(position of that impression)

over every logged search whose ``user_query`` is ``q`` (SRW multiplies the impressions by the
CTR of one observed rank; the sum is the same when a document is always shown at one rank).
Impressions are the ``query_response_hit_ids`` of each search (position = index); for a
search without them, its ``impression`` events. A click on an object the search did not list
counts as shown at the click's ordinal. A COEC becomes an integer grade: 0 (shown, never
clicked), 1 (below the clicks expected), 2 (up to twice), 3 (more than twice).

The judgments are written to ``qrels/implicit.tsv`` (their COEC values to
``qrels/implicit_coec.tsv``), apart from the explicit qrels; ``--judgments implicit`` selects
them (``retrieval.dataset.load_dataset``). A ``user_query`` is matched to the dataset's
queries by exact text; searches of other texts still count in ``ctr(p)``. Agreement with the
explicit judgments, on the (query, document) pairs both judge (a document the explicit qrels
of a judged query do not list counts as grade 0): Cohen's kappa on relevant (grade > 0) and
Kendall's tau-b on the grades (scikit-learn, SciPy).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

from eval.importers._base import ImportResult, Importer, Option, Problems, json_lines
from retrieval.dataset import IMPLICIT_QRELS, load_dataset, read_qrels_file
from retrieval.files import atomic_write_text

CLICKS = ("click",)
MAX_RANK = 20
COEC_FILE = "qrels/implicit_coec.tsv"


def grade_of(coec: float) -> int:
    """0 never clicked, 1 below expectation, 2 up to twice it, 3 more."""
    if coec <= 0:
        return 0
    return 1 if coec < 1 else 2 if coec <= 2 else 3


def read_logs(
    queries_path: Path, events_path: Path, clicks: tuple[str, ...]
) -> tuple[dict, dict, Counter]:
    """``searches`` {query_id: (user_query, [shown ids] | None)} and ``events`` {query_id:
    [(action, object_id, ordinal | None)]}; problems raise ``DatasetError`` naming file:line."""
    problems = Problems()
    skipped: Counter = Counter()
    searches: dict[str, tuple[str, list | None]] = {}
    for line, obj in json_lines(queries_path, problems, queries_path.name):
        query_id, text, hits = (
            obj.get("query_id"),
            obj.get("user_query"),
            obj.get("query_response_hit_ids"),
        )
        if not isinstance(query_id, str) or not query_id or not isinstance(text, str):
            problems.add(
                queries_path.name, line, "query_id", "needs a query_id and a user_query string"
            )
            continue
        if hits is not None and (
            not isinstance(hits, list) or not all(isinstance(h, str) for h in hits)
        ):
            problems.add(
                queries_path.name, line, "query_response_hit_ids", "expected a list of id strings"
            )
            continue
        if query_id in searches:
            problems.add(queries_path.name, line, "query_id", f"{query_id!r} logged twice")
            continue
        searches[query_id] = (text, hits)
    events: dict[str, list] = defaultdict(list)
    for line, obj in json_lines(events_path, problems, events_path.name):
        action, query_id = obj.get("action_name"), obj.get("query_id")
        if action not in clicks and action != "impression":
            skipped["events of other actions"] += 1
            continue
        attributes = (
            obj.get("event_attributes") if isinstance(obj.get("event_attributes"), dict) else {}
        )
        target = attributes.get("object") if isinstance(attributes.get("object"), dict) else {}
        position = (
            attributes.get("position") if isinstance(attributes.get("position"), dict) else {}
        )
        object_id, ordinal = target.get("object_id"), position.get("ordinal")
        if not isinstance(query_id, str) or not isinstance(object_id, str) or not object_id:
            problems.add(
                events_path.name,
                line,
                "event",
                "a click needs query_id and event_attributes.object.object_id",
            )
            continue
        if ordinal is not None and (
            isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 0
        ):
            problems.add(
                events_path.name, line, "ordinal", f"expected a whole number ≥ 0, got {ordinal!r}"
            )
            continue
        if query_id not in searches:
            skipped["events of searches not in the query log"] += 1
            continue
        events[query_id].append(("click" if action in clicks else "impression", object_id, ordinal))
    problems.raise_if_any()
    return searches, dict(events), skipped


def coec_judgments(
    searches: dict, events: dict, max_rank: int = MAX_RANK
) -> dict[str, dict[str, float]]:
    """``{user_query: {object_id: COEC}}`` for every object shown or clicked (formula above)."""
    shown: dict[str, list[tuple[str, int]]] = {}
    clicked: dict[str, list[tuple[str, int]]] = {}
    for query_id, (_, hits) in searches.items():
        own = events.get(query_id, [])
        if hits is not None:
            impressions = [(d, p) for p, d in enumerate(hits)]
        else:
            impressions = [(d, o) for kind, d, o in own if kind == "impression" and o is not None]
        position = {}
        for d, p in impressions:
            position.setdefault(d, p)
        clicks = []
        for kind, d, ordinal in own:
            if kind != "click":
                continue
            p = position.get(d, ordinal)
            if p is None:
                continue
            if d not in position:
                impressions.append((d, p))
                position[d] = p
            clicks.append((d, p))
        shown[query_id] = [(d, p) for d, p in impressions if p < max_rank]
        clicked[query_id] = [(d, p) for d, p in clicks if p < max_rank]
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


def agreement(explicit: dict[str, dict[str, int]], implicit: dict[str, dict[str, int]]) -> dict:
    """Cohen's kappa (relevant = grade > 0) and Kendall's tau-b (grades) on the pairs both judge."""
    from scipy.stats import kendalltau
    from sklearn.metrics import cohen_kappa_score

    pairs = [
        (explicit[q].get(d, 0), g)
        for q, docs in implicit.items()
        if explicit.get(q)
        for d, g in docs.items()
    ]
    out = {"pairs": len(pairs), "kappa": math.nan, "tau": math.nan}
    if len(pairs) >= 2:
        a, b = [x > 0 for x, _ in pairs], [y > 0 for _, y in pairs]
        if len(set(a) | set(b)) > 1:
            out["kappa"] = float(cohen_kappa_score(a, b))
        out["tau"] = float(kendalltau([x for x, _ in pairs], [y for _, y in pairs]).statistic)
    return out


def import_ubi(
    dest: str | Path,
    *,
    queries: str | Path,
    events: str | Path,
    clicks: str = "click",
    max_rank: int = MAX_RANK,
    force: bool = False,
    name: str | None = None,
) -> ImportResult:
    """Derive implicit judgments for the dataset at ``dest`` from its users' UBI logs."""
    if name:
        raise ValueError("import ubi: --name does not apply (the judgments are added to DATASET)")
    if isinstance(max_rank, bool) or not isinstance(max_rank, int) or max_rank < 1:
        raise ValueError(f"--max-rank must be a whole number ≥ 1, got {max_rank!r}")
    root = Path(dest)
    dataset = load_dataset(root)
    for label, path in (("--queries", queries), ("--events", events)):
        if not Path(path).is_file():
            raise ValueError(f"{label} {path}: not a file (UBI JSON lines)")
    if (root / IMPLICIT_QRELS).exists() and not force:
        raise ValueError(f"{root / IMPLICIT_QRELS}: already exists (use --force to replace it)")
    actions = tuple(a.strip() for a in str(clicks).split(",") if a.strip()) or CLICKS
    searches, logged, skipped = read_logs(Path(queries), Path(events), actions)
    coec = coec_judgments(searches, logged, max_rank)
    query_of = {}
    for query in dataset.queries:
        query_of.setdefault(query.text, query.id)
    doc_ids = {d.id for d in dataset.documents}
    implicit: dict[str, dict[str, int]] = {}
    values: list[str] = []
    for text, docs in coec.items():
        query_id = query_of.get(text)
        if query_id is None:
            skipped["searched texts that are no query of the dataset"] += 1
            continue
        for doc_id, value in sorted(docs.items()):
            if doc_id not in doc_ids:
                skipped["objects that are no document of the dataset"] += 1
                continue
            implicit.setdefault(query_id, {})[doc_id] = grade_of(value)
            values.append(f"{query_id}\t{doc_id}\t{value:.6f}\n")
    if not implicit:
        raise ValueError("no logged search matches a query of the dataset by its text (user_query)")
    rows = [f"{q}\t{d}\t{g}\n" for q, docs in implicit.items() for d, g in docs.items()]
    atomic_write_text(root / COEC_FILE, "query-id\tcorpus-id\tcoec\n" + "".join(values))
    atomic_write_text(root / IMPLICIT_QRELS, "query-id\tcorpus-id\tscore\n" + "".join(rows))
    written = load_dataset(root)
    read_qrels_file(root / IMPLICIT_QRELS, written)  # the file reads back as the loader reads it
    result = ImportResult(kind="ubi", dest=root, dataset=written, skipped=skipped)
    agree = agreement(dataset.qrels, implicit)
    result.notes.append(
        f"implicit judgments (COEC, {len(searches)} searches): {len(rows)} for {len(implicit)} "
        f"queries in {IMPLICIT_QRELS}; use --judgments implicit"
    )
    if agree["pairs"]:
        result.notes.append(
            f"agreement with explicit judgments on {agree['pairs']} pairs: Cohen's kappa "
            f"{agree['kappa']:.3f} (relevant = grade > 0), Kendall's tau-b {agree['tau']:.3f}"
        )
    else:
        result.notes.append("agreement: no (query, document) pair is judged both ways")
    return result


def _run(
    dest, *, queries, events, clicks="click", max_rank=str(MAX_RANK), **common
) -> ImportResult:
    try:
        rank = int(max_rank)
    except (TypeError, ValueError):
        raise ValueError(f"--max-rank must be a whole number, got {max_rank!r}") from None
    return import_ubi(
        dest, queries=queries, events=events, clicks=clicks or "click", max_rank=rank, **common
    )


IMPORTER = Importer(
    "ubi",
    "usage logs (UBI queries + events) → implicit judgments by COEC, in an existing dataset",
    _run,
    source=None,
    dest="the dataset folder to add qrels/implicit.tsv to",
    existing=True,
    options=(
        Option(
            "--queries",
            "ubi_queries JSON lines (query_id, user_query, query_response_hit_ids)",
            required=True,
            path=True,
        ),
        Option(
            "--events",
            "ubi_events JSON lines (action_name, query_id, event_attributes.object."
            "object_id, event_attributes.position.ordinal)",
            required=True,
            path=True,
        ),
        Option(
            "--clicks",
            "actions that count as clicks, comma-separated (default click)",
            default="click",
        ),
        Option(
            "--max-rank",
            f"positions counted (0-based, below this; default {MAX_RANK})",
            default=str(MAX_RANK),
        ),
    ),
)
