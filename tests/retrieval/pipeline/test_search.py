"""``retrieval.pipeline.search``'s results carry every field the seeds' result types name: seed
000's SearchResult (memory_type, section, reinforcement, token_count) and seed 002's snippet
(lineRange, provider/model), on the tiny fixture."""

from __future__ import annotations

import dataclasses

from retrieval.pipeline import search


def test_a_result_carries_the_seeds_fields(tiny_index):
    response = search(tiny_index, "ERR_CONN_REFUSED", "bm25")
    d03 = response.results[0]
    assert d03.id == "d03"
    # corpus: error-fix, no title, reinforcement 3, lines 10–11; answered with MiniLM's vector
    assert (d03.memory_type, d03.section, d03.reinforcement, d03.line_start, d03.line_end) == (
        "error-fix", "", 3, 10, 11)
    assert d03.model == "minilm"
    assert set(response.to_json()["results"][0]) >= {
        "memory_type", "section", "reinforcement", "line_start", "line_end", "model", "token_count"}


def test_keyword_only_results_name_no_model(tiny_index):
    response = search(dataclasses.replace(tiny_index, embedder=None), "ERR_CONN_REFUSED", "bm25")
    assert response.results[0].model == "none (keyword-only)"
