"""Importers: BEIR folders, LoCoMo, TREC qrels/runs, markdown memory workspaces.

``rwb import KIND SRC DEST [--force] [--name NAME]`` converts outside data into the one
dataset format (``retrieval/dataset.py``). Every importer builds into a temporary sibling
of DEST, validates it with ``load_dataset`` and only then renames it into place, so a
failed import leaves nothing at DEST (and ``--force`` keeps the old DEST until the new one
is ready).

Policies shared by the importers (each skip is counted and reported, never silent):

- qrels rows naming an unknown query or document, or with a negative grade, are skipped;
- when a qrels file exists, queries without any judgment are dropped (as BEIR's loader
  does), so every evaluated query has judgments;
- LoCoMo: evidence ids are repaired where the intent is plain (``"D8:6; D9:17"``,
  ``"D:11:26"``, ``"D30:05"``), ids that match no turn of the conversation are skipped,
  and a question left without evidence is skipped — matching the converted LoCoMo files.

``read_trec_run`` / ``write_trec_run`` / ``read_trec_qrels`` read and write TREC files
for evaluation.
"""

from __future__ import annotations

import calendar
import json
import math
import os
import re
import shutil
import tempfile
import time
import tomllib
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator

import tomli_w

from eval.progress import iterate as _progress
from retrieval.dataset import MAX_TEXT_CHARS, Dataset, DatasetError, load_dataset, loads_strict
from retrieval.files import atomic_write_text, fsync_dir, fsync_tree

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_MAX_PROBLEMS = 200
MARKER = ".rwb-import.json"
"""Written into every imported folder: ``--force`` replaces only a folder that has it (and
holds nothing but the files it lists), so it never deletes a user's own files."""
_STALE_AGE_S = 24 * 3600  # a temporary folder without a pid in its name is stale after this


@dataclass
class ImportResult:
    """What an import wrote, and what it skipped (reason → count)."""

    kind: str
    dest: Path
    dataset: Dataset
    skipped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def documents(self) -> int:
        return len(self.dataset.documents)

    @property
    def queries(self) -> int:
        return len(self.dataset.queries)

    @property
    def qrels(self) -> int:
        return sum(len(v) for v in self.dataset.qrels.values())

    def summary(self) -> str:
        groups = {d.group for d in self.dataset.documents if d.group}
        parts = [f"{self.documents} documents", f"{self.queries} queries", f"{self.qrels} qrels"]
        if groups:
            parts.append(f"{len(groups)} group{'s' if len(groups) != 1 else ''}")
        text = f"{self.kind}: {self.dest}: " + ", ".join(parts)
        skipped = [f"{n} {reason}" for reason, n in self.skipped.items() if n]
        if skipped:
            text += "; skipped " + ", ".join(skipped)
        repaired = [f"{n} {what}" for what, n in self.repaired.items() if n]
        if repaired:
            text += "; repaired " + ", ".join(repaired)
        return text


# ---------------------------------------------------------------------------
# Shared plumbing: atomic write, JSONL reading


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _check_dest(dest: Path, force: bool, sources: Iterable[Path]) -> None:
    resolved = dest.resolve()
    for source in sources:
        source = Path(source).resolve()
        if _inside(source, resolved):
            raise ValueError(f"{dest}: DEST must not contain the source {source} (choose another folder)")
    if not (dest.exists() or dest.is_symlink()):
        return
    if not force:
        raise ValueError(f"{dest}: already exists (use --force to replace it)")
    if dest.is_symlink() or not dest.is_dir():
        raise ValueError(f"{dest}: exists and is not a dataset folder; not replacing it")
    if not any(dest.iterdir()):
        return
    if not (dest / "corpus.jsonl").is_file():
        raise ValueError(f"{dest}: exists and does not look like a dataset folder (no corpus.jsonl); not replacing it")
    if not (dest / MARKER).is_file():
        raise ValueError(f"{dest}: was not written by `rwb import` (no {MARKER}); not replacing it — "
                         "move it aside or choose another DEST")
    try:
        listed = set(json.loads((dest / MARKER).read_text("utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(f"{dest}: its {MARKER} is unreadable; not replacing it — move it aside") from None
    for path in sorted(dest.rglob("*")):
        rel = path.relative_to(dest).as_posix()
        if (path.is_file() or path.is_symlink()) and rel != MARKER and rel not in listed:
            raise ValueError(f"{dest}: holds {rel}, which the earlier import did not write; not replacing it "
                             "— move your files out or choose another DEST")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temporaries(dest: Path) -> list[str]:
    """Remove ``.DEST.importing-*`` / ``.DEST.replaced-*`` folders left by a killed import.

    A folder is stale when the pid in its name is not running (or, for a name without a pid,
    when it is older than a day). A stale ``.replaced-`` folder is the previous DEST saved
    aside: it is renamed back when DEST is missing, removed otherwise. Returns what was done."""
    done = []
    parent = dest.parent
    if not parent.is_dir():
        return done
    for kind in ("importing", "replaced"):
        for path in sorted(parent.glob(f".{glob_escape(dest.name)}.{kind}-*")):
            if not path.is_dir() or path.is_symlink():
                continue
            tail = path.name[len(f".{dest.name}.{kind}-"):]
            head = tail.split("-", 1)[0]
            if head.isdigit():
                stale = int(head) != os.getpid() and not _pid_alive(int(head))
            else:
                try:
                    stale = time.time() - path.stat().st_mtime > _STALE_AGE_S
                except OSError:
                    stale = False
            if not stale:
                continue
            if kind == "replaced" and not (dest.exists() or dest.is_symlink()):
                os.rename(path, dest)
                done.append(f"restored {dest} from {path.name} (an import was killed mid-swap)")
            else:
                shutil.rmtree(path, ignore_errors=True)
                done.append(f"removed {path.name} (left by a killed import)")
    return done


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _swap_into_place(tmp: Path, dest: Path) -> None:
    if not (dest.exists() or dest.is_symlink()):
        os.rename(tmp, dest)
        fsync_dir(dest.parent)
        return
    backup = Path(tempfile.mkdtemp(prefix=f".{dest.name}.replaced-{os.getpid()}-", dir=dest.parent))
    backup.rmdir()
    os.rename(dest, backup)
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(backup, dest)
        raise
    fsync_dir(dest.parent)
    shutil.rmtree(backup, ignore_errors=True)


def write_atomically(kind: str, dest: str | Path, build: Callable[[Path, "ImportResult"], None], *,
                     force: bool = False, sources: Iterable[Path] = (), name: str | None = None,
                     card: dict | None = None) -> ImportResult:
    """Build a dataset into a temporary sibling of ``dest``, validate it, rename it into place.

    ``build(tmp, result)`` writes corpus.jsonl (and queries/qrels) into ``tmp`` and counts
    skips on ``result``; ``dataset.toml`` is written here from ``card`` with the name set,
    and ``MARKER`` lists every file written. Everything is fsynced before the rename. On any
    error the temporary folder is removed and ``dest`` is left as it was; temporary folders
    of earlier, killed imports into the same DEST are cleaned up first.
    """
    dest = Path(dest)
    notes = clean_stale_temporaries(dest)
    _check_dest(dest, force, sources)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.importing-{os.getpid()}-", dir=dest.parent))
    result = ImportResult(kind=kind, dest=dest, dataset=None, notes=notes)  # type: ignore[arg-type]
    try:
        build(tmp, result)
        card = dict(card or {})
        card["name"] = name or card.get("name") or dest.name
        (tmp / "dataset.toml").write_text(tomli_w.dumps(card), "utf-8")
        dataset = load_dataset(tmp)
        files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file() or p.is_symlink())
        (tmp / MARKER).write_text(json.dumps({"kind": kind, "files": files}, indent=1), "utf-8")
        fsync_tree(tmp)
        _check_dest(dest, force, sources)  # DEST may have appeared while we were building
        _swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.dataset = replace(dataset, root=dest)
    return result


class _Problems(list):
    def add(self, file: str, line: int, field_name: str, message: str) -> None:
        self.append(f"{file}:{line}: {field_name}: {message}")

    def raise_if_any(self) -> None:
        if self:
            raise DatasetError(self)


def _lines(path: Path, problems: _Problems, label: str) -> Iterator[tuple[int, str]]:
    """Numbered non-blank lines of a UTF-8 text file (problems for bad bytes, BOM tolerated)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                problems.add(label, number, "encoding", f"not valid UTF-8 (byte {error.start})")
                continue
            if text.strip():
                yield number, text


def _json_lines(path: Path, problems: _Problems, label: str) -> Iterator[tuple[int, dict]]:
    for number, text in _lines(path, problems, label):
        if len(problems) >= _MAX_PROBLEMS:
            return
        try:
            obj = loads_strict(text)
        except ValueError as error:  # malformed, duplicate key, huge number, nested too deeply
            problems.add(label, number, getattr(error, "field", "json"), getattr(error, "message", str(error)))
            continue
        if not isinstance(obj, dict):
            problems.add(label, number, "json", "expected a JSON object")
            continue
        yield number, obj


def _record_id(obj: dict, problems: _Problems, label: str, line: int) -> str | None:
    raw = obj.get("_id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        problems.add(label, line, "_id", "missing or empty")
        return None
    if raw != raw.strip() or any(c in raw for c in "\t\r\n"):
        problems.add(label, line, "_id", f"{raw!r} has a tab, line break or surrounding spaces "
                                         "(a qrels row could not name it)")
        return None
    return raw


def _dump(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def _copy_licences(folder: Path, tmp: Path) -> None:
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name.upper().startswith(("LICENSE", "LICENCE", "COPYING")):
            shutil.copyfile(path, tmp / path.name)


def _source_card(folder: Path) -> dict:
    path = folder / "dataset.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid TOML ({error})") from None


# ---------------------------------------------------------------------------
# qrels (BEIR TSV and TREC) and TREC runs


def _parse_qrels(path: Path, *, trec: bool, label: str | None = None) -> list[tuple[int, str, str, int]]:
    """Rows ``(line, query_id, doc_id, grade)``; malformed rows raise DatasetError with file:line.

    BEIR layout: ``query-id<TAB>corpus-id<TAB>score`` with an optional header line (a TREC
    4-column row is accepted too). TREC layout (``trec=True``): ``qid iter docid grade``.
    """
    label = label or path.name
    problems = _Problems()
    rows = []
    for line, text in _lines(path, problems, label):
        if len(problems) >= _MAX_PROBLEMS:
            break
        parts = text.split("\t") if ("\t" in text and not trec) else text.split()
        parts = [p.strip() for p in parts]
        if not trec and not rows and parts and parts[0].lower() in ("query-id", "query_id", "qid"):
            continue
        if trec and len(parts) != 4:
            problems.add(label, line, "row", f"expected 4 columns (qid iter docid grade), got {len(parts)}")
            continue
        if not trec and len(parts) == 4:
            parts = [parts[0], parts[2], parts[3]]
        if not trec and len(parts) != 3:
            problems.add(label, line, "row", f"expected 3 columns (query-id corpus-id score), got {len(parts)}")
            continue
        query_id, doc_id, grade = parts[0], parts[-2], parts[-1]
        try:
            value = float(grade)
            if not value.is_integer():
                raise ValueError
        except ValueError:
            problems.add(label, line, "score", f"expected an integer grade, got {grade!r}")
            continue
        if not query_id or not doc_id:
            problems.add(label, line, "row", "empty query or document id")
            continue
        rows.append((line, query_id, doc_id, int(value)))
    problems.raise_if_any()
    if not rows:
        raise ValueError(f"{path}: no qrels rows")
    return rows


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """A TREC qrels file (``qid iter docid grade``) → ``{qid: {docid: grade}}``."""
    qrels: dict[str, dict[str, int]] = {}
    for _, query_id, doc_id, grade in _parse_qrels(Path(path), trec=True, label=str(path)):
        qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A TREC run file (``qid Q0 docid rank score tag``) → ``{qid: {docid: score}}``.

    Problems raise ValueError naming ``file:line`` (the first one, with a count of the rest).
    """
    path = Path(path)
    label = str(path)
    problems = _Problems()
    run: dict[str, dict[str, float]] = {}
    seen: dict[tuple[str, str], int] = {}
    for line, text in _lines(path, problems, label):
        parts = text.split()
        if len(parts) != 6:
            problems.add(label, line, "row", f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}")
            continue
        query_id, _, doc_id, rank, score, _ = parts
        try:
            int(rank)
        except ValueError:
            problems.add(label, line, "rank", f"expected an integer, got {rank!r}")
            continue
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            problems.add(label, line, "score", f"expected a finite number, got {score!r}")
            continue
        if (query_id, doc_id) in seen:
            problems.add(label, line, "docid", f"{doc_id!r} listed twice for query {query_id!r} "
                                                f"(first on line {seen[query_id, doc_id]})")
            continue
        seen[query_id, doc_id] = line
        run.setdefault(query_id, {})[doc_id] = value
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)
    if not run:
        raise ValueError(f"{label}: no run lines (the file is empty)")
    return run


def write_trec_run(run: dict[str, dict[str, float]], path: str | Path, tag: str = "rwb") -> None:
    """Write ``{qid: {docid: score}}`` as a TREC run (ranked by score, ties by docid), atomically."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r} must be a non-empty word without whitespace")
    lines = []
    for query_id, scores in run.items():
        query_id = str(query_id)
        if not query_id or any(c.isspace() for c in query_id):
            raise ValueError(f"query id {query_id!r} is empty or contains whitespace")
        ranked = sorted(((float(s), str(d)) for d, s in scores.items()), key=lambda p: (-p[0], p[1]))
        for rank, (score, doc_id) in enumerate(ranked, start=1):
            if not doc_id or any(c.isspace() for c in doc_id):
                raise ValueError(f"document id {doc_id!r} (query {query_id!r}) is empty or contains whitespace")
            if not math.isfinite(score):
                raise ValueError(f"score {score!r} of {doc_id!r} (query {query_id!r}) is not finite")
            lines.append(f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}\n")
    atomic_write_text(Path(path), "".join(lines))


def _write_qrels(tmp: Path, rows: list[tuple[int, str, str, int]], doc_ids: set[str], query_ids: set[str],
                 result: ImportResult) -> set[str]:
    """Write qrels/test.tsv from parsed rows; return the judged query ids."""
    qrels: dict[str, dict[str, int]] = {}
    for _, query_id, doc_id, grade in rows:
        if grade < 0:
            result.skipped["qrels with a negative grade"] += 1
        elif query_id not in query_ids:
            result.skipped["qrels naming an unknown query"] += 1
        elif doc_id not in doc_ids:
            result.skipped["qrels naming an unknown document"] += 1
        elif doc_id in qrels.get(query_id, {}):
            result.skipped["duplicate qrels"] += 1
        else:
            qrels.setdefault(query_id, {})[doc_id] = grade
    if not qrels:
        raise ValueError("no qrels row names a known query and document (wrong corpus or queries?)")
    (tmp / "qrels").mkdir()
    with open(tmp / "qrels" / "test.tsv", "w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, docs in qrels.items():
            for doc_id, grade in docs.items():
                out.write(f"{query_id}\t{doc_id}\t{grade}\n")
    return set(qrels)


# ---------------------------------------------------------------------------
# BEIR


def _beir_record(obj: dict, record_id: str, kind: str) -> dict:
    """Our record from a BEIR one: id first, extra fields kept, LoCoMo-converted fields mapped."""
    out = {"_id": record_id}
    out.update((k, v) for k, v in obj.items() if k != "_id")
    if obj.get("sample_id") not in (None, "") and not obj.get("group"):
        out["group"] = str(obj["sample_id"])
    if kind == "doc" and obj.get("timestamp_iso") and not obj.get("created_at"):
        out["created_at"] = obj["timestamp_iso"]
    if kind == "query" and isinstance(obj.get("category_name"), str) and not obj.get("intent"):
        out["intent"] = obj["category_name"]
    return out


def _beir_text(obj: dict, problems: _Problems, label: str, line: int, title_fallback: bool) -> str | None:
    text = obj.get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        title = obj.get("title")
        if title_fallback and isinstance(title, str) and title.strip():
            return title
        return ""
    if not isinstance(text, str):
        problems.add(label, line, "text", f"expected a string, got {type(text).__name__}")
        return None
    if len(text) > MAX_TEXT_CHARS:
        problems.add(label, line, "text", f"{len(text)} characters exceeds the {MAX_TEXT_CHARS} limit; split it")
        return None
    return text


def import_beir(src: str | Path, dest: str | Path, *, force: bool = False, name: str | None = None,
                split: str = "test") -> ImportResult:
    """A BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) → a dataset folder."""
    src = Path(src)
    if not src.is_dir():
        raise ValueError(f"{src}: not a folder (expected a BEIR folder with corpus.jsonl)")
    corpus = src / "corpus.jsonl"
    if not corpus.is_file():
        raise ValueError(f"{src}: no corpus.jsonl (not a BEIR folder)")
    queries_path = src / "queries.jsonl"
    qrels_path = next((p for p in (src / "qrels" / f"{split}.tsv", src / "qrels.tsv") if p.is_file()), None)
    if split != "test" and qrels_path == src / "qrels.tsv":
        qrels_path = None
    if qrels_path is None and (src / "qrels").is_dir():
        found = sorted(p.stem for p in (src / "qrels").glob("*.tsv"))
        raise ValueError(f"{src}/qrels: no {split}.tsv (found: {', '.join(found) or 'none'}; use --split)")
    card = _source_card(src)
    card.setdefault("description", f"Imported from the BEIR folder {src.name!r}.")

    def build(tmp: Path, result: ImportResult) -> None:
        problems = _Problems()
        doc_ids: dict[str, int] = {}
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as out:
            for line, obj in _progress(_json_lines(corpus, problems, "corpus.jsonl"), "corpus", unit="doc"):
                doc_id = _record_id(obj, problems, "corpus.jsonl", line)
                text = _beir_text(obj, problems, "corpus.jsonl", line, title_fallback=True)
                if doc_id is None or text is None:
                    continue
                if doc_id in doc_ids:
                    problems.add("corpus.jsonl", line, "_id", f"duplicate id {doc_id!r} (first on line {doc_ids[doc_id]})")
                    continue
                if not text.strip():
                    result.skipped["documents without text or title"] += 1
                    continue
                if not (isinstance(obj.get("text"), str) and obj["text"].strip()):
                    result.repaired["documents with empty text (title used as text)"] += 1
                    obj = {**obj, "text": text}
                doc_ids[doc_id] = line
                out.write(_dump(_beir_record(obj, doc_id, "doc")))
        problems.raise_if_any()
        if not doc_ids:
            raise ValueError(f"{corpus}: no documents")
        queries: dict[str, dict] = {}
        if queries_path.is_file():
            for line, obj in _json_lines(queries_path, problems, "queries.jsonl"):
                query_id = _record_id(obj, problems, "queries.jsonl", line)
                text = _beir_text(obj, problems, "queries.jsonl", line, title_fallback=False)
                if query_id is None or text is None:
                    continue
                if query_id in queries:
                    problems.add("queries.jsonl", line, "_id", f"duplicate id {query_id!r}")
                    continue
                if not text.strip():
                    result.skipped["queries without text"] += 1
                    continue
                queries[query_id] = _beir_record(obj, query_id, "query")
            problems.raise_if_any()
        judged = set(queries)
        if qrels_path is not None:
            if not queries:
                raise ValueError(f"{src}: qrels without queries.jsonl")
            rows = _parse_qrels(qrels_path, trec=False, label=f"qrels/{qrels_path.name}"
                                if qrels_path.parent.name == "qrels" else qrels_path.name)
            judged = _write_qrels(tmp, rows, set(doc_ids), set(queries), result)
            result.skipped["queries without judgments"] += len(queries) - len(judged)
        if queries:
            with open(tmp / "queries.jsonl", "w", encoding="utf-8") as out:
                out.writelines(_dump(q) for qid, q in queries.items() if qid in judged)
        _copy_licences(src, tmp)

    return write_atomically("beir", dest, build, force=force, sources=[src], name=name, card=card)


# ---------------------------------------------------------------------------
# LoCoMo (native locomo10.json)

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_LOCOMO_TIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+)\.?,?\s+(\d{4})\s*", re.IGNORECASE)
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"session_(\d+)")


def parse_locomo_time(value: str) -> datetime:
    """LoCoMo's session time ("1:56 pm on 8 May, 2023") → a naive datetime (local time, no zone)."""
    match = _LOCOMO_TIME.fullmatch(value) if isinstance(value, str) else None
    month = _MONTHS.get(match.group(5).lower()) if match else None
    if not match or month is None:
        raise ValueError(f"not a LoCoMo date like '1:56 pm on 8 May, 2023': {value!r}")
    hour, minute = int(match.group(1)), int(match.group(2))
    if not 1 <= hour <= 12:
        raise ValueError(f"hour {hour} is not a 12-hour clock hour: {value!r}")
    hour = hour % 12 + (12 if match.group(3).lower() == "p" else 0)
    try:
        return datetime(int(match.group(6)), month, int(match.group(4)), hour, minute)
    except ValueError as error:
        raise ValueError(f"{error}: {value!r}") from None


def _normalize_evidence(raw: object, known: set[str], skipped: Counter, repaired: Counter) -> list[str]:
    """LoCoMo evidence list → valid, distinct turn ids (``D3:7``); odd ids are repaired or counted."""
    items = raw if isinstance(raw, list) else [raw] if raw not in (None, "") else []
    evidence: list[str] = []
    for item in items:
        tokens = [t for t in re.split(r"[;,\s]+", item) if t] if isinstance(item, str) else [item]
        for token in tokens:
            match = _EVIDENCE.fullmatch(token) if isinstance(token, str) else None
            if not match:
                skipped["malformed evidence ids"] += 1
                continue
            turn = f"D{int(match.group(1))}:{int(match.group(2))}"
            if turn != token or len(tokens) > 1:
                repaired["evidence ids"] += 1
            if turn in evidence:
                skipped["duplicate evidence ids"] += 1
            elif turn not in known:
                skipped["evidence ids not in their conversation"] += 1
            else:
                evidence.append(turn)
    return evidence


def _locomo_sessions(sample: dict, where: str) -> list[tuple[int, list, str | None]]:
    conversation = sample.get("conversation")
    if not isinstance(conversation, dict):
        raise ValueError(f"{where}: 'conversation' missing or not an object")
    sessions = []
    for key, turns in conversation.items():
        match = _SESSION.fullmatch(key)
        if not match:
            continue
        if not isinstance(turns, list):
            raise ValueError(f"{where}.conversation.{key}: expected a list of turns")
        sessions.append((int(match.group(1)), turns, conversation.get(f"{key}_date_time")))
    return sorted(sessions, key=lambda s: s[0])


def import_locomo(src: str | Path, dest: str | Path, *, force: bool = False, name: str | None = None) -> ImportResult:
    """LoCoMo's ``locomo10.json`` → one memory per dialog turn, one query per question with evidence."""
    src = Path(src)
    if not src.is_file():
        raise ValueError(f"{src}: not a file (expected LoCoMo's locomo10.json)")
    try:
        text = src.read_bytes().decode("utf-8-sig")
        samples = json.loads(text)
    except UnicodeDecodeError as error:
        raise ValueError(f"{src}: not valid UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{src}:{error.lineno}: json: malformed JSON ({error.msg} at column {error.colno})") from None
    except (ValueError, RecursionError) as error:
        raise ValueError(f"{src}: json: {'nested too deeply' if isinstance(error, RecursionError) else error}") from None
    try:
        loads_strict(text)  # refuse duplicate keys (json.loads keeps the last silently)
    except ValueError as error:
        raise ValueError(f"{src}: {getattr(error, 'field', 'json')}: {getattr(error, 'message', error)}") from None
    if not isinstance(samples, list) or not samples:
        raise ValueError(f"{src}: expected a non-empty JSON list of conversations (LoCoMo's locomo10.json)")

    def build(tmp: Path, result: ImportResult) -> None:
        docs, queries, qrels = [], [], []
        latest: datetime | None = None
        groups: set[str] = set()
        for index, sample in enumerate(_progress(samples, "conversations", unit="conv")):
            where = f"{src.name}[{index}]"
            if not isinstance(sample, dict) or not isinstance(sample.get("sample_id"), str) or not sample["sample_id"]:
                raise ValueError(f"{where}: expected an object with a 'sample_id' string")
            group = sample["sample_id"]
            if group in groups:
                raise ValueError(f"{where}: duplicate sample_id {group!r}")
            groups.add(group)
            where = f"{src.name}[{index}] ({group})"
            known: set[str] = set()
            for number, turns, when_text in _locomo_sessions(sample, where):
                if not turns:
                    continue
                if when_text is None:
                    when = None
                    result.skipped["sessions without a date (turns left undated)"] += 1
                else:
                    try:
                        when = parse_locomo_time(when_text)
                    except ValueError as error:
                        raise ValueError(f"{where}.conversation.session_{number}_date_time: {error}") from None
                    latest = when if latest is None or when > latest else latest
                for position, turn in enumerate(turns):
                    at = f"{where}.conversation.session_{number}[{position}]"
                    if not isinstance(turn, dict):
                        raise ValueError(f"{at}: expected a turn object")
                    dia_id, speaker, text = turn.get("dia_id"), turn.get("speaker"), turn.get("text")
                    if not isinstance(dia_id, str) or not dia_id.strip():
                        raise ValueError(f"{at}: 'dia_id' missing or empty")
                    if dia_id in known:
                        raise ValueError(f"{at}: duplicate dia_id {dia_id!r}")
                    if not isinstance(speaker, str) or not isinstance(text, str):
                        raise ValueError(f"{at}: 'speaker' and 'text' must be strings")
                    known.add(dia_id)
                    caption = turn.get("blip_caption")
                    body = f"{speaker}: {text}" + (f" [shares {caption}]" if isinstance(caption, str) and caption else "")
                    doc = {"_id": f"{group}:{dia_id}", "title": "", "text": body, "group": group}
                    if when is not None:
                        doc["created_at"] = when.isoformat()
                    doc.update({"sample_id": group, "dia_id": dia_id, "session": number, "speaker": speaker})
                    if when_text is not None:
                        doc["timestamp"] = when_text
                    for key in ("blip_caption", "img_url"):
                        if turn.get(key):
                            doc[key] = turn[key]
                    docs.append(doc)
            qa = sample.get("qa", [])
            if not isinstance(qa, list):
                raise ValueError(f"{where}.qa: expected a list of questions")
            for position, item in enumerate(qa):
                at = f"{where}.qa[{position}]"
                if not isinstance(item, dict) or not isinstance(item.get("question"), str) or not item["question"].strip():
                    raise ValueError(f"{at}: expected an object with a non-empty 'question'")
                evidence = _normalize_evidence(item.get("evidence"), known, result.skipped, result.repaired)
                if not evidence:
                    result.skipped["questions without usable evidence"] += 1
                    continue
                category = item.get("category")
                query = {"_id": f"{group}:q{position}", "text": item["question"], "group": group}
                category_name = LOCOMO_CATEGORIES.get(category, f"category-{category}")
                query.update({"intent": category_name, "sample_id": group, "category": category,
                              "category_name": category_name, "evidence": evidence})
                for key in ("answer", "adversarial_answer"):
                    if key in item:
                        query[key] = item[key]
                queries.append(query)
                qrels.extend((query["_id"], f"{group}:{turn}") for turn in evidence)
        if not docs:
            raise ValueError(f"{src}: no dialog turns found")
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as out:
            out.writelines(_dump(d) for d in docs)
        if queries:
            with open(tmp / "queries.jsonl", "w", encoding="utf-8") as out:
                out.writelines(_dump(q) for q in queries)
            (tmp / "qrels").mkdir()
            with open(tmp / "qrels" / "test.tsv", "w", encoding="utf-8") as out:
                out.write("query-id\tcorpus-id\tscore\n")
                out.writelines(f"{q}\t{d}\t1\n" for q, d in qrels)
        _copy_licences(src.parent, tmp)
        if latest is not None:
            card["reference_time"] = latest.isoformat()

    card = {
        "description": f"LoCoMo conversations imported from {src.name}: one memory per dialog turn "
                       "(dated by its session), one query per question with evidence; search within "
                       "the query's group (its conversation).",
        "languages": ["en"],
    }
    return write_atomically("locomo", dest, build, force=force, sources=[src], name=name, card=card)


# ---------------------------------------------------------------------------
# TREC qrels onto an existing corpus


def _dataset_file(value: str | Path, filename: str, option: str) -> Path:
    path = Path(value)
    if path.is_dir():
        path = path / filename
    if not path.is_file():
        raise ValueError(f"{option} {value}: no {filename} there")
    return path


def import_trec_qrels(src: str | Path, dest: str | Path, *, corpus: str | Path, queries: str | Path | None = None,
                      force: bool = False, name: str | None = None) -> ImportResult:
    """A TREC qrels file + an existing dataset's corpus (and queries) → a copy with qrels/test.tsv."""
    src = Path(src)
    if not src.is_file():
        raise ValueError(f"{src}: not a file (expected a TREC qrels file: qid 0 docid grade)")
    corpus_path = _dataset_file(corpus, "corpus.jsonl", "--corpus")
    queries_path = _dataset_file(queries if queries is not None else corpus_path.parent, "queries.jsonl",
                                 "--queries" if queries is not None else "--corpus")
    rows = _parse_qrels(src, trec=True, label=str(src))
    card = _source_card(corpus_path.parent) if corpus_path.name == "corpus.jsonl" else {}
    card["description"] = (card.get("description", "") + f" Judgments from the TREC qrels file {src.name!r}.").strip()

    def ids(path: Path, label: str) -> tuple[set[str], list[tuple[str, str]]]:
        problems = _Problems()
        found: set[str] = set()
        kept = []
        for line, text in _lines(path, problems, label):
            try:
                obj = loads_strict(text)
            except ValueError as error:
                problems.add(label, line, getattr(error, "field", "json"), getattr(error, "message", str(error)))
                continue
            record_id = _record_id(obj, problems, label, line) if isinstance(obj, dict) else None
            if record_id is not None:
                found.add(record_id)
                kept.append((record_id, text))
        problems.raise_if_any()
        return found, kept

    def build(tmp: Path, result: ImportResult) -> None:
        doc_ids, _ = ids(corpus_path, "corpus.jsonl")
        query_ids, query_lines = ids(queries_path, "queries.jsonl")
        shutil.copyfile(corpus_path, tmp / "corpus.jsonl")
        judged = _write_qrels(tmp, rows, doc_ids, query_ids, result)
        result.skipped["queries without judgments"] += len(query_ids - judged)
        with open(tmp / "queries.jsonl", "w", encoding="utf-8") as out:
            out.writelines(text + "\n" for query_id, text in query_lines if query_id in judged)
        _copy_licences(corpus_path.parent, tmp)

    return write_atomically("trec-qrels", dest, build, force=force,
                            sources=[src, corpus_path.parent, queries_path.parent], name=name, card=card)


# ---------------------------------------------------------------------------
# Markdown memory workspace

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_BULLET = re.compile(r"( *)([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_FENCE = re.compile(r" *(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_DATED = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
MEMORY_TYPES = {"preferences": "preference", "instructions": "instruction", "entities": "entity",
                "decisions": "decision", "patterns": "pattern", "tasks": "task"}


@dataclass
class Chunk:
    """One memory found in a markdown file: 1-based inclusive line range, heading as title."""

    title: str
    text: str
    line_start: int
    line_end: int


def chunk_markdown(text: str) -> list[Chunk]:
    """Split markdown into memories: one per top-level bullet item (nested items and
    continuation lines included), paragraph, table or fenced code block; headings (any
    level) end a memory and become the title of the ones that follow. YAML front matter,
    HTML comments and thematic breaks are not memories."""
    lines = text.splitlines()
    chunks: list[Chunk] = []
    title = ""
    block: list[tuple[int, str]] = []
    kind = ""          # "para" | "bullet" | "code"
    content_col = 0    # bullet: column where its text starts
    fence = ""         # open code fence marker, inside a block
    blank_seen = False

    def flush() -> None:
        nonlocal block, kind, blank_seen
        while block and not block[-1][1].strip():
            block.pop()
        if block:
            if kind == "bullet":
                first = _BULLET.fullmatch(block[0][1]).group(4)
                rest = [line[min(len(line) - len(line.lstrip(" ")), content_col):] for _, line in block[1:]]
                body = "\n".join([first, *rest])
            elif kind == "code":
                body = "\n".join(line for _, line in block)
            else:
                body = "\n".join(line.strip() for _, line in block)
            if body.strip():
                chunks.append(Chunk(title, body.strip("\n").rstrip(), block[0][0], block[-1][0]))
        block, kind, blank_seen = [], "", False

    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            start = end + 1
    in_comment = False
    for index in range(start, len(lines)):
        raw = lines[index]
        number, line = index + 1, raw[:len(raw) - len(raw.lstrip())].expandtabs(4) + raw.lstrip()
        if fence:
            block.append((number, line))
            marker = _FENCE.match(line)
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence) \
                    and not line.strip()[len(marker.group(1)):].strip():
                fence = ""
                if kind == "code":
                    flush()
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        if line.lstrip().startswith("<!--"):  # an HTML comment is not a memory
            in_comment = "-->" not in line[line.index("<!--") + 4:]
            continue
        stripped = line.strip()
        if not stripped:
            if kind == "para":
                flush()
            elif kind == "bullet":
                blank_seen = True
                block.append((number, line))
            continue
        marker = _FENCE.match(line)
        if marker:
            if kind == "bullet" and len(line) - len(line.lstrip(" ")) >= content_col:
                block.append((number, line))
            else:
                flush()
                kind, block = "code", [(number, line)]
            fence = marker.group(1)
            continue
        if kind == "para" and len(block) >= 1 and _SETEXT.fullmatch(line):
            title = " ".join(l.strip() for _, l in block)
            block, kind = [], ""
            continue
        heading = _HEADING.fullmatch(line)
        if heading:
            flush()
            title = (heading.group(2) or "").strip()
            continue
        if _RULE.fullmatch(line):
            flush()
            continue
        bullet = _BULLET.fullmatch(line)
        indent = len(line) - len(line.lstrip(" "))
        if bullet and (bullet.group(4).strip() or kind != "para"):
            if kind == "bullet" and indent >= content_col:
                block.append((number, line))  # nested item
                blank_seen = False
                continue
            flush()
            kind, block = "bullet", [(number, line)]
            content_col = len(bullet.group(1)) + len(bullet.group(2)) + max(1, len(bullet.group(3)))
            continue
        if kind == "bullet" and (indent >= content_col or not blank_seen):
            block.append((number, line))  # continuation (or lazy continuation) of the item
            blank_seen = False
            continue
        if kind != "para":
            flush()
            kind = "para"
        block.append((number, line))
    flush()
    return chunks


def _workspace_files(root: Path, result: ImportResult) -> Iterator[tuple[str, Path]]:
    """(relative posix path, file) for every markdown file inside ``root``; hidden entries and
    symbolic links leading outside it are skipped, linked folders are not descended into."""
    real_root = root.resolve()
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in sorted(dirs):
            if name.startswith("."):
                dirs.remove(name)
            elif (base / name).is_symlink():
                result.skipped["linked folders (not followed)"] += 1
                dirs.remove(name)
        dirs.sort()
        for name in sorted(files):
            path = base / name
            if name.startswith(".") or path.suffix.lower() not in (".md", ".markdown"):
                continue
            if path.is_symlink():
                target = path.resolve()
                if not _inside(target, real_root) or not target.is_file():
                    result.skipped["links pointing outside the workspace"] += 1
                    continue
            elif not path.is_file():
                continue
            yield path.relative_to(root).as_posix(), path


def _memory_type(rel: str) -> str:
    parts = rel.split("/")
    stem = Path(rel).stem.lower()
    if parts[0] == "journal" or (parts[0] == "memory" and _DATED.fullmatch(Path(rel).stem)):
        return "episode"
    return MEMORY_TYPES.get(stem, "fact")


def _file_time(rel: str, path: Path) -> datetime:
    match = _DATED.fullmatch(Path(rel).stem)
    if match:
        try:
            day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
            return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
        except ValueError:
            pass
    return datetime.fromtimestamp(int(path.stat().st_mtime), tz=timezone.utc)


def import_markdown(src: str | Path, dest: str | Path, *, force: bool = False, name: str | None = None,
                    project: str | None = None, copy_files: bool = True) -> ImportResult:
    """A markdown memory workspace → one memory per bullet item / paragraph of every ``.md`` file.

    ``scope`` is global for ``user/*`` and ``MEMORY.md``, project otherwise (``project`` =
    the workspace folder's name unless given); ``memory_type`` follows the file name; dates
    come from a ``YYYY-MM-DD`` file name, else the file's mtime. The markdown files are
    copied into DEST too (so ``rwb show`` can read a memory's lines), unless ``copy_files``
    is false.
    """
    src = Path(src)
    if not src.is_dir():
        raise ValueError(f"{src}: not a folder (expected a markdown memory workspace)")
    if _inside(Path(dest).resolve(), src.resolve()):
        raise ValueError(f"{dest}: DEST must be outside the workspace {src} (it would be imported next time)")
    project = project if project is not None else src.resolve().name
    card = {"description": f"Memories imported from the markdown workspace {src.resolve().name!r}."}

    def build(tmp: Path, result: ImportResult) -> None:
        docs = []
        copied: list[tuple[str, Path]] = []
        for rel, path in _progress(list(_workspace_files(src, result)), "files", unit="file"):
            try:
                text = path.read_bytes().decode("utf-8-sig")
            except UnicodeDecodeError as error:
                raise ValueError(f"{rel}: not valid UTF-8 (byte {error.start})") from None
            when = _file_time(rel, path).isoformat()
            scope = "global" if rel.startswith("user/") or rel == "MEMORY.md" else "project"
            memory_type = _memory_type(rel)
            for chunk in chunk_markdown(text):
                if len(chunk.text) > MAX_TEXT_CHARS:
                    raise ValueError(f"{rel}:{chunk.line_start}: text: a {len(chunk.text)}-character block "
                                     f"exceeds the {MAX_TEXT_CHARS} limit; split it")
                doc = {"_id": f"{rel}:{chunk.line_start}", "title": chunk.title, "text": chunk.text,
                       "path": rel, "line_start": chunk.line_start, "line_end": chunk.line_end,
                       "scope": scope, "memory_type": memory_type, "created_at": when, "updated_at": when}
                if scope == "project" and project:
                    doc["project"] = project
                docs.append(doc)
            copied.append((rel, path))
        if not docs:
            raise ValueError(f"{src}: no markdown memories found (no .md file with text)")
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as out:
            out.writelines(_dump(d) for d in docs)
        if copy_files:
            for rel, path in copied:
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)

    return write_atomically("markdown", dest, build, force=force, sources=[src], name=name, card=card)
