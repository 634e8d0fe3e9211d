"""What the hardening campaigns share: a private workspace, the command line run in this
process, and the one-line error every bad input must end in."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"


@pytest.fixture()
def workspace(tmp_path, monkeypatch):
    """A private copy of the tiny dataset and a private RWB_HOME."""
    home = tmp_path / "home"
    monkeypatch.setenv("RWB_HOME", str(home))
    data = tmp_path / "tiny"
    shutil.copytree(TINY, data)
    return data, home


def rwb(capsys, *argv) -> tuple[int, str, str]:
    """``rwb ARGV`` in this process: (status, stdout, stderr)."""
    from eval.cli import main

    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(status: int, err: str) -> str:
    """The one line of a refused command (exit 2, ``rwb: error: …``, no traceback)."""
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("rwb: error: "), err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]
