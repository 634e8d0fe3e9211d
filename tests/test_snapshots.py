"""Frozen snapshots keep the rankings and per-query values they were taken with."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.stores.configs import resolve_config
from eval.stores.pool import load_pool
from eval.stores.snapshots import SnapshotStore, compare, judgments_version
from retrieval.dataset import load_dataset
from retrieval.pipeline import response_for, run_pipeline

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(tmp_path_factory.mktemp("snap-home")))
        yield load_pool(load_dataset(TINY), "minilm")


def test_freeze_keeps_rankings_and_values_and_compare_gives_per_query_deltas(pool, tmp_path):
    dataset = load_dataset(TINY)
    judged = judge(pool, dataset.qrels)
    store = SnapshotStore(dataset, tmp_path)
    vector = evaluate_config(pool, judged, resolve_config("vector"))
    rrf = evaluate_config(pool, judged, resolve_config("rrf"))
    a = store.freeze("vector-then", vector, pool, dataset.qrels)
    store.freeze("rrf-then", rrf, pool, dataset.qrels)
    assert store.names() == ["rrf-then", "vector-then"]
    with pytest.raises(ValueError, match="exists"):
        store.freeze("vector-then", vector, pool, dataset.qrels)
    shown = [r.id for r in response_for(pool, run_pipeline(pool, resolve_config("vector")), 0,
                                        dataset.documents).results]
    assert store.load("vector-then")["queries"]["q1"]["ranking"] == shown[:10]
    assert a["judgments"] == judgments_version(dataset.qrels)
    rows = {r["query"]: r for r in compare(store.load("vector-then"), store.load("rrf-then"), "ndcg@5")}
    for qi, qid in enumerate(pool.query_ids):
        assert rows[qid]["A"] == pytest.approx(vector.values["ndcg@5"][qi], abs=1e-6)
        assert rows[qid]["delta"] == pytest.approx(rrf.values["ndcg@5"][qi] - vector.values["ndcg@5"][qi],
                                                   abs=2e-6)


def test_bad_names_are_refused(pool, tmp_path):
    store = SnapshotStore(load_dataset(TINY), tmp_path)
    with pytest.raises(ValueError, match="invalid name"):
        store.load("../escape")
