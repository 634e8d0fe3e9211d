"""``rwb import ubi``: implicit judgments from UBI logs by COEC, kept apart, with agreement.

``test_srw_coec_on_an_edge_log`` holds the default model equal to OpenSearch SRW's
``CoecClickModel``, computed by hand in its comments. The first log below (impressions only as
``query_response_hit_ids``) is read by our own variant, ``--model coec-rwb``, over the runs
fixture (tests/fixtures/runs: q1 "how does rank fusion combine the paths", q2 "what is in a
qrels or run file"):
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

import hashlib
import json
import math

import numpy as np
import pytest

from eval.cli import main
from eval.importers._coec import Event, java_3f, rwb_coec, srw_coec, srw_rank_ctr
from eval.importers._sampling import pps_sample, random_sample, top_n
from eval.importers.ubi import agreement, grade_of, import_ubi, read_logs
from eval.stores.judgments import effective_qrels
from retrieval.dataset import DatasetError, load_dataset
from tests.eval.importers.test_runs import QUICK_EVAL, import_fixture

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
    """The runs fixture imported as a dataset (tests/eval/importers/test_runs.py)."""
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    return import_fixture(tmp_path / "mine").dest


def test_coec_rwb_by_hand(logs):
    searches, events, _ = read_logs(*logs, ("click",))
    coec = rwb_coec(searches, events, ("click",), 20)
    assert coec[Q1] == pytest.approx({"d1": 12 / 7, "d2": 0.0, "d3": 1.0})
    assert coec[Q2] == pytest.approx({"d7": 0.0, "d1": 1.5})
    assert [grade_of(x) for x in (0.0, 0.5, 1.0, 12 / 7, 2.0, 2.5)] == [0, 1, 2, 2, 2, 3]


def test_import_writes_implicit_judgments_apart(dataset, logs, tmp_path):
    explicit_before = (dataset / "qrels" / "test.tsv").read_text()
    result = import_ubi(dataset, queries=logs[0], events=logs[1], model="coec-rwb")
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
        import_ubi(dataset, queries=logs[0], events=logs[1], model="coec-rwb")


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
        main(["import", "ubi", str(dataset), "--queries", str(logs[0]), "--events", str(logs[1]),
              "--model", "coec-rwb"])
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


# ---- SRW's COEC (the default model) ----------------------------------------------------------

SRW_MAX_RANK = 3


def event(query_id: str, doc: str, ordinal: int, action: str, n: int, **extra) -> dict:
    return {**click(query_id, doc, ordinal, action), "event_id": f"e{n}", **extra}


def edge_events() -> list[dict]:
    """Repeated positions, a click on an unlisted document, positions at and beyond max rank."""
    plan = [
        # a1 (q1): shown d1@0 d2@1 d3@2 d4@3 (at max rank) d5@4 (beyond); clicks d1 d3 d4 d5
        ("a1", "d1", 0, "impression"), ("a1", "d2", 1, "impression"),
        ("a1", "d3", 2, "impression"), ("a1", "d4", 3, "impression"),
        ("a1", "d5", 4, "impression"),
        ("a1", "d1", 0, "click"), ("a1", "d3", 2, "click"), ("a1", "d4", 3, "click"),
        ("a1", "d5", 4, "click"),
        # a2 (q1): shown d2@0 d1@1 d3@2 (d1 and d2 at a second position); clicks d1, d6 unlisted
        ("a2", "d2", 0, "impression"), ("a2", "d1", 1, "impression"),
        ("a2", "d3", 2, "impression"),
        ("a2", "d1", 1, "click"), ("a2", "d6", 1, "click"),
        # b1 (q2): shown d7@0 d1@1; click d1; a hover on d8
        ("b1", "d7", 0, "impression"), ("b1", "d1", 1, "impression"), ("b1", "d1", 1, "click"),
        ("b1", "d8", 2, "hover"),
        # z1 ("not a query"): counts in the CTR by position only
        ("z1", "d1", 0, "impression"), ("z1", "d9", 1, "impression"), ("z1", "d1", 0, "click"),
    ]
    return [event(q, d, o, a, n) for n, (q, d, o, a) in enumerate(plan)]


# By hand, SRW's CoecClickModel with max rank 3 on edge_events():
# 1. CTR by position, events at ordinal ≤ 3 (d5's two events at 4 drop out):
#    impressions @0: a1 d1, a2 d2, b1 d7, z1 d1 = 4; @1: a1 d2, a2 d1, b1 d1, z1 d9 = 4;
#    @2: a1 d3, a2 d3 = 2; @3: a1 d4 = 1 (the 4th most frequent position; the aggregation
#    keeps 3, and there is no CTR at 3 anyway).
#    clicks @0: a1 d1, z1 d1 = 2; @1: a2 d1, a2 d6 (unlisted, still a click at 1), b1 d1 = 3;
#    @2: a1 d3 = 1; @3: a1 d4 = 1.
#    ctr(0) = 2/4 = 0.5, ctr(1) = 3/4 = 0.75, ctr(2) = 1/2 = 0.5.
# 2./3. Per pair: clicks / (ctr(best position) × impressions), "%.3f":
#    q1 d1: 2 clicks, 2 impressions (@0, @1), best 0: 2 / (0.5 × 2) = 2.000
#    q1 d2: 0 clicks, 2 impressions (@1, @0), best 0: 0 / (0.5 × 2) = 0.000
#    q1 d3: 1 click, 2 impressions (@2, @2), best 2: 1 / (0.5 × 2) = 1.000
#    q1 d4: 1 click, 1 impression at 3 = max rank: no CTR at 3, expected 0 → 0.000
#    q1 d5: every event at 4 > max rank: not judged
#    q1 d6: 1 click, 0 impressions (never shown): expected 0.75 × 0 = 0 → 0.000
#    q2 d1: 1 click, 1 impression @1: 1 / (0.75 × 1) = 1.333
#    q2 d7: 0 clicks, 1 impression @0: 0.000;  q2 d8: a hover only: 0.000
# Grades (coec-0-3): 2.000 → 2, 1.000 → 2, 1.333 → 2, 0.000 → 0.
SRW_VALUES = {
    ("q1", "d1"): "2.000", ("q1", "d2"): "0.000", ("q1", "d3"): "1.000",
    ("q1", "d4"): "0.000", ("q1", "d6"): "0.000",
    ("q2", "d1"): "1.333", ("q2", "d7"): "0.000", ("q2", "d8"): "0.000",
}


@pytest.fixture
def edge_logs(tmp_path):
    queries = [  # the hit lists disagree with the impression events: SRW does not read them
        {"query_id": "a1", "user_query": Q1, "query_response_hit_ids": ["d1", "d2"]},
        {"query_id": "a2", "user_query": Q1, "query_response_hit_ids": ["d2", "d1", "d3", "d6"]},
        {"query_id": "b1", "user_query": Q2, "query_response_hit_ids": ["d7", "d1"]},
        {"query_id": "z1", "user_query": "not a query", "query_response_hit_ids": ["d1"]},
    ]
    (tmp_path / "edge_queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (tmp_path / "edge_events.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in edge_events())
    )
    return tmp_path / "edge_queries.jsonl", tmp_path / "edge_events.jsonl"


def written(dataset, name: str) -> dict:
    rows = (dataset / "qrels" / name).read_text().splitlines()[1:]
    return {(q, d): v for q, d, v in (row.split("\t") for row in rows)}


def test_srw_coec_on_an_edge_log(dataset, edge_logs):
    import_ubi(dataset, queries=edge_logs[0], events=edge_logs[1], max_rank=SRW_MAX_RANK)
    assert written(dataset, "implicit_coec.tsv") == SRW_VALUES
    assert written(dataset, "implicit.tsv") == {
        pair: str(grade_of(value)) for pair, value in SRW_VALUES.items()
    }
    assert written(dataset, "implicit.tsv")[("q1", "d6")] == "0"  # a click alone is no grade 3


def test_srw_rank_ctr_keeps_the_aggregations_buckets():
    """Max rank 2: the ordinal aggregation keeps the 2 most frequent positions. Impressions
    @0 ×3, @1 ×1, @2 ×2 → buckets @0, @2: position 1's impression is not counted, so
    ctr(1) = 0 although a click at 1 was logged; ctr(0) = 1 click / 3 = 1/3."""
    events = [Event("impression", "a", Q1, f"d{i}", 0) for i in range(3)]
    events += [Event("impression", "a", Q1, "d3", 1), Event("click", "a", Q1, "d3", 1)]
    events += [Event("impression", "a", Q1, f"d{i}", 2) for i in (4, 5)]
    events += [Event("Click", "a", Q1, "d0", 0)]  # equal to click ignoring case (Java)
    assert srw_rank_ctr(events, 2) == {0: pytest.approx(1 / 3), 1: 0.0}
    assert srw_coec(events, 2)[Q1]["d3"] == "0.000"


def test_java_rounding_and_the_grade_mapping():
    # Java's %.3f rounds the shortest decimal half-up; Python's format would give 2.000
    assert [java_3f(x) for x in (2.0005, 0.0005, 1 / 3, 2 / 3, 0.0)] == [
        "2.001", "0.001", "0.333", "0.667", "0.000"
    ]
    assert [grade_of(v) for v in ("0.000", "0.001", "0.999", "1.000", "2.000", "2.001")] == [
        0, 1, 1, 2, 2, 3
    ]


def test_an_event_logged_again_counts_once(dataset, edge_logs):
    copies = [event("b1", "d1", 1, "click", 999)] * 50  # one click, logged 50 times
    with open(edge_logs[1], "a") as handle:
        handle.write("".join(json.dumps(e) + "\n" for e in copies))
    result = import_ubi(dataset, queries=edge_logs[0], events=edge_logs[1], max_rank=SRW_MAX_RANK)
    # one more click at 1: ctr(1) = 4/4 = 1; q2 d1 = 2 clicks / (1 × 1 impression) = 2.000
    # (counted 50 times: ctr(1) = 53/4, q2 d1 = 51 / 13.25 = 3.849, grade 3)
    assert written(dataset, "implicit_coec.tsv")[("q2", "d1")] == "2.000"
    assert result.skipped["events logged again (same event_id)"] == 49


def test_a_symlink_inside_the_dataset_is_not_written_through(dataset, edge_logs, tmp_path, capsys):
    outside = tmp_path / "bashrc"
    outside.write_text("export KEEP=1\n")
    (dataset / "qrels" / "implicit_coec.tsv").symlink_to(outside)
    args = ["import", "ubi", str(dataset), "--queries", str(edge_logs[0]),
            "--events", str(edge_logs[1])]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and "outside the dataset folder" in err
    assert len(err.strip().splitlines()) == 1
    assert outside.read_text() == "export KEEP=1\n"
    assert not (dataset / "qrels" / "implicit.tsv").exists()
    (dataset / "qrels" / "implicit_coec.tsv").unlink()
    (dataset / "qrels" / "implicit.tsv").symlink_to(outside)  # with --force too
    assert main([*args, "--force"]) == 2
    assert outside.read_text() == "export KEEP=1\n"
    assert not (dataset / "qrels" / "implicit_coec.tsv").exists()


# ---- query sets sampled from the log (SRW's samplers) -----------------------------------------


def test_samplers_by_hand():
    texts = ["a", "b", "a", "c", "", "b", "a", " "]
    # topn: counts without "": a 3, b 2, c 1, " " 1; the 3 most frequent (ties by text, " " < c)
    # are a, b, " "; " " is blank once trimmed and dropped, so 2 are left
    assert top_n(texts, 3) == {"a": 3, "b": 2}
    # random: each search's score, "" skipped; a text keeps its best: a .9, b .5, c .3, " " .6
    scores = np.array([0.1, 0.5, 0.9, 0.3, 0.99, 0.2, 0.4, 0.6])
    assert list(random_sample(texts, 2, scores).items()) == [("a", 3), (" ", 1)]
    # pptss: shares in order of first appearance a 3/8, b 2/8, c 1/8, "" 1/8, " " 1/8, so the
    # cumulative edges are .375 .625 .75 .875 1; draws .1 → a, .5 → b, .2 → a (kept once),
    # .74 → c, .99 → " "
    picked = pps_sample(texts, np.array([0.1, 0.5, 0.2, 0.74, 0.99]))
    assert list(picked.items()) == [("a", 3), ("b", 2), ("c", 1), (" ", 1)]


def test_sample_adds_the_query_set_and_judges_it_alone(dataset, logs):
    before = (dataset / "queries.jsonl").read_text()
    result = import_ubi(dataset, queries=logs[0], events=logs[1], model="coec-rwb", sample=2,
                        sampler="topn")
    # topn 2 of the searched texts (Q1 twice, Q2 once, "not a query" once; ties by text):
    # Q1 (query q1) and "not a query" (new, id ubi- + the first 10 hex of its sha1)
    new_id = "ubi-" + hashlib.sha1(b"not a query").hexdigest()[:10]
    added = (dataset / "queries.jsonl").read_text()[len(before):]
    assert json.loads(added) == {"_id": new_id, "text": "not a query", "ubi_frequency": 1}
    # coec-rwb (first log): q1 as by hand above; "not a query" d1 = 1 / ctr(0) = 1 / (1/2) = 2
    home = dataset.parent / "home"
    assert effective_qrels(load_dataset(dataset), home, source="implicit").qrels == {
        "q1": {"d1": 2, "d2": 0, "d3": 2},
        new_id: {"d1": 2},
    }
    assert any("query set sampled (topn, seed 0, 2 asked): 2 texts, 1 added" in n
               for n in result.notes)


def test_sample_is_reproducible_by_seed(tmp_path, logs, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    outputs = []
    for copy in ("one", "two"):
        root = import_fixture(tmp_path / copy).dest
        args = ["import", "ubi", str(root), "--queries", str(logs[0]), "--events", str(logs[1]),
                "--model", "coec-rwb", "--sample", "2", "--sampler", "pptss", "--seed", "7"]
        assert main(args) == 0
        outputs.append([(root / f).read_text() for f in ("queries.jsonl", "qrels/implicit.tsv")])
    assert outputs[0] == outputs[1]
    assert main(["import", "ubi", str(root), "--queries", str(logs[0]), "--events",
                 str(logs[1]), "--sample", "2", "--sampler", "most", "--force"]) == 2


def test_an_event_without_an_object_counts_in_the_ctr_only(tmp_path):
    (tmp_path / "q.jsonl").write_text(json.dumps({"query_id": "a1", "user_query": Q1}) + "\n")
    shown = event("a1", "d1", 0, "impression", 1)
    unnamed = event("a1", "d1", 0, "impression", 2)
    del unnamed["event_attributes"]["object"]
    lines = [shown, event("a1", "d1", 0, "click", 3), unnamed]
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    _, events, skipped = read_logs(tmp_path / "q.jsonl", tmp_path / "e.jsonl")
    assert skipped["events without an object id or a search (counted in the CTR only)"] == 1
    # ctr(0) = 1 click / 2 impressions (one of them without an object): d1 = 1 / (1/2 × 1) = 2
    assert srw_coec(events, 3) == {Q1: {"d1": "2.000"}}


def test_a_qrels_folder_linked_outside_is_not_written_into(dataset, edge_logs, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (dataset / "qrels" / "test.tsv").rename(outside / "test.tsv")
    (dataset / "qrels").rmdir()
    (dataset / "qrels").symlink_to(outside)
    with pytest.raises(ValueError, match="outside the dataset folder"):     # refused when read, before any write
        import_ubi(dataset, queries=edge_logs[0], events=edge_logs[1])
    assert sorted(p.name for p in outside.iterdir()) == ["test.tsv"]
