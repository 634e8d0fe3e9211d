"""Qrels files: BEIR TSV and TREC (``qid iter docid grade``) read with ``file:line`` problems,
and written as a dataset's ``qrels/test.tsv`` (rows naming an unknown query or document, or
with a negative grade, are skipped and counted)."""

from __future__ import annotations

from pathlib import Path

import shutil

from eval.importers._base import MAX_PROBLEMS, ImportResult, Problems, lines, record_lines


def parse_qrels(path: Path, *, trec: bool, label: str | None = None) -> list[tuple[int, str, str, int]]:
    """Rows ``(line, query_id, doc_id, grade)``; malformed rows raise DatasetError with file:line.

    BEIR layout: ``query-id<TAB>corpus-id<TAB>score`` with an optional header line (a TREC
    4-column row is accepted too). TREC layout (``trec=True``): ``qid iter docid grade``.
    """
    label = label or path.name
    problems = Problems()
    rows = []
    for line, text in lines(path, problems, label):
        if len(problems) >= MAX_PROBLEMS:
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


def write_qrels(tmp: Path, rows: list[tuple[int, str, str, int]], doc_ids: set[str], query_ids: set[str],
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


def copy_judged(tmp: Path, corpus: Path, queries: Path, rows: list[tuple[int, str, str, int]],
                result: ImportResult) -> tuple[set[str], set[str]]:
    """Copy the corpus into ``tmp``, write the qrels ``rows`` and the judged queries; return the
    document ids and the judged query ids (queries without judgments are dropped, counted)."""
    doc_ids, _ = record_lines(corpus, "corpus.jsonl")
    query_ids, query_lines = record_lines(queries, "queries.jsonl")
    shutil.copyfile(corpus, tmp / "corpus.jsonl")
    judged = write_qrels(tmp, rows, doc_ids, query_ids, result)
    result.skipped["queries without judgments"] += len(query_ids - judged)
    with open(tmp / "queries.jsonl", "w", encoding="utf-8") as out:
        out.writelines(text + "\n" for query_id, text in query_lines if query_id in judged)
    return doc_ids, judged
