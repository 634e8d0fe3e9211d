"""The bundled default dataset loads, validates and keeps the shape its card promises."""

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from retrieval.dataset import load_dataset

ROOT = Path(__file__).resolve().parents[1]
DEVMEM = ROOT / "datasets" / "devmem"
VALIDATOR = ROOT / "scripts" / "validate_dataset.py"


def test_devmem_loads_with_the_promised_shape():
    dataset = load_dataset(DEVMEM)
    assert len(dataset.documents) >= 300 and len(dataset.queries) >= 100
    assert dataset.reference_time.isoformat() == "2026-11-20T18:00:00+00:00"
    intents = Counter(q.intent for q in dataset.queries)
    assert set(intents) == {"debug", "concept", "timeline", "brainstorm", "preference"}
    assert min(intents.values()) >= 12
    assert all(3 in dataset.qrels[q.id].values() for q in dataset.queries)
    judged = {d for docs in dataset.qrels.values() for d in docs}
    background = 1 - len(judged) / len(dataset.documents)
    assert 0.30 <= background <= 0.50
    assert {"zh", "en"} == {q.lang for q in dataset.queries}


def test_validator_passes_devmem_and_names_file_line_field_on_a_broken_copy(tmp_path):
    ok = subprocess.run([sys.executable, str(VALIDATOR), str(DEVMEM)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "devmem"
    shutil.copytree(DEVMEM, broken)
    lines = (broken / "corpus.jsonl").read_text("utf-8").splitlines()
    lines[4] = lines[4].replace('"confidence": ', '"confidence": 7')
    (broken / "corpus.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    bad = subprocess.run([sys.executable, str(VALIDATOR), str(broken)], capture_output=True, text=True)
    assert bad.returncode == 1
    assert "corpus.jsonl:5: confidence:" in bad.stdout + bad.stderr
