"""The candidate table is a type of its own: reading one (a fusion scoring it) needs no engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_importing_a_fusion_imports_no_engine():
    """A fusion scores a table; importing it must not start Tantivy, LanceDB or the index (the
    table used to live with the retrieval code, so every fusion imported all of it)."""
    code = ("import retrieval.fusion.rrf, sys; "
            "print(sorted(m for m in ('tantivy', 'lancedb', 'retrieval.index', 'retrieval.candidates') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
