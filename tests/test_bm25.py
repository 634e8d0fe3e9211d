"""The Tantivy BM25 index: any user string is a valid query, identifiers are found whole
and by parts, Chinese is matched character by character, prefilters are exact."""

from __future__ import annotations

import pytest

from retrieval.bm25 import BM25Index, Filters, IndexedDoc, query_terms


@pytest.fixture(scope="module")
def small_bm25(tmp_path_factory):
    docs = [
        IndexedDoc("id1", "KeyError: 'user_id' when loading accounts", scope="project", project="ledger"),
        IndexedDoc("id2", "The user profile page shows the id of each account", scope="global"),
        IndexedDoc("id3", "用户喜欢深色主题的编辑器", scope="global", group="alice"),
        IndexedDoc("id4", "深夜的天空是黑色的", scope="global", group="bob"),
        IndexedDoc("id5", "title: foo AND bar (draft)", scope="project", project="webapp"),
    ]
    path = tmp_path_factory.mktemp("bm25") / "index"
    BM25Index.build(path, docs)
    return BM25Index.open(path)  # reopened: the custom analyzers must be registered again


def ids(hits):
    return [doc_id for doc_id, _ in hits]


@pytest.mark.parametrize("query", [
    "KeyError: 'user_id'", "f(x", "a AND", '"unbalanced', "title:foo", "foo OR", "NOT", "(((", "a:b:c",
    "user_id^2", "fo*", "~foo", "[1 TO 5]", "+-&&||!(){}[]^\"~*?:\\/", "'; DROP TABLE memories; --",
])
def test_query_syntax_never_raises(tiny_index, query):
    hits = tiny_index.bm25.search(query, 10)
    assert all(isinstance(doc_id, str) and score > 0 for doc_id, score in hits)


def test_operator_queries_are_searched_as_words(small_bm25):
    assert ids(small_bm25.search("KeyError: 'user_id'", 10))[0] == "id1"
    assert ids(small_bm25.search("title:foo", 10)) == ["id5"]  # the words title and foo, not a field query
    assert "id5" in ids(small_bm25.search("a AND", 10))  # AND is a word, not an operator
    assert ids(small_bm25.search("f(x", 10)) == []  # f and x appear nowhere


@pytest.mark.parametrize("query", ["", "   ", "!!!", "\x00\x01", "。，、"])
def test_queries_without_terms_find_nothing(tiny_index, query):
    assert tiny_index.bm25.search(query, 10) == []


def test_identifiers_found_whole_and_by_parts(tiny_index):
    bm25 = tiny_index.bm25
    assert ids(bm25.search("ERR_CONN_REFUSED", 10))[0] == "d03"
    assert ids(bm25.search("err_conn_refused", 10))[0] == "d03"
    assert sorted(ids(bm25.search("refused", 10))) == ["d03", "d05"]  # d05 says "connection refused"
    assert ids(bm25.search("conn", 10)) == ["d03"]
    assert ids(bm25.search("user_id", 10)) == ["d06"]
    assert ids(bm25.search("user", 10)) == ["d06"]
    assert ids(bm25.search("utils/retry.py", 10)) == ["d07"]
    assert ids(bm25.search("retry", 10)) == ["d07"]
    assert ids(bm25.search("utils", 10)) == ["d07"]


def test_whole_identifier_outranks_its_parts(small_bm25):
    """'user_id' matches id1's identifier whole; id2 only has the words user and id."""
    hits = small_bm25.search("user_id", 10)
    assert ids(hits)[:2] == ["id1", "id2"]
    assert hits[0][1] > hits[1][1]


def test_query_terms_split_identifiers_and_han_characters():
    assert query_terms("ERR_CONN_REFUSED") == [
        ("words", "err"), ("words", "conn"), ("words", "refused"), ("idents", "err_conn_refused")]
    assert query_terms("深色主题") == [("words", "深"), ("words", "色"), ("words", "主"), ("words", "题")]
    assert ("idents", "utils/retry.py") in query_terms("see utils/retry.py")


def test_query_terms_are_capped():
    assert len(query_terms(" ".join(f"w{i}" for i in range(10_000)))) == 256


def test_chinese_query_finds_the_chinese_memory(tiny_index):
    assert ids(tiny_index.bm25.search("深色主题", 10)) == ["d01"]


def test_chinese_ranks_the_memory_sharing_more_characters_first(small_bm25):
    hits = small_bm25.search("深色主题", 10)
    assert ids(hits) == ["id3", "id4"]  # id4 shares only 深 and 色


def test_filters_are_exact_prefilters(small_bm25, tiny_index):
    assert ids(small_bm25.search("深色", 10, Filters(group="bob"))) == ["id4"]
    assert ids(small_bm25.search("user", 10, Filters(scope="global"))) == ["id2"]
    assert ids(small_bm25.search("foo", 10, Filters(project="webapp"))) == ["id5"]
    assert small_bm25.search("foo", 10, Filters(project="ledger")) == []
    for value in ["' OR '1'='1", "*", "global OR project", "glob"]:
        assert tiny_index.bm25.search("the", 10, Filters(scope=value)) == []
        assert tiny_index.bm25.search("the", 10, Filters(group=value)) == []
        assert tiny_index.bm25.search("the", 10, Filters(project=value)) == []


def test_depth_limits_the_hits(tiny_index):
    assert len(tiny_index.bm25.search("the", 2)) == 2
    assert tiny_index.bm25.search("the", 0) == []
