"""Hardening round 3 (RELIABILITY.md): attacks from outside through the command line, one test
per class, each with several inputs. Pass = exit 2 with ONE line ``rwb: error: …`` (never
"internal error", never a traceback), or the intended output and nothing else changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval.cli import main
from tests.campaigns.conftest import one_line_error, rwb

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"


def dataset_with(tmp_path: Path, corpus=None, queries=None, qrels=None, card=None) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(TINY, root)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        if rows is not None:
            with open(root / name, "a", encoding="utf-8") as handle:
                handle.write("".join(json.dumps(r) + "\n" for r in rows))
    if qrels is not None:
        with open(root / "qrels" / "test.tsv", "a", encoding="utf-8") as handle:
            handle.write("".join(f"{row}\n" for row in qrels))
    if card is not None:
        (root / "dataset.toml").write_text(card, "utf-8")
    return root


# ---- 2. the validator reports everything `rwb eval` would refuse --------------------------------

DOC = {"_id": "z1", "text": "an odd document"}
Q = {"_id": "qz", "text": "an odd query"}
INVALID = {  # input → (file:line: field) that `rwb validate` must name
    "created far in the future": ({"corpus": [{**DOC, "created_at": "9999-12-31T23:59:59"}]},
                                  "corpus.jsonl:11: created_at"),
    "created at the calendar's start": (
        {"corpus": [{**DOC, "created_at": "0001-01-01T00:00:00+14:00"}]},
        "corpus.jsonl:11: created_at"),
    "updated in year 1200": ({"corpus": [{**DOC, "updated_at": "1200-06-01"}]},
                             "corpus.jsonl:11: updated_at"),
    "query reference_time at the end": (
        {"queries": [{**Q, "reference_time": "9999-12-31T23:59:59-14:00"}]},
        "queries.jsonl:5: reference_time"),
    "card reference_time 1800": ({"card": 'name = "tiny"\nreference_time = 1800-01-01T00:00:00Z\n'},
                                 "dataset.toml:2: reference_time"),
    "card reference_time 9999": (
        {"card": 'name = "tiny"\nreference_time = "9999-12-31T23:59:59"\n'},
        "dataset.toml:2: reference_time"),
    "grade 10^40": ({"qrels": ["q1\td01\t" + "1" + "0" * 40]}, "qrels/test.tsv:6: score"),
    "grade 2000 (exponential gain overflows)": ({"qrels": ["q1\td01\t2000"]},
                                                "qrels/test.tsv:6: score"),
    "grade 101": ({"qrels": ["q1\td01\t101"]}, "qrels/test.tsv:6: score"),
    "grade 1e3": ({"qrels": ["q1\td01\t1e3"]}, "qrels/test.tsv:6: score"),
    "duplicate row, another grade": ({"qrels": ["q1\td03\t1"]}, "qrels/test.tsv:6: score"),
    "related {}": ({"corpus": [{**DOC, "related": {}}]}, "corpus.jsonl:11: related"),
    "related 0": ({"corpus": [{**DOC, "related": 0}]}, "corpus.jsonl:11: related"),
    "related a string": ({"corpus": [{**DOC, "related": "d01"}]}, "corpus.jsonl:11: related"),
    "related [1]": ({"corpus": [{**DOC, "related": [1]}]}, "corpus.jsonl:11: related"),
    "related false": ({"corpus": [{**DOC, "related": False}]}, "corpus.jsonl:11: related"),
    "title a number": ({"corpus": [{**DOC, "title": 5}]}, "corpus.jsonl:11: title"),
    "intent a list": ({"queries": [{**Q, "intent": ["debug"]}]}, "queries.jsonl:5: intent"),
    "created_at a number": ({"corpus": [{**DOC, "created_at": 20260101}]},
                            "corpus.jsonl:11: created_at"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_validate_names_what_eval_refuses(case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    changes, where = INVALID[case]
    root = dataset_with(tmp_path, **changes)
    status, out, err = rwb(capsys, "validate", root)
    assert status == 2 and where in out + err, (out, err)
    status, _, err = rwb(capsys, "eval", root, "--pipeline", "rrf")
    assert "invalid dataset" in one_line_error(status, err)
    assert not (tmp_path / "home" / "candidates").exists()  # refused before anything was retrieved


def test_a_repeated_qrels_row_with_the_same_grade_is_accepted(tmp_path, capsys):
    root = dataset_with(tmp_path, qrels=["q1\td03\t3"])
    assert rwb(capsys, "validate", root)[0] == 0


# ---- 3. bounds at the edge of every numeric flag ---------------------------------------------

BOUNDS = [
    ("eval", "--metrics", "ndcg@" + "1" + "0" * 20),
    ("eval", "--metrics", "recall@10001"),
    ("eval", "--metrics", "ndcg@2147483648"),
    ("eval", "--metrics", "ndcg@0"),
    ("eval", "--metrics", "ndcg@" + "9" * 5000),
    ("eval", "--cutoffs", "0"),
    ("eval", "--cutoffs", "10001"),
    ("eval", "--pool-depth", str(10**20)),
    ("eval", "--pool-depth", "-1"),
    ("eval", "--permutations", str(10**20)),
    ("eval", "--bootstrap", "-1"),
    ("eval", "--budget", str(10**20)),
    ("eval", "--alpha", "nan"),
    ("eval", "--alpha", "inf"),
    ("eval", "--alpha", "0"),
    ("eval", "--alpha", "1"),
    ("sweep", "--param", "rrf.rrf_k=1:100:1e-320"),
    ("sweep", "--param", "rrf.w_dense=0:1:1e-9"),
    ("sweep", "--param", "rrf.rrf_k=-1e308:1e308:1"),
    ("sweep", "--param", "rrf.rrf_k=1:1e300:1e290"),
    ("sweep", "--param", "rrf.rrf_k=1:nan:1"),
    ("sweep", "--metric", "ndcg@99999999999"),
    ("sweep", "--random", str(10**20)),
    ("sweep", "--workers", str(10**20)),
    ("tune", "--param", "rrf.rrf_k=1:100:1e-320"),
    ("tune", "--param", "rrf.w_dense=0:1:1e-300"),
    ("tune", "--param", "rrf.rrf_k=1:1e308"),
    ("tune", "--trials", str(10**20)),
    ("tune", "--folds", "-3"),
    ("tune", "--metric", "mrr@10001"),
]


@pytest.mark.parametrize("command,flag,value", BOUNDS)
def test_numeric_flags_at_the_edge_are_refused_in_one_line(command, flag, value, tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    extra = []
    if command == "sweep" and flag != "--param":
        extra = ["--param", "rrf.rrf_k=10:60:10", "--folds", "2"]
    if command == "tune":
        extra = ["--folds", "2", "--inner-folds", "2"] if flag != "--folds" else []
    status, _, err = rwb(capsys, command, TINY, "--pipeline", "rrf", *extra, flag, value)
    one_line_error(status, err)  # a grid listed before its size was known would die of MemoryError
    assert not (tmp_path / "home" / "candidates").exists(), "refused only after retrieving"


# ---- 1. one writer: outputs, symlinks, FIFOs, RWB_HOME -----------------------------------------

def test_outputs_follow_the_writer_policy(tmp_path, capsys, monkeypatch, rwb_home):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    status, _, err = rwb(capsys, "eval", TINY, "--pipeline", "rrf", "--json", link)
    assert status == 0, err
    assert link.is_symlink() and json.loads(real.read_text())["dataset"] == "tiny"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    status, _, err = rwb(capsys, "eval", TINY, "--pipeline", "rrf", "--json", fifo)
    assert "FIFO with no reader" in one_line_error(status, err)
    folder = tmp_path / "folder"
    folder.mkdir()
    status, _, err = rwb(capsys, "sweep", TINY, "--pipeline", "rrf", "--param",
                         "rrf.rrf_k=10:60:10", "--folds", "2", "--out", folder)
    assert "is a folder" in one_line_error(status, err)
    report = tmp_path / "report"
    status, _, err = rwb(capsys, "report", TINY, "--pipeline", "rrf", "--out", report)
    assert status == 0, err
    assert sorted(p.name for p in report.iterdir()) == ["report.html", "report.json", "report.md"]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["fifo", "folder", "link.json", "real.json", "report"]


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_an_empty_rwb_home_is_an_error_not_the_working_folder(value, tmp_path):
    env = {**os.environ, "RWB_HOME": value, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for command in (["index", str(TINY)], ["eval", str(TINY), "--pipeline", "rrf"]):
        done = subprocess.run([sys.executable, "-m", "eval.cli", *command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert "RWB_HOME is set but empty" in one_line_error(done.returncode, done.stderr)
    assert list(tmp_path.iterdir()) == []


def test_the_fingerprint_is_of_the_bytes_that_were_read(tmp_path, monkeypatch):
    from retrieval import dataset as ds

    root = dataset_with(tmp_path)
    before = ds.fingerprint(root)
    original = ds._load_documents

    def edit_while_loading(*args, **kwargs):  # the file changes after it was read, mid-load
        docs = original(*args, **kwargs)
        with open(root / "corpus.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"_id": "late", "text": "added during the load"}) + "\n")
        return docs

    monkeypatch.setattr(ds, "_load_documents", edit_while_loading)
    loaded = ds.load_dataset(root)
    assert loaded.fingerprint == before and "late" not in {d.id for d in loaded.documents}
    assert ds.fingerprint(root) != before


# ---- 6. a profile's base names a pipeline or a saved profile, never a path ----------------------

def test_base_never_reads_a_file(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    secret = tmp_path / "outside.toml"
    secret.write_text('api_token = "s3cr3t"\ndatabase = "prod"\n')
    pipeline = tmp_path / "p.toml"
    messages = []
    for base in (str(secret), str(tmp_path / "missing.toml"), "../../outside.toml", "~/x.toml",
                 "/etc/passwd", "outside", "saved:../../x", "./p.toml"):
        pipeline.write_text(f"base = {json.dumps(base)}\n")
        status, _, err = rwb(capsys, "eval", TINY, "--pipeline", pipeline)
        line = one_line_error(status, err)
        assert "api_token" not in line and "database" not in line and "s3cr3t" not in line
        messages.append(line)
    assert messages[0] == messages[1]  # whether the file exists is not told


def test_base_chains_and_nesting_are_bounded(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    profiles = tmp_path / "home" / "profiles"
    profiles.mkdir(parents=True)
    bodies = {"me": 'base = "saved:me"\n', "a": 'base = "b"\n', "b": 'base = "saved:a"\n',
              "deep": "x = " + "[" * 5000 + "]" * 5000 + "\n",
              "tables": "x = " + "{y = " * 300 + "1" + "}" * 300 + "\n",
              **{f"c{i}": f'base = "saved:c{i + 1}"\n' for i in range(12)}, "c12": 'base = "rrf"\n'}
    for name, body in bodies.items():
        (profiles / f"{name}.toml").write_text(body)
    for name, expected in (("me", "loops"), ("a", "loops"), ("deep", "nested"),
                           ("tables", "nested"), ("c0", "deep")):
        status, _, err = rwb(capsys, "eval", TINY, "--pipeline", f"saved:{name}")
        assert expected in one_line_error(status, err), (name, err)
    status, _, err = rwb(capsys, "eval", TINY, "--pipeline", "saved:c8")  # 4 bases: allowed
    assert status == 0, err


# ---- 4. interrupts: one line, 130 / 143, no temporaries ------------------------------------------

def _interrupt(tmp_path: Path, argv: list[str], sig: int, delay: float,
               home: Path) -> tuple[int, str]:
    env = {**os.environ, "RWB_HOME": str(home), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "eval.cli", *argv], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


TUNE = ["tune", str(TINY), "--pipeline", "rrf", "--folds", "2", "--inner-folds", "2",
        "--trials", "10000"]
SWEEP = ["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=1:1000:0.001",
         "--random", "999999", "--folds", "2"]


@pytest.mark.parametrize("argv,sig,delay", [
    (["index", str(TINY)], signal.SIGINT, 0.5),
    (["index", str(TINY)], signal.SIGINT, 2.5),
    (["index", str(TINY)], signal.SIGTERM, 2.5),
    (TUNE, signal.SIGINT, 12),
    (TUNE, signal.SIGTERM, 12),
    (SWEEP, signal.SIGINT, 12),
])
def test_an_interrupt_ends_in_one_line(argv, sig, delay, tmp_path, rwb_home):
    # the tune and sweep cases reuse the session's home (index and pool built), so the signal
    # lands in the search itself
    home = tmp_path / "home" if argv[0] == "index" else rwb_home
    if argv[0] != "index":
        assert main(["index", str(TINY), "--quiet"]) == 0
    status, err = _interrupt(tmp_path, argv, sig, delay, home)
    expected = {signal.SIGINT: (130, "rwb: interrupted"),
                signal.SIGTERM: (143, "rwb: terminated")}[sig]
    assert (status, err.strip()) == expected
    debris = [p for p in Path(home).rglob("*")
              if p.name.endswith(".tmp") or ".importing-" in p.name]
    assert debris == []


FINALISER = """
import os, signal, sys, time
import eval.cli as cli

class Finalised:
    def __del__(self):  # the signal lands here, where Python would swallow it
        os.kill(os.getpid(), signal.SIG{name})
        time.sleep(0.3)

def command(args):
    if {in_exec}:  # as dataclasses builds a class's methods: source text run by exec()
        exec("import os, signal, time\\nos.kill(os.getpid(), signal.SIG{name})\\ntime.sleep(5)", {{}})
    Finalised()
    time.sleep({after})
    return 0

def parser():
    p = cli.Parser(prog="rwb")
    p.add_subparsers(dest="command").add_parser("work").set_defaults(func=command)
    return p

cli.build_parser = parser
sys.exit(cli.main())
"""


@pytest.mark.parametrize("name,after,in_exec,expected", [
    ("INT", 0.0, False, (130, "rwb: interrupted")),  # the command ends before it is felt again
    ("INT", 5.0, False, (130, "rwb: interrupted")),  # felt again while the command still runs
    ("TERM", 5.0, False, (143, "rwb: terminated")),
    ("INT", 0.0, True, (130, "rwb: interrupted")),   # CPython would exit by SIGINT, not 130
])
def test_an_interrupt_inside_a_finaliser_or_exec_is_not_lost(name, after, in_exec, expected, tmp_path):
    # Python "ignores" an exception raised in __del__ (it prints a traceback and goes on): CI once
    # sent Ctrl-C while a library's object was being finalised, and rwb index ran to the end with 0.
    # A Ctrl-C inside exec()'d source text made the process die by SIGINT after "rwb: interrupted"
    script = tmp_path / "finaliser.py"
    script.write_text(FINALISER.format(name=name, after=after, in_exec=in_exec))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "finaliser", "work"], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=60)  # run as `python -m eval.cli` and the rwb script run it
    assert (done.returncode, done.stderr.strip()) == expected
    assert time.monotonic() - started < 4.5  # the 5 s command did not run on


# ---- 5. user text is text: report.md carries no live markup from data --------------------------

EVIL = ["![beacon](http://127.0.0.1:9/b.png)", "<img src=x onerror=alert(1)>",
        "<b onmouseover=x>hover</b>", "[link](http://e.x)", "`code` | pipe", "<https://auto.link>",
        "*emph* _u_ ~~s~~ $x$"]


def test_report_md_escapes_every_text_from_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    root = tmp_path / "evil"
    shutil.copytree(TINY, root)
    name = " ".join(EVIL[:4])
    card = "".join(line + "\n" for line in (root / "dataset.toml").read_text().splitlines()
                   if not line.startswith(("name", "description")))
    head = f"name = {json.dumps(name)}\ndescription = {json.dumps(' '.join(EVIL))}\n"
    (root / "dataset.toml").write_text(head + card)
    rows = [json.loads(line) for line in (root / "queries.jsonl").read_text().splitlines()]
    for row, evil in zip(rows, EVIL[1:]):
        row["intent"] = evil
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pipeline = tmp_path / "evil.toml"
    pipeline.write_text(f'base = "rrf"\nname = {json.dumps(EVIL[0] + " " + EVIL[1])}\n')
    status, _, err = rwb(capsys, "report", root, "--pipeline", pipeline, "--baseline", "vector",
                         "--out", tmp_path / "out")
    assert status == 0, err
    md = (tmp_path / "out" / "report.md").read_text()
    # code is inert in Markdown (CommonMark 6.1): fenced blocks and code spans are taken out
    # before looking for live markup; a backtick from data cannot close a span (it is replaced)
    md = re.sub(r"^(`{3,})toml\n.*?\n\1$", "", md, flags=re.S | re.M)
    md = re.sub(r"`[^`\n]*`", "", md)
    for live in (r"(?<!\\)!(?=\[)", r"(?<!\\)<(?=img|b |https:|/b)", r"(?<!\\)\]\(", r"(?<!\\)`"):
        assert not re.search(live, md), (live, md)  # each one unescaped would be live markup
    readable = md.replace("\\", "")
    assert EVIL[0] in readable and EVIL[1] in readable  # shown, as text
    html_text = (tmp_path / "out" / "report.html").read_text()
    assert "<img src=x" not in html_text and "<b onmouseover" not in html_text


def test_a_killed_pool_save_leaves_nothing_after_the_next_run(tmp_path, capsys, monkeypatch):
    """A pool write SIGKILLed mid-way leaves its temporary; the next run that merely reuses the
    stored pool removes it (the write's process is gone)."""
    from eval.stores.pool import pool_path
    from retrieval.candidates import DEFAULT_POOL_DEPTH
    from retrieval.dataset import load_dataset

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    assert rwb(capsys, "eval", TINY, "--pipeline", "rrf")[0] == 0
    path = pool_path(load_dataset(TINY), "minilm", DEFAULT_POOL_DEPTH)
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    leftover = path.with_name(f".{path.name}.{killed.pid}-x1y2z3.tmp")
    leftover.write_bytes(b"\0" * 800_000)  # what the killed writer had written so far
    killed.kill()
    killed.wait()
    before = path.read_bytes()
    assert rwb(capsys, "eval", TINY, "--pipeline", "rrf")[0] == 0
    assert not leftover.exists() and path.read_bytes() == before  # reused, not rewritten
