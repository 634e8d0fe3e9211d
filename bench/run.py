"""``python -m bench.run --quick|--full``: run the benchmarks, print figures and one summary line.

Quick (``make bench-quick``, < 2 min with a warm embedding cache): indexing (2 × 500 short
docs), ``minilm-int8`` against the float model's bare encode (64 devmem texts; full: 512 with
LoCoMo and SciFact), re-scoring and sweep on devmem, hybrid latency at 10k documents, quality
on devmem (MiniLM), and in headless Chromium the first ranking and first Evaluate after ``rwb index`` and
Tune's knob loop against the reference page (first session).
Full (``make bench``): adds LoCoMo to re-scoring and sweeps, 2,100 docs for
indexing, hybrid latency at 10k and 100k, quality on every shared dataset with both
embedders, what each memo buys (``bench/caches.py``), the 1M-vector scale run, and the
scaling table (re-score time against queries and pool depth, sweep rate against Ray workers);
the browser run adds a session after a restart and one on LoCoMo.

The last line of stdout is ``key=value`` pairs, one per headline ratio. The whole result
(every repeat's time, machine, versions, load average) is written as JSON under
``.rwb-bench/results/``. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback

from bench.common import Section, fmt, loadavg, log, machine, now
from bench.context import Context

QUICK = ("indexing", "encoder", "rescore", "sweep", "hybrid", "quality", "browser")
FULL = ("indexing", "encoder", "rescore", "sweep", "caches", "quality", "hybrid", "scale", "scaling",
        "browser", "learn", "index_scaling")
SMOKE = ("indexing", "rescore", "sweep", "caches", "hybrid", "quality", "scale")
KEYS = ("rescore_speedup_vs_ranx", "rescore_speedup_alternating", "sweep_speedup_vs_ranx",
        "sweep_speedup_alternating", "sweep_configs_per_s", "hybrid_latency_ratio_vs_lancedb",
        "indexing_throughput_vs_encode", "indexing_cpu_ratio_vs_encode", "encode_speedup_vs_float",
        "reindex_speedup_vs_first_build",
        "knob_to_page_p50_ms", "knob_ratio_vs_reference", "grade_ratio_vs_knob", "first_ranking_s",
        "first_evaluate_s")


def _summary_line(ratios: dict[str, float]) -> str:
    keys = [k for k in KEYS if k in ratios] + [k for k in ratios if k not in KEYS]
    return " ".join(f"{k}={fmt(ratios[k])}" for k in keys)


def _print_section(section: Section) -> None:
    print(f"== {section.name} ({section.seconds:.1f} s, load average {section.loadavg[0]} → {section.loadavg[1]})")
    print(json.dumps(section.figures, indent=1, default=str))
    for key, value in section.ratios.items():
        print(f"   {key} = {fmt(value)}")
    for note in section.notes:
        print(f"   note: {note}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="the < 2 min subset (default)")
    mode.add_argument("--full", action="store_true", help="everything, shared datasets included (~30 min)")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes on tests/fixtures/tiny (for tests)")
    parser.add_argument("--only", help="comma-separated benchmarks to run (of: %s)" % ", ".join(FULL))
    parser.add_argument("--skip", default="", help="comma-separated benchmarks to leave out")
    parser.add_argument("--embedders", help="comma-separated embedders for the quality benchmark "
                        "(default: minilm in quick mode, minilm,use-multilingual in full mode)")
    parser.add_argument("--warm", action="store_true",
                        help="only encode the full mode's datasets into the embedding cache, then exit")
    args = parser.parse_args(argv)

    from bench.data import use_bench_home

    home = use_bench_home()
    ctx = Context(full=args.full, home=home, smoke=args.smoke)
    if args.embedders:
        ctx.state["embedders"] = tuple(e.strip() for e in args.embedders.split(",") if e.strip())
    if args.warm:
        from bench.data import quality_datasets, warm_embeddings

        warm_embeddings(["minilm", "use-multilingual"], quality_datasets(full=True))
        return {}
    names = SMOKE if args.smoke else FULL if args.full else QUICK
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in FULL]
        if unknown:
            parser.error(f"unknown benchmark(s) {unknown}; choose from {list(FULL)}")
        names = tuple(n for n in names if n in wanted) or tuple(wanted)
    names = tuple(n for n in names if n not in {s.strip() for s in args.skip.split(",")})

    started = now()
    result = {"mode": ctx.mode, "command": "python -m bench.run " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(), "sections": {}, "ratios": {}, "errors": {}}
    log(f"bench {ctx.mode}: {', '.join(names)} (RWB_HOME={home})")
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        load_before, start = loadavg(), now()
        log(f"-- {name}")
        try:
            section = module.run(ctx)
        except Exception as error:  # one failing benchmark must not hide the others' figures
            traceback.print_exc()
            result["errors"][name] = f"{type(error).__name__}: {error}"
            print(f"== {name}: FAILED ({type(error).__name__}: {error})")
            continue
        section.seconds = now() - start
        section.loadavg = (load_before, loadavg())
        result["sections"][name] = section.to_json()
        result["ratios"].update(section.ratios)
        _print_section(section)
    result["seconds"] = round(now() - started, 1)
    result["machine"]["loadavg_end"] = loadavg()
    out_dir = home / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    text = json.dumps(result, indent=1, default=str)
    (out_dir / f"{ctx.mode}-{stamp}.json").write_text(text)
    (out_dir / f"{ctx.mode}-latest.json").write_text(text)
    log(f"bench {ctx.mode} done in {result['seconds']} s; results in {out_dir / f'{ctx.mode}-latest.json'}")
    print(f"total {result['seconds']} s")
    print(_summary_line(result["ratios"]))
    sys.stdout.flush()
    return result


if __name__ == "__main__":
    os.environ.setdefault("LANCEDB_LOG", "error")
    main()
