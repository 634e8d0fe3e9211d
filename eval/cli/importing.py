"""``rwb import KIND SRC DEST``: outside data (BEIR, LoCoMo, TREC qrels, markdown) into a dataset folder."""

from __future__ import annotations

import argparse

from eval.cli._common import add_quiet, note
from eval.importers.formats import ImportResult, import_beir, import_locomo, import_markdown, import_trec_qrels

MAX_NOTES = 5


def _report(result: ImportResult) -> int:
    print(result.summary())
    for text in result.notes[:MAX_NOTES]:
        note(f"note: {text}")
    if len(result.notes) > MAX_NOTES:
        note(f"note: … and {len(result.notes) - MAX_NOTES} more notes")
    return 0


def cmd_import(args) -> int:
    common = {"force": args.force, "name": args.name}
    if args.kind == "beir":
        result = import_beir(args.src, args.dest, split=args.split, **common)
    elif args.kind == "locomo":
        result = import_locomo(args.src, args.dest, **common)
    elif args.kind == "trec-qrels":
        result = import_trec_qrels(args.src, args.dest, corpus=args.corpus, queries=args.queries, **common)
    else:
        result = import_markdown(args.src, args.dest, project=args.project, copy_files=not args.no_copy, **common)
    return _report(result)


def register(sub) -> None:
    parser = sub.add_parser(
        "import", help="convert BEIR, LoCoMo, TREC qrels or a markdown workspace into a dataset folder",
        description="Convert outside data into a dataset folder. The folder is built next to DEST, "
                    "validated, then renamed into place: a failed import leaves nothing at DEST.")
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("src", metavar="SRC")
    common.add_argument("dest", metavar="DEST", help="the dataset folder to write")
    common.add_argument("--force", action="store_true", help="replace DEST if it is a dataset folder already")
    common.add_argument("--name", help="dataset name (default: DEST's folder name)")
    add_quiet(common)

    p = kinds.add_parser("beir", parents=[common], help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    p.add_argument("--split", default="test", help="qrels split to import (qrels/SPLIT.tsv; default test)")
    kinds.add_parser("locomo", parents=[common], help="LoCoMo's native locomo10.json")
    p = kinds.add_parser("trec-qrels", parents=[common],
                         help="a TREC qrels file (qid 0 docid grade) onto an existing corpus")
    p.add_argument("--corpus", required=True, help="a dataset folder (or its corpus.jsonl)")
    p.add_argument("--queries", help="a dataset folder or queries.jsonl (default: the corpus folder's)")
    p = kinds.add_parser("markdown", parents=[common], help="a markdown memory workspace folder")
    p.add_argument("--project", help="project name of project-scope memories (default: SRC's folder name)")
    p.add_argument("--no-copy", action="store_true", help="do not copy the markdown files into DEST")
    for p in kinds.choices.values():
        p.set_defaults(func=cmd_import)
