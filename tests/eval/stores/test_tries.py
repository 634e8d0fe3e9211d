"""The try store: tries kept per dataset with their scores, restorable, named and annotated;
notes on queries; a damaged file is named, never silently replaced."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.stores.configs import resolve_config
from eval.stores.tries import TryStore
from retrieval.dataset import load_dataset
from retrieval.pipeline import with_params

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"


@pytest.fixture
def store(tmp_path):
    return TryStore(load_dataset(TINY), tmp_path)


def test_tries_are_numbered_restorable_and_not_repeated(store):
    start = resolve_config("rrf")
    k10 = with_params(start, {"rrf.rrf_k": 10.0})
    first = store.add(k10, "rrf", {"rrf.rrf_k": 10.0}, {"ndcg@5": 0.5}, "vector", {"ndcg@5": 0.25})
    again = store.add(k10, "rrf", {"rrf.rrf_k": 10.0}, {"ndcg@5": 0.5}, "vector", {"ndcg@5": 0.25})
    second = store.add(start, "rrf", {}, {"ndcg@5": 0.4}, "vector", {"ndcg@5": 0.25})
    assert (first["id"], again["id"], second["id"]) == (1, 1, 2)
    assert store.config(1) == k10 and store.config(2) == start
    assert [t["metrics"]["ndcg@5"] for t in store.tries()] == [0.5, 0.4]


def test_name_notes_and_query_notes(store):
    store.add(resolve_config("rrf"), "rrf", {}, {"ndcg@5": 0.5}, "vector", {"ndcg@5": 0.25})
    store.describe(1, name="baseline-ish", notes="  first look  ")
    assert (store.get(1)["name"], store.get(1)["notes"]) == ("baseline-ish", "first look")
    with pytest.raises(ValueError, match="at most 64"):
        store.describe(1, name="x" * 65)
    with pytest.raises(ValueError, match="no try #7"):
        store.describe(7, name="x")
    store.note_query("q1", "d03 answers it")
    store.note_query("q2", "odd")
    store.note_query("q2", "")
    assert store.query_notes() == {"q1": "d03 answers it"}


def test_damaged_file_is_named(store):
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="damaged"):
        store.tries()
