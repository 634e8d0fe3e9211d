"""The engine's commands of ``rwb``: index, search, pipelines. Bad input exits non-zero
with one ``rwb: error:`` line and no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.pipeline import PIPELINES
from tests.conftest import ROOT, TINY, rwb_here

RWB = Path(sys.executable).with_name("rwb")
REQUIRED = ["vector", "bm25", "rrf", "seed-salience", "seed-adaptive", "openclaw", "vector-threshold", "lingxi"]


def rwb(*args: str, home: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    command = [str(RWB)] if RWB.exists() else [sys.executable, "-m", "eval.cli"]
    env = os.environ | {"RWB_HOME": str(home), "HF_HUB_OFFLINE": "1", "LANCEDB_LOG": "error"}
    return subprocess.run([*command, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def main(*args: str) -> int:
    from eval.cli import main as rwb_main

    return rwb_main(list(args))


def test_search_json_prints_one_object(tiny_index, rwb_home):
    """Run as a user would (a fresh process, the session's index already built)."""
    done = rwb("search", str(TINY), "ERR_CONN_REFUSED", "--json", home=rwb_home)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    body = json.loads(done.stdout)
    assert {"query", "pipeline", "route", "profile", "degraded", "total_tokens", "budget_remaining",
            "results"} <= set(body)
    assert (body["query"], body["pipeline"], body["route"], body["degraded"]) == (
        "ERR_CONN_REFUSED", "rrf", "hybrid", [])
    first = body["results"][0]
    assert {"id", "rank", "score", "components", "path", "text"} <= set(first)
    assert (first["id"], first["rank"], first["path"]) == ("d03", 0, "agent/patterns.md")
    assert first["score"] == pytest.approx(1 / (60 + 0 + 1) + 1 / (60 + 0 + 1))
    assert first["components"] == pytest.approx({"dense": 1 / (60 + 0 + 1), "sparse": 1 / (60 + 0 + 1)})
    assert body["total_tokens"] == sum(_tokens(r["text"]) for r in body["results"])


def _tokens(text):
    from retrieval.candidates import token_count

    return token_count(text)


@pytest.mark.parametrize("args, reason", [
    (["search", "no/such/dataset", "x"], "rwb: error: invalid dataset: no/such/dataset: not a dataset folder"),
    (["search", str(TINY), "x", "--pipeline", "nope"], "rwb: error: unknown pipeline 'nope'"),
    (["search", str(TINY), "x", "--top-k", "0"], "rwb: error: --top-k must be ≥ 1, got 0"),
    (["search", str(TINY), "x", "--pipeline", "missing.toml"], "rwb: error: pipeline file 'missing.toml' does not exist"),
    (["index", "no/such/dataset"], "rwb: error: invalid dataset: no/such/dataset"),
    (["search", str(TINY), "x", "--top-k", "10001"], "rwb: error: --top-k must be ≤ 10,000, got 10,001"),
    (["search", str(TINY)], "rwb: error: search: the following arguments are required: query"),
    (["show", str(TINY), "."], "rwb: error: path '.' names the dataset folder itself"),
    (["show", str(TINY), "../README.md"], "rwb: error:"),
    (["show", str(TINY), "user/preferences.md", "--lines", "5:2"], "rwb: error: --lines must be START:END"),
    (["nope"], "rwb: error: argument COMMAND: invalid choice: 'nope'"),
])
def test_bad_input_exits_with_a_one_line_reason(tmp_path, args, reason):
    done = rwb_here(tmp_path / "home", *args)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(reason), done.stderr
    assert done.stdout == ""


def test_invalid_dataset_lists_its_problems(tmp_path):
    root = tmp_path / "broken"
    root.mkdir()
    (root / "corpus.jsonl").write_text('{"_id": "a", "text": "ok"}\n{"_id": "b"}\n', "utf-8")
    done = rwb_here(tmp_path / "home", "search", str(root), "x")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == "rwb: error: invalid dataset: corpus.jsonl:2: text: missing or empty"


def test_pipelines_lists_the_named_pipelines(tmp_path):
    done = rwb_here(tmp_path / "home", "pipelines")
    assert done.returncode == 0
    pipelines_part = done.stdout.split("\n\n")[0]   # then a blank line and the fusion methods
    listed = [line.split()[0] for line in pipelines_part.splitlines() if line and not line[0].isspace()]
    assert set(REQUIRED) <= set(listed)
    assert listed == list(PIPELINES)
    as_json = json.loads(rwb_here(tmp_path / "home", "pipelines", "--json").stdout)
    assert as_json["openclaw"]["min_score"] == 0.35 and as_json["openclaw"]["max_results"] == 6


def test_index_twice_encodes_nothing_the_second_time(tiny_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    assert main("index", str(tiny_copy), "--quiet") == 0
    first = capsys.readouterr().out
    assert "10 documents indexed" in first and "(model minilm, analyzer bigram (bilingual-bigram-v1), 10 texts encoded)" in first
    assert main("index", str(tiny_copy), "--quiet") == 0
    assert "0 texts encoded" in capsys.readouterr().out


def test_index_builds_the_default_candidate_pool_the_workbench_opens_with(tiny_copy, tmp_path, monkeypatch,
                                                                          capsys):
    from eval.stores.pool import pool_path
    from retrieval.candidates import DEFAULT_POOL_DEPTH
    from retrieval.dataset import load_dataset

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    dataset = load_dataset(tiny_copy)
    assert main("index", str(tiny_copy), "--quiet", "--no-pool") == 0
    assert "candidate pool" not in capsys.readouterr().out
    assert not pool_path(dataset, "minilm", DEFAULT_POOL_DEPTH).is_file()
    assert main("index", str(tiny_copy), "--quiet") == 0
    assert f"candidate pool: {len(dataset.queries)} queries, depth {DEFAULT_POOL_DEPTH}" in capsys.readouterr().out
    assert pool_path(dataset, "minilm", DEFAULT_POOL_DEPTH).is_file()


def test_toml_pipeline_file_works_where_a_name_does(tiny_index, tmp_path, capsys):
    path = tmp_path / "rrf10.toml"
    path.write_text('base = "rrf"\n\n[rrf]\nrrf_k = 10\n', "utf-8")
    assert main("search", str(TINY), "ERR_CONN_REFUSED", "--pipeline", str(path), "--json") == 0
    body = json.loads(capsys.readouterr().out)
    assert body["pipeline"] == "rrf-custom"
    assert body["results"][0]["id"] == "d03"
    assert body["results"][0]["score"] == pytest.approx(1 / (10 + 0 + 1) + 1 / (10 + 0 + 1))


def test_search_options_top_k_and_scope(tiny, tiny_index, capsys):
    assert main("search", str(TINY), "database", "--top-k", "2", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)["results"]) == 2
    assert main("search", str(TINY), "database", "--scope", "global", "--json") == 0
    scope_of = {d.id: d.scope for d in tiny.documents}
    results = json.loads(capsys.readouterr().out)["results"]
    assert results and {scope_of[r["id"]] for r in results} == {"global"}


def test_search_text_output(tiny_index, capsys):
    assert main("search", str(TINY), "我的偏好是什么", "--pipeline", "seed-salience") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("route=fast profile=- tokens=") and "budget_remaining=" in out[0]
    rank, _score, doc_id, path = out[1].split()[:4]
    # seed 000's fast path: one result, the whole file, then the memories it holds (lines 3, 5)
    assert (rank, doc_id, path) == ("1.", "user/preferences.md", "user/preferences.md")
    assert out[2] == "    memories: d01, d02"
    # seed 000's pipeline writes back on every search: the file's two memories, once each
    assert out[3].startswith("write-back: access_count + 1 on 2 memories (") and len(out) == 4


def test_validate_is_the_loader(tmp_path):
    """``rwb validate`` accepts what the loader accepts (a naive timestamp is UTC, qrels may be
    space-separated) and lists every problem the loader finds, one per line."""
    ok = rwb_here(tmp_path / "home", "validate", str(TINY))
    assert ok.returncode == 0 and ok.stderr == ""
    assert ok.stdout.startswith("tiny: OK — 10 documents, 4 queries (4 judged)")
    root = tmp_path / "lenient"
    root.mkdir()
    (root / "corpus.jsonl").write_text('{"_id": "a", "text": "alpha", "created_at": "2026-01-02T03:04:05"}\n', "utf-8")
    (root / "queries.jsonl").write_text('{"_id": "q", "text": "alpha?"}\n', "utf-8")
    (root / "qrels.tsv").write_text("query-id corpus-id score\nq a 3\n", "utf-8")
    done = rwb_here(tmp_path / "home", "validate", str(root))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reference time 2026-01-02T03:04:05+00:00" in done.stdout
    (root / "corpus.jsonl").write_text('{"_id": "a", "text": "alpha", "confidence": 2}\n{"_id": "b"}\n', "utf-8")
    bad = rwb_here(tmp_path / "home", "validate", str(root))
    assert bad.returncode == 2
    assert bad.stdout.splitlines() == ["corpus.jsonl:1: confidence: 2 is out of range (must be in [0.0, 1.0])",
                                       "corpus.jsonl:2: text: missing or empty"]
    assert bad.stderr == f"rwb: error: {root}: 2 problems\n"
    other = rwb_here(tmp_path / "home", "search", str(root), "x")   # every other command: one line
    assert other.stderr.splitlines() == [
        "rwb: error: invalid dataset: corpus.jsonl:1: confidence: 2 is out of range (must be in [0.0, 1.0]) "
        "(and 1 more; `rwb validate` lists them all)"]


def test_pipeline_labels_work_on_the_command_line(tiny_index, tmp_path, monkeypatch, capsys):
    """``--pipeline`` takes what the workbench's pickers offer: a seed 001 preset
    (``profile:debug``) and a profile saved in the workbench (``saved:<name>``)."""
    from eval.stores.configs import save_profile
    from retrieval.pipeline import PIPELINES, with_params

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    assert main("search", str(TINY), "ERR_CONN_REFUSED", "--pipeline", "profile:debug", "--json") == 0
    body = json.loads(capsys.readouterr().out)
    assert (body["pipeline"], body["profile"]) == ("profile-debug", "debug")
    save_profile("rrf10", with_params(PIPELINES["rrf"], {"rrf.rrf_k": 10.0}), origin="rrf")
    assert main("search", str(TINY), "ERR_CONN_REFUSED", "--pipeline", "saved:rrf10", "--json") == 0
    body = json.loads(capsys.readouterr().out)
    assert body["results"][0]["id"] == "d03"
    assert body["results"][0]["score"] == pytest.approx(1 / (10 + 0 + 1) + 1 / (10 + 0 + 1))
    assert main("search", str(TINY), "x", "--pipeline", "saved:nothing-here") == 2
    assert main("search", str(TINY), "x", "--pipeline", "profile:nope") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rwb: error: unknown profile 'nope'")
