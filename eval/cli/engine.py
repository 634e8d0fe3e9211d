"""``rwb index | search | show | pipelines | validate``: the engine's commands."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from eval.cli._common import add_embedder, add_quiet, bounded, note
from eval.progress import Progress
from retrieval.dataset import DatasetError, load_dataset
from retrieval.fusion import FUSIONS
from retrieval.index import open_index
from retrieval.pipeline import PIPELINES, describe, get_pipeline, search, to_dict


def _open(path: str, embedder: str, rebuild: bool = False):
    dataset = load_dataset(path)
    with Progress("doc") as progress:
        handle = open_index(dataset, embedder, progress=progress, rebuild=rebuild, on_notice=note)
    return dataset, handle


def cmd_index(args) -> int:
    dataset, handle = _open(args.dataset, args.embedder, args.rebuild)
    encoded = handle.embedder.encoded if handle.embedder else 0
    print(f"{dataset.name}: {len(dataset.documents)} documents indexed at {handle.path} "
          f"(model {handle.manifest['model'] or 'none'}, analyzer {handle.manifest['analyzer']}, "
          f"{encoded} texts encoded)")
    for text in handle.degraded:
        print(f"degraded: {text}")
    return 0


def cmd_search(args) -> int:
    config = get_pipeline(args.pipeline)
    if args.top_k is not None:
        config = replace(config, max_results=bounded("--top-k", args.top_k))
    _, handle = _open(args.dataset, args.embedder)
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


def _line_range(text: str | None) -> tuple[int, int | None]:
    if not text:
        return 1, None
    try:
        lo, _, hi = text.partition(":")
        start, end = int(lo or 1), (int(hi) if hi else None)
    except ValueError:
        raise ValueError(f"--lines must look like 10:20, got {text!r}") from None
    if start < 1 or (end is not None and end < start):
        raise ValueError(f"--lines must be START:END with 1 ≤ START ≤ END, got {text!r}")
    return start, end


def cmd_show(args) -> int:
    from retrieval.files import read_memory_file

    start, end = _line_range(args.lines)
    print(read_memory_file(Path(args.dataset), args.path, start, end))
    return 0


def _counts(counter: Counter) -> str:
    return ", ".join(f"{k or '-'} {n}" for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def cmd_validate(args) -> int:
    """Every problem the loader finds, one ``file:line: field: what is wrong`` per line on stdout."""
    try:
        dataset = load_dataset(args.dataset)
    except DatasetError as error:
        for problem in error.problems:
            print(problem)
        n = len(error.problems)
        print(f"rwb: error: {args.dataset}: {n} problem{'s' if n != 1 else ''}", file=sys.stderr)
        return 2
    judgments = sum(len(docs) for docs in dataset.qrels.values())
    grades = Counter(g for docs in dataset.qrels.values() for g in docs.values())
    print(f"{dataset.name}: OK — {len(dataset.documents)} documents, {len(dataset.queries)} queries "
          f"({len(dataset.qrels)} judged), {judgments} judgments (grades: "
          + (", ".join(f"{g}: {grades[g]}" for g in sorted(grades, reverse=True)) or "-") + ")")
    print(f"  intents: {_counts(Counter(q.intent for q in dataset.queries))}; "
          f"languages: {_counts(Counter(q.lang for q in dataset.queries))}")
    print(f"  reference time {dataset.reference_time.isoformat()} · fingerprint {dataset.fingerprint[:12]}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("index", help="build or refresh a dataset's indexes")
    p.add_argument("dataset")
    add_embedder(p)
    p.add_argument("--rebuild", action="store_true", help="rebuild even if the index is current")
    add_quiet(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search a dataset with a pipeline")
    p.add_argument("dataset")
    p.add_argument("query")
    p.add_argument("--pipeline", default="rrf", help="a pipeline name or a TOML file")
    p.add_argument("--top-k", type=int, default=None, help="at most this many results (1–10,000)")
    p.add_argument("--scope", choices=["global", "project"])
    p.add_argument("--group")
    p.add_argument("--project")
    add_embedder(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("show", help="print a memory file (or lines of it) from inside a dataset folder")
    p.add_argument("dataset")
    p.add_argument("path", help="path relative to the dataset folder, e.g. user/preferences.md")
    p.add_argument("--lines", help="line range START:END (1-based, inclusive)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("pipelines", help="list the named pipelines and the fusion methods")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_pipelines)

    p = sub.add_parser("validate", help="check a dataset folder: every problem as file:line: field: …",
                       description="Load DATASET with the loader's own checks. Every problem is printed as "
                                   "file:line: field: what is wrong, and the exit status is 2; a valid dataset "
                                   "gets a short summary.")
    p.add_argument("dataset")
    p.set_defaults(func=cmd_validate)
