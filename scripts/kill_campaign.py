"""SIGKILL `rwb index` at several points of a rebuild; check the previous index every time.

    .venv/bin/python scripts/kill_campaign.py [--delays 0.5,2,4,8]

Each round: index a copy of the tiny dataset, add 600 new memories (so the rebuild must
encode), start `rwb index`, kill it after DELAY seconds, then check that the published
index is still the previous, complete one; finally let a last run finish and check it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.dataset import load_dataset  # noqa: E402
from retrieval.index import _check, index_dir, read_manifest  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delays", default="0.5,2,4,8,12")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rwb-kill-"))
    os.environ["RWB_HOME"] = str(work / "home")  # this process reads the same index folders
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LANCEDB_LOG": "error"}
    data = work / "tiny"
    shutil.copytree(ROOT / "tests" / "fixtures" / "tiny", data)
    rwb = [sys.executable, "-m", "eval.cli", "index", str(data), "--quiet"]
    subprocess.run(rwb, check=True, env=env, capture_output=True)
    results = []
    for round_no, delay in enumerate(float(d) for d in args.delays.split(",")):
        directory = index_dir(load_dataset(data), "minilm")
        before = read_manifest(directory)
        with open(data / "corpus.jsonl", "a", encoding="utf-8") as handle:
            for i in range(600):
                text = f"Round {round_no} note {i}: checked item {i * 13 % 97} of the runbook."
                handle.write(json.dumps({"_id": f"r{round_no}-{i}", "text": text}) + "\n")
        proc = subprocess.Popen(rwb, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        finished = proc.poll() is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        manifest = read_manifest(directory)
        try:
            _check((directory / "current").resolve(), manifest)
            usable = True
        except Exception:  # noqa: BLE001 - an unusable index is the finding
            usable = False
        outcome = "finished before the kill" if finished else (
            "previous index kept" if manifest == before else "new index already published")
        results.append((delay, outcome, usable))
        print(f"kill after {delay:>5.1f} s: {outcome}; published index usable: {usable}")
    done = subprocess.run(rwb, env=env, capture_output=True, text=True)
    final = read_manifest(index_dir(load_dataset(data), "minilm"))
    ok = done.returncode == 0 and final["dataset_fingerprint"] == load_dataset(data).fingerprint
    print(f"final run: exit {done.returncode}, index current: {ok}, documents {final['documents']}")
    shutil.rmtree(work, ignore_errors=True)
    return 0 if ok and all(usable for _, _, usable in results) else 1


if __name__ == "__main__":
    sys.exit(main())
