"""``rwb judge``: grade from the command line, undo, export, and the agreement between raters —
the workbench's own judgment store.

Grades go to ``eval.stores.judgments.JudgmentStore`` (history and undo; the dataset's files are
never modified), the store the Tune and Data pages write, each with its rater (``--rater``;
default the OS user); every figure reads them through ``effective_qrels``, so a grade given here
or in the workbench changes ``rwb eval`` alike. ``--agreement`` compares two raters' grades
(``eval.statistics.agreement``: ordinal Krippendorff's α, quadratic-weighted Cohen's κ, the
confusion matrix, and per query how much a pipeline's metric moves when one's grades replace
the other's).
"""

from __future__ import annotations

import itertools
import math

from eval.cli._common import add_analyzer, add_embedder, load_with_pool, write_file, write_json
from eval.stores.judgments import (JudgmentStore, check_rater, default_rater, effective_qrels, parse_raters,
                                   rater_tables, trec_qrels)
from retrieval.candidates import DEFAULT_POOL_DEPTH
from retrieval.dataset import load_dataset
from retrieval.limits import clip

SHOWN = 5   # queries named per agreement, those the metric moves most


def _grade(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"GRADE must be an integer 0–3, got {clip(text)}") from None


def _pairs(tables: dict, chosen: tuple[str, ...] | None) -> list[tuple[str, str]]:
    """The pairs ``--agreement`` compares: the two ``--raters`` named, else every two named
    raters, and the explicit judgments against the implicit ones when there are some."""
    if chosen is not None:
        if len(chosen) != 2:
            raise ValueError(f"--agreement compares two: give --raters A,B (got {len(chosen)})")
        for name in chosen:
            if name not in tables:
                raise ValueError(f"nothing graded by {name!r} (can compare: {', '.join(tables)})")
        return [(chosen[0], chosen[1])]
    named = [n for n in tables if n not in ("dataset", "explicit", "implicit")]
    pairs = list(itertools.combinations(sorted(named), 2))
    if "implicit" in tables:
        pairs.append(("explicit", "implicit"))
    if not pairs:
        raise ValueError("no two raters to compare: grade with --rater NAME, or import implicit judgments "
                         f"with `rwb import ubi` (can compare: {', '.join(tables)})")
    return pairs


def _fmt(value: float) -> str:
    return "undefined" if math.isnan(value) else f"{value:.3f}"


def cmd_agreement(args, dataset) -> int:
    from eval.experiments.live import evaluate_config
    from eval.metrics.measure import judge, parse_metric
    from eval.statistics.agreement import agreement, with_impact
    from eval.stores.configs import resolve_config

    parse_metric(args.metric)
    config = resolve_config(args.pipeline)
    tables = rater_tables(dataset)
    chosen = tuple(n.strip() for n in args.raters.split(",") if n.strip()) if args.raters else None
    pairs = _pairs(tables, chosen)
    _, pool = load_with_pool(args)
    def values_of(qrels: dict) -> dict[str, float]:
        ev = evaluate_config(pool, judge(pool, qrels), config, (args.metric,))
        return dict(zip(pool.query_ids, (float(v) for v in ev.values[args.metric])))
    results = []
    for first, second in pairs:
        found = with_impact(agreement(first, tables[first], second, tables[second]), values_of,
                            tables["explicit"], tables[first], tables[second], args.metric)
        results.append(found)
        print(f"agreement {first} vs {second}: {found.pairs} pairs graded by both · Krippendorff's α (ordinal) "
              f"{_fmt(found.alpha)} · Cohen's κ (quadratic) {_fmt(found.kappa)}")
        print("  confusion (rows: " + first + ", columns: " + second + ", grades 0–3): "
              + " | ".join(" ".join(str(v) for v in row) for row in found.confusion))
        moved = sorted(found.impact.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
        if moved:
            print(f"  {config.name} {args.metric} moves on {sum(1 for v in found.impact.values() if v)} of "
                  f"{len(found.impact)} queries they disagree on with {second}'s grades for {first}'s; most: "
                  + ", ".join(f"{q} {v:+.3f}" for q, v in moved[:SHOWN]))
    if args.json:
        write_json(args.json, {"dataset": dataset.name, "pipeline": config.name,
                               "agreement": [r.to_json() for r in results]})
    return 0


def cmd_judge(args) -> int:
    dataset = load_dataset(args.dataset)
    store = JudgmentStore(dataset)
    given = [x for x in (args.query_id, args.doc_id, args.grade) if x is not None]
    if given and len(given) != 3:
        raise ValueError("give QUERY_ID DOC_ID GRADE together")
    if given and args.undo:
        raise ValueError("give either QUERY_ID DOC_ID GRADE or --undo, not both")
    if args.agreement:
        if given or args.undo:
            raise ValueError("--agreement reports; give it without a grade or --undo")
        return cmd_agreement(args, dataset)
    if given:
        grade = _grade(args.grade)
        rater = check_rater(args.rater or default_rater())
        before = effective_qrels(dataset).qrels.get(args.query_id, {}).get(args.doc_id)
        store.grade(args.query_id, args.doc_id, grade, author=args.author, rater=rater)
        print(f"{args.query_id} {args.doc_id}: {'-' if before is None else before} → {grade}")
    elif args.undo:
        last = store.undo()
        if last is None:
            print("nothing to undo")
        else:
            before = "-" if last["before"] is None else last["before"]
            print(f"undone: {last['query']} {last['doc']}: {last['after']} → {before}")
    used = effective_qrels(dataset, raters=parse_raters(args.raters))
    if args.export:
        write_file(args.export, trec_qrels(used.qrels), "--export")
        print(f"wrote {args.export}: {sum(map(len, used.qrels.values()))} judgments as TREC qrels")
    print(f"judgments: {used.label}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "judge", help="grade a (query, memory) pair, undo the last grade, export the judgments, agreement",
        description="Grades are kept beside the dataset (under $RWB_HOME, with history and their rater), as "
                    "the workbench keeps them; rwb eval, tune, sweep and report use them and say so. "
                    "Without arguments: which judgments are in effect. --agreement: how two raters agree.")
    p.add_argument("dataset")
    p.add_argument("query_id", nargs="?", metavar="QUERY_ID")
    p.add_argument("doc_id", nargs="?", metavar="DOC_ID")
    p.add_argument("grade", nargs="?", metavar="GRADE", help="0–3 (0: not relevant)")
    p.add_argument("--undo", action="store_true", help="revert the latest grade")
    p.add_argument("--export", metavar="FILE",
                   help="write the judgments in effect as TREC qrels (qid 0 docid grade)")
    p.add_argument("--author", default="rwb judge",
                   help="recorded in the history (default 'rwb judge')")
    p.add_argument("--rater", default=None, help="who gives the grade (default: the OS user)")
    p.add_argument("--raters", default=None, metavar="NAME[,NAME…]",
                   help="whose grades are in effect (default every rater's, merged); with --agreement the "
                        "two to compare: raters, or dataset (its qrels), explicit (in effect), implicit (clicks)")
    p.add_argument("--agreement", action="store_true",
                   help="agreement between raters (every two, and explicit vs implicit): Krippendorff's α, "
                        "Cohen's weighted κ, the confusion matrix, and how much --metric moves per query")
    p.add_argument("--pipeline", default="rrf", help="the pipeline whose metric --agreement moves (default rrf)")
    p.add_argument("--metric", default="ndcg@5", help="the metric --agreement moves (default ndcg@5)")
    p.add_argument("--json", metavar="FILE", help="write the agreement as JSON")
    add_embedder(p)
    add_analyzer(p)
    p.set_defaults(func=cmd_judge, pool_depth=DEFAULT_POOL_DEPTH)
