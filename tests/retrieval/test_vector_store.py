"""The in-memory exact scan below the ANN threshold returns what LanceDB's own flat search
returns: the same top 10, the same similarities, the same prefilter semantics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval.vector_store import ANN_THRESHOLD, Row, RowColumns, VectorFilters, VectorStore, ann_index

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


def test_the_ann_index_is_built_through_lancedbs_config_api(tmp_path):
    """Above the threshold (lowered to 1,000 for this test) the index is created with
    ``create_index("vector", config=...)``: LanceDB's legacy ``create_index(metric=…)`` form
    warns with a DeprecationWarning, this one does not."""
    import warnings

    rng = np.random.default_rng(11)
    n, dim = 1000, 32
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    rows = [Row(f"a{i:04d}", "global", "", "", math.nan) for i in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        built = VectorStore.build(tmp_path, rows, vectors, ann_threshold=1000)
    reopened = VectorStore.open(tmp_path)
    assert built.indexed and reopened.indexed
    assert reopened.index_type == ann_index(n, dim).__class__.__name__ == reopened._table.list_indices()[0].index_type
    # a stored vector finds itself first: cosine similarity 1 (refined on the exact vectors)
    top = reopened.search(vectors[123], 3)
    assert top[0][0] == "a0123" and top[0][1] == pytest.approx(1.0, abs=1e-5)


def test_row_columns_build_the_same_table_as_row_objects(tmp_path):
    """``RowColumns`` (one array per field, no per-row objects) and a list of ``Row`` give the
    same table: same ids, metadata and search results."""
    import pyarrow as pa

    rng = np.random.default_rng(5)
    n, dim = 200, 16
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    created = np.where(np.arange(n) % 4 == 0, np.nan, 1.7e9 + np.arange(n))
    rows = [Row(f"r{i:03d}", "project" if i % 2 else "global", f"p{i % 3}", "", float(created[i])) for i in range(n)]
    columns = RowColumns(pa.array([r.id for r in rows]), np.array([r.scope for r in rows]),
                         [r.project for r in rows], pa.repeat("", n), created)
    a = VectorStore.build(tmp_path / "a", rows, vectors)
    b = VectorStore.build(tmp_path / "b", columns, vectors)
    ta, tb = a._table.to_arrow(), b._table.to_arrow()
    assert ta.drop_columns(["created_ts"]).equals(tb.drop_columns(["created_ts"]))
    assert np.array_equal(ta["created_ts"].to_numpy(), tb["created_ts"].to_numpy(), equal_nan=True)  # NaN: undated
    query = rng.standard_normal(dim).astype(np.float32)
    flt = VectorFilters(scope="project", created_after=1.7e9 + 50)
    assert b.search(query, 10, flt) == a.search(query, 10, flt)
    assert [d for d, _ in b.lance_search(query, 10, flt)] == [d for d, _ in a.search(query, 10, flt)]
    with pytest.raises(ValueError):
        VectorStore.build(tmp_path / "c", rows[:-1], vectors)  # 199 rows, 200 vectors


def test_equal_similarities_keep_table_order_at_every_depth(tmp_path):
    """Each vector is stored twice (rows 2i and 2i+1), so every similarity is tied with
    another. A search of depth d is the first d rows of a deeper search, the earlier row of a
    tie first — also when a tie straddles the cut (depth 1, 3, 5, …)."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((60, 24)).astype(np.float32)
    vectors = np.repeat(base, 2, axis=0)  # rows 0,1 = base[0]; rows 2,3 = base[1]; …
    rows = [Row(f"t{i:03d}", "global", "", "", math.nan) for i in range(len(vectors))]
    store = VectorStore.build(tmp_path, rows, vectors)
    query = rng.standard_normal(24).astype(np.float32)
    deep = store.search(query, 40)
    best = int(np.argmax(base @ query / np.linalg.norm(base, axis=1)))
    assert [d for d, _ in deep[:2]] == [f"t{2 * best:03d}", f"t{2 * best + 1:03d}"]
    for depth in range(1, 40):
        assert store.search(query, depth) == deep[:depth]
