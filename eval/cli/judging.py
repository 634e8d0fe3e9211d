"""``rwb judge``: grade from the command line, undo, export — the workbench's own judgment store.

Grades go to ``eval.stores.judgments.JudgmentStore`` (history and undo; the dataset's files are
never modified), the store the Tune and Data pages write; every figure reads them through
``effective_qrels``, so a grade given here or in the workbench changes ``rwb eval`` alike.
"""

from __future__ import annotations

from eval.cli._common import write_file
from eval.stores.judgments import JudgmentStore, effective_qrels, trec_qrels
from retrieval.dataset import load_dataset
from retrieval.limits import clip


def _grade(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"GRADE must be an integer 0–3, got {clip(text)}") from None


def cmd_judge(args) -> int:
    dataset = load_dataset(args.dataset)
    store = JudgmentStore(dataset)
    given = [x for x in (args.query_id, args.doc_id, args.grade) if x is not None]
    if given and len(given) != 3:
        raise ValueError("give QUERY_ID DOC_ID GRADE together")
    if given and args.undo:
        raise ValueError("give either QUERY_ID DOC_ID GRADE or --undo, not both")
    if given:
        grade = _grade(args.grade)
        before = effective_qrels(dataset).qrels.get(args.query_id, {}).get(args.doc_id)
        store.grade(args.query_id, args.doc_id, grade, author=args.author)
        print(f"{args.query_id} {args.doc_id}: {'-' if before is None else before} → {grade}")
    elif args.undo:
        last = store.undo()
        if last is None:
            print("nothing to undo")
        else:
            before = "-" if last["before"] is None else last["before"]
            print(f"undone: {last['query']} {last['doc']}: {last['after']} → {before}")
    used = effective_qrels(dataset)
    if args.export:
        write_file(args.export, trec_qrels(used.qrels), "--export")
        print(f"wrote {args.export}: {sum(map(len, used.qrels.values()))} judgments as TREC qrels")
    print(f"judgments: {used.label}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "judge", help="grade a (query, memory) pair, undo the last grade, export the judgments",
        description="Grades are kept beside the dataset (under $RWB_HOME, with history), as the "
                    "workbench keeps them; rwb eval, tune, sweep and report use them and say so. "
                    "Without arguments: which judgments are in effect.")
    p.add_argument("dataset")
    p.add_argument("query_id", nargs="?", metavar="QUERY_ID")
    p.add_argument("doc_id", nargs="?", metavar="DOC_ID")
    p.add_argument("grade", nargs="?", metavar="GRADE", help="0–3 (0: not relevant)")
    p.add_argument("--undo", action="store_true", help="revert the latest grade")
    p.add_argument("--export", metavar="FILE",
                   help="write the judgments in effect as TREC qrels (qid 0 docid grade)")
    p.add_argument("--author", default="rwb judge",
                   help="recorded in the history (default 'rwb judge')")
    p.set_defaults(func=cmd_judge)
