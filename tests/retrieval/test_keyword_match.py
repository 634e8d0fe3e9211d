"""Keyword match mode ``any`` / ``all`` (seed 002: OpenClaw joins its FTS query's terms with AND).

A crafted store where the 4-word query "redis cache eviction policy" finds 8 memories with
``any`` (each holds at least one of the words) and 2 with ``all`` (k1 and k2 hold all four);
real Tantivy, real LanceDB and MiniLM for the pipeline-level tests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from retrieval.bm25 import BM25Index, IndexedDoc
from retrieval.candidates import build_candidates
from retrieval.dataset import Query, load_dataset
from retrieval.index import open_index
from retrieval.pipeline import PIPELINES, from_toml, get_param, knobs, run_pipeline, to_toml, with_params

QUERY = "redis cache eviction policy"
DOCS = {
    "k1": "Redis cache eviction policy.",                          # all four words
    "k2": "The cache eviction policy of Redis is set in the config file next to the memory limit.",  # all four
    "k3": "Redis cache warms up after a restart.",                 # redis, cache
    "k4": "Eviction policy for the session store.",                # eviction, policy
    "k5": "Redis cluster failover notes.",                         # redis
    "k6": "Cache headers for static assets.",                      # cache
    "k7": "Policy review meeting notes.",                          # policy
    "k8": "The deploy checklist for Friday.",                      # none
    "k9": "Eviction eviction policy policy.",                      # eviction, policy — each twice, in 4 words
}
ANY_HITS = {"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k9"}   # every memory but k8
ALL_HITS = ["k1", "k2"]  # both hold each word once; k1 is the shorter text, so BM25 ranks it first


def ids(hits):
    return [doc_id for doc_id, _ in hits]


@pytest.fixture(scope="module", params=["unigram", "bigram"])
def store(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("kw") / "bm25"
    BM25Index.build(path, [IndexedDoc(k, t) for k, t in DOCS.items()], request.param)
    return BM25Index.open(path, request.param)


def test_any_finds_every_memory_holding_a_word_all_only_those_holding_all_four(store):
    assert set(ids(store.search(QUERY, 10, match="any"))) == ANY_HITS  # 8 hits
    assert ids(store.search(QUERY, 10, match="all")) == ALL_HITS       # 2 of them hold all four words


def test_an_all_hit_keeps_its_any_score_and_order(store):
    """The same term clauses match a document that holds every word, so its BM25 score is
    the same in both modes: the ``all`` list is the ``any`` list without the partial matches."""
    any_hits = dict(store.search(QUERY, 10, match="any"))
    all_hits = store.search(QUERY, 10, match="all")
    assert [(k, pytest.approx(any_hits[k], rel=1e-6)) for k, _ in all_hits] == all_hits
    assert [k for k in ids(store.search(QUERY, 10)) if k in ALL_HITS] == ALL_HITS


def test_all_requires_every_word_whatever_the_case_or_punctuation(store):
    assert ids(store.search("REDIS, cache! eviction? policy", 10, match="all")) == ALL_HITS
    assert ids(store.search("eviction policy", 10, match="all")) == ["k9", "k1", "k4", "k2"]  # k9: tf 2 in 4 words
    assert store.search("redis cache eviction policy friday", 10, match="all") == []  # no memory holds all five
    assert store.search("", 10, match="all") == []


def test_all_requires_the_words_of_an_identifier_not_the_identifier_whole(tmp_path):
    """``all`` requires each word (``err``, ``conn``, ``refused``, ``retry``); the whole
    identifier ``err_conn_refused`` only adds to the score, as in ``any``."""
    BM25Index.build(tmp_path / "i", [
        IndexedDoc("whole", "ERR_CONN_REFUSED on the first retry"),
        IndexedDoc("words", "conn refused: err, retry later"),
        IndexedDoc("three", "ERR_CONN_REFUSED again"),           # no "retry"
    ], "unigram")
    index = BM25Index.open(tmp_path / "i", "unigram")
    assert ids(index.search("ERR_CONN_REFUSED retry", 10, match="all")) == ["whole", "words"]
    assert ids(index.search("ERR_CONN_REFUSED retry", 10, match="any"))[:1] == ["whole"]
    assert set(ids(index.search("ERR_CONN_REFUSED retry", 10, match="any"))) == {"whole", "words", "three"}


@pytest.mark.parametrize("analyzer", ["unigram", "bigram"])
def test_all_in_chinese_requires_every_character(tmp_path, analyzer):
    BM25Index.build(tmp_path / "i", [
        IndexedDoc("z1", "用户喜欢深色主题"),   # 深 色 主 题 all present
        IndexedDoc("z2", "主题是深色的"),       # all four, in another order
        IndexedDoc("z3", "深色模式"),           # 深 色 only
    ], analyzer)
    index = BM25Index.open(tmp_path / "i", analyzer)
    assert sorted(ids(index.search("深色主题", 10, match="all"))) == ["z1", "z2"]
    assert sorted(ids(index.search("深色主题", 10, match="any"))) == ["z1", "z2", "z3"]


def test_an_unknown_match_mode_is_refused(store):
    with pytest.raises(ValueError,
                       match=r"match must be one of \['any', 'all', 'technical'\], got 'and'"):
        store.search(QUERY, 10, match="and")


# ---- the candidate pool and the pipelines ---------------------------------------------------

@pytest.fixture(scope="module")
def kw_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("kw-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(root / "home"))
        data = root / "kw"
        (data / "qrels").mkdir(parents=True)
        (data / "corpus.jsonl").write_text(
            "".join(json.dumps({"_id": k, "text": t}) + "\n" for k, t in DOCS.items()), "utf-8")
        (data / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": QUERY}) + "\n", "utf-8")
        (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tk1\t3\nq1\tk2\t2\n", "utf-8")
        yield open_index(load_dataset(data), analyzer="unigram")


def ranked(c, run, qi=0):
    return [c.doc_ids[int(c.doc_idx[row])] for row in run.ranking.for_query(qi)]


def row_of(c, doc_id):
    return int(np.flatnonzero(c.doc_idx == c.doc_ids.index(doc_id))[0])


def test_the_pool_holds_the_and_list_even_below_the_or_depth(kw_index):
    """With 2 candidates per path the OR list is k1, k9 (k9 repeats two of the words in a
    4-word text and outscores k2, which holds each word once in 17 words). k2 is still in the
    pool, at rank 1 of the AND list: filtering the stored OR hits by the words they hold
    would have lost it."""
    c = build_candidates(kw_index, [Query("q1", QUERY)], pool_depth=2)
    sparse = {c.doc_ids[int(c.doc_idx[r])]: int(c.bm25_rank[r]) for r in range(c.n_rows) if c.bm25_rank[r] >= 0}
    every = {c.doc_ids[int(c.doc_idx[r])]: int(c.bm25_all_rank[r]) for r in range(c.n_rows) if c.bm25_all_rank[r] >= 0}
    assert sparse == {"k1": 0, "k9": 1}
    assert every == {"k1": 0, "k2": 1}
    assert c.bm25_all_score[row_of(c, "k2")] > 0 and c.bm25_score[row_of(c, "k2")] == 0.0
    view = c.with_keyword_match("all")
    assert view.bm25_rank[row_of(c, "k2")] == 1 and view.bm25_rank[row_of(c, "k9")] == -1
    assert c.with_keyword_match("any") is c and c.with_keyword_match("all") is view  # made once
    with pytest.raises(ValueError, match="keyword match must be one of"):
        c.with_keyword_match("every")


def test_bm25_pipeline_returns_the_and_hits_in_all_mode(kw_index):
    c = build_candidates(kw_index, [Query("q1", QUERY)], pool_depth=20)
    bm25_all = with_params(PIPELINES["bm25"], {"keyword_match": "all"})
    assert ranked(c, run_pipeline(c, bm25_all)) == ALL_HITS
    assert set(ranked(c, run_pipeline(c, PIPELINES["bm25"]))) == ANY_HITS  # 8 results under max_results 10


def test_openclaw_uses_all_and_a_toml_variant_any(kw_index):
    """openclaw: 0.7·cos + 0.3·1/(1+rank), the rank taken in the keyword list of its mode."""
    assert PIPELINES["openclaw"].keyword_match == "all"
    variant = from_toml('base = "openclaw"\nkeyword_match = "any"\n')
    assert variant.keyword_match == "any" and variant.max_results == 6
    c = build_candidates(kw_index, [Query("q1", QUERY)], pool_depth=PIPELINES["openclaw"].path_depth)
    sparse_all = run_pipeline(c, PIPELINES["openclaw"]).scored.components["sparse"]
    sparse_any = run_pipeline(c, variant).scored.components["sparse"]
    # all: k1 rank 0 → 0.3·1/1, k2 rank 1 → 0.3·1/2; every other memory gets no keyword score
    assert {k: round(float(sparse_all[row_of(c, k)]), 6) for k in DOCS if sparse_all[row_of(c, k)] > 0} == {
        "k1": round(0.3 * 1 / 1, 6), "k2": round(0.3 * 1 / 2, 6)}
    # any: k1 rank 0, k9 rank 1, k2 rank 2 → 0.3, 0.15, 0.1
    assert [round(float(sparse_any[row_of(c, k)]), 6) for k in ("k1", "k9", "k2")] == [
        round(0.3 * 1 / 1, 6), round(0.3 * 1 / 2, 6), round(0.3 * 1 / 3, 6)]
    assert (sparse_any > 0).sum() == 8


def test_keyword_match_is_a_declared_pipeline_parameter():
    ref = next(k for k in knobs(PIPELINES["rrf"]) if k.path == "keyword_match")
    assert (ref.knob.kind, ref.knob.options, ref.knob.sweepable, ref.value) == (
        "choice", ("any", "all", "technical"), False, "any")
    assert get_param(PIPELINES["openclaw"], "keyword_match") == "all"
    assert 'keyword_match = "all"' in to_toml(PIPELINES["openclaw"]).splitlines()
    assert from_toml(to_toml(PIPELINES["openclaw"])) == PIPELINES["openclaw"]
    with pytest.raises(ValueError, match=r"keyword_match must be one of "
                                         r"\['any', 'all', 'technical'\], got 'AND'"):
        with_params(PIPELINES["rrf"], {"keyword_match": "AND"})
    with pytest.raises(ValueError, match="keyword_match must be one of"):
        from_toml('base = "openclaw"\nkeyword_match = true\n')


def test_a_stored_pool_keeps_both_keyword_lists(kw_index, tmp_path):
    c = build_candidates(kw_index, [Query("q1", QUERY)], pool_depth=20)
    c.save(tmp_path / "pool.npz")
    loaded = type(c).load(tmp_path / "pool.npz")
    assert loaded.analyzer == "unigram"
    assert np.array_equal(loaded.bm25_all_rank, c.bm25_all_rank)
    assert ranked(loaded, run_pipeline(loaded, with_params(PIPELINES["bm25"], {"keyword_match": "all"}))) == ALL_HITS
