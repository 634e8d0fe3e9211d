"""Each exporter's output run by the engine's own fusion code (Qdrant: qdrant-client's local
mode; OpenSearch and Weaviate: the ports in ``tests/opensearch_port.py`` /
``tests/weaviate_port.py``), on devmem-sized data: devmem's 348 notes and 120 queries with
seeded random 32-d vectors (``--embedder precomputed``, no model loaded) and our Tantivy BM25.

Every query's top k must equal our fusion of the very lists the engine fused, ties aside (a
position where the two differ must hold documents our fusion scores equal)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from eval.export import export_config
from eval.stores.configs import resolve_config
from retrieval.pipeline import run_pipeline, with_params
from tests import opensearch_port, weaviate_port
from tests.conftest import ROOT

TIE = 1e-6  # relative: scores this close are a tie (the engines compute in float32)


@pytest.fixture(scope="module")
def devmem(tmp_path_factory, rwb_home):
    """devmem with seeded random vectors, and its candidate pool 100 deep per path."""
    from eval.stores.pool import load_pool
    from retrieval.dataset import load_dataset

    root = tmp_path_factory.mktemp("export-engines") / "devmem"
    shutil.copytree(ROOT / "datasets" / "devmem", root)
    dataset = load_dataset(root)
    rng = np.random.default_rng(29)
    (root / "vectors").mkdir()
    np.save(root / "vectors" / "corpus.npy", rng.normal(size=(len(dataset.documents), 32)).astype(np.float32))
    np.save(root / "vectors" / "queries.npy", rng.normal(size=(len(dataset.queries), 32)).astype(np.float32))
    (root / "vectors" / "corpus_ids.txt").write_text("".join(d.id + "\n" for d in dataset.documents))
    (root / "vectors" / "queries_ids.txt").write_text("".join(q.id + "\n" for q in dataset.queries))
    dataset = load_dataset(root)
    return dataset, load_pool(dataset, "precomputed", pool_depth=100)


def config_of(label: str, **changes):
    config = resolve_config(label)
    for path, value in changes.items():
        config = with_params(config, {path.replace("__", "."): value})
    return config


def leg(pool, qi: int, path: str, depth: int) -> list[tuple[str, float]]:
    """One path's list for query ``qi`` from the pool, best first, cut at ``depth``."""
    rank = pool.dense_rank if path == "dense" else pool.bm25_rank
    score = pool.dense_sim if path == "dense" else pool.bm25_score
    rows = [r for r in range(pool.offsets[qi], pool.offsets[qi + 1]) if 0 <= rank[r] < depth]
    rows.sort(key=lambda r: rank[r])
    return [(pool.doc_ids[pool.doc_idx[r]], float(score[r])) for r in rows]


def compare(pool, config, engine_top) -> tuple[int, int, list[str]]:
    """``(same, tie order only, differing query ids)`` of ``engine_top(qi)`` (the engine's ids,
    best first) against our fusion of the pool's lists under ``config``."""
    run = run_pipeline(pool, config)
    same = ties = 0
    differ = []
    for qi, qid in enumerate(pool.query_ids):
        rows = run.ranking.for_query(qi)
        mine = [pool.doc_ids[pool.doc_idx[r]] for r in rows]
        theirs = engine_top(qi)
        if theirs == mine:
            same += 1
            continue
        ours = {pool.doc_ids[pool.doc_idx[r]]: float(run.scored.score[r])
                for r in range(pool.offsets[qi], pool.offsets[qi + 1])}
        if len(theirs) == len(mine) and all(
            abs(ours.get(a, -np.inf) - ours[b]) <= TIE * max(1e-12, abs(ours[b])) for a, b in zip(theirs, mine)
        ):
            ties += 1
        else:
            differ.append(qid)
    return same, ties, differ


# ---- Qdrant: qdrant-client's local mode runs Qdrant's own fusion ------------------------------

@pytest.mark.parametrize("label, changes", [
    ("rrf", {}),
    ("rrf", {"rrf__w_dense": 2.0, "rrf__weighting": "qdrant"}),
    ("rrf", {"rrf__w_dense": 0.5, "rrf__w_sparse": 1.5, "rrf__rrf_k": 10.0, "rrf__weighting": "qdrant"}),
    ("dbsf", {}),
])
def test_qdrant_runs_the_export_as_we_fuse(devmem, label, changes):
    from eval.export.qdrant import verify

    dataset, pool = devmem
    agreement = verify(dataset, "precomputed", config_of(label, **changes), pool=pool)
    assert agreement.queries == 120
    assert agreement.differ == (), agreement
    assert agreement.same + agreement.tie_order == 120


def test_qdrant_dbsf_keeps_scores_beyond_three_sigma(devmem):
    """Qdrant does not clip its DBSF scores: on these lists some hit lies beyond mean ± 3σ of its
    20-hit list, where a clipped norm would differ from Qdrant (the case the check above covers)."""
    from retrieval.fusion._base import normalise

    _, pool = devmem
    visible = np.ones(pool.n_rows, dtype=bool)
    value, hit = normalise(pool, visible, 20, "sparse", "dbsf")
    assert (value[hit] > 1.0).any()


def test_qdrant_refuses_weights_it_would_divide():
    with pytest.raises(ValueError, match="Qdrant's weight divides the rank"):
        export_config(config_of("rrf", rrf__w_dense=2.0), "qdrant")


# ---- OpenSearch: the neural-search port -----------------------------------------------------

def opensearch_top(pool, exported: dict):
    processor = exported["search_pipeline"]["body"]["phase_results_processors"][0]
    body = exported["search"]["body"]
    hybrid = body["query"]["hybrid"]
    depth = hybrid["pagination_depth"]
    assert hybrid["queries"][1]["knn"]["vector"]["k"] == depth
    return lambda qi: [d for d, _ in opensearch_port.hybrid(
        [leg(pool, qi, "sparse", depth), knn_scores(leg(pool, qi, "dense", depth))], processor)[:body["size"]]]


def knn_scores(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The k-NN query's scores as OpenSearch hands them on: space ``cosinesimil`` scores
    (1 + cos) / 2 (every engine since k-NN 2.19; OpenSearch documentation, "Spaces")."""
    return [(d, (1.0 + s) / 2.0) for d, s in hits]


@pytest.mark.parametrize("label, changes", [
    ("rrf", {}),
    ("rrf", {"rrf__w_dense": 3.0, "rrf__rrf_k": 20.0}),
    ("opensearch", {}),
    ("opensearch", {"mean__mean": "geometric", "mean__w_dense": 0.3, "mean__w_sparse": 0.7}),
    ("opensearch", {"mean__mean": "harmonic", "mean__w_dense": 0.7, "mean__w_sparse": 0.3}),
    ("opensearch", {"mean__mean": "geometric", "depth": 50}),
    ("opensearch", {"mean__norm": "l2"}),
    ("opensearch", {"mean__norm": "l2", "mean__mean": "geometric", "mean__w_dense": 0.3, "mean__w_sparse": 0.7}),
    ("opensearch", {"mean__norm": "l2", "mean__mean": "harmonic", "depth": 50}),
])
def test_opensearch_runs_the_export_as_we_fuse(devmem, label, changes):
    _, pool = devmem
    config = config_of(label, **changes)
    same, ties, differ = compare(pool, config, opensearch_top(pool, json.loads(export_config(config, "opensearch"))))
    assert differ == [] and same + ties == 120, (same, ties, differ)


@pytest.mark.parametrize("mean", ["geometric", "harmonic"])
def test_opensearch_refuses_means_under_our_semantics(devmem, mean):
    """Under mean.semantics = 'rwb' OpenSearch would rank most queries differently; the export
    refuses, naming the difference."""
    _, pool = devmem
    ours = config_of("opensearch", mean__mean=mean, mean__semantics="rwb")
    with pytest.raises(ValueError, match="mean.semantics = 'rwb'.*OpenSearch replaces only a 0"):
        export_config(ours, "opensearch")
    theirs = json.loads(export_config(replace(ours, params=replace(ours.params, semantics="opensearch")), "opensearch"))
    _, _, differ = compare(pool, ours, opensearch_top(pool, theirs))
    assert len(differ) > 60  # what the export used to promise


# ---- Weaviate: the Go port -------------------------------------------------------------------

def weaviate_top(pool, exported: dict):
    setting = exported.get("server", {}).get("QUERY_HYBRID_MAXIMUM_RESULTS",
                                             weaviate_port.DEFAULT_QUERY_HYBRID_MAXIMUM_RESULTS)
    depth = weaviate_port.leg_depth(exported["limit"], setting)
    return lambda qi: [d for d, _ in weaviate_port.hybrid(
        exported, leg(pool, qi, "sparse", depth), leg(pool, qi, "dense", depth))]


@pytest.mark.parametrize("label, changes", [
    ("relative-score", {}),
    ("wsum", {"wsum__w_dense": 0.6, "wsum__w_sparse": 0.2}),
    ("combsum", {}),
    ("rrf", {"rrf__rrf_k": 59.0}),
    ("rrf", {"rrf__rrf_k": 59.0, "rrf__w_dense": 2.0}),
    ("relative-score", {"depth": 40}),
])
def test_weaviate_runs_the_export_as_we_fuse(devmem, label, changes):
    _, pool = devmem
    config = config_of(label, **changes)
    same, ties, differ = compare(pool, config, weaviate_top(pool, json.loads(export_config(config, "weaviate"))))
    assert differ == [] and same + ties == 120, (same, ties, differ)


def test_weaviate_default_leg_depth_is_not_the_pipelines(devmem):
    """Without the setting Weaviate fetches 100 per leg, not the pipeline's 20: most queries differ."""
    _, pool = devmem
    config = config_of("rrf", rrf__rrf_k=59.0)
    exported = json.loads(export_config(config, "weaviate"))
    exported.pop("server")
    _, _, differ = compare(pool, config, weaviate_top(pool, exported))
    assert len(differ) > 60


# ---- every exporter refuses what its engine cannot mean ---------------------------------------

ENGINES = ["lancedb", "opensearch", "qdrant", "weaviate"]


@pytest.mark.parametrize("engine", ENGINES)
def test_rrf_with_both_weights_zero_is_refused_everywhere(engine):
    config = config_of("rrf", rrf__w_dense=0.0, rrf__w_sparse=0.0, rrf__rrf_k=59.0)
    with pytest.raises(ValueError, match="both path weights 0"):
        export_config(config, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_weight_rounding_to_zero_is_refused(engine):
    """w_dense = 1e-9: OpenSearch's 6-decimal shares would be [1.0, 0.0] (the vector path dropped)."""
    label = {"opensearch": "opensearch", "qdrant": "rrf", "lancedb": "wsum", "weaviate": "wsum"}[engine]
    fusion = resolve_config(label).fusion
    changes = {f"{fusion}__w_dense": 1e-13 if engine in ("lancedb", "weaviate") else 1e-9, f"{fusion}__w_sparse": 1.0}
    if engine == "qdrant":  # Qdrant takes the raw weights: nothing is rounded
        changes["rrf__weighting"] = "qdrant"
        assert json.loads(export_config(config_of(label, **changes), "qdrant"))["body"]["query"]["rrf"][
            "weights"] == [1e-9, 1.0]
        return
    with pytest.raises(ValueError, match="rounds to 0"):
        export_config(config_of(label, **changes), engine)


def test_cli_refusals_are_one_line(capsys, tmp_path):
    from eval.cli import main

    toml = tmp_path / "zero.toml"
    toml.write_text('base = "opensearch"\n\n[mean]\nw_dense = 1e-9\n')
    assert main(["export", str(toml), "--to", "opensearch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error: opensearch cannot express") and err.count("\n") == 1
    assert "mean.w_dense = 1e-09" in err
