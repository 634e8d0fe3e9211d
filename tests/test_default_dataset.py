"""The bundled default dataset: valid by ``rwb validate`` (the loader's checks), and the size,
balance and consistency targets its card promises — those are devmem's own and live here only."""

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from retrieval.dataset import load_dataset

ROOT = Path(__file__).resolve().parents[1]
DEVMEM = ROOT / "datasets" / "devmem"
INTENTS = {"debug", "concept", "timeline", "brainstorm", "preference"}
CASES = {"exact-identifier", "error-code", "file-path", "paraphrase", "cross-lingual", "relative-time",
         "low-confidence-trap", "superseded", "lexical-trap", "preference", "brainstorm", "concept"}
MEMORY_TYPES = {"preference", "instruction", "entity", "decision", "pattern", "task", "fact", "episode",
                "error-fix", "inference"}
SOURCES = {"user", "assistant-inferred", "tool-output", "session-summary"}
MEMORY_FIELDS = ("path", "line_start", "line_end", "scope", "project", "memory_type", "created_at", "updated_at",
                 "confidence", "vitality", "reinforcement", "access_count", "source", "related")


@pytest.fixture(scope="module")
def devmem():
    return load_dataset(DEVMEM)


def rwb(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LANCEDB_LOG": "error"}
    return subprocess.run([sys.executable, "-m", "eval.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def test_devmem_size_and_balance(devmem):
    assert len(devmem.documents) >= 300 and len(devmem.queries) >= 100
    assert devmem.reference_time.isoformat() == "2026-11-20T18:00:00+00:00"
    intents = Counter(q.intent for q in devmem.queries)
    assert set(intents) == INTENTS
    assert min(intents.values()) >= 12
    assert {"zh", "en"} == {q.lang for q in devmem.queries} == set(devmem.languages)
    judged = {d for docs in devmem.qrels.values() for d, grade in docs.items() if grade > 0}
    background = 1 - len(judged) / len(devmem.documents)
    assert 0.30 <= background <= 0.50


def test_devmem_queries_are_labelled_and_judged(devmem):
    assert all(q.extra.get("case") in CASES for q in devmem.queries)
    assert set(devmem.qrels) == {q.id for q in devmem.queries}
    assert all(3 in devmem.qrels[q.id].values() for q in devmem.queries)
    assert {g for docs in devmem.qrels.values() for g in docs.values()} <= {1, 2, 3}


def test_devmem_memories_carry_consistent_metadata(devmem):
    raw = [json.loads(line) for line in (DEVMEM / "corpus.jsonl").read_text("utf-8").splitlines()]
    assert all(key in obj for obj in raw for key in MEMORY_FIELDS)
    spans = defaultdict(list)
    for doc in devmem.documents:
        assert doc.memory_type in MEMORY_TYPES and doc.source in SOURCES, doc.id
        assert doc.created_at <= doc.updated_at <= devmem.reference_time, doc.id
        assert (doc.scope == "global") == doc.path.startswith("user/") and (doc.scope == "global") == (not doc.project)
        journal = re.fullmatch(r"journal/(\d{4}-\d{2}-\d{2})\.md", doc.path)
        assert not journal or doc.created_at.date().isoformat() == journal.group(1), doc.id
        assert 1 <= doc.line_start <= doc.line_end, doc.id
        assert doc.id not in doc.related and len(set(doc.related)) == len(doc.related), doc.id
        spans[(doc.project, doc.path)].append((doc.line_start, doc.line_end, doc.id))
    for ranges in spans.values():
        ranges.sort()
        for (_, end, a), (start, _, b) in zip(ranges, ranges[1:]):
            assert start > end, f"{a} and {b} overlap"


def test_rwb_validate_passes_devmem_and_names_file_line_field_on_a_broken_copy(tmp_path):
    ok = rwb("validate", str(DEVMEM))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("devmem: OK") and ok.stderr == ""
    broken = tmp_path / "devmem"
    shutil.copytree(DEVMEM, broken)
    lines = (broken / "corpus.jsonl").read_text("utf-8").splitlines()
    lines[4] = lines[4].replace('"confidence": ', '"confidence": 7')
    (broken / "corpus.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    bad = rwb("validate", str(broken))
    assert bad.returncode == 2
    assert bad.stdout.startswith("corpus.jsonl:5: confidence:")
    assert bad.stderr == f"rwb: error: {broken}: 1 problem\n"
