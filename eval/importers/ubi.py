"""Usage logs as judgments: UBI query and event logs → implicit judgments by COEC, and query
sets sampled from the logged searches.

``rwb import ubi DATASET --queries ubi_queries.jsonl --events ubi_events.jsonl`` reads the
two logs of the User Behavior Insights schema (OpenSearch UBI 1.0) as JSON lines:

- a query: ``query_id``, ``user_query`` (the text searched) and, optionally,
  ``query_response_hit_ids`` (the object ids shown, in rank order);
- an event: ``action_name``, ``query_id``, ``event_attributes.object.object_id``,
  ``event_attributes.position.ordinal`` (0-based) and, optionally, ``event_id`` and
  ``user_query``. Events that share an ``event_id`` are one event logged again (counted
  once); an event's ``user_query`` is its own, else its search's in the queries log.

Click model (``--model``, ``eval/importers/_coec.py``): ``coec`` (default) is OpenSearch Search
Relevance Workbench's ``CoecClickModel`` exactly: per (``user_query``, object) the clicks over
``ctr(best position) × impressions``, counting ``impression`` and ``click`` events at
positions ≤ ``--max-rank`` and a CTR per position below it, written as SRW writes it (3
decimals). ``coec-rwb`` is our own variant for logs without impression events (impressions
from ``query_response_hit_ids``, expected clicks summed per impression). Each value becomes a
grade by the ``coec-0-3`` mapping: 0 for 0 (SRW's not relevant), 1 below 1 (clicked less than
expected), 2 up to 2, 3 above.

The grades are written to ``qrels/implicit.tsv`` and the click model's values to
``qrels/implicit_coec.tsv``, apart from the explicit qrels; ``--judgments implicit`` selects
them. Both are files inside the dataset folder and are written only there: one that leads
outside it through a symlink is refused (``retrieval.files.inside_for_write``) before
anything is written. A ``user_query`` is matched to the dataset's queries by exact text;
searches of other texts still count in the CTR by position. An event whose ``query_id`` is not
in the queries log is counted and reported with the import's summary.

``--sample N`` (``--sampler random|topn|pptss``, ``--seed S``; ``eval/importers/_sampling.py``)
draws a query set from the logged searches by SRW's samplers: the sampled texts that are no
query of the dataset yet are added to ``queries.jsonl`` (id ``ubi-`` + a hash of the text,
with ``ubi_frequency``), and the implicit judgments are written for the sampled queries
only, so ``--judgments implicit`` evaluates the sample.

Agreement with the explicit judgments, on the (query, document) pairs both judge (a document
the explicit qrels of a judged query do not list counts as grade 0): Cohen's kappa on
relevant (grade > 0) and Kendall's tau-b on the grades (scikit-learn, SciPy).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from pathlib import Path

from eval.importers._base import ImportResult, Importer, Option, Problems, json_lines
from eval.importers._coec import (
    GRADE_MAPPING,
    Event,
    equals_ignore_case,
    grade_of,
    rwb_coec,
    srw_coec,
)
from eval.importers._sampling import MAX_SAMPLE, SAMPLERS, sample_queries
from retrieval.dataset import (
    IMPLICIT_QRELS,
    MAX_TEXT_CHARS,
    load_dataset,
    read_qrels_file,
    scrub_text,
)
from retrieval.files import atomic_write_bytes, atomic_write_text, inside_for_write

CLICKS = ("click",)
MAX_RANK = 20
COEC_FILE = "qrels/implicit_coec.tsv"
QUERIES_FILE = "queries.jsonl"
MODELS = ("coec", "coec-rwb")
SAMPLE_PREFIX = "ubi-"

__all__ = ["grade_of", "read_logs", "import_ubi", "agreement", "IMPORTER"]


def _int_or_none(value) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def read_logs(
    queries_path: Path, events_path: Path, clicks: tuple[str, ...] = CLICKS
) -> tuple[dict, list[Event], Counter]:
    """``searches`` {query_id: (user_query, [shown ids] | None)} in log order, the ``events``
    (each ``event_id`` once) and the skip counts; problems raise ``DatasetError`` naming
    file:line (an object id that is not a string, a position that is not a whole number ≥ 0).
    An event without an object id or a search (``query_id`` or its own ``user_query``) still
    counts in SRW's CTR by position, as in SRW, for no (query, document) pair."""
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
    events: list[Event] = []
    seen_ids: set = set()
    for line, obj in json_lines(events_path, problems, events_path.name):
        action, query_id = obj.get("action_name"), obj.get("query_id")
        if not isinstance(action, str):
            skipped["events without an action_name"] += 1
            continue
        event_id = obj.get("event_id")
        if isinstance(event_id, (str, int)) and not isinstance(event_id, bool):
            if event_id in seen_ids:
                skipped["events logged again (same event_id)"] += 1
                continue
            seen_ids.add(event_id)
        attributes = (
            obj.get("event_attributes") if isinstance(obj.get("event_attributes"), dict) else {}
        )
        target = attributes.get("object") if isinstance(attributes.get("object"), dict) else {}
        position = (
            attributes.get("position") if isinstance(attributes.get("position"), dict) else {}
        )
        object_id, ordinal = target.get("object_id"), position.get("ordinal")
        own_text = obj.get("user_query") if isinstance(obj.get("user_query"), str) else None
        counted = (
            action in clicks
            or equals_ignore_case(action, "click")
            or equals_ignore_case(action, "impression")
        )
        if object_id is not None and (not isinstance(object_id, str) or not object_id):
            problems.add(
                events_path.name, line, "object_id", f"expected an id string, got {object_id!r}"
            )
            continue
        if not _int_or_none(ordinal) or (ordinal is not None and ordinal < 0):
            if counted:
                problems.add(
                    events_path.name,
                    line,
                    "ordinal",
                    f"expected a whole number ≥ 0, got {ordinal!r}",
                )
            else:
                skipped["events of other actions without a valid position"] += 1
            continue
        if object_id is None or not (isinstance(query_id, str) or own_text is not None):
            # as in SRW, such an event still counts in the CTR by position, for no pair
            skipped["events without an object id or a search (counted in the CTR only)"] += 1
        if isinstance(query_id, str) and query_id not in searches:
            # its search is not in the queries log: it counts in the CTR by position only
            skipped["events whose query_id is not in the queries log"] += 1
        if own_text is None and isinstance(query_id, str) and query_id in searches:
            own_text = searches[query_id][0]
        search = query_id if isinstance(query_id, str) else None
        events.append(Event(action, search, own_text, object_id, ordinal))
    problems.raise_if_any()
    return searches, events, skipped


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


def _whole(label: str, value, low: int, high: int | None = None) -> int:
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            raise ValueError(f"{label} must be a whole number, got {value[:40]!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{label} must be a whole number ≥ {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{label} must be a whole number in {low}…{high:,}, got {value:,}")
    return value


def _query_text_ok(text: str) -> bool:
    return bool(text.strip()) and scrub_text(text) == text and len(text) <= MAX_TEXT_CHARS


def sampled_query_ids(
    sample: dict[str, int], query_of: dict[str, str], taken: set[str]
) -> tuple[dict[str, str], list[dict]]:
    """``{text: query id}`` for the sampled texts (a dataset query of that text, else a new
    ``ubi-<hash>`` id) and the new queries' records (``_id``, ``text``, ``ubi_frequency``)."""
    ids, added = {}, []
    for text, frequency in sample.items():
        if text in query_of:
            ids[text] = query_of[text]
            continue
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()
        length = 10
        new_id = SAMPLE_PREFIX + digest[:length]
        while new_id in taken:  # another text's id: lengthen the hash
            length += 2
            new_id = SAMPLE_PREFIX + digest[:length]
        taken.add(new_id)
        ids[text] = new_id
        added.append({"_id": new_id, "text": text, "ubi_frequency": frequency})
    return ids, added


def import_ubi(
    dest: str | Path,
    *,
    queries: str | Path,
    events: str | Path,
    clicks: str = "click",
    max_rank: int = MAX_RANK,
    model: str = "coec",
    sample: int | None = None,
    sampler: str = "pptss",
    seed: int = 0,
    force: bool = False,
    name: str | None = None,
) -> ImportResult:
    """Derive implicit judgments for the dataset at ``dest`` from its users' UBI logs (and,
    with ``sample``, a query set drawn from the logged searches)."""
    if name:
        raise ValueError("import ubi: --name does not apply (the judgments are added to DATASET)")
    max_rank = _whole("--max-rank", max_rank, 1)
    if model not in MODELS:
        raise ValueError(f"--model must be one of {', '.join(MODELS)}, got {model!r}")
    if sample is not None:
        sample = _whole("--sample", sample, 1, MAX_SAMPLE)
        seed = _whole("--seed", seed, 0)
        if sampler not in SAMPLERS:
            raise ValueError(f"--sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    root = Path(dest)
    dataset = load_dataset(root)
    for label, path in (("--queries", queries), ("--events", events)):
        if not Path(path).is_file():
            raise ValueError(f"{label} {path}: not a file (UBI JSON lines)")
    outputs = [IMPLICIT_QRELS, COEC_FILE] + ([QUERIES_FILE] if sample is not None else [])
    target = {relative: inside_for_write(root, relative) for relative in outputs}
    if target[IMPLICIT_QRELS].exists() and not force:
        raise ValueError(f"{root / IMPLICIT_QRELS}: already exists (use --force to replace it)")
    actions = tuple(a.strip() for a in str(clicks).split(",") if a.strip()) or CLICKS
    if model == "coec" and actions != CLICKS:
        raise ValueError("--clicks applies to --model coec-rwb; SRW's coec counts click events")
    searches, logged, skipped = read_logs(Path(queries), Path(events), actions)
    if model == "coec":
        values = srw_coec(logged, max_rank)
    else:
        values = {
            text: {d: f"{v:.6f}" for d, v in docs.items()}
            for text, docs in rwb_coec(searches, logged, actions, max_rank).items()
        }
    query_of: dict[str, str] = {}
    for query in dataset.queries:
        query_of.setdefault(query.text, query.id)
    added: list[dict] = []
    drawn: dict[str, int] = {}
    if sample is not None:
        texts = [text for text, _ in searches.values()]
        drawn = sample_queries(texts, sample, sampler, seed)
        unusable = [t for t in drawn if not _query_text_ok(t)]
        skipped["sampled texts that cannot be a query (blank or too long)"] += len(unusable)
        drawn = {t: f for t, f in drawn.items() if t not in unusable}
        if not drawn:
            raise ValueError(f"--sample {sample}: the {sampler} sampler drew no usable query text")
        query_of, added = sampled_query_ids(drawn, query_of, {q.id for q in dataset.queries})
        values = {t: values.get(t, {}) for t in drawn}
    doc_ids = {d.id for d in dataset.documents}
    implicit: dict[str, dict[str, int]] = {}
    rows: list[str] = []
    for text, docs in values.items():
        query_id = query_of.get(text)
        if query_id is None:
            skipped["searched texts that are no query of the dataset"] += 1
            continue
        for doc_id, value in sorted(docs.items()):
            if doc_id not in doc_ids:
                skipped["objects that are no document of the dataset"] += 1
                continue
            implicit.setdefault(query_id, {})[doc_id] = grade_of(value)
            rows.append(f"{query_id}\t{doc_id}\t{value}\n")
    if not implicit:
        raise ValueError("no logged search matches a query of the dataset by its text (user_query)")
    graded = [f"{q}\t{d}\t{g}\n" for q, docs in implicit.items() for d, g in docs.items()]
    if added:
        before = target[QUERIES_FILE].read_bytes() if target[QUERIES_FILE].is_file() else b""
        joint = b"" if not before or before.endswith(b"\n") else b"\n"
        lines = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in added)
        atomic_write_bytes(target[QUERIES_FILE], before + joint + lines.encode("utf-8"))
    atomic_write_text(target[COEC_FILE], "query-id\tcorpus-id\tcoec\n" + "".join(rows))
    atomic_write_text(target[IMPLICIT_QRELS], "query-id\tcorpus-id\tscore\n" + "".join(graded))
    written = load_dataset(root)
    read_qrels_file(root / IMPLICIT_QRELS, written)  # the file reads back as the loader reads it
    result = ImportResult(kind="ubi", dest=root, dataset=written, skipped=skipped)
    label = "SRW's COEC" if model == "coec" else "COEC, our variant coec-rwb"
    result.notes.append(
        f"implicit judgments ({label}, graded by {GRADE_MAPPING}; {len(searches)} searches): "
        f"{len(graded)} for {len(implicit)} queries in {IMPLICIT_QRELS}; use --judgments implicit"
    )
    if sample is not None:
        result.notes.append(
            f"query set sampled ({sampler}, seed {seed}, {sample} asked): {len(drawn)} texts, "
            f"{len(added)} added to {QUERIES_FILE}, {len(implicit)} with judgments"
        )
    agree = agreement(dataset.qrels, implicit)
    if agree["pairs"]:
        result.notes.append(
            f"agreement with explicit judgments on {agree['pairs']} pairs: Cohen's kappa "
            f"{agree['kappa']:.3f} (relevant = grade > 0), Kendall's tau-b {agree['tau']:.3f}"
        )
    else:
        result.notes.append("agreement: no (query, document) pair is judged both ways")
    return result


def _run(
    dest,
    *,
    queries,
    events,
    clicks="click",
    max_rank=str(MAX_RANK),
    model="coec",
    sample=None,
    sampler="pptss",
    seed="0",
    **common,
) -> ImportResult:
    return import_ubi(
        dest,
        queries=queries,
        events=events,
        clicks=clicks or "click",
        max_rank=max_rank if max_rank not in (None, "") else MAX_RANK,
        model=model or "coec",
        sample=sample if sample not in (None, "") else None,
        sampler=sampler or "pptss",
        seed=seed if seed not in (None, "") else 0,
        **common,
    )


IMPORTER = Importer(
    "ubi",
    "usage logs (UBI queries + events) → implicit judgments by COEC (and a sampled query set), "
    "in an existing dataset",
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
            "ubi_events JSON lines (action_name, query_id, event_id, event_attributes.object."
            "object_id, event_attributes.position.ordinal)",
            required=True,
            path=True,
        ),
        Option(
            "--model",
            "click model: coec (OpenSearch SRW's CoecClickModel, default) or coec-rwb (our "
            "variant: impressions from query_response_hit_ids)",
            default="coec",
        ),
        Option(
            "--clicks",
            "coec-rwb: actions that count as clicks, comma-separated (default click; SRW's "
            "coec counts click)",
            default="click",
        ),
        Option(
            "--max-rank",
            f"positions counted (0-based; SRW: CTR below it, events up to it; default {MAX_RANK})",
            default=str(MAX_RANK),
        ),
        Option(
            "--sample",
            "N: a query set of N texts drawn from the logged searches (added to queries.jsonl), "
            "judged alone",
        ),
        Option(
            "--sampler",
            "random, topn (most frequent) or pptss (probability proportional to size, default), "
            "as SRW's",
            default="pptss",
        ),
        Option("--seed", "the sampler's seed (default 0)", default="0"),
    ),
)
