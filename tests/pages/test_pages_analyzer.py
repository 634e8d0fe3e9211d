"""The BM25 analyzer chosen in the sidebar (issue 44): every page's index and candidate pool are
the ones built with it, each dataset keeps its own choice (the command line's default,
``bigram``, until one is made), and the sidebar says which analyzer the figures use.

On the crafted Chinese store ``tests/fixtures/lingxi_zh`` (13 notes), MiniLM chosen so no
multilingual model loads. Query q1 "保存资料时报错 E11000": its bigrams include 料时, which only
n03 holds ("保存资料时上传头像报错"), so the bigram index ranks n03 above n04 ("保存资料偶尔报错超时",
保存 three times); jieba cuts 保存 / 资料 / 时报 (and 错), so 料时 is no term and n04 comes first."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.pages.test_app import ROOT, TINY, route_through_main, run, shown_docs, texts

LINGXI_ZH = ROOT / "tests" / "fixtures" / "lingxi_zh"


@pytest.fixture
def app(rwb_home, monkeypatch):
    """The app on lingxi_zh, in the session's RWB_HOME (its indexes shared with the command-line
    analyzer tests)."""
    route_through_main(monkeypatch)                 # every run draws the sidebar, as in a browser
    for name, value in (("RWB_DATASET", str(LINGXI_ZH)), ("RWB_HOME", str(rwb_home)), ("LANCEDB_LOG", "error"),
                        ("HF_HUB_OFFLINE", "1")):
        monkeypatch.setenv(name, value)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.session_state["rwb_embedder_of"] = {str(LINGXI_ZH): "minilm", str(TINY): "minilm"}
    at.query_params["from"] = "bm25"                # Tune starts from BM25 alone, on q1
    at.run()
    assert not at.exception
    yield at
    st.cache_data.clear()
    st.cache_resource.clear()


def bm25_order(pool, query_id: str) -> list[str]:
    qi = pool.query_ids.index(query_id)
    rows = [r for r in range(pool.offsets[qi], pool.offsets[qi + 1]) if pool.bm25_rank[r] >= 0]
    return [pool.doc_ids[pool.doc_idx[r]] for r in sorted(rows, key=lambda r: pool.bm25_rank[r])]


def test_the_sidebar_analyzer_chooses_the_pool_every_figure_uses(app):
    from eval.stores.pool import load_pool, pool_path
    from retrieval.dataset import load_dataset

    at = app
    assert at.sidebar.selectbox(key="rwb_analyzer").value == "bigram"         # rwb eval's default
    assert any(t.startswith("Figures use BM25 analyzer **bigram** (the default)") for t in texts(at))
    assert at.selectbox(key="tune_source_pick").value == "bm25" and at.selectbox(key="tune_query").value == 0
    bigram = shown_docs(at)
    assert bigram.index("n03") < bigram.index("n04")

    at = run(at.sidebar.selectbox(key="rwb_analyzer").set_value("jieba"))
    jieba = shown_docs(at)
    assert jieba.index("n04") < jieba.index("n03") and set(jieba) == set(bigram)
    assert any(t.startswith("Figures use BM25 analyzer **jieba** (chosen; the default is bigram)") for t in texts(at))
    dataset = load_dataset(LINGXI_ZH)
    assert pool_path(dataset, "minilm", 50, "jieba").is_file()                 # built when first chosen
    pool = load_pool(dataset, "minilm", 50, on_notice=None, analyzer="jieba")
    assert pool.analyzer == "jieba" and bm25_order(pool, "q1") == jieba   # the page ranks that very pool

    at = run(at.sidebar.selectbox(key="rwb_dataset").set_value("Other folder…"))   # another dataset: its own
    at = run(at.sidebar.text_input(key="rwb_dataset_typed").set_value(str(TINY)))   # choice, the default
    assert at.sidebar.selectbox(key="rwb_analyzer").value == "bigram"
    at = run(at.sidebar.selectbox(key="rwb_dataset").set_value(str(LINGXI_ZH)))
    assert at.sidebar.selectbox(key="rwb_analyzer").value == "jieba"
