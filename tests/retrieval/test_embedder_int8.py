"""Issue 45 item 1: ``minilm-int8``, the bundled MiniLM with int8 weights on ONNX Runtime.

Its graph is exported from the bundled model and quantised once per test session into the
session's ``$RWB_HOME/models`` (``retrieval.onnx_graph``); each test reads that one graph. What
a user relies on: the float graph is the float model (so any difference is the quantisation),
the int8 vectors are close to MiniLM's but are their own (another embedding-cache key, another
index folder), they are the same bits in every run and on any thread count (what Ray's
bit-for-bit indexing needs), and a damaged graph file is built again, equal to the first."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval.dataset import load_dataset
from retrieval.embedders import (EMBEDDERS, ENGLISH_ONLY, MODELS, CachedEmbedder, EmbeddingCache, OnnxEmbedder,
                                 load_embedder)
from retrieval.onnx_graph import GRAPH, RECORD, export_float, int8_graph
from tests.conftest import ROOT, rwb_here

TEXTS = ["How do we deploy the ledger API?", "night theme for the editor",
         "The payment webhook retries three times, then the refund is queued for a person to check. " * 12,
         "a", "保存资料时报错 E11000"]        # a short text, one past 256 tokens (truncated), Chinese


@pytest.fixture(scope="module")
def graph(rwb_home):
    """The int8 graph, built into the session's ``$RWB_HOME/models`` (where ``minilm-int8`` reads it)."""
    return int8_graph(rwb_home / "models")


@pytest.fixture(scope="module")
def float_vectors():
    return load_embedder("minilm").encode(TEXTS)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)  # both unit length


def test_minilm_int8_is_a_registered_english_only_embedder_the_pages_offer():
    from pages._state import EMBEDDERS as ON_PAGES

    assert "minilm-int8" in EMBEDDERS and "minilm-int8" in ENGLISH_ONLY
    assert MODELS["minilm-int8"].startswith("all-MiniLM-L6-v2 with int8 weights")
    assert ON_PAGES == ("minilm", "use-multilingual", "minilm-int8")  # the registry; minilm stays the fallback


def test_the_exported_float_graph_gives_the_float_models_vectors(float_vectors):
    """Tokenizer (truncation at 256 tokens, padding to the longest), mean pooling and norm are
    the float model's: the un-quantised graph gives sentence-transformers' vectors."""
    onnx_float = OnnxEmbedder(graph=export_float()).encode(TEXTS)
    assert _cosines(onnx_float, float_vectors).min() >= 0.99999


def test_int8_vectors_are_close_to_minilms_on_devmem_but_not_its_own(graph):
    texts = [d.text for d in load_dataset(ROOT / "datasets" / "devmem").documents][:32]
    cos = _cosines(OnnxEmbedder(graph=graph).encode(texts), load_embedder("minilm").encode(texts))
    assert cos.mean() >= 0.985 and cos.min() >= 0.97   # measured 0.991 and 0.975 on 256 devmem texts
    assert cos.max() < 0.9999                          # another model: never mixed with minilm's vectors


def test_int8_vectors_are_the_same_bits_in_every_session_and_on_any_thread_count(graph):
    one = OnnxEmbedder(graph=graph, threads=1)
    first = one.encode(TEXTS)
    for again in (one.encode(TEXTS), OnnxEmbedder(graph=graph, threads=3).encode(TEXTS)):
        assert again.dtype == np.float32 and again.tobytes() == first.tobytes()


def test_the_embedding_cache_keeps_int8_vectors_apart_from_minilms(graph, tmp_path, float_vectors):
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    int8 = CachedEmbedder(load_embedder("minilm-int8"), cache)
    first = int8.encode(TEXTS)
    assert int8.model_id == "minilm-int8" and int8.encoded == len(TEXTS)
    minilm = CachedEmbedder(load_embedder("minilm"), cache)
    assert minilm.encode(TEXTS).tobytes() == float_vectors.tobytes()
    assert minilm.encoded == len(TEXTS)        # none of the int8 vectors was taken for MiniLM's
    again = CachedEmbedder(load_embedder("minilm-int8"), cache)
    assert again.encode(TEXTS).tobytes() == first.tobytes() and again.encoded == 0


def test_rwb_index_with_minilm_int8_builds_its_own_index(graph, tiny_copy, rwb_home):
    done = rwb_here(rwb_home, "index", tiny_copy, "--embedder", "minilm-int8", "--quiet")
    assert done.returncode == 0, done.stderr
    from retrieval.index import index_dir, read_manifest

    dataset = load_dataset(tiny_copy)
    folder = index_dir(dataset, "minilm-int8") / "current"
    assert read_manifest(index_dir(dataset, "minilm-int8"))["model"] == "minilm-int8"
    assert index_dir(dataset, "minilm-int8") != index_dir(dataset, "minilm")
    vectors = np.load(folder / "vectors.npy")
    expected = OnnxEmbedder(graph=graph).encode([d.text for d in dataset.documents])
    order = json.loads((folder / "ids.json").read_text())
    assert order == [d.id for d in dataset.documents] and vectors.tobytes() == expected.tobytes()


def test_a_damaged_or_partial_graph_file_is_built_again_equal_to_the_first(graph, rwb_home, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in (GRAPH, RECORD):
        (folder / name).write_bytes((rwb_home / "models" / name).read_bytes())
    (folder / GRAPH).write_bytes(graph[:len(graph) // 2])        # a write cut short
    rebuilt = int8_graph(folder)
    assert rebuilt == graph                                       # export and quantisation are deterministic
    assert (folder / GRAPH).read_bytes() == graph
    assert sorted(p.name for p in folder.iterdir()) == [RECORD, GRAPH]   # no temporaries left
    written = (folder / GRAPH).stat().st_mtime_ns
    assert int8_graph(folder) == graph and (folder / GRAPH).stat().st_mtime_ns == written  # read, not built
