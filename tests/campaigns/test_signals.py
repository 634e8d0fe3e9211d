"""Signals are never swallowed, and a third party's noise never joins the error line.

Was (issue 46, class 4 and 6): SIGTERM while ``rwb check`` verified the index was caught as
damage ("index … is damaged (Terminated: ); rebuilding") and the run finished with exit 0,
reports and a history entry; SIGTERM to ``rwb index --executor ray`` exited 15 silently (Ray's
handler replaced ours once Ray started); ``RAY_ADDRESS=ray://:::x`` printed Ray's two-line
UserWarning before the error line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.campaigns.conftest import rwb

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"

try:
    import ray  # noqa: F401

    HAS_RAY = True
except ImportError:
    HAS_RAY = False
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install -e '.[distributed]')")


def test_sigterm_while_the_index_is_verified_ends_the_check(workspace, capsys, tmp_path, monkeypatch):
    """The real SIGTERM, sent while ``rwb check`` checks the index's files (in ``_verify_files``):
    143 and one line, no report, no history entry, no rebuild."""
    import retrieval.index as index
    from eval.stores.history import CheckHistory
    from retrieval.dataset import load_dataset

    data, _ = workspace
    snap = tmp_path / "rrf.json"
    assert rwb(capsys, "--quiet", "snapshot", data, "--pipeline", "rrf", "--out", snap)[0] == 0
    from retrieval.embedders import default_embedder

    embedder = default_embedder(load_dataset(data))
    build = (index.index_dir(load_dataset(data), embedder) / "current").resolve()
    real = index._verify_files

    def terminated_while_verifying(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(index, "_verify_files", terminated_while_verifying)
    junit = tmp_path / "junit.xml"
    status, out, err = rwb(capsys, "--quiet", "check", data, "--pipeline", "rrf", "--against", snap,
                           "--junit", junit)
    assert (status, out, err) == (143, "", "rwb: terminated\n")
    assert not junit.exists() and CheckHistory(load_dataset(data)).entries() == []
    assert (index.index_dir(load_dataset(data), embedder) / "current").resolve() == build  # not rebuilt


KEEPS_OURS = """
import os, signal, sys, time
from eval.cli import interrupts
interrupts.install()
from retrieval.ray_actors import start_actors


class Echo:
    def ping(self):
        return 1


start_actors(Echo, (), 1)
print("ours" if signal.getsignal(signal.SIGTERM) is interrupts._handler else "replaced", flush=True)
try:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)
    print("not interrupted", flush=True)
except interrupts.Terminated:
    print("rwb: terminated", flush=True)
    os._exit(143)
"""


@needs_ray
def test_our_sigterm_handler_stays_in_force_once_ray_starts(tmp_path):
    script = tmp_path / "keeps_ours.py"
    script.write_text(KEEPS_OURS, "utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert (done.returncode, done.stdout) == (143, "ours\nrwb: terminated\n"), (done.returncode, done.stdout,
                                                                                 done.stderr[-2000:])


@needs_ray
def test_rays_warning_stays_off_the_error_line(tmp_path):
    """An unreachable Ray client address: exit 2 and the error line alone (no ``--quiet``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RWB_HOME": str(tmp_path / "home"),
           "RAY_ADDRESS": "ray://:::x", "RAY_CLIENT_INITIAL_CONNECTION_TIMEOUT_S": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "eval.cli", "index", str(TINY), "--executor", "ray",
                           "--embedder", "minilm"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert (done.returncode, done.stderr) == (2, "rwb: error: ray client connection timeout\n"), done.stderr
