#!/usr/bin/env python3
"""Check a retrieval dataset in the BEIR layout, and the memory fields rwb adds.

Usage: python scripts/validate_dataset.py DATASET_DIR

Layout: corpus.jsonl, queries.jsonl, qrels/*.tsv (header ``query-id<TAB>corpus-id<TAB>score``)
and, for datasets written for this project, dataset.toml.

Checks, in three layers:

* generic (any BEIR dataset): every line parses, ``_id``/``text`` present, ids unique, qrels
  (``qrels/*.tsv``, or ``qrels.tsv`` beside the corpus) have the header, three columns,
  integer scores, and refer to existing queries and documents;
* memory fields (whenever a document carries them; all of them are required once any document
  has ``memory_type``): types and ranges of confidence, vitality, counters, ISO 8601 dates with a
  timezone, ``related`` ids, scope/project/path consistency, journal dates equal to the journal
  file's name, non-overlapping line ranges within a file (a file is ``(project, path)``);
* datasets with a dataset.toml (written for rwb): its keys, an ``intent``/``lang``/``case`` on
  every query, grades in {1, 2, 3}, a grade-3 document for every query, no date after
  ``reference_time``; and, for the dataset named ``devmem``, its own size and balance targets.

Every problem is printed as ``file:line: field: what is wrong`` (line 0 = the file as a whole),
then a summary. Exit status 1 if there is any problem, else 0. Standard library only.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

INTENTS = {"debug", "concept", "timeline", "brainstorm", "preference"}
CASES = {"exact-identifier", "error-code", "file-path", "paraphrase", "cross-lingual",
         "relative-time", "low-confidence-trap", "superseded", "lexical-trap", "preference",
         "brainstorm", "concept"}
MEMORY_TYPES = {"preference", "instruction", "entity", "decision", "pattern", "task", "fact",
                "episode", "error-fix", "inference"}
SOURCES = {"user", "assistant-inferred", "tool-output", "session-summary"}
SCOPES = {"global", "project"}
MEMORY_FIELDS = ("path", "line_start", "line_end", "scope", "project", "memory_type",
                 "created_at", "updated_at", "confidence", "vitality", "reinforcement",
                 "access_count", "source", "related")
TOML_KEYS = {"name": str, "description": str, "languages": list, "license": str,
             "reference_time": (str, datetime)}
GRADES = {1, 2, 3}
QRELS_HEADER = ["query-id", "corpus-id", "score"]
HEADER_TEXT = "\t".join(QRELS_HEADER)
JOURNAL_RE = re.compile(r"^journal/(\d{4}-\d{2}-\d{2})\.md$")
HAN_RE = re.compile(r"[\u3400-\u9fff]")

# devmem's own targets (dataset.toml name == "devmem")
DEVMEM_MIN_DOCS = 300
DEVMEM_MIN_QUERIES = 100
DEVMEM_BACKGROUND = (0.30, 0.50)
DEVMEM_MIN_PER_INTENT = 12


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)

    def add(self, file: str, line: int, fld: str, what: str) -> None:
        self.problems.append(f"{file}:{line}: {fld}: {what}")


def is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: object) -> bool:
    return (is_int(v) or isinstance(v, float)) and not (isinstance(v, float) and not math.isfinite(v))


def parse_time(v: object) -> datetime | None:
    """An ISO 8601 timestamp with an explicit timezone, else None."""
    if not isinstance(v, str):
        return None
    try:
        t = datetime.fromisoformat(v)
    except ValueError:
        return None
    return t if t.tzinfo is not None else None


def read_jsonl(path: Path, rep: Report) -> list[tuple[int, dict]]:
    rows: list[tuple[int, dict]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                rep.add(path.name, n, "line", "empty line")
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                rep.add(path.name, n, "json", f"invalid JSON ({e.msg} at column {e.colno})")
                continue
            if not isinstance(obj, dict):
                rep.add(path.name, n, "json", f"expected an object, got {type(obj).__name__}")
                continue
            rows.append((n, obj))
    return rows


def check_ids(fname: str, rows: list[tuple[int, dict]], rep: Report) -> dict[str, int]:
    """`_id` and `text` on every row; returns id -> line."""
    seen: dict[str, int] = {}
    for n, obj in rows:
        _id = obj.get("_id")
        if not isinstance(_id, str) or not _id:
            rep.add(fname, n, "_id", f"missing or not a non-empty string: {_id!r}")
        elif _id in seen:
            rep.add(fname, n, "_id", f"duplicate id {_id!r} (first on line {seen[_id]})")
        else:
            seen[_id] = n
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            rep.add(fname, n, "text", "missing or empty")
        if "title" in obj and not isinstance(obj["title"], str):
            rep.add(fname, n, "title", f"not a string: {obj['title']!r}")
    return seen


def read_toml(path: Path, rep: Report) -> dict:
    try:
        with path.open("rb") as f:
            meta = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        rep.add(path.name, 0, "toml", f"does not parse: {e}")
        return {}
    lines = path.read_text(encoding="utf-8").splitlines()

    def line_of(key: str) -> int:
        for i, ln in enumerate(lines, 1):
            if re.match(rf"\s*{re.escape(key)}\s*=", ln):
                return i
        return 0

    for key, typ in TOML_KEYS.items():
        if key not in meta:
            rep.add(path.name, 0, key, "missing")
        elif not isinstance(meta[key], typ):
            want = " or ".join(t.__name__ for t in typ) if isinstance(typ, tuple) else typ.__name__
            rep.add(path.name, line_of(key), key, f"expected {want}, got {meta[key]!r}")
    langs = meta.get("languages")
    if isinstance(langs, list) and not all(isinstance(x, str) and x for x in langs):
        rep.add(path.name, line_of("languages"), "languages", "every language must be a non-empty string")
    ref = meta.get("reference_time")
    if isinstance(ref, datetime):  # a TOML date-time value: keep it, as an ISO string
        meta["reference_time"] = ref.isoformat()
    if isinstance(meta.get("reference_time"), str) and parse_time(meta["reference_time"]) is None:
        rep.add(path.name, line_of("reference_time"), "reference_time",
                f"not an ISO 8601 timestamp with a timezone: {meta['reference_time']!r}")
    return meta


def check_memory_fields(rows: list[tuple[int, dict]], doc_ids: dict[str, int],
                        reference: datetime | None, rep: Report) -> None:
    fname = "corpus.jsonl"
    required = any("memory_type" in obj for _, obj in rows)
    spans: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    for n, d in rows:
        if required:
            for key in MEMORY_FIELDS:
                if key not in d:
                    rep.add(fname, n, key, "missing (this corpus carries memory fields)")
        if "confidence" in d and not (is_number(d["confidence"]) and 0 <= d["confidence"] <= 1):
            rep.add(fname, n, "confidence", f"{d['confidence']!r} is not a number in [0, 1]")
        if "vitality" in d and not (is_number(d["vitality"]) and 0 <= d["vitality"] <= 100):
            rep.add(fname, n, "vitality", f"{d['vitality']!r} is not a number in [0, 100]")
        for key in ("reinforcement", "access_count"):
            if key in d and not (is_int(d[key]) and d[key] >= 0):
                rep.add(fname, n, key, f"{d[key]!r} is not an integer >= 0")
        if "memory_type" in d and d["memory_type"] not in MEMORY_TYPES:
            rep.add(fname, n, "memory_type", f"{d['memory_type']!r} is not one of {sorted(MEMORY_TYPES)}")
        if "source" in d and d["source"] not in SOURCES:
            rep.add(fname, n, "source", f"{d['source']!r} is not one of {sorted(SOURCES)}")
        times = {}
        for key in ("created_at", "updated_at"):
            if key in d:
                t = parse_time(d[key])
                if t is None:
                    rep.add(fname, n, key, f"not an ISO 8601 timestamp with a timezone: {d[key]!r}")
                else:
                    times[key] = t
                    if reference is not None and t > reference:
                        rep.add(fname, n, key, f"{d[key]} is after the dataset's reference_time")
        if len(times) == 2 and times["updated_at"] < times["created_at"]:
            rep.add(fname, n, "updated_at", "is before created_at")
        path = d.get("path")
        if "path" in d:
            if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
                rep.add(fname, n, "path", f"not a relative file path: {path!r}")
                path = None
        scope, project = d.get("scope"), d.get("project")
        if "scope" in d and scope not in SCOPES:
            rep.add(fname, n, "scope", f"{scope!r} is not one of {sorted(SCOPES)}")
        if "project" in d and not isinstance(project, str):
            rep.add(fname, n, "project", f"not a string: {project!r}")
        if scope == "global" and project:
            rep.add(fname, n, "project", f"a global memory has project {project!r}; expected \"\"")
        if scope == "project" and isinstance(project, str) and not project:
            rep.add(fname, n, "project", "a project memory needs a project name")
        if isinstance(path, str) and scope in SCOPES:
            if (scope == "global") != path.startswith("user/"):
                rep.add(fname, n, "scope", f"{scope!r} does not fit path {path!r} (global is user/*)")
        if isinstance(path, str) and "created_at" in times:
            m = JOURNAL_RE.match(path)
            if m and times["created_at"].date().isoformat() != m.group(1):
                rep.add(fname, n, "created_at",
                        f"{d['created_at']} does not match the journal file date {m.group(1)}")
        ls, le = d.get("line_start"), d.get("line_end")
        for key, v in (("line_start", ls), ("line_end", le)):
            if key in d and not (is_int(v) and v >= 1):
                rep.add(fname, n, key, f"{v!r} is not an integer >= 1")
        if is_int(ls) and is_int(le) and ls >= 1 and le >= 1:
            if le < ls:
                rep.add(fname, n, "line_end", f"{le} is before line_start {ls}")
            elif isinstance(path, str):
                spans[(project if isinstance(project, str) else "", path)].append((ls, le, n))
        if "related" in d:
            rel = d["related"]
            if not isinstance(rel, list):
                rep.add(fname, n, "related", f"not a list: {rel!r}")
            else:
                for r in rel:
                    if not isinstance(r, str) or r not in doc_ids:
                        rep.add(fname, n, "related", f"{r!r} is not a document id")
                    elif r == d.get("_id"):
                        rep.add(fname, n, "related", "a memory links to itself")
                if len(set(map(str, rel))) != len(rel):
                    rep.add(fname, n, "related", "duplicate ids")
    for (project, path), lst in spans.items():
        lst.sort()
        for (s0, e0, n0), (s1, e1, n1) in zip(lst, lst[1:]):
            if s1 <= e0:
                where = f"{project}:{path}" if project else path
                rep.add(fname, n1, "line_start",
                        f"lines {s1}-{e1} overlap lines {s0}-{e0} (line {n0}) in {where}")


def check_queries(rows: list[tuple[int, dict]], labelled: bool, languages: list[str] | None,
                  rep: Report) -> None:
    fname = "queries.jsonl"
    for n, q in rows:
        for key, allowed in (("intent", INTENTS), ("case", CASES)):
            if key in q:
                if q[key] not in allowed:
                    rep.add(fname, n, key, f"{q[key]!r} is not one of {sorted(allowed)}")
            elif labelled:
                rep.add(fname, n, key, "missing")
        if "lang" in q:
            if not isinstance(q["lang"], str) or (languages and q["lang"] not in languages):
                rep.add(fname, n, "lang", f"{q['lang']!r} is not one of the dataset's languages {languages}")
        elif labelled:
            rep.add(fname, n, "lang", "missing")


def read_qrels(path: Path, query_ids: dict[str, int], doc_ids: dict[str, int], labelled: bool,
               rep: Report) -> list[tuple[str, str, int]]:
    fname = f"{path.parent.name}/{path.name}" if path.parent.name == "qrels" else path.name
    out: list[tuple[str, str, int]] = []
    seen: dict[tuple[str, str], int] = {}
    with path.open(encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or lines[0].split("\t") != QRELS_HEADER:
        rep.add(fname, 1, "header", f"expected {HEADER_TEXT!r}")
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 3:
            rep.add(fname, n, "columns", f"expected 3 tab-separated columns, got {len(cols)}")
            continue
        qid, did, score = cols
        if qid not in query_ids:
            rep.add(fname, n, "query-id", f"{qid!r} is not in queries.jsonl")
        if did not in doc_ids:
            rep.add(fname, n, "corpus-id", f"{did!r} is not in corpus.jsonl")
        try:
            grade = int(score)
        except ValueError:
            rep.add(fname, n, "score", f"{score!r} is not an integer")
            continue
        if labelled and grade not in GRADES:
            rep.add(fname, n, "score", f"{grade} is not a grade in {sorted(GRADES)}")
        elif grade < 0:
            rep.add(fname, n, "score", f"{grade} is negative")
        if (qid, did) in seen:
            rep.add(fname, n, "corpus-id", f"pair ({qid}, {did}) already judged on line {seen[(qid, did)]}")
            continue
        seen[(qid, did)] = n
        out.append((qid, did, grade))
    return out


def check_devmem_targets(n_docs: int, n_queries: int, background: float, intents: Counter,
                         rep: Report) -> None:
    """devmem's own size and balance targets (not required of other datasets)."""
    if n_docs < DEVMEM_MIN_DOCS:
        rep.add("corpus.jsonl", 0, "documents",
                f"{n_docs} documents; devmem needs at least {DEVMEM_MIN_DOCS}")
    if n_queries < DEVMEM_MIN_QUERIES:
        rep.add("queries.jsonl", 0, "queries",
                f"{n_queries} queries; devmem needs at least {DEVMEM_MIN_QUERIES}")
    lo, hi = DEVMEM_BACKGROUND
    if not lo <= background <= hi:
        rep.add("qrels/test.tsv", 0, "background",
                f"{background:.1%} of documents are unjudged; devmem needs {lo:.0%}-{hi:.0%}")
    for intent in sorted(INTENTS):
        if intents.get(intent, 0) < DEVMEM_MIN_PER_INTENT:
            rep.add("queries.jsonl", 0, "intent",
                    f"{intent!r} has {intents.get(intent, 0)} queries; "
                    f"devmem needs at least {DEVMEM_MIN_PER_INTENT}")


def validate(root: Path) -> tuple[Report, list[str]]:
    rep = Report()
    summary: list[str] = []
    labelled = (root / "dataset.toml").is_file()
    meta = read_toml(root / "dataset.toml", rep) if labelled else {}
    reference = parse_time(meta.get("reference_time")) if meta else None
    languages = meta.get("languages") if isinstance(meta.get("languages"), list) else None

    docs: list[tuple[int, dict]] = []
    queries: list[tuple[int, dict]] = []
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).is_file():
            rep.add(name, 0, "file", "missing")
    if (root / "corpus.jsonl").is_file():
        docs = read_jsonl(root / "corpus.jsonl", rep)
    if (root / "queries.jsonl").is_file():
        queries = read_jsonl(root / "queries.jsonl", rep)
    doc_ids = check_ids("corpus.jsonl", docs, rep)
    query_ids = check_ids("queries.jsonl", queries, rep)
    check_memory_fields(docs, doc_ids, reference, rep)
    check_queries(queries, labelled, languages, rep)

    qrel_files = sorted((root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
    if (root / "qrels.tsv").is_file():
        qrel_files.append(root / "qrels.tsv")
    if not qrel_files:
        rep.add("qrels/test.tsv", 0, "file", "missing")
    qrels: list[tuple[str, str, int]] = []
    for p in qrel_files:
        qrels += read_qrels(p, query_ids, doc_ids, labelled, rep)

    by_query: dict[str, list[int]] = defaultdict(list)
    for qid, _, grade in qrels:
        by_query[qid].append(grade)
    if labelled:
        for qid, n in query_ids.items():
            if qid not in by_query:
                rep.add("queries.jsonl", n, "_id", f"{qid} has no judged document")
            elif 3 not in by_query[qid]:
                rep.add("queries.jsonl", n, "_id", f"{qid} has no grade-3 document")

    judged_docs = {did for _, did, grade in qrels if grade > 0}
    background = 1 - len(judged_docs & doc_ids.keys()) / len(doc_ids) if doc_ids else 0.0
    intents = Counter(q.get("intent", "-") for _, q in queries)
    cases = Counter(q.get("case", "-") for _, q in queries)
    langs = Counter(q.get("lang", "-") for _, q in queries)
    han_docs = sum(1 for _, d in docs if isinstance(d.get("text"), str) and HAN_RE.search(d["text"]))
    grades = Counter(g for _, _, g in qrels)

    def fmt(c: Counter) -> str:
        if set(c) == {"-"}:
            return "not labelled"
        return ", ".join(f"{k} {v}" for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0]))))

    summary += [
        f"dataset    {meta.get('name', root.name)}",
        f"documents  {len(docs)}  ({han_docs} with Chinese text, {han_docs / max(len(docs), 1):.0%})",
        f"queries    {len(queries)}  (judged: {len(by_query)})",
        f"qrels      {len(qrels)}  grades: {fmt(grades)}",
        f"background {background:.1%} of documents have no positive judgment",
        f"languages  {fmt(langs)}",
        f"intents    {fmt(intents)}",
        f"cases      {fmt(cases)}",
    ]
    if any("memory_type" in d for _, d in docs):
        summary.append(f"types      {fmt(Counter(d.get('memory_type', '-') for _, d in docs))}")
        summary.append(f"sources    {fmt(Counter(d.get('source', '-') for _, d in docs))}")

    if meta.get("name") == "devmem":
        check_devmem_targets(len(docs), len(queries), background, intents, rep)
    return rep, summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset_dir", type=Path)
    ap.add_argument("--max-problems", type=int, default=500,
                    help="print at most this many problems (default 500; 0 = all)")
    args = ap.parse_args(argv)
    if not args.dataset_dir.is_dir():
        print(f"{args.dataset_dir}:0: dataset_dir: not a directory", file=sys.stderr)
        return 1
    rep, summary = validate(args.dataset_dir)
    shown = rep.problems if args.max_problems <= 0 else rep.problems[: args.max_problems]
    for p in shown:
        print(p)
    if len(shown) < len(rep.problems):
        print(f"... and {len(rep.problems) - len(shown)} more problems")
    if rep.problems:
        print()
    print("\n".join(summary))
    print(f"problems   {len(rep.problems)}")
    return 1 if rep.problems else 0


if __name__ == "__main__":
    sys.exit(main())
