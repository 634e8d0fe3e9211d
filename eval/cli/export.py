"""``rwb export CONFIG --to ENGINE``: a tuned pipeline in the engine's own configuration."""

from __future__ import annotations

from eval.cli._common import add_quiet, write_file
from eval.export import EXPORTERS, export_config
from eval.statistics.provenance import of_file
from eval.stores.configs import resolve_config
from retrieval.bm25 import ANALYZERS


def cmd_export(args) -> int:
    provenance = of_file(args.config)   # a file tuned or learned on a dataset: its figures there are in-sample
    text = export_config(resolve_config(args.config), args.to, args.analyzer,
                         (provenance.export_note(),) if provenance else ())
    if args.out:
        write_file(args.out, text, "--out")
    else:
        print(text, end="")
    return 0


def register(sub) -> None:
    p = sub.add_parser(
        "export",
        help="write a pipeline as LanceDB / OpenSearch / Qdrant / Weaviate configuration",
        description="Write the engine's own configuration of a pipeline's fusion (Python or "
        "JSON). A stage the engine cannot express (routing, budgets, floors, memory "
        "multipliers) is refused with the reason; README lists what each engine expresses.",
    )
    p.add_argument(
        "config",
        metavar="CONFIG",
        help="a pipeline name, profile:<preset>, saved:<name> or a TOML file",
    )
    p.add_argument(
        "--to",
        required=True,
        choices=sorted(EXPORTERS),
        help="; ".join(f"{e.engine}: {e.summary}" for e in EXPORTERS.values()),
    )
    p.add_argument("--analyzer", choices=sorted(ANALYZERS), default=None,
                   help="the BM25 analyzer the pipeline was tuned with: the export names the engine's "
                        "equivalent analysis or refuses where it has none (default: not part of the export); "
                        + "; ".join(f"{e.engine}: {', '.join(sorted(e.analyzers)) or 'none'}" for e in EXPORTERS.values()))
    p.add_argument("--out", metavar="FILE", help="write to FILE (default: standard output)")
    add_quiet(p)
    p.set_defaults(func=cmd_export)
