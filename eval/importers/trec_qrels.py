"""A TREC qrels file (``qid iter docid grade``): read, and imported onto an existing dataset's corpus and queries
→ a copy of them with ``qrels/test.tsv``."""

from __future__ import annotations

from pathlib import Path

from eval.importers._base import (
    ImportResult, Importer, Option, copy_licences, dataset_file, source_card,
)
from eval.importers._files import write_atomically
from eval.importers._qrels import copy_judged, parse_qrels


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """A TREC qrels file (``qid iter docid grade``) → ``{qid: {docid: grade}}``."""
    qrels: dict[str, dict[str, int]] = {}
    for _, query_id, doc_id, grade in parse_qrels(Path(path), trec=True, label=str(path)):
        qrels.setdefault(query_id, {})[doc_id] = grade
    return qrels


def import_trec_qrels(src: str | Path, dest: str | Path, *, corpus: str | Path, queries: str | Path | None = None,
                      force: bool = False, name: str | None = None) -> ImportResult:
    """A TREC qrels file + an existing dataset's corpus (and queries) → a copy with qrels/test.tsv."""
    src = Path(src)
    if not src.is_file():
        raise ValueError(f"{src}: not a file (expected a TREC qrels file: qid 0 docid grade)")
    corpus_path = dataset_file(corpus, "corpus.jsonl", "--corpus")
    queries_path = dataset_file(queries if queries is not None else corpus_path.parent, "queries.jsonl",
                                 "--queries" if queries is not None else "--corpus")
    rows = parse_qrels(src, trec=True, label=str(src))
    card = source_card(corpus_path.parent) if corpus_path.name == "corpus.jsonl" else {}
    card["description"] = (card.get("description", "") + f" Judgments from the TREC qrels file {src.name!r}.").strip()

    def build(tmp: Path, result: ImportResult) -> None:
        copy_judged(tmp, corpus_path, queries_path, rows, result)
        copy_licences(corpus_path.parent, tmp)

    return write_atomically("trec-qrels", dest, build, force=force,
                            sources=[src, corpus_path.parent, queries_path.parent], name=name, card=card)


IMPORTER = Importer(
    "trec-qrels", "a TREC qrels file (qid 0 docid grade) onto an existing corpus",
    lambda src, dest, **options: import_trec_qrels(src, dest, **options), source="the TREC qrels file",
    options=(Option("--corpus", "a dataset folder (or its corpus.jsonl)", required=True, path=True),
             Option("--queries", "a dataset folder or queries.jsonl (default: the corpus folder's)",
                    path=True)))
