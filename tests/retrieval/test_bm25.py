"""The Tantivy BM25 index: any user string is a valid query, identifiers are found whole
and by parts, Chinese is matched character by character, prefilters are exact."""

from __future__ import annotations

import pytest

from retrieval.bm25 import ANALYZERS, BM25Index, Filters, IndexedDoc, han_bigrams, han_words, query_terms, technical_terms


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
    assert query_terms("深色主题", "unigram") == [("words", "深"), ("words", "色"), ("words", "主"), ("words", "题")]
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


# ---- analyzers: Han unigrams, or unigrams plus character bigrams ------------------------------

def test_han_bigrams_are_pairs_within_each_run_of_han_text():
    assert han_bigrams("深色主题") == ["深色", "色主", "主题"]
    assert han_bigrams("用户API深色，主题") == ["用户", "深色", "主题"]  # never across Latin text or punctuation
    assert han_bigrams("dark theme 深") == []


def test_the_bigram_analyzer_adds_bigram_terms_after_the_words():
    assert query_terms("深色主题", "bigram") == [("words", "深"), ("words", "色"), ("words", "主"), ("words", "题"),
                                              ("bigrams", "深色"), ("bigrams", "色主"), ("bigrams", "主题")]
    assert query_terms("ERR_CONN_REFUSED", "bigram") == query_terms("ERR_CONN_REFUSED", "unigram")
    with pytest.raises(ValueError, match=r"unknown analyzer 'trigram'; choose from \['bigram', 'jieba', 'unigram'\]"):
        query_terms("x", "trigram")


def _pair(tmp_path, docs):
    out = {}
    for name in ANALYZERS:
        BM25Index.build(tmp_path / name, docs, name)
        out[name] = BM25Index.open(tmp_path / name, name)
    return out


def test_bigrams_rank_the_characters_in_query_order_first(tmp_path):
    """Both memories hold 深 色 主 题 once in four characters, so unigram scores tie; only
    'in-order' holds the bigrams 深色 色主 主题 (the other holds 题主 主色 色深)."""
    index = _pair(tmp_path, [IndexedDoc("in-order", "深色主题"), IndexedDoc("reversed", "题主色深"),
                             IndexedDoc("other", "天空很蓝")])
    unigram, bigram = index["unigram"].search("深色主题", 10), index["bigram"].search("深色主题", 10)
    assert sorted(ids(unigram)) == ["in-order", "reversed"] and unigram[0][1] == pytest.approx(unigram[1][1])
    assert ids(bigram) == ["in-order", "reversed"] and bigram[0][1] > bigram[1][1]


def test_jieba_segments_each_han_run_into_dictionary_words(capfd):
    """jieba's bundled dictionary: 深色 / 主题, 数据库 / 连接 / 超时; single characters stay in
    ``words`` only; never across Latin text; quiet (jieba prints its dictionary build by default)."""
    assert han_words("深色主题") == ["深色", "主题"]
    assert han_words("数据库连接超时 ERR_CONN_REFUSED，请检查配置") == ["数据库", "连接", "超时", "检查", "配置"]
    assert han_words("dark theme 深") == []
    assert query_terms("深色主题", "jieba") == [("words", "深"), ("words", "色"), ("words", "主"), ("words", "题"),
                                             ("segments", "深色"), ("segments", "主题")]
    assert query_terms("ERR_CONN_REFUSED", "jieba") == query_terms("ERR_CONN_REFUSED", "unigram")
    assert capfd.readouterr().err == ""


def test_jieba_ranks_the_note_holding_the_query_words_first(tmp_path):
    """'whole' segments into 数据库 / 超时, 'scattered' (the same five characters) into 超 / 数据库 /
    时, without the word 超时: jieba ranks 'whole' first, unigrams tie."""
    assert (han_words("数据库超时"), han_words("超数据库时")) == (["数据库", "超时"], ["数据库"])
    docs = [IndexedDoc("whole", "数据库超时"), IndexedDoc("scattered", "超数据库时"), IndexedDoc("other", "天空很蓝")]
    index = _pair(tmp_path, docs)
    unigram, jieba = index["unigram"].search("数据库超时", 10), index["jieba"].search("数据库超时", 10)
    assert sorted(ids(unigram)) == ["scattered", "whole"] and unigram[0][1] == pytest.approx(unigram[1][1])
    assert ids(jieba) == ["whole", "scattered"] and jieba[0][1] > jieba[1][1]


def test_a_purely_chinese_message_without_a_technical_word_has_no_keyword_path_under_jieba_too():
    assert technical_terms("保存资料时提示没有权限", "jieba") == []
    # with an error code the jieba words only re-rank (function-character words dropped)
    assert technical_terms("我们保存资料时报错 E11000", "jieba") == [
        ("error-code", "idents", "e11000"), ("word", "segments", "保存"), ("word", "segments", "资料"),
        ("word", "segments", "时报")]


def test_english_scores_are_the_same_under_both_analyzers(tmp_path):
    docs = [IndexedDoc("e1", "KeyError: 'user_id' when loading accounts"),
            IndexedDoc("e2", "The user profile page shows the id of each account"),
            IndexedDoc("e3", "Connection refused by the cache server")]
    index = _pair(tmp_path, docs)
    for query in ("user_id", "user profile", "cache connection refused", "accounts"):
        unigram, bigram = index["unigram"].search(query, 10), index["bigram"].search(query, 10)
        assert ids(unigram) == ids(bigram)
        assert [s for _, s in unigram] == pytest.approx([s for _, s in bigram], rel=1e-6)


def test_an_index_is_opened_only_with_the_analyzer_it_was_built_with(tmp_path):
    index = _pair(tmp_path, [IndexedDoc("z", "深色主题")])
    assert (index["unigram"].analyzer, index["bigram"].analyzer, index["jieba"].analyzer) == ("unigram", "bigram", "jieba")
    for built, asked in (("jieba", "unigram"), ("jieba", "bigram"), ("unigram", "jieba")):
        with pytest.raises(ValueError, match=f"was not built with the '{asked}' analyzer"):
            BM25Index.open(tmp_path / built, asked)
    with pytest.raises(ValueError, match="was not built with the 'bigram' analyzer"):
        BM25Index.open(tmp_path / "unigram", "bigram")
    with pytest.raises(ValueError, match="was not built with the 'unigram' analyzer"):
        BM25Index.open(tmp_path / "bigram", "unigram")
