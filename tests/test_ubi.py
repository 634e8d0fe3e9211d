"""``rwb import ubi``: implicit judgments from UBI logs by COEC, kept apart, with agreement.

The log (written below) over the runs fixture (tests/fixtures/runs: q1 "how does rank fusion
combine the paths", q2 "what is in a qrels or run file"):
searches a1 q1 [d1 d2 d3], a2 q1 [d2 d1 d3], b1 q2 [d7 d1], z1 "not a query" [d1];
clicks a1 d1 @0, a2 d1 @1, b1 d1 @1, a1 d3 @2, z1 d1 @0 (plus a hover, ignored).
CTR by position: @0 2 clicks / 4 shown = 1/2, @1 2/3, @2 1/2. COEC:
q1 d1 = 2 / (1/2 + 2/3) = 12/7, q1 d2 = 0, q1 d3 = 1 / (1/2 + 1/2) = 1, q2 d7 = 0,
q2 d1 = 1 / (2/3) = 3/2  → grades 2, 0, 2, 0, 2.
Explicit qrels: q1 d3 2, d1 1; q2 d7 1, d8 1. On the 5 pairs both judge, relevant by
(explicit, implicit): (1,1) (0,0) (1,1) (1,0) (0,1): observed agreement 3/5, chance
(3/5·3/5 + 2/5·2/5) = 13/25, kappa = (3/5 − 13/25) / (1 − 13/25) = 1/6.
"""

from __future__ import annotations

import json
import math

import pytest

from eval.cli import main
from eval.importers.ubi import agreement, coec_judgments, grade_of, import_ubi, read_logs
from eval.stores.judgments import effective_qrels
from retrieval.dataset import DatasetError, load_dataset
from tests.test_runs import QUICK_EVAL, import_fixture

Q1, Q2 = "how does rank fusion combine the paths", "what is in a qrels or run file"


def click(query_id: str, doc: str, ordinal: int, action: str = "click") -> dict:
    return {
        "action_name": action,
        "query_id": query_id,
        "client_id": "c",
        "event_attributes": {
            "object": {"object_id": doc, "object_id_field": "_id"},
            "position": {"ordinal": ordinal},
        },
    }


@pytest.fixture
def logs(tmp_path):
    queries = [
        {"query_id": "a1", "user_query": Q1, "query_response_hit_ids": ["d1", "d2", "d3"]},
        {"query_id": "a2", "user_query": Q1, "query_response_hit_ids": ["d2", "d1", "d3"]},
        {"query_id": "b1", "user_query": Q2, "query_response_hit_ids": ["d7", "d1"]},
        {"query_id": "z1", "user_query": "not a query", "query_response_hit_ids": ["d1"]},
    ]
    events = [
        click("a1", "d1", 0),
        click("a2", "d1", 1),
        click("b1", "d1", 1),
        click("a1", "d3", 2),
        click("z1", "d1", 0),
        click("a1", "d2", 1, action="hover"),
    ]
    (tmp_path / "ubi_queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (tmp_path / "ubi_events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return tmp_path / "ubi_queries.jsonl", tmp_path / "ubi_events.jsonl"


@pytest.fixture
def dataset(tmp_path, monkeypatch):
    """The runs fixture imported as a dataset (tests/test_runs.py)."""
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    return import_fixture(tmp_path / "mine").dest


def test_coec_by_hand(logs):
    searches, events, skipped = read_logs(*logs, ("click",))
    assert skipped["events of other actions"] == 1
    coec = coec_judgments(searches, events)
    assert coec[Q1] == pytest.approx({"d1": 12 / 7, "d2": 0.0, "d3": 1.0})
    assert coec[Q2] == pytest.approx({"d7": 0.0, "d1": 1.5})
    assert [grade_of(x) for x in (0.0, 0.5, 1.0, 12 / 7, 2.0, 2.5)] == [0, 1, 2, 2, 2, 3]


def test_import_writes_implicit_judgments_apart(dataset, logs, tmp_path):
    explicit_before = (dataset / "qrels" / "test.tsv").read_text()
    result = import_ubi(dataset, queries=logs[0], events=logs[1])
    assert (dataset / "qrels" / "implicit.tsv").read_text() == (
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq1\td3\t2\nq2\td1\t2\nq2\td7\t0\n"
    )
    assert (dataset / "qrels" / "test.tsv").read_text() == explicit_before
    assert effective_qrels(load_dataset(dataset), tmp_path, source="implicit").qrels == {
        "q1": {"d1": 2, "d2": 0, "d3": 2},
        "q2": {"d1": 2, "d7": 0},
    }
    assert load_dataset(dataset).qrels["q1"] == {"d3": 2, "d1": 1}
    assert result.skipped["searched texts that are no query of the dataset"] == 1
    assert any("on 5 pairs: Cohen's kappa 0.167" in note for note in result.notes)
    with pytest.raises(ValueError, match="already exists"):
        import_ubi(dataset, queries=logs[0], events=logs[1])


def test_agreement_by_hand():
    explicit = {"q1": {"d3": 2, "d1": 1}, "q2": {"d7": 1, "d8": 1}}
    implicit = {"q1": {"d1": 2, "d2": 0, "d3": 2}, "q2": {"d7": 0, "d1": 2}}
    found = agreement(explicit, implicit)
    assert found["pairs"] == 5 and found["kappa"] == pytest.approx(1 / 6)
    assert math.isnan(agreement(explicit, {"q9": {"d1": 1}})["kappa"])


def test_cli_import_then_evaluate_on_implicit_judgments(dataset, logs, capsys):
    assert main(["eval", str(dataset), "--judgments", "implicit", "--pipeline", "rrf"]) == 2
    assert "rwb import ubi" in capsys.readouterr().err
    assert (
        main(["import", "ubi", str(dataset), "--queries", str(logs[0]), "--events", str(logs[1])])
        == 0
    )
    captured = capsys.readouterr()
    assert "Cohen's kappa 0.167" in captured.err and "ubi:" in captured.out
    implicit = ["--judgments", "implicit", "--pipeline", "rrf"]
    assert main(["eval", str(dataset), *implicit, *QUICK_EVAL]) == 0


def test_bad_log_lines_name_file_and_line(dataset, tmp_path, logs):
    bad = tmp_path / "bad_events.jsonl"
    bad.write_text(
        json.dumps(click("a1", "d1", 0)) + "\n" + json.dumps(click("a1", "d1", -2)) + "\n"
    )
    with pytest.raises(DatasetError) as caught:
        import_ubi(dataset, queries=logs[0], events=bad)
    assert caught.value.problems == [
        "bad_events.jsonl:2: ordinal: expected a whole number ≥ 0, got -2"
    ]
