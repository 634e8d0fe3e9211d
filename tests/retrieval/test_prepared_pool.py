"""The prepared pool (retrieval/candidates.py): what a candidate table builds with itself — tie
order, best_rank, the keyword-match views — and the per-depth values it keeps."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json

import numpy as np
import pytest

from retrieval.candidate_table import NOT_RETURNED, POOL_MAGIC, Candidates
from tests.conftest import make_candidates

# query 0: d3 dense 0 · d1 keyword 2 · d2 dense 4 and keyword 1 · d0 neither (a fast-path row);
# query 1: d1 dense 1 · d0 keyword 0, also the AND list's 0. Rows are given out of id order.
ROWS = [
    [{"id": "d3", "dense_rank": 0}, {"id": "d1", "bm25_rank": 2}, {"id": "d2", "dense_rank": 4, "bm25_rank": 1},
     {"id": "d0", "via_fast": True}],
    [{"id": "d1", "dense_rank": 1}, {"id": "d0", "bm25_rank": 0, "bm25_all_rank": 0}],
]


def table() -> Candidates:
    return make_candidates(ROWS, pool_depth=5)


def test_best_rank_is_each_rows_best_path_rank_and_visibility_one_comparison():
    c = table()
    assert c.best_rank.tolist() == [0, 2, 1, NOT_RETURNED, 1, 0]
    assert c.visible(2).tolist() == [True, False, True, False, True, True]
    for depth in range(1, 6):  # the mask the two paths' ranks give, at every depth
        by_path = ((c.dense_rank >= 0) & (c.dense_rank < depth)) | ((c.bm25_rank >= 0) & (c.bm25_rank < depth))
        assert np.array_equal(c.visible(depth), by_path)
    with pytest.raises(ValueError, match="exceeds the candidate pool depth 5"):
        c.visible(6)


def test_visible_rows_in_tie_order_per_query_made_once_per_depth():
    c = table()
    seen = c.at_depth(2)
    # query 0 sees d3 (row 0) and d2 (row 2), in id order d2, d3; query 1 d1 (row 4), d0 (row 5): d0, d1
    assert seen.order.tolist() == [2, 0, 5, 4] and seen.offsets.tolist() == [0, 2, 4]
    assert seen.index.tolist() == [0, 2, 4, 5]
    assert c.at_depth(2) is seen and c.visible(2) is seen.mask
    assert c.tie_order.tolist() == [3, 1, 2, 0, 5, 4]
    with pytest.raises(ValueError):
        seen.mask[0] = False  # read-only: every session thread reads the same arrays


def test_keyword_views_are_made_with_the_table_and_share_its_order():
    c = table()
    every = c.with_keyword_match("all")
    assert c.with_keyword_match("all") is every and c.with_keyword_match("any") is c
    assert every.bm25_rank.tolist() == [-1, -1, -1, -1, -1, 0]
    assert every.best_rank.tolist() == [0, NOT_RETURNED, 4, NOT_RETURNED, 1, 0]
    assert every.tie_order is c.tie_order and every.with_keyword_match("any") is every
    assert every.visible(2).tolist() == [True, False, False, False, True, True]


def test_a_changed_copy_prepares_itself_afresh():
    c = table()
    c.visible(1)
    moved = dataclasses.replace(c, cols={**c.cols, "dense_rank": np.array([3, -1, 4, -1, 0, -1], dtype=np.int32)})
    assert moved.best_rank.tolist() == [3, 2, 1, NOT_RETURNED, 0, 0]
    assert moved.visible(1).tolist() == [False, False, False, False, True, True]
    assert c.visible(1).tolist() == [True, False, False, False, False, True]


def test_values_along_a_mask_are_kept_only_for_the_tables_own():
    c = table()
    calls = []

    def build():
        calls.append(1)
        return np.zeros(2)

    c.derived(("normalise", 2), build, along=c.visible(2))
    c.derived(("normalise", 2), build, along=c.visible(2))
    assert len(calls) == 1
    c.derived(("normalise", 2), build, along=c.visible(2).copy())  # equal values, another array
    assert len(calls) == 2


def test_a_pool_stored_with_learned_routes_in_its_metadata_still_loads(tmp_path):
    """Pools written before routes became an argument hold ``learned_route: null``."""
    c = table()
    c.save(tmp_path / "pool.npz")
    with np.load(io.BytesIO((tmp_path / "pool.npz").read_bytes()[len(POOL_MAGIC) + 32:])) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["meta"] = np.array(json.dumps({**json.loads(str(arrays["meta"])), "learned_route": None}))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    payload = buffer.getvalue()
    (tmp_path / "old.npz").write_bytes(POOL_MAGIC + hashlib.sha256(payload).digest() + payload)
    old = Candidates.load(tmp_path / "old.npz")
    assert old.query_ids == c.query_ids and np.array_equal(old.visible(2), c.visible(2))


def test_a_pickled_table_carries_its_fields_and_prepares_itself_again():
    import pickle

    c = table()
    c.visible(2)
    c.derived("kept", lambda: np.ones(3))
    copy = pickle.loads(pickle.dumps(c))
    assert copy.__dict__["_kept"] == {} and copy.__dict__["_depths"] == {}
    assert np.array_equal(copy.visible(2), c.visible(2)) and copy.depth_of(copy.visible(2)) is copy.at_depth(2)
    assert copy.with_keyword_match("all").bm25_rank.tolist() == c.with_keyword_match("all").bm25_rank.tolist()
