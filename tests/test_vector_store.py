"""The in-memory exact scan below the ANN threshold returns what LanceDB's own flat search
returns: the same top 10, the same similarities, the same prefilter semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.vector_store import ANN_THRESHOLD, Row, VectorFilters, VectorStore

N, DIM = 3000, 48


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(7)
    # rows of different lengths: cosine must normalise both sides, as LanceDB does
    vectors = rng.standard_normal((N, DIM)).astype(np.float32) * rng.uniform(0.5, 3.0, (N, 1)).astype(np.float32)
    created = rng.uniform(1.7e9, 1.8e9, N)
    created[::9] = math.nan  # undated memories
    rows = [Row(f"m{i:05d}", "project" if i % 3 == 0 else "global", f"p{i % 4}", f"g{i % 5}", float(created[i]))
            for i in range(N)]
    return VectorStore.build(tmp_path_factory.mktemp("lance"), rows, vectors), rng


FILTERS = [VectorFilters(), VectorFilters(scope="project"), VectorFilters(project="p2", group="g1"),
           VectorFilters(created_after=1.75e9), VectorFilters(created_before=1.72e9),
           VectorFilters(scope="global", created_after=1.71e9, created_before=1.79e9),
           VectorFilters(project="no-such-project")]


def test_the_scan_serves_tables_below_the_ann_threshold(store):
    vector_store, _ = store
    assert N < ANN_THRESHOLD and not vector_store.indexed


@pytest.mark.parametrize("flt", FILTERS, ids=str)
def test_scan_equals_lancedb_flat_search_top_10(store, flt):
    vector_store, rng = store
    for _ in range(30):
        query = rng.standard_normal(DIM).astype(np.float32)
        scan = vector_store.search(query, 10, flt)
        lance = vector_store.lance_search(query, 10, flt)
        assert [d for d, _ in scan] == [d for d, _ in lance]
        assert np.allclose([s for _, s in scan], [s for _, s in lance], atol=1e-6)


def test_an_undated_memory_passes_created_after_as_in_lancedb(store):
    vector_store, rng = store
    query = rng.standard_normal(DIM).astype(np.float32)
    flt = VectorFilters(created_after=1.79e9)
    scan = {d for d, _ in vector_store.search(query, N, flt)}
    lance = {d for d, _ in vector_store.lance_search(query, N, flt)}
    assert scan == lance
    # every 9th memory is undated (m00000, m00009, …): LanceDB keeps them under created_after
    assert {f"m{i:05d}" for i in range(0, N, 9)} <= scan


def test_a_hostile_filter_value_is_still_refused(store):
    vector_store, rng = store
    with pytest.raises(ValueError):
        vector_store.search(rng.standard_normal(DIM).astype(np.float32), 5, VectorFilters(scope="a\x00b"))
    assert vector_store.search(rng.standard_normal(DIM).astype(np.float32), 5,
                               VectorFilters(scope="' OR '1'='1")) == []
