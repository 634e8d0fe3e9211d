"""Engine commands of ``rwb``: index, search, pipelines."""

from __future__ import annotations

import argparse
import json
import sys

from retrieval.dataset import load_dataset
from retrieval.embedders import DEFAULT_EMBEDDER
from retrieval.index import open_index
from retrieval.fusion import FUSIONS
from retrieval.pipeline import PIPELINES, describe, get_pipeline, search, to_dict


class ProgressBar:
    """One tqdm bar per stage, on stderr."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled and sys.stderr.isatty()
        self._bars: dict[str, object] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        bar = self._bars.get(stage)
        if bar is None:
            bar = self._bars[stage] = tqdm(total=total, desc=stage, unit="doc", file=sys.stderr, leave=False)
        bar.n = done
        bar.refresh()

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()


def open_for_cli(path: str, embedder: str, quiet: bool = False, rebuild: bool = False):
    dataset = load_dataset(path)
    bar = ProgressBar(not quiet)
    try:
        handle = open_index(dataset, embedder, progress=bar, rebuild=rebuild,
                            on_notice=lambda text: print(f"rwb: {text}", file=sys.stderr))
    finally:
        bar.close()
    return dataset, handle


def cmd_index(args) -> int:
    dataset, handle = open_for_cli(args.dataset, args.embedder, args.quiet, args.rebuild)
    encoded = handle.embedder.encoded if handle.embedder else 0
    print(f"{dataset.name}: {len(dataset.documents)} documents indexed at {handle.path} "
          f"(model {handle.manifest['model'] or 'none'}, analyzer {handle.manifest['analyzer']}, "
          f"{encoded} texts encoded)")
    for note in handle.degraded:
        print(f"degraded: {note}")
    return 0


def cmd_search(args) -> int:
    config = get_pipeline(args.pipeline)
    if args.top_k is not None:
        if args.top_k < 1:
            raise ValueError(f"--top-k must be ≥ 1, got {args.top_k}")
        from dataclasses import replace

        config = replace(config, max_results=args.top_k)
    _, handle = open_for_cli(args.dataset, args.embedder, quiet=True)
    response = search(handle, args.query, config, scope=args.scope or "", group=args.group or "",
                      project=args.project or "")
    if args.json:
        print(json.dumps(response.to_json(), ensure_ascii=False, indent=2))
        return 0
    print(f"route={response.route} profile={response.profile or '-'} tokens={response.total_tokens}"
          + (f" budget_remaining={response.budget_remaining}" if response.budget_remaining is not None else "")
          + (f" degraded={'; '.join(response.degraded)}" if response.degraded else ""))
    if not response.results:
        print("(no results)")
    for r in response.results:
        text = r.text.replace("\n", " ")
        print(f"{r.rank + 1:>2}. {r.score:8.4f}  {r.id:<12} {r.path:<24} {text[:80]}")
    return 0


def cmd_pipelines(args) -> int:
    if args.json:
        print(json.dumps({name: to_dict(p) for name, p in PIPELINES.items()}, ensure_ascii=False, indent=2))
        return 0
    for name, p in PIPELINES.items():
        print(f"{name:<17} {describe(p)}")
    print("\nfusion methods (retrieval/fusion/):")
    for name, fusion in FUSIONS.items():
        print(f"  {name:<15} {fusion.summary}  ({fusion.source})")
    return 0


def cmd_show(args) -> int:
    from pathlib import Path

    from retrieval.files import read_memory_file

    start, end = 1, None
    if args.lines:
        try:
            lo, _, hi = args.lines.partition(":")
            start, end = int(lo or 1), (int(hi) if hi else None)
        except ValueError:
            raise ValueError(f"--lines must look like 10:20, got {args.lines!r}") from None
    print(read_memory_file(Path(args.dataset), args.path, start, end))
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build or refresh a dataset's indexes")
    p.add_argument("dataset")
    p.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="minilm, use-multilingual or a model path")
    p.add_argument("--rebuild", action="store_true", help="rebuild even if the index is current")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search a dataset with a pipeline")
    p.add_argument("dataset")
    p.add_argument("query")
    p.add_argument("--pipeline", default="rrf", help="a pipeline name or a TOML file")
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--scope", choices=["global", "project"])
    p.add_argument("--group")
    p.add_argument("--project")
    p.add_argument("--embedder", default=DEFAULT_EMBEDDER)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("show", help="print a memory file (or lines of it) from inside a dataset folder")
    p.add_argument("dataset")
    p.add_argument("path", help="path relative to the dataset folder, e.g. user/preferences.md")
    p.add_argument("--lines", help="line range START:END (1-based, inclusive)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("pipelines", help="list the named pipelines")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_pipelines)
