"""``rwb import KIND …``: outside data into a dataset folder, one subcommand per registered
importer (``eval.importers.IMPORTERS``: its summary, SRC, DEST and options)."""

from __future__ import annotations

from eval.cli._common import add_quiet, note
from eval.importers import IMPORTERS, ImportResult, get_importer

MAX_NOTES = 5


def _report(result: ImportResult) -> int:
    print(result.summary())
    for text in result.notes[:MAX_NOTES]:
        note(f"note: {text}")
    if len(result.notes) > MAX_NOTES:
        note(f"note: … and {len(result.notes) - MAX_NOTES} more notes")
    return 0


def cmd_import(args) -> int:
    importer = get_importer(args.kind)
    options = {option.key: getattr(args, option.key) for option in importer.options}
    result = importer(
        getattr(args, "src", None), args.dest, force=args.force, name=args.name, **options
    )
    return _report(result)


def register(sub) -> None:
    parser = sub.add_parser(
        "import",
        help="convert outside data (" + ", ".join(IMPORTERS) + ") into a dataset folder",
        description="Convert outside data into a dataset folder. The folder is built next to DEST, "
        "validated, then renamed into place: a failed import leaves nothing at DEST.",
    )
    kinds = parser.add_subparsers(dest="kind", required=True, metavar="KIND")
    for importer in IMPORTERS.values():
        p = kinds.add_parser(importer.name, help=importer.summary, description=importer.summary)
        if importer.source is not None:
            p.add_argument("src", metavar="SRC", help=importer.source)
        p.add_argument("dest", metavar="DEST", help=importer.dest)
        p.add_argument(
            "--force", action="store_true", help="replace DEST if it is a dataset folder already"
        )
        p.add_argument("--name", help="dataset name (default: DEST's folder name)")
        for option in importer.options:
            option.add_to(p)
        add_quiet(p)
        p.set_defaults(func=cmd_import)
