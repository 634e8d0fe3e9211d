"""Render benchmark results (JSON from ``bench.run``) as Markdown tables for BENCHMARKS.md.

``python -m bench.report .rwb-bench/results/full-latest.json [more.json …]``: sections of later
files replace those of earlier ones (e.g. a full run, then ``--only quality``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.common import fmt


def _table(header: list[str], rows: list[list]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def rescore(f: dict) -> str:
    rows = []
    for name, entry in f.items():
        for label, c in entry["configs"].items():
            rows.append([name, entry["queries"], entry["rows"], label, c["ours_ms"], c["ranx_ms"], f"{c['speedup']}×",
                         c["ndcg@5_ours"], c["ndcg@5_ranx"], c["max_metric_diff"],
                         c.get("max_diff_ranx_on_our_ranking", "")])
    return _table(["query set", "queries", "candidate rows", "config", "ours ms (median)", "ranx ms (median)",
                   "speedup", "nDCG@5 ours", "nDCG@5 ranx fuse", "max diff vs ranx fuse (ties)",
                   "max diff vs ranx on our ranking"], rows)


def sweep(f: dict) -> str:
    rows, best = [], []
    for name, e in f.items():
        rows.append([name, e["counted_queries"], e["configs"], e["ours_s"], e["ranx_s"], e["ours_configs_per_s"],
                     e["ranx_configs_per_s"], f"{e['speedup']}×", e["core_configs_per_s"], f"{e['core_speedup']}×"])
        for family, b in e["best"].items():
            extra = (f"ranx on our objective: {b['ranx_same_objective']} ({b['ranx_same_objective_score']}), "
                     f"agrees: {b['same_objective_agrees']}" if family == "wsum"
                     else f"max per-config score diff {b['max_score_diff']}")
            best.append([name, family, f"{b['ours']} ({b['ours_score']})", f"{b['ranx']} ({b['ranx_score']})",
                         b["same"], b["cv_held_out"], extra])
    return (_table(["query set", "counted queries", "configs", "eval.search.sweep s", "ranx s", "ours configs/s",
                    "ranx configs/s", "speedup", "core loop configs/s", "core speedup"], rows) + "\n\n"
            + _table(["query set", "grid", "our best (nDCG@5)", "ranx best (nDCG@5)", "same", "our 5-fold held-out",
                      "check"], best))


def hybrid(f: dict) -> str:
    rows, parts = [], []
    for n, e in f.items():
        if not n.isdigit():
            continue
        for variant, r in e["peer"].items():
            rows.append([n, e["real_vectors"], e["ann_index"], variant, r["ours_p50_ms"], r["ours_p95_ms"],
                         r["lancedb_p50_ms"], r["lancedb_p95_ms"], f"{r['ratio_p50']}×", f"{r['ratio_p95']}×",
                         r["top10_overlap"]])
        if "breakdown_ms" in e:
            parts.append([n] + [e["breakdown_ms"].get(k, "") for k in (
                "ours_dense_leg", "ours_exact_numpy_dense", "ours_bm25_leg", "ours_doc_table",
                "ours_build_candidates", "ours_score_rank_respond", "peer_vector_leg",
                "peer_fts_leg")])
    q = f.get("query_embedding_ms", {})
    return (_table(["docs", "real vectors", "ANN", "peer FTS", "ours p50 ms", "ours p95 ms", "LanceDB p50 ms",
                    "LanceDB p95 ms", "p50 ratio", "p95 ratio", "top-10 overlap"], rows)
            + f"\n\nQuery embedding (excluded above; {q.get('model')}, one query at a time): p50 {q.get('p50')} ms, "
              f"p95 {q.get('p95')} ms with {q.get('torch_threads')} torch threads; p50 {q.get('one_thread_p50')} ms, "
              f"p95 {q.get('one_thread_p95')} ms with 1.\n\n"
            + _table(["docs", "our dense leg (LanceDB)", "numpy exact", "our BM25 leg", "doc_table lookup",
                      "build_candidates", "score+rank+respond", "peer vector leg", "peer FTS leg"],
                     parts)
            + "\n\n" + _table(["docs", "build step", "s"], [[n, k, v] for n, e in f.items() if n.isdigit()
                                                             for k, v in e["build_s"].items()]))


def indexing(f: dict) -> str:
    rows = [[i, c["docs"], c["first"], c["encode_s"], c["index_s"], round(c["encode_s"] / c["index_s"], 3),
             c["encode_cpu_s"], c["index_cpu_s"], round(c["encode_cpu_s"] / c["index_cpu_s"], 3),
             " / ".join(str(x) for x in c["rebuild_s"]), c["open_s"]]
            for i, c in enumerate(f["chunks"])]
    return _table(["chunk", "docs", "first", "bare encode s", "open_index s", "ratio", "encode CPU s",
                   "open_index CPU s", "CPU ratio", "rebuild s", "open s"], rows)


def scale(f: dict) -> str:
    rows = [[k, f[k]] for k in ("rows", "dim", "ann_index", "partitions", "sub_vectors", "build_s", "ann_p50_ms",
                                "ann_p95_ms", "recall@10", "exact_numpy_p50_ms", "rss_before_build_mib",
                                "peak_rss_mib", "vectors_mib", "disk_mib") if k in f]
    rows += [[f"{k}: p50 ms / recall@10", f"{v['p50_ms']} / {v['recall@10']}"] for k, v in f.get("variants", {}).items()]
    cal = f.get("real_vectors_calibration")
    if cal:
        rows += [[f"real-vector calibration ({cal['rows']} rows): {k}", v] for k, v in cal.items() if k != "rows"]
    return _table(["figure", "value"], rows)


def quality(f: dict) -> str:
    names = ("vector", "bm25", "rrf", "openclaw", "seed-adaptive", "cv-sweep")
    rows = []
    for dataset, per in f.items():
        for embedder, r in per.items():
            rows.append([dataset, embedder, r["counted"]] + [f"{r[n]['ndcg@5']:.3f} / {r[n]['recall@5']:.3f}"
                                                            for n in names])
    out = _table(["dataset", "embedder", "queries"] + [f"{n} nDCG@5 / R@5" for n in names], rows)
    sci = f.get("scifact", {})
    if sci:
        out += "\n\n" + _table(["SciFact nDCG@10", "ours (minilm)", "ours (use-multilingual)", "published"], [
            [n, sci.get("minilm", {}).get(n, {}).get("ndcg@10", "—"),
             sci.get("use-multilingual", {}).get(n, {}).get("ndcg@10", "—"),
             {"bm25": "0.665 (BEIR BM25)", "vector": "≈ 0.645 (all-MiniLM-L6-v2)"}.get(n, "")]
            for n in ("bm25", "vector", "rrf")])
    cv = [[d, e, r["cv-sweep"]["best"], r["cv-sweep"]["in_sample_ndcg@5"], r["cv-sweep"]["ndcg@5"],
           r["cv-sweep"]["fold_picks_distinct"]] for d, per in f.items() for e, r in per.items()]
    out += "\n\n" + _table(["dataset", "embedder", "sweep winner (all queries)", "in-sample nDCG@5",
                            "held-out nDCG@5", "distinct fold picks"], cv)
    return out


RENDER = {"rescore": rescore, "sweep": sweep, "hybrid": hybrid, "indexing": indexing, "scale": scale,
          "quality": quality}


def main(paths: list[str]) -> None:
    sections, ratios, meta = {}, {}, None
    for path in paths:
        data = json.loads(Path(path).read_text())
        meta = meta or data
        sections.update(data["sections"])
        ratios.update(data["ratios"])
        print(f"<!-- {path}: {data['command']}, {data['seconds']} s, load average "
              f"{data['machine'].get('loadavg_start')} → {data['machine'].get('loadavg_end')} -->")
    print(" ".join(f"{k}={fmt(v)}" for k, v in ratios.items()))
    for name, section in sections.items():
        print(f"\n### {name} ({section['seconds']} s, load average {section['loadavg'][0]} → {section['loadavg'][1]})\n")
        print(RENDER[name](section["figures"]))
        for note in section["notes"]:
            print(f"\n_{note}_")


if __name__ == "__main__":
    main(sys.argv[1:])
