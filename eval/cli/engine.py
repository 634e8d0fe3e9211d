"""``rwb index | search | show | pipelines | validate``: the engine's commands."""

from __future__ import annotations

import argparse

import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from eval.cli._common import add_analyzer, add_embedder, add_quiet, bounded, note, resolve_embedder, write_json
from eval.cli.sweep import add_executor_options, check_executor
from eval.progress import Progress
from eval.stores.access import AccessStore, with_access_counts
from eval.stores.configs import resolve_config
from retrieval.bm25 import DEFAULT_ANALYZER
from retrieval.dataset import DatasetError, load_dataset
from retrieval.fusion import FUSIONS
from retrieval.index import open_index
from retrieval.pipeline import PIPELINES, describe, search, to_dict, with_params
from retrieval.profiles import penalty_table


def _open(path: str, embedder: str | None, analyzer: str = DEFAULT_ANALYZER, rebuild: bool = False,
          query: str | None = None):
    """The dataset and its index for ``embedder`` (None: the dataset's default embedder)."""
    dataset = load_dataset(path)
    embedder = resolve_embedder(embedder, dataset, query)
    with Progress("doc") as progress:
        handle = open_index(dataset, embedder, progress=progress, rebuild=rebuild, on_notice=note, analyzer=analyzer)
    return dataset, handle


def _index(args):
    """The dataset, its index handle and (unless ``--no-pool``) its default candidate pool."""
    if args.no_pool:
        dataset, handle = _open(args.dataset, args.embedder, args.analyzer, rebuild=args.rebuild)
        return dataset, handle, None
    from eval.stores.pool import prepare

    dataset = load_dataset(args.dataset)
    args.embedder = resolve_embedder(args.embedder, dataset)
    with Progress("it") as progress:
        handle, pool = prepare(dataset, args.embedder, progress, rebuild=args.rebuild, on_notice=note,
                               analyzer=args.analyzer)
    return dataset, handle, pool


def cmd_index(args) -> int:
    """Build the indexes and (unless ``--no-pool``) the default candidate pool the workbench opens
    with, so its first page ranks as soon as the server answers."""
    check_executor(args)
    if args.batch_size is not None and args.executor != "ray":
        raise ValueError("--batch-size needs --executor ray")
    if args.executor == "ray":  # documents and queries encoded, the pool retrieved on Ray workers
        from eval.progress import step
        from eval.search.executors import make_executor
        from retrieval.ray_index import check_batch_size, ray_encoding
        from retrieval.ray_pool import ray_retrieval

        check_batch_size(args.batch_size)
        with make_executor("ray", args.address, args.workers) as cluster, \
                ray_encoding(cluster.workers, args.batch_size, on_start=step), \
                ray_retrieval(cluster.workers, on_start=step) as retriever:
            dataset, handle, pool = _index(args)
        where = f" on Ray ({cluster.workers} worker{'s' if cluster.workers != 1 else ''})"
        shards = (f", retrieved on Ray in {retriever.shards} shard{'s' * (retriever.shards != 1)}"
                  if retriever.shards else "")
    else:
        (dataset, handle, pool), where, shards = _index(args), "", ""
    encoded = handle.embedder.encoded if handle.embedder else 0
    print(f"{dataset.name}: {len(dataset.documents)} documents indexed at {handle.path} "
          f"(model {handle.manifest['model'] or 'none'}, analyzer {handle.analyzer} ({handle.manifest['analyzer']}), "
          f"{encoded} texts encoded{where})")
    for text in handle.degraded:
        print(f"degraded: {text}")
    if pool is not None:
        print(f"candidate pool: {pool.n_queries} queries, depth {pool.pool_depth} per path{shards}")
    return 0


def cmd_search(args) -> int:
    config = resolve_config(args.pipeline)
    if args.top_k is not None:
        config = with_params(config, {"max_results": bounded("--top-k", args.top_k)})
    dataset, handle = _open(args.dataset, args.embedder, args.analyzer, query=args.query)
    # precomputed vectors: only the dataset's own queries have one
    check_text = getattr(handle.embedder, "check_text", None)
    if check_text is not None:
        check_text(args.query)
    access = AccessStore(dataset)
    # seed 000: a memory's access count is the corpus's plus what earlier searches wrote back
    handle = replace(handle, dataset=with_access_counts(dataset, access.added()))
    response = search(handle, args.query, config, scope=args.scope or "", group=args.group or "",
                      project=args.project or "")
    # seed 000 (§4 访问频率): every result a search returns gets access_count + 1 — automatic for
    # its own pipeline (the salience fusion), asked for with --write-back by any other
    write_back = args.write_back if args.write_back is not None else config.fusion == "salience"
    written = access.write_back(m for r in response.results for m in (r.members or (r.id,))) \
        if write_back else None
    model = "none (keyword-only)" if response.route == "keyword-only" else (
        handle.embedder.model_id if handle.embedder is not None else "none")
    if args.json:
        data = {**response.to_json(), "model": model}
        if written is not None:
            data["write_back"] = {"memories": written, "store": str(access.path)}
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    print(f"route={response.route} profile={response.profile or '-'} tokens={response.total_tokens}"
          + (f" budget_remaining={response.budget_remaining}" if response.budget_remaining is not None else "")
          + f" model={model}"
          + (f" degraded={'; '.join(response.degraded)}" if response.degraded else ""))
    if not response.results:
        print("(no results)")
        if response.empty_reason:
            print(f"    ({response.empty_reason})")
    for r in response.results:
        text = r.text.replace("\n", " ")
        print(f"{r.rank + 1:>2}. {r.score:8.4f}  {r.id:<12} {r.path:<24} {text[:80]}")
        if r.members:
            print(f"    memories: {', '.join(r.members)}")
    if written is not None:
        print(f"write-back: access_count + 1 on {written} memories ({access.path})")
    return 0


def cmd_pipelines(args) -> int:
    if args.json:
        print(json.dumps({name: to_dict(p) for name, p in PIPELINES.items()}, ensure_ascii=False, indent=2))
        return 0
    width = max(map(len, PIPELINES)) + 1
    for name, p in PIPELINES.items():
        print(f"{name:<{width}} {describe(p)}")
    print("\nseed 003's retriever (`rwb context`; three lookups over memory_type-tagged memories, not a "
          "re-scoring pipeline):\n  similar patterns (vector top-3 ≥ 0.85) ‖ site profile (exact host, else parent) ‖ "
          "known failures (top-5 ≥ 0.8, confidence > 0.5) → one context; L1 per request, L2 300 s by query.")
    print("\nfusion methods (retrieval/fusion/):")
    for name, fusion in FUSIONS.items():
        print(f"  {name:<15} {fusion.summary}  ({fusion.source})")
    print("\npenalty strengths (seed 001 §4 惩罚策略; §2.2 quantifies only strong; see retrieval/profiles.py):")
    for line in penalty_table():
        print(f"  {line}")
    return 0


def context_replay(args, dataset, handle, used) -> int:
    """Seed 003's retriever over the dataset's queries in reference_time order: cache counts and
    the contexts' scores against ``used`` (``eval.stores.judgments.Judgments``); ``rwb context
    --replay`` and ``rwb eval --context``."""
    from eval.experiments.calibration import cross_fit, parse_threshold
    from eval.experiments.context_eval import evaluate_contexts, evaluate_contexts_cross_fitted, score_table
    from eval.reports.report import text_table
    from retrieval.seed003 import MemoryRetriever, Seed003Params

    bounded("--budget", args.budget, 1, 10_000_000)
    chosen = parse_threshold(args.threshold)

    def retriever(pattern: float, failure: float) -> MemoryRetriever:
        return MemoryRetriever(handle, Seed003Params(threshold=pattern, failure_threshold=failure,
                                                     cache_key=args.cache_key))
    params = Seed003Params(cache_key=args.cache_key)
    if isinstance(chosen, str):  # calibrated: never scored on the labels it was fitted on
        cross = cross_fit(handle, dataset.queries, used.qrels)
        how = cross.how
        log, scores = evaluate_contexts_cross_fitted(lambda t: retriever(t, t), cross, dataset, used.qrels,
                                                     args.budget, args.variants, args.warm_up)
    else:
        how = chosen.how
        log, scores = evaluate_contexts(retriever(chosen.threshold, chosen.failure_threshold), dataset,
                                        used.qrels, args.budget, args.variants, args.warm_up)
    data = {**log.to_json(), "threshold": how, "cache_key": args.cache_key,
            "scores": scores.to_json(), "judgments": used.to_json()}
    if args.json is True:  # rwb context --json: the document on stdout
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    repeats = " (each query repeated 1 s later in another case and spacing)" * args.variants
    print(f"{dataset.name}: {len(log.query_ids)} queries replayed in reference_time order"
          f"{repeats}; model {handle.embedder.model_id}; threshold {how}; L2 key {args.cache_key}, TTL {params.ttl_s:g} s on "
          "the queries' clock")
    records = log.records
    warm = (f"; warm-up: pattern records {records['hits']} hits / {records['misses']} misses"
            if args.warm_up else "")
    print(f"  L2 hits {log.l2['hits']} / misses {log.l2['misses']} "
          f"(hit rate {log.l2_hit_rate:.1%}); time saved {log.l2['saved_s'] * 1000:.1f} ms of "
          f"{log.wall_s * 1000:.1f} ms; "
          f"L1 hits {log.l1['hits']} / misses {log.l1['misses']}{warm}")
    answered = sum(1 for c in log.contexts if c.ids)
    print(f"  {answered} of {len(log.contexts)} queries got a non-empty context")
    print(f"judgments: {used.label}; {scores.n_queries} judged queries; "
          f"token budget {scores.token_budget}")
    print(text_table(*score_table(scores)))
    if isinstance(args.json, str):  # rwb eval --context --json OUT
        write_json(args.json, data)
        print(f"wrote {args.json}")
    return 0


def cmd_context(args) -> int:
    """Seed 003's retriever: one query's context, a replay of the query log, or a calibration."""
    from eval.experiments.calibration import calibrate, choose_threshold
    from eval.stores.judgments import effective_qrels
    from retrieval.seed003 import MemoryRetriever, Seed003Params

    embedders = args.embedder or [None]
    if args.calibrate:
        dataset = load_dataset(args.dataset)
        qrels = effective_qrels(dataset).qrels
        out = []
        for name in embedders:
            _, handle = _open(args.dataset, name, args.analyzer)
            cal = calibrate(handle, dataset.queries, qrels)
            out.append(cal.to_json())
            print(f"{cal.embedder}: {cal.n_queries} judged queries; best cosine per query {_quantiles(cal.best)}")
            print(f"  relevant pairs {_quantiles(cal.relevant)}; other top-10 pairs {_quantiles(cal.other)}")
            print(f"  seed threshold {cal.seed_threshold:g}: {cal.answered['seed']} queries answered, F1 "
                  f"{cal.f1['seed']:.3f} · calibrated {cal.threshold:.4f}: {cal.answered['calibrated']} answered, "
                  f"F1 {cal.f1['calibrated']:.3f} (in-sample: fitted and scored on these labels)")
        if args.json:
            print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    if len(embedders) > 1:
        raise ValueError("give one --embedder (several only with --calibrate)")
    dataset, handle = _open(args.dataset, embedders[0], args.analyzer)
    used = effective_qrels(dataset)
    if args.replay:
        return context_replay(args, dataset, handle, used)
    if not args.query:
        raise ValueError("give a QUERY, or --replay / --calibrate")
    chosen = choose_threshold(handle, dataset.queries, used.qrels, args.threshold)
    retriever = MemoryRetriever(handle, Seed003Params(threshold=chosen.threshold,
                                                      failure_threshold=chosen.failure_threshold,
                                                      cache_key=args.cache_key))
    if args.warm_up:
        retriever.warm_up()
    context = retriever.retrieve(args.query)
    if args.json:
        print(json.dumps(context.to_json(), ensure_ascii=False, indent=2))
        return 0
    print(f"model {handle.embedder.model_id}; threshold {chosen.how}")
    print(f"site key {context.site_key or '-'} · cache L1 {context.cache['l1']['hits']} hits / "
          f"{context.cache['l1']['misses']} misses, L2 {context.cache['l2']['hits']} / {context.cache['l2']['misses']}")
    for label, hits in (("similar patterns", context.similar_tasks),
                        ("site profile", [context.site_profile] if context.site_profile else []),
                        ("known failures", context.known_issues)):
        print(f"{label}:" + ("" if hits else " (none)"))
        for h in hits:
            print(f"  {h.score:6.3f}  {h.id:<12} {h.text.replace(chr(10), ' ')[:80]}")
    return 0


def _quantiles(values: dict) -> str:
    return " ".join(f"{k} {v:.3f}" for k, v in values.items())


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


def add_context_options(p, budget: bool = True) -> None:
    """Seed 003's retriever's options (``rwb context``; ``rwb eval --context``, whose own
    ``--budget`` is the same token budget)."""
    p.add_argument("--threshold", default="seed",
                   help="seed (default; also 'literal'): seed 003's 0.85 for similar patterns and 0.8 "
                        "for known failures; calibrated: a threshold fitted on the dataset's labels, "
                        "opt-in, cross-fitted over 5 folds wherever contexts are scored (never "
                        "scored on the labels it was fitted on); or a number (the pattern threshold)")
    p.add_argument("--cache-key", choices=("embedding", "text"), default="embedding",
                   help="L2 key: embedding = its first 10 values (seed 003, default); "
                        "text = the query text")
    p.add_argument("--warm-up", action="store_true",
                   help="first load the 100 most accessed patterns into L2 for an hour "
                        "(seed 003's 预热)")
    p.add_argument("--variants", action="store_true",
                   help="with --replay: repeat each query 1 s later in another case and spacing")
    if budget:
        p.add_argument("--budget", type=int, default=1500,
                       help="token budget the contexts are scored within (default 1500)")


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
    add_analyzer(p)
    p.add_argument("--rebuild", action="store_true", help="rebuild even if the index is current")
    p.add_argument("--no-pool", action="store_true",
                   help="only the indexes: skip retrieving the query set's default candidate pool")
    add_executor_options(p, "encode the documents and queries and retrieve the pool's candidates here (local, "
                            "default) or on Ray workers (ray; needs pip install -e '.[distributed]'); the index "
                            "and the pool are identical bit for bit")
    p.add_argument("--batch-size", type=int, default=None, metavar="B",
                   help="with --executor ray: texts per Ray task, a multiple of 64 (default: about 4 tasks "
                        "per worker, at most 1024)")
    add_quiet(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search a dataset with a pipeline")
    p.add_argument("dataset")
    p.add_argument("query")
    p.add_argument("--pipeline", default="rrf", help="a pipeline name, profile:<preset>, saved:<name> or a TOML file")
    p.add_argument("--top-k", type=int, default=None, help="at most this many results (1–10,000)")
    p.add_argument("--scope", choices=["global", "project"])
    p.add_argument("--group")
    p.add_argument("--project")
    add_embedder(p)
    add_analyzer(p)
    p.add_argument("--write-back", action=argparse.BooleanOptionalAction, default=None,
                   help="add 1 to the access count of every memory returned (seed 000), kept "
                        "under $RWB_HOME beside the dataset's judgments; every rwb search reads it. "
                        "Default: on for seed 000's own pipeline (salience fusion, as the seed "
                        "writes back on every search), off for the others")
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

    p = sub.add_parser("context", help="seed 003's retriever: three parallel lookups, L1/L2 caches",
                       description="Similar patterns (memory_type pattern, vector top-3 over the threshold), the "
                                   "site profile (memory_type site-profile keyed by title: exact host, else its "
                                   "parent) and known failures (error-fix/failure, top-5 over 0.8, confidence > "
                                   "0.5), run in parallel into one context; L2 cache 300 s keyed "
                                   "by the first 10 values of the query's embedding (seed 003).")
    p.add_argument("dataset")
    p.add_argument("query", nargs="?")
    add_context_options(p)
    p.add_argument("--replay", action="store_true",
                   help="answer the dataset's queries in reference_time order: cache counts, and "
                        "each lookup's and the merged context's nDCG / recall against the "
                        "judgments")
    p.add_argument("--calibrate", action="store_true",
                   help="similarity distribution per --embedder and a threshold calibrated on the labels")
    p.add_argument("--embedder", action="append", help="minilm, use-multilingual, minilm-int8 or a model path (repeat with "
                                                       "--calibrate); default: by the dataset's language")
    add_analyzer(p)
    add_quiet(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("validate", help="check a dataset folder: every problem as file:line: field: …",
                       description="Load DATASET with the loader's own checks. Every problem is printed as "
                                   "file:line: field: what is wrong, and the exit status is 2; a valid dataset "
                                   "gets a short summary.")
    p.add_argument("dataset")
    p.set_defaults(func=cmd_validate)
