"""``rwb holes``: the unjudged documents in two pipelines' top k, the ones to judge first."""

from __future__ import annotations

from eval.cli._common import (add_pool_options, bounded, check_depth, judgments, load_with_pool,
                              write_json)
from eval.experiments.holes import holes
from eval.learning.router import learned_routes
from eval.reports.report import text_table
from eval.stores.configs import resolve_config
from retrieval.pipeline import run_pipeline

MAX_SHOWN = 1_000_000


def cmd_holes(args) -> int:
    if len(args.pipeline) != 2:
        raise ValueError("give exactly two pipelines to compare: --pipeline A --pipeline B")
    bounded("--k", args.k, 1, 1000)
    bounded("--limit", args.limit, 1, MAX_SHOWN)
    configs = [resolve_config(p) for p in args.pipeline]
    dataset, pool = load_with_pool(args)
    check_depth({c.name: c for c in configs}, pool.pool_depth)
    routes = learned_routes(pool, dataset.queries, configs, args.embedder)
    a, b = (run_pipeline(pool, config, routes).ranking for config in configs)
    used = judgments(args, dataset)     # the workbench's grades too (a 0 is judged), as every command
    queue = holes(pool, used.qrels, a, b, args.k)
    names = [c.name for c in configs]
    if names[0] == names[1]:
        names = list(args.pipeline)
    texts = {d.id: d.text for d in dataset.documents}
    print(
        f"{dataset.name}: {len(queue)} unjudged (query, document) pairs in the top {args.k} of "
        f"{names[0]} (A) or {names[1]} (B); swing = |Δ nDCG@{args.k}(A − B) graded top − graded 0| "
        f"on the query"
    )
    rows = [
        [
            f"{h.swing:.4f}",
            f"{h.swing_on_mean:.5f}",
            h.query_id,
            h.doc_id,
            str(h.rank_a or "—"),
            str(h.rank_b or "—"),
            f"{h.delta_if_0:+.4f}",
            f"{h.delta_if_top:+.4f}",
            " ".join(texts.get(h.doc_id, "").split())[:60],
        ]
        for h in queue[: args.limit]
    ]
    if rows:
        print(
            text_table(
                [
                    "swing",
                    "on mean",
                    "query",
                    "document",
                    "rank A",
                    "rank B",
                    "Δ if 0",
                    "Δ if top",
                    "text",
                ],
                rows,
            )
        )
    if len(queue) > args.limit:
        print(f"… and {len(queue) - args.limit} more (--limit, --json)")
    if args.json:
        write_json(
            args.json,
            {
                "dataset": dataset.name,
                "k": args.k,
                "a": names[0],
                "b": names[1],
                "holes": [h.to_json() for h in queue],
            },
        )
        print(f"wrote {args.json}")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "holes",
        help="unjudged documents in two pipelines' top k, by how much a grade could "
        "change their comparison",
    )
    add_pool_options(p)
    p.add_argument(
        "--pipeline",
        action="append",
        default=[],
        metavar="LABEL|FILE",
        help="the two pipelines compared (give it twice)",
    )
    p.add_argument("--k", type=int, default=5, help="cutoff of the compared top k (default 5)")
    p.add_argument(
        "--limit", type=int, default=20, help="rows printed (default 20; --json has all)"
    )
    p.add_argument("--json", metavar="OUT", help="write every pair as JSON")
    p.set_defaults(func=cmd_holes)
