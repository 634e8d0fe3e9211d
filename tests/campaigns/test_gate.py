"""The regression gate (``rwb snapshot`` / ``rwb check``) attacked from outside: a gate that can
be fooled, outputs from hostile names, and a CI that must see a result whatever happens.

Each attack broke once (issue 46, class 1 and 3; issue 41, the gate that fails closed) and now
ends in the intended verdict or in exit 2 with ONE line — and, for a check, a JUnit report and a
summary that say so. Run in this process on a copy of the tiny dataset (4 judged queries).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.campaigns.conftest import one_line_error, rwb

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    """A copy of tiny, its own RWB_HOME and a snapshot of rrf on it (``rwb snapshot --out``)."""
    from eval.cli import main

    base = tmp_path_factory.mktemp("gate")
    data, home = base / "tiny", base / "home"
    shutil.copytree(TINY, data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(home))
        snap = base / "rrf.json"
        assert main(["--quiet", "snapshot", str(data), "--pipeline", "rrf", "--out", str(snap)]) == 0
        yield data, snap


def edited(snap: Path, tmp_path: Path, change) -> Path:
    """A copy of the snapshot with ``change(record)`` applied (written with NaN/Infinity allowed)."""
    record = json.loads(snap.read_text("utf-8"))
    change(record)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(record), "utf-8")
    return out


def check(capsys, data, against, *extra):
    return rwb(capsys, "--quiet", "check", data, "--pipeline", "rrf", "--against", against, "--no-history", *extra)


# ---- a gate that cannot be fooled ---------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_snapshot_holding_a_non_finite_value_is_refused(gate, capsys, tmp_path, value):
    """Was: NaN → ``PASS … ndcg@5 +nan`` exit 0; Infinity → ``FAIL … -inf`` exit 1 with numpy
    RuntimeWarnings on stderr."""
    data, snap = gate

    def poison(record):
        for query in record["queries"].values():
            query["values"]["ndcg@5"] = value

    status, out, err = check(capsys, data, edited(snap, tmp_path, poison))
    line = one_line_error(status, err)
    assert out == "" and "ndcg@5" in line and repr(value) in line and "finite" in line, line


def test_a_snapshot_missing_a_gated_value_is_refused(gate, capsys, tmp_path):
    data, snap = gate

    def drop(record):
        del next(iter(record["queries"].values()))["values"]["ndcg@5"]

    line = one_line_error(*check(capsys, data, edited(snap, tmp_path, drop))[::2])
    assert "holds no ndcg@5 for query" in line


def test_a_comparison_over_no_shared_query_is_refused(gate, capsys, tmp_path):
    """Was: ``--allow-different-queries`` against a snapshot sharing no query: ``PASS … · 0
    queries``, exit 0."""
    data, snap = gate

    def rename(record):
        record["queries"] = {f"other-{q}": v for q, v in record["queries"].items()}

    status, out, err = check(capsys, data, edited(snap, tmp_path, rename), "--allow-different-queries")
    line = one_line_error(status, err)
    assert "share no query" in line and "0 in both" in line and out == ""


def test_a_closed_stdout_never_turns_a_pass_into_a_regression(gate, capsys, monkeypatch):
    """Was: ``rwb check … | true`` exited 1 — "regression" — for a passing check."""
    from eval.cli import main

    data, snap = gate
    read, write = os.pipe()
    os.close(read)  # the reader has gone
    closed = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stdout", closed)
    try:
        status = main(["--quiet", "check", str(data), "--pipeline", "rrf", "--against", str(snap), "--no-history"])
    finally:
        monkeypatch.undo()
        try:
            closed.close()
        except OSError:
            pass
    assert status == 0, capsys.readouterr().err


def test_a_damaged_history_writes_no_passing_report(gate, capsys, tmp_path):
    """Was: a passing ``junit.xml`` and ``summary.md`` written, then exit 2."""
    from junitparser import Error, JUnitXml

    from eval.stores.history import CheckHistory
    from retrieval.dataset import load_dataset

    data, snap = gate
    path = CheckHistory(load_dataset(data)).path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"checks": "not a list"}', "utf-8")
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    try:
        status, out, err = rwb(capsys, "--quiet", "check", data, "--pipeline", "rrf", "--against", snap,
                               "--junit", junit, "--summary", summary)
    finally:
        path.unlink()
    line = one_line_error(status, err)
    assert "damaged (not a check history)" in line and out == ""
    cases = [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]
    assert len(cases) == 1 and isinstance(cases[0].result[0], Error), [c.name for c in cases]
    assert "✅" not in summary.read_text("utf-8") and "could not be run" in summary.read_text("utf-8")


def test_exit_2_still_writes_the_junit_report_and_the_summary(gate, capsys, tmp_path):
    """Issue 41: ``rwb check --against missing.json --junit j.xml --summary s.md`` exits 2 and
    both files exist; the JUnit file parses (junitparser) with one error case carrying the line."""
    from junitparser import Error, JUnitXml

    data, _ = gate
    junit, summary = tmp_path / "out" / "j.xml", tmp_path / "out" / "s.md"
    missing = tmp_path / "missing.json"
    status, _, err = check(capsys, data, missing, "--junit", junit, "--summary", summary)
    line = one_line_error(status, err)
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    cases = [case for suite in suites for case in suite]
    assert (len(suites), len(cases), suites[0].errors, suites[0].failures) == (1, 1, 1, 0)
    error = cases[0].result[0]
    assert isinstance(error, Error) and error.message == line.removeprefix("rwb: error: ")
    assert error.message == f"--against {missing}: no such file"
    assert f"`--against {missing}: no such file`" in summary.read_text("utf-8")


def test_test_case_names_are_the_metrics_and_the_tolerance_a_property(gate, capsys, tmp_path):
    """Issue 41: a changed tolerance keeps each test case's name (and so its CI history)."""
    from junitparser import JUnitXml

    data, snap = gate
    names = []
    for tolerance in ("-0.01", "-0.05"):
        junit = tmp_path / f"j{tolerance}.xml"
        status, _, err = check(capsys, data, snap, "--fail-if", f"ndcg@5:{tolerance}", "--fail-if", "recall@5",
                               "--junit", junit)
        assert status == 0, err
        suite = next(iter(JUnitXml.fromfile(str(junit))))
        names.append(sorted(case.name for case in suite))
        properties = {p.name: p.value for p in suite.properties()}
        assert properties["tolerated.ndcg@5"] == f"{float(tolerance):+g}" and properties["tolerated.recall@5"] == "+0"
    assert names == [["ndcg@5", "recall@5"], ["ndcg@5", "recall@5"]]


@pytest.mark.parametrize("flag", ["--json", "--junit", "--summary"])
def test_an_output_that_is_the_snapshot_is_refused_and_the_snapshot_kept(gate, capsys, tmp_path, flag):
    """Was: ``--json snap.json --against snap.json`` overwrote the frozen snapshot."""
    data, snap = gate
    copy = tmp_path / "snap.json"
    shutil.copy(snap, copy)
    before = copy.read_bytes()
    line = one_line_error(*check(capsys, data, copy, flag, copy)[::2])
    assert f"{flag} {copy} is the file --against names" in line
    assert copy.read_bytes() == before


def test_two_outputs_on_one_file_are_refused(gate, capsys, tmp_path):
    data, snap = gate
    line = one_line_error(*check(capsys, data, snap, "--json", tmp_path / "x", "--junit", tmp_path / "x")[::2])
    assert "is the file --junit names" in line and not (tmp_path / "x").exists()


# ---- names are data -----------------------------------------------------------------------------

HOSTILE = "evil\x01\x1b[2J\u202e"


def test_a_hostile_snapshot_name_is_escaped_in_every_output(gate, capsys, tmp_path):
    """Was: ``\\x01`` in a name made a junit.xml XML parsers reject; ``ESC[2J`` went raw to the
    terminal."""
    from junitparser import JUnitXml
    from lxml import etree

    data, snap = gate
    junit, summary = tmp_path / "j.xml", tmp_path / "s.md"
    status, out, err = check(capsys, data, edited(snap, tmp_path, lambda r: r.update(name=HOSTILE)),
                             "--junit", junit, "--summary", summary)
    assert status == 0, err
    for text in (out, summary.read_text("utf-8"), junit.read_text("utf-8")):
        assert "\x01" not in text and "\x1b" not in text and "\u202e" not in text
    assert "vs snapshot 'evil\\x01\\x1b[2J\\u202e'" in out
    etree.parse(str(junit))  # well-formed XML
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    assert {p.name: p.value for p in suite.properties()}["snapshot"] == "evil\\x01\\x1b[2J\\u202e"


def test_a_hostile_pipeline_name_is_escaped_in_the_xml_and_the_terminal(gate, capsys, tmp_path):
    from lxml import etree

    data, snap = gate
    pipeline = tmp_path / "hostile.toml"
    pipeline.write_text('name = "rrf\\u0001\\u001b[2J"\nfusion = "rrf"\n', "utf-8")
    junit = tmp_path / "j.xml"
    status, out, err = rwb(capsys, "--quiet", "check", data, "--pipeline", pipeline, "--against", snap,
                           "--no-history", "--junit", junit)
    assert status in (0, 1), err
    assert "\x1b" not in out and "rrf\\x01\\x1b[2J vs snapshot" in out
    etree.parse(str(junit))


def test_a_huge_snapshot_name_is_refused_in_one_short_line(gate, capsys, tmp_path):
    """Was: a 2,000,000-character name gave a 2 MB stdout line, a 2 MB summary and +2 MB of
    history per check."""
    data, snap = gate
    summary = tmp_path / "s.md"
    status, out, err = check(capsys, data, edited(snap, tmp_path, lambda r: r.update(name="n" * 2_000_000)),
                             "--summary", summary)
    line = one_line_error(status, err)
    assert "at most 256 characters" in line and len(line) < 400 and out == ""
    assert summary.stat().st_size < 2_000


def test_a_huge_pipeline_name_is_refused_in_one_short_line(gate, capsys, tmp_path):
    data, snap = gate
    pipeline = tmp_path / "long.toml"
    pipeline.write_text(f'name = "{"p" * 100_000}"\nfusion = "rrf"\n', "utf-8")
    status, out, err = rwb(capsys, "--quiet", "check", data, "--pipeline", pipeline, "--against", snap)
    line = one_line_error(status, err)
    assert "100,000 characters; at most 256" in line and len(line) < 400


def test_control_characters_are_escaped_by_every_markup_helper():
    from eval.reports.markup import code, html, md, md_inline, plain

    for escape in (md, md_inline, code, html, plain):
        shown = escape("a\x01b\x1b[2Jc\x7f\u202e")
        assert not any(ch in shown for ch in "\x01\x1b\x7f\u202e"), (escape.__name__, shown)
    assert html("x\x00y") == "x\\x00y" and md_inline("q\x1b") == "q\\\\x1b"


# ---- held, and kept held ------------------------------------------------------------------------

@pytest.mark.parametrize("content", [b"", b"\xff\xfe not UTF-8", b"[" * 100_000 + b"]" * 100_000,
                                     b'{"queries": [1, 2]}', b'{"queries": {"q1": {"values": {"ndcg@5": true}, '
                                                             b'"ranking": []}}}'])
def test_held_a_hostile_snapshot_file_is_one_line(gate, capsys, tmp_path, content):
    data, _ = gate
    hostile = tmp_path / "hostile.json"
    hostile.write_bytes(content)
    status, out, err = check(capsys, data, hostile)
    assert out == "" and len(one_line_error(status, err)) < 400


@pytest.mark.parametrize("target", ["folder", "/dev/full"])
def test_held_an_odd_output_target_is_one_line(gate, capsys, tmp_path, target):
    data, snap = gate
    path = tmp_path if target == "folder" else Path(target)
    status, out, err = check(capsys, data, snap, "--json", path)
    assert len(one_line_error(status, err)) < 400 and Path("/dev/full").is_char_device()
