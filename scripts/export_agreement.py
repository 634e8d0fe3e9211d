"""Reproduce QUALITY.md "Exports checked against each engine's own code": every exporter's output
run by its engine's fusion code (Qdrant: qdrant-client's local mode; OpenSearch, Weaviate: the
ports in tests/) on one dataset, each query's top k compared with our fusion of the same lists.

    PYTHONPATH=. python scripts/export_agreement.py datasets/devmem [--embedder minilm]

Prints one line per check: same order, tie order only, differing queries. "before" lines run the
function the export used to claim on the same lists.
"""

from __future__ import annotations

import argparse
import json

from eval.export import export_config
from eval.export.qdrant import verify
from eval.stores.pool import load_pool
from retrieval.dataset import load_dataset
from tests.eval.export.test_export_engines import compare, config_of, opensearch_top, weaviate_top


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset")
    parser.add_argument("--embedder", default="minilm")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset)
    pool = load_pool(dataset, args.embedder, pool_depth=100)
    print(f"{args.dataset} ({args.embedder}): {len(dataset.queries)} queries  same / tie order / differ")

    def show(engine: str, what: str, same: int, ties: int, differ: int) -> None:
        print(f"{engine:10} {what:58} {same:4} {ties:4} {differ:4}")

    weighted = config_of("rrf", rrf__w_dense=2.0, rrf__weighting="qdrant")
    for what, config, ours in [("rrf", config_of("rrf"), None), ("rrf qdrant weighting 2:1", weighted, None),
                               ("before: same request, multiply weighting 2:1", weighted,
                                config_of("rrf", rrf__w_dense=2.0)),
                               ("dbsf", config_of("dbsf"), None)]:
        a = verify(dataset, args.embedder, config, pool=pool, ours=ours)
        show("qdrant", what, a.same, a.tie_order, len(a.differ))
    for what, changes in [("rrf", {}), ("rrf w_dense 3", {"rrf__w_dense": 3.0})]:
        config = config_of("rrf", **changes)
        s, t, d = compare(pool, config, opensearch_top(pool, json.loads(export_config(config, "opensearch"))))
        show("opensearch", what, s, t, len(d))
    for mean in ("arithmetic", "geometric", "harmonic"):
        config = config_of("opensearch", mean__mean=mean)
        exported = opensearch_top(pool, json.loads(export_config(config, "opensearch")))
        s, t, d = compare(pool, config, exported)
        show("opensearch", f"{mean}_mean", s, t, len(d))
        s, t, d = compare(pool, config_of("opensearch", mean__mean=mean, mean__semantics="rwb"), exported)
        show("opensearch", f"before: {mean}_mean against semantics = rwb", s, t, len(d))
    for what, label, changes in [("relative-score", "relative-score", {}), ("wsum", "wsum", {}),
                                 ("combsum", "combsum", {}), ("rrf rrf_k 59", "rrf", {"rrf__rrf_k": 59.0}),
                                 ("rrf rrf_k 59 w_dense 2", "rrf", {"rrf__rrf_k": 59.0, "rrf__w_dense": 2.0})]:
        config = config_of(label, **changes)
        exported = json.loads(export_config(config, "weaviate"))
        s, t, d = compare(pool, config, weaviate_top(pool, exported))
        show("weaviate", what, s, t, len(d))
        exported.pop("server")
        s, t, d = compare(pool, config, weaviate_top(pool, exported))
        show("weaviate", f"before: {what}, legs 100 deep (default)", s, t, len(d))


if __name__ == "__main__":
    main()
