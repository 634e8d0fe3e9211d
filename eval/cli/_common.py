"""Options and checks shared by the ``rwb`` commands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eval.stores.judgments import SOURCES, Judgments, effective_qrels, parse_raters
from eval.stores.pool import load_pool
from eval import progress
from eval.progress import Progress, step
from retrieval.bm25 import ANALYZERS, DEFAULT_ANALYZER
from retrieval.candidates import DEFAULT_POOL_DEPTH, Candidates
from retrieval.dataset import Dataset, load_dataset
from retrieval.embedders import MODELS, default_embedder, language_note, language_warning
from retrieval.files import atomic_write_text
from retrieval.limits import MAX_DEPTH
from retrieval.pipeline import fits


def bounded(name: str, value: int, lo: int = 1, hi: int = MAX_DEPTH) -> int:
    """``value`` if ``lo ≤ value ≤ hi``; a one-line ``ValueError`` naming the flag otherwise."""
    if value < lo:
        raise ValueError(f"{name} must be ≥ {lo}, got {value}")
    if value > hi:
        raise ValueError(f"{name} must be ≤ {hi:,}, got {value:,}")
    return value


def note(text: str) -> None:
    """``rwb: TEXT`` on stderr; a ``warning: …`` is left out under ``--quiet``."""
    if text.startswith("warning:") and progress.quiet():
        return
    print(f"rwb: {text}", file=sys.stderr)


def add_quiet(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: when not given here, `rwb --quiet COMMAND` (the top-level flag) still holds
    p.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="no progress bars, no warnings (errors still print)")


EMBEDDER_HELP = (", ".join(f"{name} ({model})" for name, model in MODELS.items())     # the registry's
                 + ", a model path, or precomputed (the dataset's own vectors/: no "
                 "model loaded). Default: by the dataset's language — minilm (English only) for English "
                 "text, use-multilingual otherwise (dataset.toml languages, else the documents' script)")


def add_embedder(p: argparse.ArgumentParser, several: bool = False) -> None:
    if several:
        p.add_argument("--embedder", action="append", default=None,
                       help=EMBEDDER_HELP + "; repeat to compare embedders side by side")
    else:
        p.add_argument("--embedder", default=None, help=EMBEDDER_HELP)


_WARNINGS: list[str] = []
"""Warnings about the figures a command prints, said once after them (``flush_warnings``): a
command that ends in an error prints its one error line alone."""


def warn_after(text: str) -> None:
    if text not in _WARNINGS:
        _WARNINGS.append(text)


def flush_warnings(show: bool) -> None:
    """Print the warnings (and notes) kept for this command (when it produced its figures) and forget them."""
    if show:
        for text in _WARNINGS:       # a "note: …" (language_note) is silenced by --quiet too
            if not text.startswith("note: "):
                note(f"warning: {text}")
            elif not progress.quiet():
                note(text)
    _WARNINGS.clear()


def resolve_embedder(name: str | None, dataset: Dataset, query: str | None = None) -> str:
    """``name``, or the dataset's default embedder (``retrieval.embedders.default_embedder``)
    when none was given (every command's output names the model it used); one warning line,
    after the command's output, when an English-only model meets text in another script
    (``language_warning``)."""
    if not name:
        name = default_embedder(dataset)
    warning = language_warning(name, dataset, query)
    if warning:
        warn_after(warning)
    elif note_text := language_note(name, dataset):      # the default, and why it was kept
        warn_after("note: " + note_text)
    return name


ANALYZER_HELP = ("BM25 analyzer: " + "; ".join(f"{a.name} = {a.summary}" for a in ANALYZERS.values())
                 + f" (default {DEFAULT_ANALYZER}); each has its own index and candidate pool")


def add_analyzer(p: argparse.ArgumentParser, several: bool = False) -> None:
    if several:  # None when not given: the command takes [DEFAULT_ANALYZER]
        p.add_argument("--analyzer", action="append", default=None, choices=sorted(ANALYZERS),
                       help=ANALYZER_HELP + "; repeat to compare analyzers side by side")
    else:
        p.add_argument("--analyzer", default=DEFAULT_ANALYZER, choices=sorted(ANALYZERS), help=ANALYZER_HELP)


def add_pool_options(p: argparse.ArgumentParser, several_embedders: bool = False) -> None:
    """DATASET, --embedder, --analyzer, --judgments, --pool-depth, --quiet: what every pool-based
    command takes (``several_embedders``: --embedder and --analyzer may be repeated)."""
    p.add_argument("dataset", help="dataset folder")
    add_embedder(p, several_embedders)
    add_analyzer(p, several_embedders)
    p.add_argument("--pool-depth", type=int, default=DEFAULT_POOL_DEPTH,
                   help=f"candidates per path retrieved once per query (default {DEFAULT_POOL_DEPTH})")
    p.add_argument("--judgments", choices=SOURCES, default="explicit",
                   help="explicit (default): the dataset's qrels with the grades given in the "
                        "workbench or by `rwb judge`; implicit: qrels/implicit.tsv "
                        "(click-derived); both")
    p.add_argument("--raters", default=None, metavar="NAME[,NAME…]",
                   help="use only these raters' grades (default: every rater's, merged: a pair's last grade)")
    add_quiet(p)


def load_with_pool(args, refresh: bool = False) -> tuple[Dataset, Candidates]:
    """The dataset and its candidate pool (retrieved once, then read from the store; retrieved
    afresh from the index with ``refresh``)."""
    bounded("--pool-depth", args.pool_depth)
    step(f"loading dataset {args.dataset}")
    dataset = load_dataset(args.dataset)
    if not dataset.qrels:
        raise ValueError(f"dataset {dataset.name!r} has no qrels (qrels/test.tsv): nothing to evaluate")
    args.embedder = resolve_embedder(args.embedder, dataset)
    step(f"loading the candidate pool ({len(dataset.queries):,} queries, {args.embedder}, "
         f"depth {args.pool_depth})")
    with Progress("doc") as progress:
        pool = load_pool(dataset, args.embedder, args.pool_depth, progress=progress, analyzer=args.analyzer,
                         refresh=refresh)
    for text in dict.fromkeys(n for notes in pool.degraded for n in notes):
        note(f"degraded: {text}")
    return dataset, pool


def judgments(args, dataset: Dataset, say: bool = True) -> Judgments:
    """The judgments a command's figures use (``eval.stores.judgments.effective_qrels``), announced
    in one line on stdout (unless the command's method lines say it): ``judgments: dataset
    qrels`` or ``judgments: dataset qrels + N edits (history head H)``."""
    found = effective_qrels(dataset, source=getattr(args, "judgments", "explicit"),
                            raters=parse_raters(getattr(args, "raters", None)))
    if say:
        print(f"judgments: {found.label}")
    return found


def check_depth(configs: dict, pool_depth: int) -> None:
    """Every pipeline must find the candidates it asks for in the pool."""
    for label, config in configs.items():
        fits(config, pool_depth, f"pipeline {label!r}")


def write_file(path: str, text: str, flag: str) -> None:
    """Write ``text`` to ``path`` atomically (a folder or an unwritable place: one-line error)."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{flag} {path} is a folder; give a file name")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)


def write_json(path: str, data: dict) -> None:
    write_file(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n", "--json")
