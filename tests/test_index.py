"""Building, reusing and repairing indexes (real Tantivy, LanceDB and MiniLM), each test
under its own RWB_HOME so that the embedding cache starts empty."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from retrieval.bm25 import ANALYZER_VERSION
from retrieval.dataset import load_dataset
from retrieval.index import index_dir, open_index, read_manifest
from retrieval.pipeline import search


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("RWB_HOME", str(home))
    return home


def test_index_lives_under_rwb_home(home, tiny_copy):
    handle = open_index(load_dataset(tiny_copy))
    assert handle.path.is_relative_to(home)
    assert (home / "embeddings.sqlite").is_file()


def test_unchanged_dataset_is_not_encoded_or_rebuilt_again(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    first = open_index(dataset)
    assert first.embedder.encoded == 10
    second = open_index(load_dataset(tiny_copy))
    assert second.embedder.encoded == 0
    assert second.path == first.path


def test_manifest_records_fingerprint_model_and_analyzer(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    handle = open_index(dataset)
    manifest = json.loads((handle.path / "manifest.json").read_text("utf-8"))
    assert manifest["dataset_fingerprint"] == dataset.fingerprint
    assert manifest["model"] == "minilm"
    assert manifest["analyzer"] == ANALYZER_VERSION
    assert manifest["documents"] == 10
    assert read_manifest(index_dir(dataset, "minilm")) == manifest
    assert handle.vectors.shape == (10, 384)
    assert np.allclose(np.linalg.norm(handle.vectors, axis=1), 1.0, atol=1e-5)
    assert handle.store.count() == 10 and handle.bm25.num_docs == 10


def test_changed_corpus_rebuilds_and_encodes_only_the_changed_text(home, tiny_copy):
    first = open_index(load_dataset(tiny_copy))
    corpus = tiny_copy / "corpus.jsonl"
    lines = corpus.read_text("utf-8").splitlines()
    doc = json.loads(lines[-1])
    doc["text"] = "Zebras graze on the savanna at dawn."
    lines[-1] = json.dumps(doc)
    corpus.write_text("\n".join(lines) + "\n", "utf-8")
    changed = load_dataset(tiny_copy)
    second = open_index(changed)
    assert second.path != first.path
    assert second.manifest["dataset_fingerprint"] == changed.fingerprint != first.manifest["dataset_fingerprint"]
    assert second.embedder.encoded == 1
    assert search(second, "zebras savanna", "bm25").results[0].id == "d10"
    # a handle opened before the rebuild keeps working (its build is kept for open readers)
    assert first.path.is_dir()
    assert [doc_id for doc_id, _ in first.bm25.search("ball python", 3)][0] == "d10"


def test_deleted_bm25_folder_is_detected_and_rebuilt(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    first = open_index(dataset)
    shutil.rmtree(first.path / "bm25")
    notices = []
    second = open_index(dataset, on_notice=notices.append)
    assert len(notices) == 1 and "damaged" in notices[0]
    assert second.path != first.path
    assert second.embedder.encoded == 0  # the vectors come from the embedding cache
    assert [doc_id for doc_id, _ in second.bm25.search("ERR_CONN_REFUSED", 1)] == ["d03"]


def test_truncated_vectors_are_detected_and_rebuilt(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    first = open_index(dataset)
    np.save(first.path / "vectors.npy", np.zeros((3, 384), dtype=np.float32))
    notices = []
    second = open_index(dataset, on_notice=notices.append)
    assert notices and "vectors.npy holds 3 rows" in notices[0]
    assert second.vectors.shape == (10, 384)


def test_rebuild_flag_makes_a_new_build(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    first = open_index(dataset)
    second = open_index(dataset, rebuild=True)
    assert second.path != first.path
    assert second.embedder.encoded == 0


def test_unavailable_embedder_gives_a_keyword_only_index(home, tiny_copy, tmp_path):
    dataset = load_dataset(tiny_copy)
    handle = open_index(dataset, str(tmp_path / "no-such-model"))
    assert handle.embedder is None and handle.vectors is None and handle.store is None
    assert handle.manifest["model"] is None
    assert handle.degraded and "keyword-only" in handle.degraded[0]
    response = search(handle, "ERR_CONN_REFUSED", "rrf")
    assert response.degraded
    assert response.results[0].id == "d03"
    assert response.results[0].components == pytest.approx({"sparse": 1 / (60 + 0 + 1)})
