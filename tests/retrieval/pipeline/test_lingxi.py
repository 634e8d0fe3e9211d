"""Lingxi (seed 004) as its user story US-1 asks: an error code named in a Chinese message finds
the note holding it, by the keyword path alone; an unrelated message still finds nothing.

A hand-made store of five notes (real Tantivy, real LanceDB, MiniLM), written into the test's
tmp folder. Only ``n1`` holds ``E11000``; MiniLM embeds the Chinese part of the query far from
every English note, so the vector path alone would never reach Lingxi's cosine floor of 0.3.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from eval.cli import main as rwb_main
from retrieval.bm25 import technical_terms
from retrieval.dataset import load_dataset
from retrieval.index import open_index
from retrieval.pipeline import PIPELINES, search, to_toml, with_params
from tests.conftest import ROOT

NOTES = {
    "n1": "MongoDB E11000 duplicate key on save: the unique index on users.email; dedupe first.",
    "n2": "Prefer dark editor themes and short commit messages.",
    "n3": "The deploy checklist runs on Fridays and needs two reviewers.",
    "n4": "Retry helper uses exponential backoff with jitter, capped at 30 seconds.",
    "n5": "Team lunch is on Thursdays at the noodle place.",
}
US1 = "保存资料时报错 E11000"
UNRELATED = "recipe for the lemon tart"


@pytest.fixture(scope="module")
def handle(rwb_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("lingxi")
    (root / "qrels").mkdir()
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": k, "text": t, "path": f"notes/{k}.md"}) + "\n"
        for k, t in NOTES.items()))
    query = json.dumps({"_id": "q1", "text": US1}, ensure_ascii=False)
    (root / "queries.jsonl").write_text(query + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tn1\t1\n")
    (root / "dataset.toml").write_text(
        'name = "lingxi-us1"\nreference_time = "2026-11-20T18:00:00+00:00"\n')
    return open_index(load_dataset(root))


def cosine(handle, text: str, doc_id: str) -> float:
    vector = handle.embedder.encode([text])[0]
    return float(handle.vectors[handle.doc_ids.index(doc_id)] @ vector)


def test_technical_terms_are_error_codes_identifiers_and_names_bigrams_only_alongside():
    assert technical_terms(US1) == [("error-code", "idents", "e11000"), *(
        ("bigram", "bigrams", b) for b in ("保存", "存资", "资料", "料时", "时报", "报错"))]
    assert technical_terms("ERR_CONN_REFUSED in utils/retry.py and the LanceDB API") == [
        ("error-code", "idents", "err_conn_refused"), ("identifier", "idents", "utils/retry.py"),
        ("identifier", "idents", "lancedb"), ("identifier", "idents", "api")]
    # English words in a Chinese sentence are technical nouns; a capitalised word inside an
    # English sentence is one; a sentence's first word and function words are not
    assert technical_terms("用 ruff 检查 Python 代码") == [
        ("name", "idents", "ruff"), ("name", "idents", "python"),
        ("bigram", "bigrams", "检查"), ("bigram", "bigrams", "代码")]
    assert technical_terms("How do we lint Python code?") == [("name", "idents", "python")]
    assert technical_terms("Lint it with `ruff` please") == [("name", "idents", "ruff")]
    # HTTP statuses, error-code numbers, errno names, exception classes are error codes
    assert technical_terms("Got HTTP 502 then ECONNREFUSED and a KeyError") == [
        ("error-code", "idents", "502"), ("identifier", "idents", "http"),
        ("error-code", "idents", "econnrefused"), ("error-code", "idents", "keyerror")]
    assert technical_terms("错误码：1062") == [("error-code", "idents", "1062"),
                                              ("bigram", "bigrams", "错误"), ("bigram", "bigrams", "误码")]
    # snake_case, camelCase, dotted names and versions are identifiers; a constant is an
    # error code only when it names an error
    assert [k for k, _, _ in technical_terms("MAX_RESULTS userId os.path.join v1.2.3")] == ["identifier"] * 4
    assert technical_terms(UNRELATED) == []                      # plain words only
    assert technical_terms("我们怎么做") == []                     # 我们 怎么 么做: function characters
    assert technical_terms("保存资料时报错") == []                  # bigrams alone are no keyword query
    assert technical_terms(US1, "unigram") == [("error-code", "idents", "e11000")]  # no bigram field


def test_us1_an_error_code_in_a_chinese_message_finds_its_note(handle):
    assert cosine(handle, US1, "n1") < 0.3               # the vector path alone would drop it
    response = search(handle, US1, "lingxi")
    assert [r.id for r in response.results] == ["n1"]
    # seed 004 F2: 0.7·cos + 0.3·1/(1+0), the keyword path's first hit (no keyword tier)
    expected = 0.7 * cosine(handle, US1, "n1") + 0.3
    assert response.results[0].score == pytest.approx(expected, abs=1e-5)
    assert response.empty_reason == ""


def test_the_floor_still_drops_memories_only_the_vector_path_found(handle):
    """Without the floor, the three places fill with notes the vector path found; with it,
    only the keyword hit stays."""
    unfloored = search(handle, US1, with_params(PIPELINES["lingxi"], {"min_similarity": None}))
    assert len(unfloored.results) == 3 and unfloored.results[0].id == "n1"
    assert all(cosine(handle, US1, r.id) < 0.3 for r in unfloored.results[1:])


def test_an_unrelated_message_finds_nothing_and_says_why(handle):
    response = search(handle, UNRELATED, "lingxi")
    assert response.results == []
    assert response.empty_reason == ("the keyword path (technical terms) matched nothing, and none "
                                     "of the 5 memories the vector path found reaches cosine 0.3")


def test_keyword_only_finds_the_error_code_and_is_silent_otherwise(handle):
    blind = dataclasses.replace(handle, embedder=None)
    response = search(blind, US1, "lingxi")
    assert (response.route, [r.id for r in response.results]) == ("keyword-only", ["n1"])
    assert response.results[0].score == pytest.approx(1.0)       # (0.7 + 0.3) · 1/(1+0)
    empty = search(blind, UNRELATED, "lingxi")
    assert (empty.route, empty.results) == ("keyword-only", [])
    assert empty.empty_reason == ("keyword-only (no query vector): the keyword path (technical "
                                  "terms) matched nothing")


# ---- issue 29 item 7: US-1 on a Chinese note store (tests/fixtures/lingxi_zh) ----------------------
# Thirteen Chinese notes: n01 alone holds E11000 (a MongoDB duplicate-key note); n13 names MongoDB
# three times without the code; eight notes share 保存/资料/报错 with the message; n10 says "Use ruff
# for linting Python code". "Embedder down" is a model that cannot be loaded: Lingxi degrades to
# its keyword path (route keyword-only), as seed 004 G3 asks.

LINGXI_ZH = ROOT / "tests" / "fixtures" / "lingxi_zh"
DOWN = "/nonexistent/embedding-model"
E11000_NOTE, RUFF_NOTE = "n01", "n10"


def lingxi_ids(query: str, embedder: str, capsys, pipeline: str = "lingxi") -> tuple[str, list[str]]:
    chosen = [] if embedder == "default" else ["--embedder", embedder]
    assert rwb_main(["--quiet", "search", str(LINGXI_ZH), query, "--pipeline", pipeline, *chosen, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    return data["route"], [r["id"] for r in data["results"]]


def test_us1_on_a_chinese_store_the_error_code_note_is_answered_first(rwb_home, capsys):
    # the default embedder of a Chinese store (use-multilingual) under seed 004's own formula
    route, ids = lingxi_ids(US1, "default", capsys)
    assert route == "hybrid" and len(ids) == 3 and ids[0] == E11000_NOTE


def test_us1_with_minilm_chosen_needs_the_keyword_first_knob(rwb_home, capsys, tmp_path):
    """MiniLM cannot read Chinese: its cosines between unrelated Chinese notes beat 0.7·cos + 0.3
    of the E11000 note, which the weighted sort leaves out of the three; keyword_first (the
    documented departure from F2) answers it first."""
    route, ids = lingxi_ids(US1, "minilm", capsys)
    assert route == "hybrid" and len(ids) == 3 and E11000_NOTE not in ids
    first = tmp_path / "lingxi_first.toml"
    first.write_text(to_toml(with_params(PIPELINES["lingxi"], {"weighted.keyword_first": True})))
    route, ids = lingxi_ids(US1, "minilm", capsys, pipeline=str(first))
    assert route == "hybrid" and len(ids) == 3 and ids[0] == E11000_NOTE


def test_us1_on_a_chinese_store_with_the_embedder_down(rwb_home, capsys):
    # the keyword path alone: the one note holding E11000, none of the eight sharing 保存/资料/报错
    assert lingxi_ids(US1, DOWN, capsys) == ("keyword-only", [E11000_NOTE])
    # the error code outweighs MongoDB named three times in n13
    assert lingxi_ids("MongoDB 保存资料报错 E11000", DOWN, capsys) == ("keyword-only", [E11000_NOTE, "n13"])
    # a message without a technical term has no keyword path: silence, not a guess
    assert lingxi_ids("保存资料时提示没有权限", DOWN, capsys) == ("keyword-only", [])


def test_an_english_technical_query_finds_its_note_keyword_only(rwb_home, capsys):
    assert lingxi_ids("How do we lint Python code?", DOWN, capsys) == ("keyword-only", [RUFF_NOTE])
