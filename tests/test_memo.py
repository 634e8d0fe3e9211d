"""retrieval.memo: built once per owner and key, read-only arrays, masks matched by identity,
values gone with their owner."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from retrieval import memo as memo_module
from retrieval.memo import memo


class Owner:
    """Any weakly referenceable object stands for a candidate table here."""


def counting(value):
    calls = []

    def build():
        calls.append(1)
        return value() if callable(value) else value
    return build, calls


def test_built_once_per_owner_and_key():
    a, b = Owner(), Owner()
    build, calls = counting(lambda: np.arange(3))
    first = memo(a, ("tie order",), build)
    assert memo(a, ("tie order",), build) is first
    assert len(calls) == 1
    memo(b, ("tie order",), build)          # another owner: built again
    memo(a, ("visible", 20), build)         # another key: built again
    assert len(calls) == 3


def test_arrays_come_back_read_only_alone_or_in_a_tuple():
    owner = Owner()
    alone = memo(owner, "one", lambda: np.zeros(2))
    pair = memo(owner, "two", lambda: (np.zeros(2), np.ones(2), "text"))
    for array in (alone, pair[0], pair[1]):
        with pytest.raises(ValueError):
            array[0] = 5.0
    assert pair[2] == "text"


def test_a_mask_is_matched_by_identity_not_by_value():
    owner = Owner()
    mask = np.array([True, False, True])
    build, calls = counting(lambda: np.flatnonzero(mask))
    assert memo(owner, ("visible index",), build, along=mask).tolist() == [0, 2]
    memo(owner, ("visible index",), build, along=mask)
    assert len(calls) == 1
    memo(owner, ("visible index",), build, along=mask.copy())  # equal values, another array
    assert len(calls) == 2


def test_values_along_a_mask_do_not_push_out_the_owners_own():
    owner = Owner()
    build, calls = counting(1)
    memo(owner, "kept", build)
    for depth in range(2 * memo_module.SIZE):  # routed query sets: a fresh mask every call
        memo(owner, ("normalise", depth), lambda: 0.0, along=np.ones(2, dtype=bool))
    memo(owner, "kept", build)
    assert len(calls) == 1


def test_past_size_the_owners_values_are_dropped_and_built_again():
    owner = Owner()
    build, calls = counting(1)
    memo(owner, "first", build)
    for i in range(memo_module.SIZE):
        memo(owner, ("other", i), lambda: i)
    memo(owner, "first", build)
    assert len(calls) == 2


def test_values_go_with_their_owner():
    owner = Owner()
    value = weakref.ref(memo(owner, "x", lambda: np.zeros(1)))
    gc.collect()
    assert value() is not None  # kept while the owner lives
    del owner
    gc.collect()
    assert value() is None
