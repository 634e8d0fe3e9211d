"""Building, reusing and repairing indexes (real Tantivy, LanceDB and MiniLM), each test
under its own RWB_HOME so that the embedding cache starts empty."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from eval.stores.pool import load_pool, pool_path
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


def test_each_analyzer_has_its_own_index_and_switching_back_rebuilds_nothing(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    unigram = open_index(dataset, analyzer="unigram")
    bigram = open_index(dataset, analyzer="bigram")
    assert (unigram.analyzer, bigram.analyzer) == ("unigram", "bigram")
    assert (unigram.manifest["analyzer"], bigram.manifest["analyzer"]) == ("bilingual-v1", "bilingual-bigram-v1")
    assert index_dir(dataset, "minilm", "unigram") != index_dir(dataset, "minilm", "bigram")
    assert bigram.embedder.encoded == 0  # the vectors come from the embedding cache
    again = open_index(dataset, analyzer="unigram")
    assert again.path == unigram.path and again.analyzer == "unigram"  # not rebuilt, not the bigram index
    assert read_manifest(index_dir(dataset, "minilm", "bigram")) == bigram.manifest
    # 深色主题 is in d01 only; both analyzers find it, the bigram one with three more matching terms
    found = [[d for d, _ in handle.bm25.search("深色主题", 3)] for handle in (unigram, bigram)]
    assert found == [["d01"], ["d01"]]
    assert bigram.bm25.search("深色主题", 1)[0][1] > unigram.bm25.search("深色主题", 1)[0][1]


def test_a_build_of_another_analyzer_is_never_served(home, tiny_copy):
    """A manifest in the bigram folder that names the unigram analyzer (a stale build) is
    rebuilt, not opened."""
    dataset = load_dataset(tiny_copy)
    first = open_index(dataset, analyzer="bigram")
    manifest_path = first.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    manifest["analyzer"] = "bilingual-v1"
    manifest_path.write_text(json.dumps(manifest), "utf-8")
    second = open_index(dataset, analyzer="bigram")
    assert second.path != first.path and second.manifest["analyzer"] == "bilingual-bigram-v1"
    assert second.analyzer == "bigram"


def test_an_unknown_analyzer_is_refused(home, tiny_copy):
    with pytest.raises(ValueError, match=r"unknown analyzer 'stem'; choose from \['bigram', 'jieba', 'unigram'\]"):
        open_index(load_dataset(tiny_copy), analyzer="stem")


def test_each_analyzer_has_its_own_candidate_pool(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    unigram = load_pool(dataset, pool_depth=10, analyzer="unigram")
    bigram = load_pool(dataset, pool_depth=10, analyzer="bigram")
    assert (unigram.analyzer, bigram.analyzer) == ("unigram", "bigram")
    paths = {pool_path(dataset, "minilm", 10, name) for name in ("unigram", "bigram")}
    assert len(paths) == 2 and all(p.is_file() for p in paths)
    # a pool of the other analyzer found under this analyzer's name is retrieved again, not used
    shutil.copyfile(pool_path(dataset, "minilm", 10, "unigram"), pool_path(dataset, "minilm", 10, "bigram"))
    notices = []
    again = load_pool(dataset, pool_depth=10, analyzer="bigram", on_notice=notices.append)
    assert again.analyzer == "bigram" and "retrieved with the 'unigram' analyzer" in notices[0]
