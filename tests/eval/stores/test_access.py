"""Seed 000's access-count write-back from ``rwb search --write-back`` (``eval.stores.access``):
every memory returned gets access_count + 1, kept under $RWB_HOME, read by the next search.

On the tiny fixture with ``seed-salience`` (hybrid RRF → salience; all 10 memories are returned
for ``ERR_CONN_REFUSED``, within 1500 tokens): salience's access term for d03 is
0.10 · ln(access + 1) / ln(max + 2) with max the largest count among the query's candidates
(d01's 12): 0.10 · ln 8 / ln 14 = 0.078793 before; after one write-back every memory has one
more (d03 8, d01 13): 0.10 · ln 9 / ln 15 = 0.081136.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from eval.stores.access import AccessStore, with_access_counts
from retrieval.dataset import load_dataset
from tests.conftest import rwb_here

ROOT = Path(__file__).resolve().parents[3]
QUERY = "ERR_CONN_REFUSED"


def search(home, root, *flags) -> dict:
    proc = rwb_here(home, "search", str(root), QUERY, "--pipeline", "seed-salience", "--json", *flags)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_write_back_adds_one_to_each_returned_memory_and_the_next_search_reads_it(tmp_path,
                                                                                    tiny_copy):
    home = tmp_path / "home"
    corpus = (tiny_copy / "corpus.jsonl").read_bytes()
    first = search(home, tiny_copy, "--write-back")
    returned = [r["id"] for r in first["results"]]
    assert sorted(returned) == [f"d{i:02d}" for i in range(1, 11)]
    d03 = next(r for r in first["results"] if r["id"] == "d03")
    assert d03["components"]["access"] == pytest.approx(0.10 * math.log(8) / math.log(14), abs=1e-6)
    store = AccessStore(load_dataset(tiny_copy), home)
    assert first["write_back"] == {"memories": 10, "store": str(store.path)}
    assert store.added() == {doc_id: 1 for doc_id in returned}
    assert (tiny_copy / "corpus.jsonl").read_bytes() == corpus   # the dataset folder is untouched

    second = search(home, tiny_copy, "--no-write-back")             # reads, writes nothing
    d03 = next(r for r in second["results"] if r["id"] == "d03")
    assert d03["components"]["access"] == pytest.approx(0.10 * math.log(9) / math.log(15), abs=1e-6)
    assert "write_back" not in second and store.added() == {doc_id: 1 for doc_id in returned}

    third = search(home, tiny_copy)    # seed 000's own pipeline writes back on every search
    assert third["write_back"]["memories"] == 10
    assert store.added() == {doc_id: 2 for doc_id in returned}
    proc = rwb_here(home, "search", str(tiny_copy), QUERY, "--pipeline", "rrf", "--json")
    assert "write_back" not in json.loads(proc.stdout)              # other pipelines: only when asked
    assert store.added() == {doc_id: 2 for doc_id in returned}


def test_access_counts_are_the_corpus_plus_the_increments(tiny, tmp_path):
    store = AccessStore(tiny, tmp_path)
    assert store.write_back(["d03", "d03", "d01", "nope"]) == 2     # each once; unknown ids ignored
    store.write_back(["d03"])
    counts = {d.id: d.access_count for d in with_access_counts(tiny, store.added()).documents}
    assert (counts["d03"], counts["d01"], counts["d02"]) == (7 + 2, 12 + 1, 5)
    assert json.loads(store.path.read_text())["writes"] == 2


def test_a_damaged_store_is_named(tiny, tmp_path):
    store = AccessStore(tiny, tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text('{"added": {"d03": -1}}')
    with pytest.raises(ValueError, match="damaged"):
        store.added()
