"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/SPLIT.tsv`` → a dataset folder
(extra fields kept; LoCoMo-converted fields mapped: ``sample_id`` → group, ``timestamp_iso``
→ created_at, ``category_name`` → intent)."""

from __future__ import annotations

from pathlib import Path

from eval.importers._base import (
    ImportResult, Importer, Option, Problems, copy_licences, dump, json_lines, record_id, source_card,
)
from eval.importers._files import write_atomically
from eval.importers._qrels import parse_qrels, write_qrels
from eval.progress import iterate as _progress
from retrieval.dataset import MAX_TEXT_CHARS


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


def _beir_text(obj: dict, problems: Problems, label: str, line: int, title_fallback: bool) -> str | None:
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
    card = source_card(src)
    card.setdefault("description", f"Imported from the BEIR folder {src.name!r}.")

    def build(tmp: Path, result: ImportResult) -> None:
        problems = Problems()
        doc_ids: dict[str, int] = {}
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as out:
            for line, obj in _progress(json_lines(corpus, problems, "corpus.jsonl"), "corpus", unit="doc"):
                doc_id = record_id(obj, problems, "corpus.jsonl", line)
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
                out.write(dump(_beir_record(obj, doc_id, "doc")))
        problems.raise_if_any()
        if not doc_ids:
            raise ValueError(f"{corpus}: no documents")
        queries: dict[str, dict] = {}
        if queries_path.is_file():
            for line, obj in json_lines(queries_path, problems, "queries.jsonl"):
                query_id = record_id(obj, problems, "queries.jsonl", line)
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
            rows = parse_qrels(qrels_path, trec=False, label=f"qrels/{qrels_path.name}"
                                if qrels_path.parent.name == "qrels" else qrels_path.name)
            judged = write_qrels(tmp, rows, set(doc_ids), set(queries), result)
            result.skipped["queries without judgments"] += len(queries) - len(judged)
        if queries:
            with open(tmp / "queries.jsonl", "w", encoding="utf-8") as out:
                out.writelines(dump(q) for qid, q in queries.items() if qid in judged)
        copy_licences(src, tmp)

    return write_atomically("beir", dest, build, force=force, sources=[src], name=name, card=card)


IMPORTER = Importer(
    "beir", "a BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv)",
    lambda src, dest, **options: import_beir(src, dest, **options), source="the BEIR folder",
    options=(Option("--split", "qrels split to import (qrels/SPLIT.tsv; default test)", default="test"),))
