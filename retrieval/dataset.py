"""Load and validate a dataset folder (BEIR layout plus memory metadata).

Layout: ``corpus.jsonl``, ``queries.jsonl`` (optional), ``qrels/test.tsv`` or
``qrels.tsv`` (optional) and ``dataset.toml`` (optional).

Defaults for missing document metadata (documented in README.md):
``scope`` "global", ``memory_type`` "fact", ``confidence`` 1.0, ``vitality`` 50,
``reinforcement`` 0, ``access_count`` 0, ``updated_at`` = ``created_at``; an undated
memory has no age (its recency score is 0). The reference time ("now") is the
query's ``reference_time``, else ``dataset.toml``'s, else the newest date in the corpus.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from retrieval.files import resolve_inside
from retrieval.params import integer, knob_of, number

MAX_TEXT_CHARS = 100_000
MIN_YEAR, MAX_YEAR = 1900, 2200  # every date (created_at, updated_at, reference_time) is in these
MAX_GRADE = 100  # qrels grades are integers 0…100 (2^grade − 1, exponential gain, stays finite)
MAX_INT = 2**31 - 1  # integer fields are stored as int32 in the candidate table
SCOPES = ("global", "project")
_QUERY_FIELDS = {"_id", "text", "intent", "lang", "scope", "group", "reference_time"}


class DatasetError(ValueError):
    """Every problem found in a dataset, one ``file:line: field: what is wrong`` each."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        shown = self.problems[:20]
        more = len(self.problems) - len(shown)
        text = "\n".join(shown) + (f"\n… and {more} more problems" if more > 0 else "")
        super().__init__(text)


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""
    path: str = ""
    line_start: int = integer(0, "first line", min=0, max=MAX_INT)
    line_end: int = integer(0, "last line", min=0, max=MAX_INT)
    scope: str = "global"
    project: str = ""
    group: str = ""
    memory_type: str = "fact"
    created_at: datetime | None = None
    updated_at: datetime | None = None
    confidence: float = number(1.0, "confidence", min=0.0, max=1.0)
    vitality: float = number(50.0, "vitality", min=0.0, max=100.0)
    reinforcement: int = integer(0, "reinforcement", min=0, max=MAX_INT)
    access_count: int = integer(0, "access count", min=0, max=MAX_INT)
    source: str = ""
    related: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict, compare=False, hash=False)


DOC_FIELDS = frozenset({"_id", *(f.name for f in dataclasses.fields(Document) if f.name not in ("id", "extra"))})
"""The fields a ``corpus.jsonl`` line may hold (``_id`` is ``Document.id``); any other goes to ``extra``."""
DOC_NUMBERS = tuple((f.name, knob_of(f), f.default) for f in dataclasses.fields(Document) if knob_of(f) is not None)
"""``(name, knob, default)`` of each numeric document field, declared once on ``Document`` with
the ``retrieval.params`` declarations (bounds: ``knob.min`` / ``knob.max``): the loader checks
these, and the candidate rows carry ``ROW_FEATURES`` of them as they are."""
ROW_FEATURES = {"confidence": "float32", "vitality": "float32", "reinforcement": "float32",
                "access_count": "float32", "line_start": "int32"}
"""The document fields a candidate row carries unchanged, with the type the row holds them in
(``retrieval.candidates``: the document table and the row builder)."""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    intent: str = ""
    lang: str = ""
    scope: str = ""
    group: str = ""
    reference_time: datetime | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, eq=False)
class Dataset:
    root: Path
    name: str
    documents: tuple[Document, ...]
    queries: tuple[Query, ...]
    qrels: dict[str, dict[str, int]]
    reference_time: datetime
    description: str = ""
    languages: tuple[str, ...] = ()
    license: str = ""
    fingerprint: str = ""
    identity: str = ""
    """What the workbench's stores key this dataset by (``eval.stores.identity``): ``dataset.toml``'s
    ``id``, else its ``name``, else the folder's name — never the folder's path."""
    prepared: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    """What is computed from the loaded documents alone, kept with them (the document table,
    ``retrieval.candidates.doc_table``); a changed copy (``dataclasses.replace``) starts empty."""

    def query_reference_time(self, query: Query) -> datetime:
        return query.reference_time or self.reference_time


def scrub_text(text: str) -> str:
    """``text`` with lone surrogates (unencodable in UTF-8) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


def parse_time(value: object) -> datetime:
    """ISO 8601 string (or a TOML datetime) → aware datetime (naive values are taken as UTC),
    in UTC years ``MIN_YEAR``…``MAX_YEAR`` (ages and recency are computed from it: a date at the
    calendar's ends would overflow)."""
    if isinstance(value, datetime):
        parsed = value
    elif not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 string, got {value!r}")
    else:
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"not an ISO 8601 date/time: {value!r}") from None
    parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    if not MIN_YEAR <= parsed.year <= MAX_YEAR:
        raise ValueError(f"{str(value)!r} is outside the years {MIN_YEAR}–{MAX_YEAR}")
    try:
        utc = parsed.astimezone(timezone.utc)
    except OverflowError:
        utc = None
    if utc is None or not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise ValueError(f"{str(value)!r} is outside the years {MIN_YEAR}–{MAX_YEAR}")
    return parsed


class _Problems(list):
    def add(self, file: str, line: int, field_name: str, message: str) -> None:
        self.append(f"{file}:{line}: {field_name}: {message}")


def _read_lines(path: Path, problems: _Problems, data: bytes) -> list[tuple[int, str]] | None:
    name = path.name if path.parent.name != "qrels" else f"qrels/{path.name}"
    if not data.strip():
        problems.add(name, 1, "file", "is empty")
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        problems.add(name, 1, "encoding", "starts with a UTF-8 byte-order mark (BOM); save it as plain UTF-8")
        return None
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            problems.add(name, number, "encoding", f"not valid UTF-8 (byte {error.start})")
            continue
        if text.strip():
            lines.append((number, text.rstrip("\r")))
    return lines


def _number(obj: dict, key: str, default, lo, hi, kind, problems, file, line):
    if key not in obj or obj[key] is None:
        return default
    value = obj[key]
    shown = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit integer"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
        kind is int and isinstance(value, float) and not (math.isfinite(value) and value.is_integer())
    ):
        problems.add(file, line, key, f"expected {'an integer' if kind is int else 'a number'}, got {shown}")
        return default
    # compare without converting to float first: a 400-digit integer overflows a float
    if (isinstance(value, float) and not math.isfinite(value)) or (lo is not None and value < lo) or (
            hi is not None and value > hi):
        bounds = f"in [{lo}, {hi}]" if hi is not None else f"≥ {lo}"
        problems.add(file, line, key, f"{shown} is out of range (must be {bounds})")
        return default
    return kind(value)


class _JSONProblem(ValueError):
    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field = field_name
        self.message = message


def _unique_keys(pairs: list) -> dict:
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _JSONProblem(key, f"duplicate key {key!r} in one JSON object")
        obj[key] = value
    return obj


def loads_strict(text: str):
    """``json.loads`` that refuses duplicate keys, integers over 4300 digits and deep nesting.

    Raises ``ValueError`` subclasses only; ``error.field``/``error.message`` (when set) say
    which field and what is wrong, for a ``file:line: field: …`` report."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _JSONProblem:
        raise
    except json.JSONDecodeError as error:
        raise _JSONProblem("json", f"malformed JSON ({error.msg} at column {error.colno})") from None
    except RecursionError:
        raise _JSONProblem("json", "nested too deeply") from None
    except ValueError as error:  # e.g. "Exceeds the limit (4300 digits) for integer string conversion"
        raise _JSONProblem("json", f"unreadable number ({str(error).split(';')[0]})") from None


def _string(obj, key, problems, file, line, default=""):
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        problems.add(file, line, key, f"expected a string, got {type(value).__name__}")
        return default
    return value


def _time(obj, key, problems, file, line):
    if obj.get(key) in (None, ""):
        return None
    try:
        return parse_time(obj[key])
    except ValueError as error:
        problems.add(file, line, key, str(error))
        return None


def _json_objects(path: Path, problems: _Problems, data: bytes):
    lines = _read_lines(path, problems, data)
    for number, text in lines or ():
        try:
            obj = loads_strict(text)
        except _JSONProblem as error:
            problems.add(path.name, number, error.field, error.message)
            continue
        if not isinstance(obj, dict):
            problems.add(path.name, number, "json", "expected a JSON object")
            continue
        yield number, obj


def _id_and_text(obj, problems, file, line) -> tuple[str, str] | None:
    ok = True
    raw_id = obj.get("_id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raw_id = str(raw_id)
    if not isinstance(raw_id, str) or not raw_id.strip():
        problems.add(file, line, "_id", "missing or empty")
        ok = False
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        problems.add(file, line, "text", "missing or empty")
        ok = False
    elif scrub_text(text) != text:
        problems.add(file, line, "text", "contains a lone surrogate escape (\\ud800–\\udfff), not valid Unicode")
        ok = False
    elif len(text) > MAX_TEXT_CHARS:
        problems.add(file, line, "text", f"{len(text)} characters exceeds the {MAX_TEXT_CHARS} limit; split it")
        ok = False
    return (raw_id, text) if ok else None


def _load_documents(path: Path, problems: _Problems, seen: dict[str, int] | None = None,
                    data: bytes | None = None) -> list[Document]:
    """Documents of ``corpus.jsonl`` (its bytes ``data``, read once by the caller, else read
    here); ``seen`` receives each id's line number."""
    docs: list[Document] = []
    seen = {} if seen is None else seen
    for line, obj in _json_objects(path, problems, path.read_bytes() if data is None else data):
        file = path.name
        head = _id_and_text(obj, problems, file, line)
        if head is None:
            continue
        doc_id, text = head
        if doc_id in seen:
            problems.add(file, line, "_id", f"duplicate id {doc_id!r} (first on line {seen[doc_id]})")
            continue
        seen[doc_id] = line
        scope = _string(obj, "scope", problems, file, line, "global") or "global"
        if scope not in SCOPES:
            problems.add(file, line, "scope", f"{scope!r} is not one of {list(SCOPES)}")
        related = obj.get("related")
        related = [] if related is None else related
        if not isinstance(related, list) or not all(isinstance(r, str) for r in related):
            problems.add(file, line, "related", "expected a list of document ids")
            related = []
        created = _time(obj, "created_at", problems, file, line)
        updated = _time(obj, "updated_at", problems, file, line) or created
        title = _string(obj, "title", problems, file, line)
        extra = {k: v for k, v in obj.items() if k not in DOC_FIELDS}
        docs.append(Document(
            id=doc_id, text=text, title=title,
            path=_string(obj, "path", problems, file, line),
            scope=scope,
            project=_string(obj, "project", problems, file, line),
            group=_string(obj, "group", problems, file, line),
            memory_type=_string(obj, "memory_type", problems, file, line, "fact") or "fact",
            created_at=created, updated_at=updated,
            **{name: _number(obj, name, default, knob.min, knob.max, int if knob.kind == "int" else float,
                             problems, file, line) for name, knob, default in DOC_NUMBERS},
            source=_string(obj, "source", problems, file, line),
            related=tuple(related), extra=extra,
        ))
    return docs


def _load_queries(path: Path, problems: _Problems, data: bytes | None = None) -> list[Query]:
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for line, obj in _json_objects(path, problems, path.read_bytes() if data is None else data):
        file = path.name
        head = _id_and_text(obj, problems, file, line)
        if head is None:
            continue
        query_id, text = head
        if query_id in seen:
            problems.add(file, line, "_id", f"duplicate id {query_id!r} (first on line {seen[query_id]})")
            continue
        seen[query_id] = line
        scope = _string(obj, "scope", problems, file, line)
        if scope and scope not in SCOPES:
            problems.add(file, line, "scope", f"{scope!r} is not one of {list(SCOPES)}")
        queries.append(Query(
            id=query_id, text=text,
            intent=_string(obj, "intent", problems, file, line),
            lang=_string(obj, "lang", problems, file, line),
            scope=scope,
            group=_string(obj, "group", problems, file, line),
            reference_time=_time(obj, "reference_time", problems, file, line),
            extra={k: v for k, v in obj.items() if k not in _QUERY_FIELDS},
        ))
    return queries


def _load_qrels(path: Path, doc_ids: set[str], query_ids: set[str], problems: _Problems,
                data: bytes | None = None):
    qrels: dict[str, dict[str, int]] = {}
    first: dict[tuple[str, str], int] = {}
    file = f"qrels/{path.name}" if path.parent.name == "qrels" else path.name
    data = path.read_bytes() if data is None else data
    for line, text in _read_lines(path, problems, data) or ():
        parts = text.split("\t") if "\t" in text else text.split()
        if line == 1 and parts and parts[0].strip().lower() in ("query-id", "query_id", "qid"):
            continue
        if len(parts) == 4:  # TREC layout: qid 0 docid grade
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            problems.add(file, line, "row", f"expected 3 columns (query-id corpus-id score), got {len(parts)}")
            continue
        query_id, doc_id, grade = (p.strip() for p in parts)
        if not re.fullmatch(r"[+-]?\d{1,30}", grade):
            shown = grade if len(grade) <= 40 else f"{grade[:40]}…"
            problems.add(file, line, "score",
                         f"expected an integer grade, got {shown!r} (grades are 0–{MAX_GRADE})")
            continue
        value = int(grade)
        if not 0 <= value <= MAX_GRADE:
            problems.add(file, line, "score", f"grade {value} is outside 0–{MAX_GRADE}")
            continue
        if query_id not in query_ids:
            problems.add(file, line, "query-id", f"unknown query {query_id!r}")
            continue
        if doc_id not in doc_ids:
            problems.add(file, line, "corpus-id", f"unknown document {doc_id!r}")
            continue
        previous = qrels.get(query_id, {}).get(doc_id)
        if previous is not None and previous != value:
            where = first[query_id, doc_id]
            problems.add(file, line, "score", f"({query_id!r}, {doc_id!r}) graded {value} here and "
                                              f"{previous} on line {where}; keep one row")
            continue
        first.setdefault((query_id, doc_id), line)
        qrels.setdefault(query_id, {})[doc_id] = value
    return qrels


def read_qrels_file(path: Path, dataset: "Dataset") -> dict[str, dict[str, int]]:
    """Judgments of ``dataset``'s queries and documents from another qrels file in its layout
    (BEIR tsv or TREC); a ``DatasetError`` listing every problem."""
    problems = _Problems()
    doc_ids, query_ids = {d.id for d in dataset.documents}, {q.id for q in dataset.queries}
    resolved = inside_dataset(dataset.root, path)
    qrels = _load_qrels(path, doc_ids, query_ids, problems, resolved.read_bytes())
    if problems:
        raise DatasetError(problems)
    return qrels


def _load_card(path: Path, problems: _Problems, data: bytes | None = None) -> dict:
    try:
        text = (path.read_bytes() if data is None else data).decode("utf-8")
        card = tomllib.loads(text)
    except RecursionError:
        problems.add("dataset.toml", 1, "toml", "nested too deeply")
        return {}
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        # Python 3.11's TOMLDecodeError has no lineno; its message ends "(at line N, column M)"
        found = re.search(r"at line (\d+)", str(error))
        line = getattr(error, "lineno", None) or (int(found.group(1)) if found else 1)
        problems.add("dataset.toml", line, "toml", str(error))
        return {}
    def line_of(key: str) -> int:
        return next((n for n, row in enumerate(text.splitlines(), start=1) if row.lstrip().startswith(key)), 1)

    for key in ("id", "name", "description", "license"):
        if key in card and not isinstance(card[key], str):
            problems.add("dataset.toml", line_of(key), key, f"expected a string, got {type(card[key]).__name__}")
            del card[key]
    if "name" in card and (not card["name"].strip() or any(ord(ch) < 32 for ch in card["name"])):
        problems.add("dataset.toml", line_of("name"), "name", "must be a non-empty name without control characters")
        del card["name"]
    if "id" in card and (not card["id"].strip() or any(ord(ch) < 32 for ch in card["id"])):
        problems.add("dataset.toml", line_of("id"), "id", "must be a non-empty name without control characters")
        del card["id"]
    languages = card.get("languages", [])
    if not isinstance(languages, list) or not all(isinstance(x, str) for x in languages):
        problems.add("dataset.toml", line_of("languages"), "languages", "expected a list of strings")
        card.pop("languages", None)
    if "reference_time" in card:
        value = card["reference_time"]
        try:
            card["reference_time"] = parse_time(value)
        except ValueError as error:
            line = next((n for n, row in enumerate(text.splitlines(), start=1)
                         if row.lstrip().startswith("reference_time")), 1)
            problems.add("dataset.toml", line, "reference_time", str(error))
            del card["reference_time"]
    return card


IMPLICIT_QRELS = "qrels/implicit.tsv"
"""Implicit judgments (from usage logs, ``rwb import ubi``), kept apart from the explicit ones."""


def folder_stamp(root: Path) -> tuple:
    """A cheap change detector for a dataset folder: (name, mtime_ns, size) of its files."""
    out = []
    for file in (root / "corpus.jsonl", root / "queries.jsonl", root / "dataset.toml", qrels_path(root)):
        if file is not None and file.is_file():
            stat = file.stat()
            out.append((file.name, stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def qrels_path(root: Path) -> Path | None:
    """The explicit qrels file (``qrels/test.tsv`` or ``qrels.tsv``), if any."""
    for candidate in (root / "qrels" / "test.tsv", root / "qrels.tsv"):
        if candidate.is_file():
            return candidate
    return None


def inside_dataset(root: Path, path: Path) -> Path:
    """``path`` (a file of the dataset at ``root``) resolved, when it stays inside the dataset's
    folder; else a ``ValueError`` — the same line whether or not what a symlink points to
    exists (``retrieval.files.resolve_inside``)."""
    try:
        relative = Path(path).relative_to(root).as_posix()
    except ValueError:  # spelled differently (one of them resolved): compare as written
        relative = os.path.relpath(Path(path).absolute(), Path(root).absolute())
    try:
        return resolve_inside(Path(root), relative)
    except ValueError:
        raise ValueError(f"{path}: resolves outside the dataset folder (a symlink leaving it); "
                         "a dataset's files must be inside it") from None


def _dataset_files(root: Path) -> dict[str, tuple[Path, bytes]]:
    """The dataset's files, each read once (and only inside its folder): what is validated,
    loaded and fingerprinted is the same bytes even when a file is edited while it is read."""
    files = {}
    for key, path in (("corpus", root / "corpus.jsonl"), ("queries", root / "queries.jsonl"),
                      ("qrels", qrels_path(root)), ("card", root / "dataset.toml")):
        if path is not None and path.is_file():
            files[key] = (path, inside_dataset(root, path).read_bytes())
    return files


def _fingerprint_of(files: dict[str, tuple[Path, bytes]]) -> str:
    digest = hashlib.sha256()
    for key in ("corpus", "queries", "qrels", "card"):
        if key in files:
            path, data = files[key]
            digest.update(path.name.encode())
            digest.update(data)
    return digest.hexdigest()


def fingerprint(root: Path) -> str:
    """sha256 over the dataset's files, so a result names the exact data it came from."""
    return _fingerprint_of(_dataset_files(root))


def load_dataset(root: str | Path) -> Dataset:
    """Read and validate a dataset folder; raise DatasetError listing every problem.

    ``qrels`` are the dataset's explicit judgments; implicit ones (``IMPLICIT_QRELS``) and the
    workbench's edits are combined with them by ``eval.stores.judgments.effective_qrels``."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError([f"{root}: not a dataset folder (expected corpus.jsonl inside)"])
    if not (root / "corpus.jsonl").is_file():
        raise DatasetError([f"{root}/corpus.jsonl: missing (a dataset needs at least a corpus)"])
    problems = _Problems()
    files = _dataset_files(root)
    if "corpus" not in files:
        raise DatasetError([f"{root}/corpus.jsonl: missing (a dataset needs at least a corpus)"])
    card = _load_card(files["card"][0], problems, files["card"][1]) if "card" in files else {}
    doc_lines: dict[str, int] = {}
    documents = _load_documents(files["corpus"][0], problems, doc_lines, files["corpus"][1])
    queries = []
    if "queries" in files:
        queries = _load_queries(files["queries"][0], problems, files["queries"][1])
    doc_ids = {d.id for d in documents}
    for doc in documents:
        for target in doc.related:
            if target not in doc_ids:
                problems.add("corpus.jsonl", doc_lines[doc.id], "related",
                             f"{doc.id!r} links to unknown document {target!r}")
    query_ids = {q.id for q in queries}
    qrels = (_load_qrels(files["qrels"][0], doc_ids, query_ids, problems, files["qrels"][1])
             if "qrels" in files else {})
    if problems:
        raise DatasetError(problems)
    dates = [d.updated_at for d in documents if d.updated_at is not None]
    reference = card.get("reference_time") or (max(dates) if dates else datetime(2000, 1, 1, tzinfo=timezone.utc))
    return Dataset(
        root=root, name=str(card.get("name") or root.name),
        documents=tuple(documents), queries=tuple(queries), qrels=qrels,
        reference_time=reference,
        description=str(card.get("description", "")),
        languages=tuple(card.get("languages", ())),
        license=str(card.get("license", "")),
        fingerprint=_fingerprint_of(files),
        identity=str(card.get("id") or card.get("name") or root.name),
    )
