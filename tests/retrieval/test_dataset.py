"""The dataset loader: every problem as ``file:line: field: what is wrong``, defaults for
missing metadata, and the reference time."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from retrieval.dataset import DatasetError, load_dataset
from tests.conftest import TINY

PROBLEM = re.compile(r"^(corpus\.jsonl|queries\.jsonl|qrels/test\.tsv|dataset\.toml):\d+: [\w-]+: \S.*$")


def write_dataset(root: Path, corpus: list | bytes, queries: list | bytes | None = None,
                  qrels: str | None = None, card: str | None = None) -> Path:
    """A dataset folder; JSONL given as a list of objects or raw strings, or as raw bytes."""
    root.mkdir(parents=True, exist_ok=True)

    def jsonl(items) -> bytes:
        if isinstance(items, bytes):
            return items
        return "\n".join(i if isinstance(i, str) else json.dumps(i, ensure_ascii=False) for i in items).encode()

    (root / "corpus.jsonl").write_bytes(jsonl(corpus))
    if queries is not None:
        (root / "queries.jsonl").write_bytes(jsonl(queries))
    if qrels is not None:
        (root / "qrels").mkdir(exist_ok=True)
        (root / "qrels" / "test.tsv").write_text(qrels, "utf-8")
    if card is not None:
        (root / "dataset.toml").write_text(card, "utf-8")
    return root


def problems_of(root: Path) -> list[str]:
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    for problem in caught.value.problems:
        assert PROBLEM.match(problem), f"not 'file:line: field: what is wrong': {problem!r}"
    return caught.value.problems


def test_tiny_fixture_loads(tiny):
    assert tiny.name == "tiny"
    assert len(tiny.documents) == 10 and len(tiny.queries) == 4
    assert tiny.qrels["q1"] == {"d03": 3}
    assert tiny.reference_time == datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)
    assert tiny.languages == ("en", "zh")
    d05 = next(d for d in tiny.documents if d.id == "d05")
    assert (d05.confidence, d05.vitality, d05.scope, d05.project) == (0.4, 20.0, "project", "ledger-api")
    assert next(d for d in tiny.documents if d.id == "d03").related == ("d04",)


def test_every_problem_reported_with_file_line_and_field(tmp_path):
    good = {"_id": "a", "text": "fine"}
    corpus = [
        json.dumps(good),                                              # 1
        '{"_id": "b", "text": "unterminated',                          # 2
        json.dumps({"text": "no id"}),                                 # 3
        json.dumps({"_id": "c"}),                                      # 4
        json.dumps({"_id": "a", "text": "again"}),                     # 5
        json.dumps({"_id": "d", "text": "t", "confidence": 1.5}),      # 6
        json.dumps({"_id": "e", "text": "t", "vitality": 120}),        # 7
        json.dumps({"_id": "f", "text": "t", "created_at": "2026-02-30"}),  # 8
        json.dumps({"_id": "g", "text": "t", "scope": "team"}),        # 9
        json.dumps({"_id": "h", "text": "t", "related": ["nowhere"]}),  # 10
        json.dumps({"_id": "i", "text": "t", "reinforcement": 1.5}),   # 11
        "[1, 2]",                                                      # 12
    ]
    queries = [json.dumps({"_id": "q1", "text": "a query"}), json.dumps({"_id": "q1", "text": "twice"})]
    qrels = "query-id\tcorpus-id\tscore\nq1\ta\t1\nqX\ta\t1\nq1\tzzz\t1\nq1\ta\thigh\nq1\ta\n"
    root = write_dataset(tmp_path / "broken", "\n".join(corpus).encode() + b"\n\xff\xfe{}", queries, qrels)
    problems = problems_of(root)
    expected = [
        "corpus.jsonl:2: json: malformed JSON",
        "corpus.jsonl:3: _id: missing or empty",
        "corpus.jsonl:4: text: missing or empty",
        "corpus.jsonl:5: _id: duplicate id 'a' (first on line 1)",
        "corpus.jsonl:6: confidence: 1.5 is out of range",
        "corpus.jsonl:7: vitality: 120 is out of range",
        "corpus.jsonl:8: created_at: not an ISO 8601 date/time: '2026-02-30'",
        "corpus.jsonl:9: scope: 'team' is not one of ['global', 'project']",
        "corpus.jsonl:10: related: 'h' links to unknown document 'nowhere'",
        "corpus.jsonl:11: reinforcement: expected an integer, got 1.5",
        "corpus.jsonl:12: json: expected a JSON object",
        "corpus.jsonl:13: encoding: not valid UTF-8",
        "queries.jsonl:2: _id: duplicate id 'q1' (first on line 1)",
        "qrels/test.tsv:3: query-id: unknown query 'qX'",
        "qrels/test.tsv:4: corpus-id: unknown document 'zzz'",
        "qrels/test.tsv:5: score: expected an integer grade, got 'high'",
        "qrels/test.tsv:6: row: expected 3 columns",
    ]
    for start in expected:
        assert any(p.startswith(start) for p in problems), f"missing {start!r} in {problems}"
    assert len(problems) == len(expected)


def test_byte_order_mark_is_reported(tmp_path):
    root = write_dataset(tmp_path / "bom", b"\xef\xbb\xbf" + json.dumps({"_id": "a", "text": "t"}).encode())
    assert problems_of(root) == [
        "corpus.jsonl:1: encoding: starts with a UTF-8 byte-order mark (BOM); save it as plain UTF-8"]


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file_is_reported(tmp_path, content):
    root = write_dataset(tmp_path / "empty", content)
    assert problems_of(root) == ["corpus.jsonl:1: file: is empty"]


def test_empty_queries_file_is_reported(tmp_path):
    root = write_dataset(tmp_path / "noq", [{"_id": "a", "text": "t"}], queries=b"")
    assert problems_of(root) == ["queries.jsonl:1: file: is empty"]


def test_dataset_toml_problems_name_their_line(tmp_path):
    root = write_dataset(tmp_path / "badtoml", [{"_id": "a", "text": "t"}], card='name = "x"\nlicense = = "MIT"\n')
    [problem] = problems_of(root)
    assert problem.startswith("dataset.toml:2: toml: ")
    root = write_dataset(tmp_path / "badtime", [{"_id": "a", "text": "t"}],
                         card='name = "x"\nreference_time = "2026-02-30"\n')
    assert problems_of(root) == ["dataset.toml:2: reference_time: not an ISO 8601 date/time: '2026-02-30'"]


def test_missing_folder_or_corpus(tmp_path):
    with pytest.raises(DatasetError, match="not a dataset folder"):
        load_dataset(tmp_path / "nowhere")
    (tmp_path / "nocorpus").mkdir()
    with pytest.raises(DatasetError, match="corpus.jsonl: missing"):
        load_dataset(tmp_path / "nocorpus")


def test_problem_list_is_shortened_in_the_message_but_complete(tmp_path):
    root = write_dataset(tmp_path / "many", [{"_id": f"d{i}", "text": "t", "vitality": 101} for i in range(30)])
    with pytest.raises(DatasetError) as caught:
        load_dataset(root)
    assert len(caught.value.problems) == 30
    assert str(caught.value).endswith("… and 10 more problems")


def test_defaults_for_missing_metadata(tmp_path):
    root = write_dataset(tmp_path / "bare", [
        {"_id": "a", "text": "just text"},
        {"_id": 7, "text": "dated", "created_at": "2026-03-01T12:00:00"},
    ])
    dataset = load_dataset(root)
    bare, dated = dataset.documents
    assert (bare.scope, bare.memory_type, bare.confidence, bare.vitality) == ("global", "fact", 1.0, 50.0)
    assert (bare.reinforcement, bare.access_count, bare.title, bare.path, bare.related) == (0, 0, "", "", ())
    assert bare.created_at is None and bare.updated_at is None
    assert dated.id == "7"  # integer ids are read as strings
    assert dated.created_at == datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)  # naive → UTC
    assert dated.updated_at == dated.created_at  # updated_at defaults to created_at
    assert dataset.queries == () and dataset.qrels == {}


def test_reference_time_from_dataset_toml(tmp_path):
    root = write_dataset(tmp_path / "ref", [{"_id": "a", "text": "t", "created_at": "2026-01-01T00:00:00Z"}],
                         card='reference_time = "2026-11-20T18:00:00+00:00"\n')
    assert load_dataset(root).reference_time == datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)
    # a TOML datetime works too, and a naive one is UTC
    (root / "dataset.toml").write_text("reference_time = 2026-11-20T18:00:00\n", "utf-8")
    assert load_dataset(root).reference_time == datetime(2026, 11, 20, 18, 0, tzinfo=timezone.utc)


def test_reference_time_defaults_to_the_newest_memory(tmp_path):
    root = write_dataset(tmp_path / "noref", [
        {"_id": "a", "text": "t", "created_at": "2026-01-01T00:00:00Z"},
        {"_id": "b", "text": "t", "created_at": "2026-02-01T00:00:00Z", "updated_at": "2026-05-05T00:00:00Z"},
    ], queries=[{"_id": "q", "text": "x", "reference_time": "2026-06-01T00:00:00Z"}, {"_id": "r", "text": "y"}])
    dataset = load_dataset(root)
    assert dataset.reference_time == datetime(2026, 5, 5, tzinfo=timezone.utc)
    q, r = dataset.queries
    assert dataset.query_reference_time(q) == datetime(2026, 6, 1, tzinfo=timezone.utc)
    assert dataset.query_reference_time(r) == datetime(2026, 5, 5, tzinfo=timezone.utc)


def test_fingerprint_changes_with_the_data(tmp_path, tiny):
    import shutil

    copy = tmp_path / "tiny"
    shutil.copytree(TINY, copy)
    assert load_dataset(copy).fingerprint == tiny.fingerprint
    with open(copy / "qrels" / "test.tsv", "a", encoding="utf-8") as handle:
        handle.write("q2\td02\t1\n")
    assert load_dataset(copy).fingerprint != tiny.fingerprint


def test_trec_qrels_layout_is_accepted(tmp_path):
    root = write_dataset(tmp_path / "trec", [{"_id": "a", "text": "t"}], [{"_id": "q", "text": "x"}],
                         qrels="q 0 a 2\n")
    assert load_dataset(root).qrels == {"q": {"a": 2}}


def test_document_fields_are_declared_once_and_the_rows_carry_them():
    """The loader's field list, defaults and bounds come from ``Document``'s declarations, and
    the candidate rows' document features are declared numbers of it (issue 43 item 5)."""
    import dataclasses

    from retrieval.dataset import DOC_FIELDS, DOC_NUMBERS, ROW_FEATURES, Document

    assert DOC_FIELDS == {"_id"} | {f.name for f in dataclasses.fields(Document)} - {"id", "extra"}
    bounds = {name: (knob.min, knob.max, default) for name, knob, default in DOC_NUMBERS}
    assert bounds["vitality"] == (0.0, 100.0, 50.0) and bounds["confidence"] == (0.0, 1.0, 1.0)
    assert set(ROW_FEATURES) <= set(bounds)
