"""Degraded mode: every named pipeline with the embedder down (keyword-only), next to the same
pipeline with vectors, on one dataset's judged queries.

    python -m bench.degraded DATASET [--embedder minilm] [--pool-depth 50]

The keyword-only pool is what ``build_candidates`` retrieves when the index has no embedder
(``retrieval.candidates._embed_queries``: "embedder unavailable: keyword-only"): no query
vector, BM25 lists only. Scores are ``eval.metrics.measure`` (equal to ranx), over the queries
``eval.stores.judgments.effective_qrels`` counts. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses

from eval.metrics.measure import judge, mean_metrics
from eval.stores.judgments import effective_qrels
from eval.stores.pool import load_pool
from retrieval.candidates import build_candidates
from retrieval.dataset import load_dataset
from retrieval.index import open_index
from retrieval.pipeline import PIPELINES, run_pipeline

METRICS = ("ndcg@5", "recall@10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--pool-depth", type=int, default=50)
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    used = effective_qrels(dataset)
    normal = load_pool(dataset, args.embedder, args.pool_depth)
    blind = dataclasses.replace(open_index(dataset, args.embedder), embedder=None)
    degraded = build_candidates(blind, dataset.queries, args.pool_depth)
    print(f"{dataset.name}, {args.embedder}, pool depth {args.pool_depth}, "
          f"judgments: {used.label}; degraded: {'; '.join(degraded.degraded[0])}\n")
    columns = " | ".join(f"{m} with vectors | {m} keyword-only" for m in METRICS)
    print(f"| pipeline | {columns} |")
    print("|---|" + "---|---|" * len(METRICS))
    for name, config in PIPELINES.items():
        cells = []
        scores = [mean_metrics(c, judge(c, used.qrels), run_pipeline(c, config).ranking, METRICS)
                  for c in (normal, degraded)]
        for m in METRICS:
            cells += [f"{scores[0][m]:.4f}", f"{scores[1][m]:.4f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
