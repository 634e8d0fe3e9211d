"""Corruption campaign: damage every kind of file under $RWB_HOME and run the next command.

    .venv/bin/python scripts/corruption_campaign.py [DATASET] [--modes truncate,empty,bitflip]

Builds a private $RWB_HOME for DATASET (default: the tiny test fixture): the index
(manifest, ids, vectors, Tantivy segments and metadata, LanceDB data / version / transaction
files, lock files, the ``current`` link), the embedding cache, a candidate pool, judgments,
an experiment log and a saved profile. Then, for each file kind and each damage (truncate
to half, empty, flip one bit; the ``current`` link is pointed at a missing build), it
restores the pristine home, damages one file of that kind and runs the command that reads
it (``rwb search`` for index and cache files, ``rwb eval`` for pools, the store's own
reader for judgments / experiments / profiles, behind the CLI's one-line error policy).

Pass: the command succeeds with the same output as before the damage (repaired or not
affected), or exits 2 with exactly one ``rwb: error:`` line and no traceback.
Fail: a traceback, another exit status, or different results. Exit status 1 if any fail.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RWB = [sys.executable, "-m", "eval.cli"]

STORE_READER = """
import json
import sys
from retrieval.dataset import load_dataset
from eval.stores.experiments import ExperimentStore
from eval.stores.judgments import JudgmentStore
from eval.stores.profiles import ProfileStore
try:
    kind = sys.argv[2]
    if kind == "judgments":
        print(sorted(JudgmentStore(load_dataset(sys.argv[1])).qrels().items()))
    elif kind == "experiments":
        print(json.dumps(ExperimentStore().list(), sort_keys=True))
    else:
        print(ProfileStore().load("campaign"))
except (ValueError, OSError) as error:  # the CLI's policy: one line, exit 2
    print(f"rwb: error: {str(error).splitlines()[0]}", file=sys.stderr)
    sys.exit(2)
"""

SETUP = """
import sys
from retrieval.dataset import load_dataset
from retrieval.pipeline import get_pipeline
from eval.stores.experiments import ExperimentStore
from eval.stores.judgments import JudgmentStore
from eval.stores.profiles import ProfileStore
dataset = load_dataset(sys.argv[1])
JudgmentStore(dataset).grade(dataset.queries[0].id, dataset.documents[-1].id, 2)
ExperimentStore().add({"pipeline": "rrf", "metrics": {"ndcg@5": 0.5}})
ProfileStore().save("campaign", get_pipeline("rrf"))
"""


def run(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)


def kind_of(rel: str) -> str:
    """A file's kind: its path with build names, hashes and numbers replaced by ``*``."""
    kind = re.sub(r"builds/[^/]+", "builds/*", rel)
    kind = re.sub(r"(?<=[/-])[0-9a-f]{8,}(?:-[0-9a-f]{4,})*", "*", kind)
    kind = re.sub(r"\d{6,}", "*", kind)
    return kind


def command_for(kind: str, data: Path) -> tuple[str, list[str]]:
    if kind.startswith("candidates/"):
        return "rwb eval", [*RWB, "eval", str(data), "--pipeline", "rrf", "--pipeline", "bm25",
                            "--quiet"]
    for store in ("judgments", "experiments", "profiles"):
        if kind.startswith(store):
            return f"{store} reader", [sys.executable, "-c", STORE_READER, str(data), store]
    return "rwb search", [*RWB, "search", str(data), "ERR_CONN_REFUSED pool database", "--pipeline", "rrf", "--json"]


def damage(path: Path, mode: str) -> bool:
    """Damage ``path``; False when the damage is not applicable (e.g. bit-flip of an empty file)."""
    if mode == "dangling":
        if not path.is_symlink():
            return False
        path.unlink()
        path.symlink_to("builds/missing-build")
        return True
    if path.is_symlink():
        return False
    data = path.read_bytes()
    if mode == "empty":
        if not data:
            return False
        path.write_bytes(b"")
    elif mode == "truncate":
        if len(data) < 2:
            return False
        path.write_bytes(data[: len(data) // 2])
    elif mode == "bitflip":
        if not data:
            return False
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x04
        path.write_bytes(bytes(flipped))
    return True


def normalise(stdout: str) -> str:
    """Output without fields that legitimately change when an index is rebuilt."""
    try:
        obj = json.loads(stdout)
        if not isinstance(obj, dict):
            return json.dumps(obj, sort_keys=True)
        for result in obj.get("results", []):
            result.pop("explain", None)
        obj.pop("degraded", None)
        return json.dumps(obj.get("results", obj), sort_keys=True)
    except ValueError:
        return re.sub(r"\s+", " ", stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", nargs="?", default=str(ROOT / "tests" / "fixtures" / "tiny"))
    parser.add_argument("--modes", default="truncate,empty,bitflip,dangling")
    parser.add_argument("--json", metavar="OUT", help="write every case as JSON")
    parser.add_argument("--only", default="", help="only file kinds containing this text")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="rwb-corruption-"))
    data = work / "data"
    shutil.copytree(args.dataset, data)
    pristine, home = work / "pristine", work / "home"
    env = {**os.environ, "RWB_HOME": str(pristine), "PYTHONPATH": str(ROOT), "LANCEDB_LOG": "error",
           "HF_HUB_OFFLINE": "1"}
    for step in ([*RWB, "index", str(data), "--quiet"], [sys.executable, "-c", SETUP, str(data)]):
        done = run(step, env)
        if done.returncode:
            sys.exit(f"setup failed: {done.stderr[-2000:]}")
    baseline: dict[str, str] = {}
    for kind in ("candidates/x", "indexes/x", "judgments/x", "experiments.json", "profiles/x"):
        name, argv_ = command_for(kind, data)
        done = run(argv_, env)
        if done.returncode:
            sys.exit(f"baseline {name} failed: {done.stderr[-2000:]}")
        baseline[name] = normalise(done.stdout)
    env["RWB_HOME"] = str(home)
    kinds: dict[str, str] = {}
    for path in sorted(pristine.rglob("*")):
        if path.is_file() or path.is_symlink():
            rel = path.relative_to(pristine).as_posix()
            kinds.setdefault(kind_of(rel), rel)
    cases, failures = [], 0
    for kind, rel in kinds.items():
        if args.only not in kind:
            continue
        for mode in args.modes.split(","):
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(pristine, home, symlinks=True)
            if not damage(home / rel, mode):
                continue
            name, argv_ = command_for(kind, data)
            done = run(argv_, env)
            errors = [line for line in done.stderr.splitlines() if line.startswith("rwb: error:")]
            if "Traceback" in done.stderr or done.returncode not in (0, 2):
                outcome = f"FAIL: exit {done.returncode}, {done.stderr.strip().splitlines()[-1][:160]}"
            elif done.returncode == 2:
                outcome = "one-line error" if len(errors) == 1 else f"FAIL: {len(errors)} error lines"
            elif normalise(done.stdout) != baseline[name]:
                outcome = "FAIL: different results"
            else:
                repaired = "rebuild" in done.stderr or "damaged" in done.stderr or "retriev" in done.stderr
                outcome = "repaired" if repaired else "ok (not affected)"
            failures += outcome.startswith("FAIL")
            case = {"kind": kind, "mode": mode, "command": name, "outcome": outcome,
                    "message": (errors[0] if errors else "")[:200]}
            cases.append(case)
            print(f"{kind:<70} {mode:<9} {name:<18} {outcome}  {case['message'][:120]}", flush=True)
    summary = {}
    for case in cases:
        key = case["outcome"].split(":")[0]
        summary[key] = summary.get(key, 0) + 1
    print(f"\n{len(kinds)} file kinds, {len(cases)} cases: " + ", ".join(f"{v} {k}" for k, v in summary.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"kinds": len(kinds), "cases": cases}, indent=1), "utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
