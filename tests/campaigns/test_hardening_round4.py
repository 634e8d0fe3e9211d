"""Hardening round 4 (issue 35, RELIABILITY.md §11): attacks from outside on the surfaces added in
round 3 — model files, files inside a dataset, signals, durability, modes, unbounded values — and
the attacks that held, kept held. Pass = the intended output, or exit 2 with ONE line
``rwb: error: …`` (never "internal error", never a traceback, never a signal)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from eval.cli import main

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"


def rwb(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(status: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("rwb: error: "), err
    assert "internal error" not in err and "Traceback" not in err, err
    return lines[0]


def rwb_process(argv: list[str], home: Path, cwd: Path, timeout: float = 300,
                **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "RWB_HOME": str(home), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "eval.cli", *map(str, argv)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


# ---- 7. every confirmed save is durable: the profile store included ----------------------------

def _fsynced(monkeypatch) -> list[str]:
    """The paths ``os.fsync`` is called on, in order."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_a_saved_profile_is_fsynced_with_the_folders_made_for_it(tmp_path, monkeypatch):
    from eval.stores.profiles import ProfileStore
    from retrieval.pipeline import get_pipeline

    home = tmp_path / "home"  # a fresh $RWB_HOME: neither it nor profiles/ exists yet
    seen = _fsynced(monkeypatch)
    path = ProfileStore(home).save("mine", get_pipeline("rrf"))
    # the file's data (its temporary, renamed over it), the folder holding it, and the entries of
    # the two folders made for it in their parents: a crash after "saved" loses none of them
    assert any(Path(p).name.startswith(".mine.toml.") for p in seen), seen
    assert str(home / "profiles") in seen and str(home) in seen and str(tmp_path) in seen, seen
    seen.clear()
    ProfileStore(home).delete("mine")
    assert not path.exists() and seen == [str(home / "profiles")]


SAVE_THEN_KILL = """
import os, signal, sys
from eval.stores.profiles import ProfileStore
from retrieval.pipeline import get_pipeline
ProfileStore().save("kept", get_pipeline("rrf"))
print("saved", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_saved_profile_survives_the_process_killed_after_saving(tmp_path):
    env = {**os.environ, "RWB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", SAVE_THEN_KILL], env=env, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout) == (-signal.SIGKILL, "saved\n"), done.stderr
    from eval.stores.profiles import ProfileStore

    assert ProfileStore(tmp_path / "home").load("kept").fusion == "rrf"


# ---- 10. outputs keep the target's mode; new files follow the umask ----------------------------

@pytest.mark.parametrize("before,umask,after", [
    (None, 0o022, 0o644), (None, 0o077, 0o600), (None, 0o002, 0o664),
    (0o755, 0o022, 0o755), (0o644, 0o077, 0o644), (0o600, 0o022, 0o600), (0o640, 0o022, 0o640),
])
def test_a_write_keeps_the_targets_mode_and_a_new_file_follows_the_umask(before, umask, after,
                                                                          tmp_path):
    from retrieval.files import atomic_write_text

    target = tmp_path / "hybrid.py"
    if before is not None:
        target.write_text("old\n")
        target.chmod(before)
    old = os.umask(umask)
    try:
        atomic_write_text(target, "new\n")
    finally:
        os.umask(old)
    assert (target.read_text(), stat.S_IMODE(target.stat().st_mode)) == ("new\n", after)


def test_an_output_through_a_symlink_keeps_its_targets_mode(tmp_path):
    from retrieval.files import atomic_write_files

    real, link = tmp_path / "real.md", tmp_path / "link.md"
    real.write_text("old")
    real.chmod(0o755)
    link.symlink_to(real)
    atomic_write_files({link: b"new", tmp_path / "other.md": b"x"})
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o755


def test_rwb_eval_json_keeps_an_executable_output_executable(tmp_path, capsys, rwb_home):
    out = tmp_path / "metrics.json"
    out.write_text("{}")
    out.chmod(0o755)
    status, _, err = rwb(capsys, "eval", TINY, "--pipeline", "rrf", "--json", out, "--quiet")
    assert status == 0, err
    assert json.loads(out.read_text()) and stat.S_IMODE(out.stat().st_mode) == 0o755
