"""``rwb eval`` / ``rwb sweep`` / ``rwb report`` as a user runs them, on the tiny fixture.

The pool is built once in the session's RWB_HOME; the subprocesses read it from the store.
Bad input must exit non-zero with one ``rwb: error:`` line and no traceback.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.cli import main as rwb_main
from eval.stores.pool import load_pool
from retrieval.candidates import DEFAULT_POOL_DEPTH
from retrieval.pipeline import get_pipeline
from tests.conftest import rwb_here

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "fixtures" / "tiny"
RWB = [sys.executable, "-m", "eval.cli"]


@pytest.fixture(scope="module")
def home(tiny, rwb_home):
    load_pool(tiny)  # retrieval happens once; every command below reads the stored pool
    return rwb_home


def test_eval_prints_the_table_and_writes_json(home, tmp_path):
    out = tmp_path / "eval.json"
    proc = rwb_here(home, "eval", str(TINY), "--pipeline", "rrf", "--pipeline", "seed-adaptive",
               "--metrics", "ndcg@5,recall@5", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    means = next(line for line in lines if line.startswith("metric"))     # one row per metric, a column per pipeline
    assert means.split() == ["metric", "vector", "(baseline)", "rrf", "seed-adaptive"]   # baseline added, first
    assert any(line.startswith("ndcg@5 ") for line in lines) and any(line.startswith("recall@5 ") for line in lines)
    detail = next(line for line in lines if line.startswith("pipeline") and "95% CI" in line)
    assert detail.split() == ["pipeline", "mean", "95%", "CI", "Δ", "vs", "vector", "95%", "CI", "of", "Δ", "p",
                              "(raw)", "p", "(holm)", "W/T/L"]
    assert "nDCG: linear gain rel / log2(rank + 1) (Järvelin & Kekäläinen 2002; ranx ndcg)" in lines
    assert "Ties in a ranking: scores descending, then document id ascending" in lines
    assert any(line.startswith("95% confidence intervals: percentile bootstrap over the queries, 10,000 resamples")
               for line in lines)
    assert any("Holm–Bonferroni correction per metric across the 2 pipelines compared with vector" in line
               for line in lines)
    at = lines.index("Per intent (ndcg@5; judged queries in brackets):")            # the per-intent table
    assert lines[at + 1].split() == ["pipeline", "debug", "(2)", "timeline", "(1)", "preference", "(1)"]
    assert [line.split()[0] for line in lines[at + 3:at + 6]] == ["vector", "rrf", "seed-adaptive"]
    data = json.loads(out.read_text("utf-8"))
    assert data["dataset"] == "tiny" and data["n_queries"] == 4 and data["metrics"] == ["ndcg@5", "recall@5"]
    assert data["settings"]["gain"] == "linear" and data["settings"]["correction"] == "holm"
    assert data["intervals"]["n_resamples"] == 10_000 and set(data["intervals"]["means"]) == set(data["results"])
    assert set(data["results"]) == {"vector", "rrf", "seed-adaptive"}
    for key in ("per_intent", "per_query"):
        assert set(data[key]) == {"vector", "rrf", "seed-adaptive"}
    cell = data["significance"]["seed-adaptive"]["ndcg@5"]
    assert set(cell) >= {"p_value", "wins", "ties", "losses"}


def test_eval_cutoffs_gain_correction_and_the_fewer_than_k_note(home, tmp_path):
    out = tmp_path / "eval.json"
    proc = rwb_here(home, "eval", str(TINY), "--pipeline", "openclaw", "--metrics", "ndcg,map", "--cutoffs", "3,10",
               "--gain", "exponential", "--correction", "bonferroni", "--bootstrap", "500", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("nDCG: exponential gain (2^rel − 1) / log2(rank + 1)") for line in lines)
    assert [line.split()[0] for line in lines if line.split()[:1] in (["ndcg_burges@3"], ["ndcg_burges@10"], ["map"])
            ][:3] == ["ndcg_burges@3", "ndcg_burges@10", "map"]
    assert "p (bonferroni)" in proc.stdout and "500 resamples" in proc.stdout
    data = json.loads(out.read_text("utf-8"))
    assert data["metrics"] == ["ndcg_burges@3", "ndcg_burges@10", "map"]
    # openclaw keeps at most 6 results: all 4 judged queries have fewer than 10
    assert data["fewer_than_k"]["openclaw"]["10"] == 4
    assert all(n <= 6 for n in data["n_results"]["openclaw"].values())
    assert "  openclaw: " in proc.stdout and "k=10: 4 of 4 queries" in proc.stdout


def test_sweep_writes_a_toml_usable_as_pipeline(home, tmp_path):
    best, out = tmp_path / "best.toml", tmp_path / "sweep.json"
    proc = rwb_here(home, "sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10",
               "--param", "rrf.w_dense=0:1:0.5", "--folds", "2", "--seed", "3", "--out", str(best), "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "held-out" in proc.stdout
    data = json.loads(out.read_text("utf-8"))
    assert data["n_configs"] == 6 * 3 and data["cv"]["folds"] == 2
    # on tiny the adaptive preset beats every rrf setting: --out holds the recommendation, and says so
    assert data["recommended"]["name"] == "adaptive" and data["recommended"]["fixed"] is True
    assert "Recommended: the fixed pipeline adaptive" in proc.stdout
    config = get_pipeline(str(best))
    assert config.name == "adaptive"
    again = rwb_here(home, "eval", str(TINY), "--pipeline", str(best), "--metrics", "ndcg@5", "--json",
                str(tmp_path / "again.json"))
    assert again.returncode == 0, again.stderr
    scores = json.loads((tmp_path / "again.json").read_text("utf-8"))["results"]
    assert scores["adaptive"]["ndcg@5"] == pytest.approx(data["recommended"]["score"], abs=1e-12)


def test_report_writes_three_files(home, tmp_path):
    out = tmp_path / "report"
    proc = rwb_here(home, "report", str(TINY), "--pipeline", "rrf", "--sweep", "rrf", "--param", "rrf.rrf_k=20:60:20",
               "--folds", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    for name in ("report.html", "report.md", "report.json"):
        assert (out / name).is_file()
    assert json.loads((out / "report.json").read_text("utf-8"))["sweep"]["n_configs"] == 3


def test_bad_input_in_a_real_process_is_one_line_without_traceback(home):
    proc = rwb_here(home, "sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10-60")
    assert proc.returncode != 0
    assert proc.stderr.startswith("rwb: error: bad --param 'rrf.rrf_k=10-60'")
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, reason", [
    (["eval", str(TINY), "--pipeline", "rrf", "--metrics", "ndcg@5,foo@3"], "unknown metric 'foo@3'"),
    (["eval", str(TINY), "--pipeline", "nope"], "unknown pipeline 'nope'"),
    (["eval", str(TINY), "--pipeline", "rrf", "--test", "tukey"], "test must be one of ['fisher', 'student'], got 'tukey'"),
    (["eval", str(TINY), "--pipeline", "rrf", "--correction", "fdr"], "correction must be one of ['bonferroni', 'holm', 'none'], got 'fdr'"),
    (["eval", str(TINY), "--pipeline", "rrf", "--gain", "cubic"], "unknown gain 'cubic'"),
    (["eval", str(TINY), "--pipeline", "rrf", "--cutoffs", "5,0"], "bad cutoff '0'"),
    (["eval", str(TINY), "--pipeline", "rrf", "--bootstrap", "0"], "--bootstrap must be ≥ 1"),
    (["eval", str(TINY), "--pipeline", "rrf", "--metrics", "ndcg@5", "--detail", "map"],
     "--detail 'map' is not an evaluated metric"),
    (["eval", str(TINY), "--pipeline", "rrf", "--permutations", "10000001"], "--permutations must be ≤ 1,000,000"),
    (["eval", str(TINY), "--pipeline", "rrf", "--pool-depth", "20000"], "--pool-depth must be ≤ 10,000"),
    (["eval", str(TINY), "--pipeline", "rrf", "--pool-depth", "10"], "rerun with --pool-depth 20"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60"], "expected name=lo:hi:step"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=60:10:10"], "lo (60) must be ≤ hi (10)"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:0"], "step must be > 0"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.k=1:2:1"], "unknown parameter 'rrf.k'"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", "--folds", "1"],
     "--folds must be ≥ 2"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", "--folds", "5"],
     "--folds 5 exceeds the number of judged queries (4)"),
    (["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", "--metric", "ndcg"],
     "unknown metric 'ndcg'"),
    (["sweep", str(TINY), "--param", "rrf.rrf_k=10:60:10"], "give the pipeline to tune"),
    (["report", str(TINY), "--pipeline", "rrf"], "--out DIR"),
    (["eval", str(TINY / "missing"), "--pipeline", "rrf"], "invalid dataset"),
])
def test_bad_input_gives_one_line_reason(home, capsys, args, reason):
    assert rwb_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and reason in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("args, reason", [
    (["sweep", str(TINY), "--pipeline", "rrf", "--folds", "abc"], "sweep: argument --folds: invalid int value"),
    (["eval", str(TINY), "--alpha"], "eval: argument --alpha: expected one argument"),
    (["report", str(TINY), "--pool-depth", "x"], "report: argument --pool-depth: invalid int value"),
    (["search", str(TINY)], "search: the following arguments are required: query"),
    (["nope"], "argument COMMAND: invalid choice: 'nope'"),
    (["import", "beir", "src"], "import beir: the following arguments are required: DEST"),
    (["eval", str(TINY), "--bogus"], "unrecognized arguments: --bogus"),
    ([], "the following arguments are required: COMMAND"),
])
def test_argument_errors_are_one_line_too(capsys, args, reason):
    assert rwb_main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and reason in err and len(err.strip().splitlines()) == 1


def on_terminal(home: Path, *args: str) -> tuple[str, str]:
    """``rwb ARGS`` in its own process with stderr on a pseudo-terminal: (stdout, stderr)."""
    env = {**os.environ, "RWB_HOME": str(home), "PYTHONPATH": str(ROOT), "LANCEDB_LOG": "error"}
    master, slave = pty.openpty()
    proc = subprocess.Popen([*RWB, *args], stdout=subprocess.PIPE, stderr=slave, env=env, cwd=ROOT)
    os.close(slave)
    err, deadline = b"", time.monotonic() + 300
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 1.0)[0]:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:                          # EIO: the process closed the terminal (it ended)
            break
        if not chunk:
            break
        err += chunk
    os.close(master)
    out = proc.stdout.read()
    proc.stdout.close()
    assert proc.wait(timeout=300) == 0, err.decode(errors="replace")
    return out.decode(), err.decode().replace("\r\n", "\n")


def test_eval_names_each_step_at_once_on_a_terminal(home, capsys):
    """No wait without a word: on a terminal each stage is named on stderr as it starts, the
    libraries' import first; in a pipe nothing is added and stdout (the results) is the same."""
    args = ["eval", str(TINY), "--pipeline", "rrf", "--permutations", "200", "--bootstrap", "200"]
    assert rwb_main(args) == 0
    piped = capsys.readouterr()
    assert "…" not in piped.err
    out, err = on_terminal(home, *args)
    steps = [line.split("\r")[-1] for line in err.splitlines() if line.endswith("…")]
    assert steps == ["rwb: starting rwb eval (loading its libraries)…",
                     f"rwb: loading dataset {TINY}…",
                     "rwb: loading the candidate pool (4 queries, minilm, depth "
                     f"{DEFAULT_POOL_DEPTH})…",
                     "rwb: scoring 2 pipelines on 4 queries…",
                     "rwb: significance tests (Fisher, 200 permutations)…",
                     "rwb: confidence intervals (200 bootstrap resamples)…",
                     "rwb: evaluating the intent router…",
                     "rwb: judgment bias (judged@k, nDCG'@k, bpref)…"]
    assert out == piped.out
