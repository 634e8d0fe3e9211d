"""``rwb``: the command line. Bad input exits 2 with a one-line reason, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys

from eval import commands, importers
from retrieval import cli as engine_cli
from retrieval.dataset import DatasetError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rwb", description="Retrieval Workbench")
    sub = parser.add_subparsers(dest="command", required=True)
    engine_cli.add_commands(sub)
    commands.add_commands(sub)
    importers.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LANCEDB_LOG", "error")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DatasetError as error:
        problems = error.problems
        print(f"rwb: error: invalid dataset: {problems[0]}", file=sys.stderr)
        for problem in problems[1:20]:
            print(f"  {problem}", file=sys.stderr)
        if len(problems) > 20:
            print(f"  … and {len(problems) - 20} more", file=sys.stderr)
        return 2
    except (ValueError, OSError, RuntimeError) as error:
        print(f"rwb: error: {str(error).splitlines()[0] if str(error) else type(error).__name__}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rwb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
