"""``rwb import``: BEIR, LoCoMo, TREC qrels/runs and markdown workspaces → the dataset format.

Fixture counts below can be checked by hand against tests/fixtures/{beir,locomo,trec,workspace}.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from eval.cli import main
from eval.importers.beir import import_beir
from eval.importers.locomo import import_locomo, parse_locomo_time
from eval.importers.markdown import chunk_markdown, import_markdown
from eval.importers.runs import read_trec_run, write_trec_run
from eval.importers.trec_qrels import import_trec_qrels, read_trec_qrels
from retrieval.dataset import DatasetError, load_dataset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SHARED = Path(__file__).resolve().parents[4] / "shared" / "datasets"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"real datasets not found at {SHARED}")


def docs_by_id(dataset):
    return {d.id: d for d in dataset.documents}


def leftovers(folder: Path) -> list[str]:
    """Temporary import folders left next to DEST."""
    return [p.name for p in folder.iterdir() if ".importing-" in p.name or ".replaced-" in p.name]


# ---------------------------------------------------------------------------
# BEIR


def test_beir_fixture_counts_and_fields(tmp_path):
    result = import_beir(FIXTURES / "beir", tmp_path / "out")
    ds = load_dataset(tmp_path / "out")
    assert (result.documents, result.queries, result.qrels) == (3, 2, 3)
    assert (len(ds.documents), len(ds.queries)) == (3, 2)
    # q3 has no judgments (dropped, as BEIR's loader does); q2 → no-such-doc is skipped
    assert result.skipped["queries without judgments"] == 1
    assert result.skipped["qrels naming an unknown document"] == 1
    assert ds.qrels == {"q1": {"conv-1:D1:1": 1, "conv-1:D1:2": 1}, "q2": {"42": 2}}
    docs = docs_by_id(ds)
    first = docs["conv-1:D1:1"]
    assert first.group == "conv-1"                                   # sample_id → group
    assert first.created_at == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)  # timestamp_iso
    assert first.extra["speaker"] == "Ann" and first.extra["sample_id"] == "conv-1"
    assert docs["42"].title == "Green tea"                           # integer id → "42"
    assert docs["42"].extra["metadata"] == {"url": "https://example.org/tea"}
    assert docs["42"].group == "" and docs["42"].created_at is None
    query = {q.id: q for q in ds.queries}["q1"]
    assert query.group == "conv-1" and query.intent == "single-hop" and query.extra["category"] == 4
    assert (tmp_path / "out" / "dataset.toml").is_file() and ds.name == "out"
    assert leftovers(tmp_path) == []


def test_beir_name_and_bad_line(tmp_path):
    result = import_beir(FIXTURES / "beir", tmp_path / "named", name="tiny-beir")
    assert result.dataset.name == "tiny-beir" == load_dataset(tmp_path / "named").name
    src = tmp_path / "bad"
    shutil.copytree(FIXTURES / "beir", src)
    with open(src / "corpus.jsonl", "a") as out:
        out.write('{"_id": "x", "text": \n')
    with pytest.raises(DatasetError, match=r"corpus\.jsonl:4: json: malformed JSON"):
        import_beir(src, tmp_path / "never")
    assert not (tmp_path / "never").exists() and leftovers(tmp_path) == []


def test_beir_missing_corpus_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no corpus.jsonl"):
        import_beir(tmp_path, tmp_path / "out")
    with pytest.raises(ValueError, match="no train.tsv"):
        import_beir(FIXTURES / "beir", tmp_path / "out", split="train")


# ---------------------------------------------------------------------------
# LoCoMo


def test_locomo_time_parsing():
    assert parse_locomo_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert parse_locomo_time("12:09 am on 13 September, 2023") == datetime(2023, 9, 13, 0, 9)
    assert parse_locomo_time("12:30 pm on 1 Jan, 2024") == datetime(2024, 1, 1, 12, 30)
    with pytest.raises(ValueError, match="not a LoCoMo date"):
        parse_locomo_time("8 May 2023")


def test_locomo_fixture(tmp_path):
    result = import_locomo(FIXTURES / "locomo" / "locomo_tiny.json", tmp_path / "lo")
    ds = load_dataset(tmp_path / "lo")
    # 5 + 2 turns; conv-1's 5 questions minus the one without evidence, plus conv-2's one
    assert (len(ds.documents), len(ds.queries), result.qrels) == (7, 5, 7)
    assert {d.group for d in ds.documents} == {q.group for q in ds.queries} == {"conv-1", "conv-2"}
    docs = docs_by_id(ds)
    assert docs["conv-1:D1:1"].text == "Ann: I adopted a puppy named Biscuit last week."
    assert docs["conv-1:D1:2"].text == "Bo: Look what I painted! [shares a photo of a painting of a sunset over a lake]"
    assert docs["conv-1:D2:1"].created_at == datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)
    assert docs["conv-1:D2:1"].extra["session"] == 2 and docs["conv-1:D2:1"].extra["dia_id"] == "D2:1"
    # latest session that has turns (conv-1's session_3 has a date but no turns)
    assert ds.reference_time == datetime(2023, 9, 13, 0, 9, tzinfo=timezone.utc)
    queries = {q.id: q for q in ds.queries}
    assert "conv-1:q2" not in queries                      # evidence [] → skipped
    q4 = queries["conv-1:q4"]
    assert (q4.intent, q4.extra["category"], q4.extra["category_name"]) == ("temporal", 2, "temporal")
    assert q4.extra["evidence"] == ["D1:3", "D2:1"]         # "D:1:3", "D2:01" repaired; "D" and repeat dropped
    assert ds.qrels["conv-1:q1"] == {"conv-1:D1:2": 1, "conv-1:D2:2": 1}   # "D1:2; D2:2" split
    assert ds.qrels["conv-1:q3"] == {"conv-1:D2:2": 1}      # D9:9 does not exist
    assert queries["conv-1:q3"].extra["adversarial_answer"] == "a bowl"
    assert result.skipped == {"questions without usable evidence": 1, "evidence ids not in their conversation": 1,
                              "malformed evidence ids": 1, "duplicate evidence ids": 1}
    assert result.repaired["evidence ids"] == 4


def test_locomo_bad_json_names_the_line(tmp_path):
    bad = tmp_path / "locomo10.json"
    bad.write_text('[\n  {"sample_id": "conv-1",\n   "qa": [}\n]\n')
    with pytest.raises(ValueError, match=r"locomo10\.json:3: json"):
        import_locomo(bad, tmp_path / "out")
    bad.write_text('[{"sample_id": "conv-1", "conversation": {"session_1_date_time": "yesterday", '
                   '"session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}, "qa": []}]')
    with pytest.raises(ValueError, match=r"session_1_date_time: not a LoCoMo date"):
        import_locomo(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


# ---------------------------------------------------------------------------
# TREC


def test_trec_qrels_onto_existing_corpus(tmp_path):
    result = import_trec_qrels(FIXTURES / "trec" / "qrels.txt", tmp_path / "tq", corpus=FIXTURES / "beir")
    ds = load_dataset(tmp_path / "tq")
    assert ds.qrels == {"q1": {"conv-1:D1:1": 2, "conv-1:D1:2": 0}, "q2": {"42": 1}}
    assert (len(ds.documents), len(ds.queries)) == (3, 2)   # q3 unjudged → dropped
    assert result.skipped["qrels naming an unknown query"] == 1   # q9
    assert (tmp_path / "tq" / "qrels" / "test.tsv").read_text().startswith("query-id\tcorpus-id\tscore\n")
    assert read_trec_qrels(FIXTURES / "trec" / "qrels.txt")["q9"] == {"42": 1}


def test_trec_qrels_bad_row(tmp_path):
    bad = tmp_path / "qrels.txt"
    bad.write_text("q1 0 conv-1:D1:1 1\nq1 conv-1:D1:2 1\n")
    with pytest.raises(DatasetError, match=r"qrels\.txt:2: row: expected 4 columns"):
        import_trec_qrels(bad, tmp_path / "out", corpus=FIXTURES / "beir")
    with pytest.raises(ValueError, match="--corpus"):
        import_trec_qrels(FIXTURES / "trec" / "qrels.txt", tmp_path / "out", corpus=tmp_path)
    assert not (tmp_path / "out").exists()


def test_trec_run_read_and_write(tmp_path):
    run = read_trec_run(FIXTURES / "trec" / "run.txt")
    assert run == {"q1": {"conv-1:D1:1": 12.5, "conv-1:D1:2": 3.25}, "q2": {"42": 7.0}}
    out = tmp_path / "run.txt"
    write_trec_run({"q1": {"b": 1.0, "a": 1.0, "c": 2.5}}, out, tag="mine")
    # ties keep the order given (b before a), ranks renumbered
    assert out.read_text().splitlines() == ["q1 Q0 c 1 2.5 mine", "q1 Q0 b 2 1.0 mine", "q1 Q0 a 3 1.0 mine"]
    out.write_text("q1 Q0 z 3 1.0 t\nq1 Q0 y 1 2.0 t\nq1 Q0 b 4 1.0 t\nq1 Q0 a 2 1.0 t\n")
    assert list(read_trec_run(out)["q1"]) == ["y", "a", "z", "b"]  # score, then the rank column
    write_trec_run(run, out, tag="again")
    assert read_trec_run(out) == run
    with pytest.raises(ValueError, match="tag"):
        write_trec_run(run, out, tag="two words")


@pytest.mark.parametrize("line, problem", [
    ("q1 Q0 d1 1 0.5", r"run\.txt:2: row: expected 6 columns"),
    ("q1 Q0 d2 first 0.5 t", r"run\.txt:2: rank: expected an integer"),
    ("q1 Q0 d2 2 nan t", r"run\.txt:2: score: expected a finite number"),
    ("q1 Q0 d1 2 0.5 t", r"run\.txt:2: docid: 'd1' listed twice .*first on line 1"),
])
def test_trec_run_errors_name_the_line(tmp_path, line, problem):
    path = tmp_path / "run.txt"
    path.write_text(f"q1 Q0 d1 1 0.9 t\n{line}\n")
    with pytest.raises(ValueError, match=problem):
        read_trec_run(path)


# ---------------------------------------------------------------------------
# Markdown workspace


@pytest.fixture
def workspace(tmp_path):
    """The fixture workspace copied out, with a fixed mtime on undated files."""
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "workspace", root)
    stamp = datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc).timestamp()
    for path in root.rglob("*.md"):
        os.utime(path, (stamp, stamp))
    return root


def test_markdown_workspace(workspace, tmp_path):
    result = import_markdown(workspace, tmp_path / "out")
    ds = load_dataset(tmp_path / "out")
    assert (len(ds.documents), len(ds.queries), ds.qrels) == (16, 0, {})
    assert not (tmp_path / "out" / "queries.jsonl").exists()
    assert result.documents == 16
    docs = docs_by_id(ds)
    # the bullet on line 7 of user/preferences.md
    pref = docs["user/preferences.md:7"]
    assert (pref.path, pref.line_start, pref.line_end) == ("user/preferences.md", 7, 7)
    assert (pref.scope, pref.memory_type, pref.title) == ("global", "preference", "Editor")
    assert pref.text == "Prefers a dark theme in every editor."
    assert pref.project == ""
    assert pref.created_at == pref.updated_at == datetime(2026, 11, 20, 12, 0, tzinfo=timezone.utc)  # mtime
    wrapped = docs["user/preferences.md:8"]                  # bullet with a continuation line
    assert (wrapped.line_start, wrapped.line_end) == (8, 9)
    assert wrapped.text == "Uses tabs, not spaces, in Python files;\nshows them four columns wide."
    assert docs["user/preferences.md:3"].title == "Preferences"  # paragraph under the # heading
    assert docs["MEMORY.md:3"].scope == "global" and docs["MEMORY.md:3"].line_end == 4
    journal = docs["journal/2026-11-19.md:5"]
    assert (journal.memory_type, journal.scope, journal.title) == ("episode", "project", "Morning")
    assert journal.project == "ws"
    assert journal.created_at == datetime(2026, 11, 19, tzinfo=timezone.utc)  # from the file name
    assert docs["memory/2026-11-18.md:1"].created_at == datetime(2026, 11, 18, tzinfo=timezone.utc)
    task = docs["TASKS.md:5"]                                # nested items stay with their parent
    assert (task.memory_type, task.line_start, task.line_end) == ("task", 5, 7)
    assert task.text == "[ ] Build the importers\n- [x] beir\n- [ ] markdown"
    pattern = docs["agent/patterns.md:5"]                    # code fence inside the bullet, "# start" no heading
    assert (pattern.memory_type, pattern.line_end) == ("pattern", 10)
    assert {d.memory_type for d in ds.documents} == {
        "fact", "preference", "instruction", "entity", "decision", "pattern", "task", "episode"}
    assert docs["user/instructions.md:4"].text == "Run the tests before committing."
    assert docs["notes.md:7"].title == "Build server"        # setext heading after front matter
    assert not any("private" in d.text for d in ds.documents)  # HTML comment
    # the markdown files travel with the dataset, so line ranges can be read back
    lines = (tmp_path / "out" / "user" / "preferences.md").read_text().splitlines()
    assert lines[pref.line_start - 1] == "- Prefers a dark theme in every editor."


def test_markdown_line_ranges_read_back(workspace, tmp_path):
    """Every memory's lines, read from the copied file as ``rwb show`` does, hold its text."""
    files = pytest.importorskip("retrieval.files")
    result = import_markdown(workspace, tmp_path / "out")
    for doc in result.dataset.documents:
        shown = files.read_memory_file(tmp_path / "out", doc.path, doc.line_start, doc.line_end)
        assert shown.count("\n") == doc.line_end - doc.line_start
        for text_line in doc.text.splitlines():
            assert text_line.strip() in shown, (doc.id, text_line)


def test_markdown_symlinks_stay_inside(workspace, tmp_path):
    outside = tmp_path / "secret.md"
    outside.write_text("- the secret outside the workspace\n")
    (workspace / "leak.md").symlink_to(outside)
    (workspace / "dir-leak").symlink_to(tmp_path, target_is_directory=True)
    (workspace / "alias.md").symlink_to(workspace / "MEMORY.md")
    result = import_markdown(workspace, tmp_path / "out", project="proj")
    texts = [d.text for d in result.dataset.documents]
    assert not any("secret" in t for t in texts)
    assert result.skipped["links pointing outside the workspace"] == 1
    assert result.skipped["linked folders (not followed)"] == 1
    assert "alias.md:3" in docs_by_id(result.dataset)        # a link inside the workspace is fine
    assert all(d.path and not d.path.startswith(("/", "..")) for d in result.dataset.documents)
    assert {d.project for d in result.dataset.documents if d.scope == "project"} == {"proj"}


def test_markdown_chunker_edge_cases():
    text = "Intro line\n\n* a\n* b\n\n  still b\n\n---\n\n## T ##\n\n| x | y |\n|---|---|\n| 1 | 2 |\n"
    chunks = chunk_markdown(text)
    assert [(c.title, c.text, c.line_start, c.line_end) for c in chunks] == [
        ("", "Intro line", 1, 1), ("", "a", 3, 3), ("", "b\n\nstill b", 4, 6),
        ("T", "| x | y |\n|---|---|\n| 1 | 2 |", 12, 14)]


def test_markdown_empty_workspace_and_dest_inside(tmp_path, workspace):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no markdown memories"):
        import_markdown(tmp_path / "empty", tmp_path / "out")
    with pytest.raises(ValueError, match="outside the workspace"):
        import_markdown(workspace, workspace / "out")
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


# ---------------------------------------------------------------------------
# Atomic writes


def test_existing_dest_needs_force_and_failed_force_keeps_it(tmp_path):
    dest = tmp_path / "out"
    import_beir(FIXTURES / "beir", dest)
    before = (dest / "corpus.jsonl").read_bytes()
    with pytest.raises(ValueError, match="already exists"):
        import_locomo(FIXTURES / "locomo" / "locomo_tiny.json", dest)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError):
        import_locomo(bad, dest, force=True)
    assert (dest / "corpus.jsonl").read_bytes() == before    # the old dataset survives a failed --force
    import_locomo(FIXTURES / "locomo" / "locomo_tiny.json", dest, force=True)
    assert len(load_dataset(dest).documents) == 7
    assert leftovers(tmp_path) == []


def test_force_refuses_a_folder_that_is_not_a_dataset(tmp_path):
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="does not look like a dataset folder"):
        import_beir(FIXTURES / "beir", dest, force=True)
    assert (dest / "notes.txt").read_text() == "keep me"


def test_validation_failure_leaves_nothing(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(FIXTURES / "beir", src)
    with open(src / "corpus.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"_id": "bad", "text": "out of range", "confidence": 7}) + "\n")
    out = tmp_path / "out"
    with pytest.raises(DatasetError, match="confidence: 7 is out of range"):
        import_beir(src, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no DEST, no temporary folder


# ---------------------------------------------------------------------------
# Command line


def test_cli_import_and_errors(tmp_path, capsys):
    assert main(["import", "beir", str(FIXTURES / "beir"), str(tmp_path / "b"), "--name", "demo"]) == 0
    out = capsys.readouterr().out
    assert "3 documents, 2 queries, 3 qrels" in out and load_dataset(tmp_path / "b").name == "demo"
    assert main(["import", "beir", str(FIXTURES / "beir"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and "already exists" in err and err.count("\n") == 1
    assert main(["import", "trec-qrels", str(FIXTURES / "trec" / "qrels.txt"), str(tmp_path / "t"),
                 "--corpus", str(FIXTURES / "beir")]) == 0
    assert main(["import", "markdown", str(FIXTURES / "workspace"), str(tmp_path / "m"), "--no-copy"]) == 0
    assert not (tmp_path / "m" / "user").exists()
    assert main(["import", "locomo", str(FIXTURES / "locomo" / "locomo_tiny.json"), str(tmp_path / "l")]) == 0
    assert main(["import", "nonsense", "a", "b"]) == 2   # a usage error: one line, no SystemExit
    assert "invalid choice: 'nonsense'" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Real data sets (../shared/datasets), skipped when absent


@needs_shared
def test_real_locomo10_matches_the_converted_files(tmp_path):
    result = import_locomo(SHARED / "locomo" / "locomo10.json", tmp_path / "locomo")
    ds = result.dataset
    assert len({d.group for d in ds.documents}) == 10
    assert (len(ds.documents), len(ds.queries), result.qrels) == (5882, 1982, 2820)
    converted = {}
    with open(SHARED / "locomo" / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            obj = json.loads(line)
            converted[obj["_id"]] = obj["timestamp_iso"]
    assert {d.id: d.created_at.replace(tzinfo=None).isoformat() for d in ds.documents} == converted
    with open(SHARED / "locomo" / "qrels" / "test.tsv", encoding="utf-8") as handle:
        pairs = {tuple(line.split("\t")[:2]) for line in handle.read().splitlines()[1:]}
    assert {(q, d) for q, docs in ds.qrels.items() for d in docs} == pairs
    assert sum(q.intent == "temporal" for q in ds.queries) == 321
    assert ds.reference_time == datetime(2024, 1, 12, 13, 41, tzinfo=timezone.utc)


@needs_shared
def test_real_beir_imports(tmp_path):
    scifact = import_beir(SHARED / "scifact", tmp_path / "scifact")
    assert (len(scifact.dataset.documents), len(scifact.dataset.queries), scifact.qrels) == (5183, 300, 339)
    assert len(load_dataset(tmp_path / "scifact").documents) == 5183
    locomo = import_beir(SHARED / "locomo", tmp_path / "locomo")
    assert len({d.group for d in locomo.dataset.documents}) == 10
    assert all(q.group for q in locomo.dataset.queries)
    assert all(d.created_at is not None for d in locomo.dataset.documents)
