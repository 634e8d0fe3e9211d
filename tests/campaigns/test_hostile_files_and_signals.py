"""Hardening round 4 (issue 35, RELIABILITY.md §11): attacks from outside on the surfaces added
in round 3 — model files, files inside a dataset, signals, durability, modes, unbounded values —
and the attacks that held, kept held. Pass = the intended output, or exit 2 with ONE line
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
from tests.campaigns.conftest import one_line_error, rwb

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"


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


# ---- 3. a damaged or hostile LightGBM model file never kills the process ----------------------

N_FEATURES = 4


def _booster_text() -> str:
    import lightgbm

    rng = np.random.default_rng(7)
    x = rng.normal(size=(60, N_FEATURES))
    y = (x[:, 0] + x[:, 2] > 0).astype(int) + (x[:, 1] > 1).astype(int)
    ranker = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=30, num_leaves=4,
                                 min_child_samples=2, num_threads=1, deterministic=True,
                                 verbose=-1)
    ranker.fit(x, y, group=[20, 20, 20])
    return ranker.booster_.model_to_string()


def _resized(text: str) -> str:
    """``text`` with ``tree_sizes`` recomputed for its trees, as a hostile editor would."""
    head, _, rest = text.partition("\nTree=")
    body = "Tree=" + rest
    trees = body[:body.index("end of trees")]
    blocks = ["Tree=" + b for b in trees.split("Tree=")[1:]]
    sizes = " ".join(str(len(b)) for b in blocks)
    lines = [f"tree_sizes={sizes}" if line.startswith("tree_sizes=") else line
             for line in head.split("\n")]
    return "\n".join(lines) + "\n" + body


def _damages(text: str) -> dict[str, str]:
    first_tree = text.index("Tree=0")
    second = text.index("Tree=1")
    garbage = text[:second] + "Tree=1\nnum_leaves=3\n%%%% not a field\n\x7f\x7f\x7f" + \
        text[text.index("Tree=2"):]
    cycle = text.replace("left_child=1 ", "left_child=0 ", 1)
    assert len(text) // 2 < text.index("end of trees")  # half of the text cuts a tree
    return {
        "cut in half": text[:len(text) // 2],
        "cut inside the trees": text[:first_tree + 120],
        "tree_sizes edited": text.replace("tree_sizes=", "tree_sizes=9", 1),
        "max_feature_idx=2": text.replace(f"max_feature_idx={N_FEATURES - 1}",
                                          "max_feature_idx=2", 1),
        "garbage Tree= section": garbage,
        "garbage Tree= section, sizes fixed": _resized(garbage),
        "a cycle in the children, sizes fixed": _resized(cycle),
        "split on feature 99, sizes fixed": _resized(
            text.replace("split_feature=", "split_feature=99 ", 1).replace(
                "split_feature=99 ", "split_feature=99", 1)),
        "leaf_value missing a value": _resized(text.replace("leaf_value=", "leaf_value=x", 1)),
        "a categorical split": _resized(text.replace("num_cat=0", "num_cat=1", 1)),
    }


LOAD_EACH = """
import json, sys
from retrieval.fusion.learned.model import load_model
for path in sys.argv[1:]:
    try:
        load_model(path)
        print(json.dumps(["loaded", path]), flush=True)
    except ValueError as error:
        print(json.dumps(["refused", str(error)]), flush=True)
"""


def test_every_damaged_model_file_is_one_clear_refusal(tmp_path):
    from retrieval.fusion.learned.features import feature_set_id
    from retrieval.fusion.learned.model import TreeModel, model_to_json, save_model

    names = ("dense_sim", "bm25_score", "confidence", "vitality")
    text = _booster_text()
    save_model(TreeModel(names, feature_set_id(names), text, {}), tmp_path / "good.model.json")
    files = [tmp_path / "good.model.json"]
    for i, (what, damaged) in enumerate(_damages(text).items()):
        assert damaged != text, what
        data = model_to_json(TreeModel(names, feature_set_id(names), text, {}))
        data["booster"] = damaged  # damaged: the checksum written at save time no longer matches
        (tmp_path / f"d{i}.model.json").write_text(json.dumps(data))
        files.append(tmp_path / f"d{i}.model.json")
        hostile = model_to_json(TreeModel(names, feature_set_id(names), damaged, {}))
        (tmp_path / f"h{i}.model.json").write_text(json.dumps(hostile))  # checksum made to match
        files.append(tmp_path / f"h{i}.model.json")
    done = subprocess.run([sys.executable, "-c", LOAD_EACH, *map(str, files)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    outcomes = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(outcomes) == len(files)
    assert outcomes[0] == ["loaded", str(files[0])]
    for path, (kind, message) in zip(files[1:], outcomes[1:]):
        assert kind == "refused" and "\n" not in message and len(message) < 400, (path, message)
    assert "sha256 differs" in outcomes[1][1]  # a damaged file is named as damaged


FUZZ = """
import json, random, sys
import numpy as np
from retrieval.fusion.learned.features import feature_set_id
from retrieval.fusion.learned.model import TreeModel, model_from_json, model_to_json
text, rounds = open(sys.argv[1]).read(), int(sys.argv[2])
names = ("dense_sim", "bm25_score", "confidence", "vitality")
rng = random.Random(35)
x = np.random.default_rng(0).normal(size=(50, 4)) * 3
outcomes = {"refused": 0, "loaded": 0}
for _ in range(rounds):
    t = list(text)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(t))
        op, c = rng.random(), rng.choice("0123456789-.e =\\nxTreabcdfgilmnoprstuv_[]:")
        if op < 0.6: t[i] = c
        elif op < 0.8: del t[i]
        else: t.insert(i, c)
    data = model_to_json(TreeModel(names, feature_set_id(names), "".join(t), {}))
    try:
        model_from_json(data, "m").predict(x)
        outcomes["loaded"] += 1
    except ValueError as error:
        assert "\\n" not in str(error)
        outcomes["refused"] += 1
print(json.dumps(outcomes))
"""


def test_random_edits_of_a_model_are_refused_or_load_never_anything_else(tmp_path):
    # hostile edits (the checksum recomputed): 1–3 characters replaced, deleted or inserted
    # anywhere in the text; by hand 11,000 such edits, 1,300 accepted, none crashed LightGBM
    (tmp_path / "booster.txt").write_text(_booster_text())
    done = subprocess.run([sys.executable, "-c", FUZZ, str(tmp_path / "booster.txt"), "400"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    outcomes = json.loads(done.stdout.splitlines()[-1])  # LightGBM may print warnings first
    assert outcomes["refused"] + outcomes["loaded"] == 400 and outcomes["refused"] > 0


def test_rwb_eval_with_a_damaged_model_file_exits_2_with_one_line(tmp_path, rwb_home):
    from retrieval.fusion.learned.features import feature_set_id
    from retrieval.fusion.learned.model import TreeModel, model_to_json

    names = ("dense_sim", "bm25_score", "confidence", "vitality")
    text = _booster_text()
    hostile = model_to_json(TreeModel(names, feature_set_id(names),
                                      text.replace("tree_sizes=", "tree_sizes=9", 1), {}))
    (tmp_path / "m.model.json").write_text(json.dumps(hostile))
    (tmp_path / "m.toml").write_text('fusion = "learned"\n[learned]\nmodel = "lambdamart"\n'
                                     'file = "m.model.json"\n')
    done = rwb_process(["eval", TINY, "--pipeline", tmp_path / "m.toml", "--quiet"],
                       rwb_home, tmp_path)  # the session's index and pool: the model is reached
    assert "tree_sizes do not match" in one_line_error(done.returncode, done.stderr)


# ---- 4. files inside a dataset folder are read only inside it ---------------------------------

DOCS = {"a": [1.0, 0.0, 0.0], "b": [1.0, 1.0, 0.0], "c": [0.0, 1.0, 0.0]}


def _vectors_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": k, "text": f"memory {k}"}) + "\n" for k in DOCS))
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "east"}\n')
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\n")
    (root / "vectors").mkdir()
    np.save(root / "vectors" / "corpus.npy", np.array(list(DOCS.values()), np.float32))
    (root / "vectors" / "corpus_ids.txt").write_text("a\nb\nc\n")
    np.save(root / "vectors" / "queries.npy", np.array([[1.0, 0.0, 0.0]], np.float32))
    (root / "vectors" / "queries_ids.txt").write_text("q1\n")
    return root


def test_vectors_symlinked_out_of_the_dataset_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    outside = _vectors_dataset(tmp_path / "outside")  # a complete, valid set of vectors
    cases = {}
    ds = _vectors_dataset(tmp_path / "file")
    (ds / "vectors" / "corpus.npy").unlink()
    (ds / "vectors" / "corpus.npy").symlink_to(outside / "vectors" / "corpus.npy")
    cases["corpus.npy a symlink out"] = ds
    ds = _vectors_dataset(tmp_path / "folder")
    shutil.rmtree(ds / "vectors")
    (ds / "vectors").symlink_to(outside / "vectors")
    cases["vectors/ a symlink out"] = ds
    ds = _vectors_dataset(tmp_path / "ids")
    (ds / "vectors" / "queries_ids.txt").unlink()
    (ds / "vectors" / "queries_ids.txt").symlink_to(outside / "vectors" / "queries_ids.txt")
    cases["queries_ids.txt a symlink out"] = ds
    for what, ds in cases.items():
        status, _, err = rwb(capsys, "index", ds, "--embedder", "precomputed", "--quiet")
        assert "outside the dataset folder" in one_line_error(status, err), what
    ds = _vectors_dataset(tmp_path / "inside")  # a symlink that stays inside is fine
    (ds / "vectors" / "corpus_ids.txt").rename(ds / "ids.txt")
    (ds / "vectors" / "corpus_ids.txt").symlink_to(ds / "ids.txt")
    status, _, err = rwb(capsys, "index", ds, "--embedder", "precomputed", "--quiet")
    assert status == 0, err


def test_an_outside_target_that_exists_and_one_that_does_not_read_the_same(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    secret = tmp_path / "secret.npy"
    np.save(secret, np.zeros((3, 3), np.float32))
    messages = []
    for name, target in (("exists", secret), ("missing", tmp_path / "no-such.npy")):
        ds = _vectors_dataset(tmp_path / name)
        (ds / "vectors" / "corpus.npy").unlink()
        (ds / "vectors" / "corpus.npy").symlink_to(target)
        status, _, err = rwb(capsys, "index", ds, "--embedder", "precomputed", "--quiet")
        messages.append(one_line_error(status, err).replace(str(ds), "DS"))
    assert messages[0] == messages[1]


def test_a_run_symlinked_out_of_the_dataset_is_refused(tmp_path, capsys, monkeypatch):
    from eval.importers.runs import import_runs

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    runs = ROOT / "tests" / "fixtures" / "runs"
    dest = import_runs(tmp_path / "mine", corpus=runs / "corpus.jsonl",
                       queries=runs / "queries.jsonl", qrels=runs / "qrels.tsv",
                       run=[f"dense={runs / 'dense.run'}", f"sparse={runs / 'sparse.run'}"]).dest
    shutil.copy(dest / "runs" / "dense.run", tmp_path / "outside.run")
    (dest / "runs" / "dense.run").unlink()
    (dest / "runs" / "dense.run").symlink_to(tmp_path / "outside.run")
    status, _, err = rwb(capsys, "eval", dest, "--pipeline", "rrf", "--quiet")
    assert "outside the dataset folder" in one_line_error(status, err)


def test_a_datasets_own_files_symlinked_out_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "dataset.toml"):
        ds = tmp_path / name.replace("/", "-")
        shutil.copytree(TINY, ds)
        outside = tmp_path / f"outside-{name.replace('/', '-')}"
        (ds / name).rename(outside)
        (ds / name).symlink_to(outside)
        status, _, err = rwb(capsys, "validate", ds)
        assert "outside the dataset folder" in one_line_error(status, err), name
    ds = tmp_path / "implicit"  # qrels/implicit.tsv, read by --judgments implicit
    shutil.copytree(TINY, ds)
    (tmp_path / "implicit.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td01\t1\n")
    (ds / "qrels" / "implicit.tsv").symlink_to(tmp_path / "implicit.tsv")
    from eval.stores.judgments import effective_qrels
    from retrieval.dataset import load_dataset

    with pytest.raises(ValueError, match="outside the dataset folder"):
        effective_qrels(load_dataset(ds), source="implicit")


def test_an_absolute_model_file_in_a_toml_is_refused_the_same_whether_it_exists(tmp_path,
                                                                               capsys, rwb_home):
    messages = []
    for target in ("/etc/passwd", "/etc/no-such-file"):
        (tmp_path / "m.toml").write_text('fusion = "learned"\n[learned]\nmodel = "lambdamart"\n'
                                         f'file = "{target}"\n')
        status, _, err = rwb(capsys, "eval", TINY, "--pipeline", tmp_path / "m.toml", "--quiet")
        messages.append(one_line_error(status, err).replace(repr(target), "FILE"))
    assert messages[0] == messages[1] and "absolute path is refused" in messages[0]


def test_a_model_the_workbench_keeps_is_still_read_by_its_absolute_path(tmp_path, monkeypatch):
    from retrieval.fusion.learned.features import feature_set_id
    from retrieval.fusion.learned.model import TreeModel, save_model
    from retrieval.pipeline import get_pipeline

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    names = ("dense_sim", "bm25_score", "confidence", "vitality")
    kept = tmp_path / "home" / "learned" / "k.model.json"
    kept.parent.mkdir(parents=True)
    save_model(TreeModel(names, feature_set_id(names), _booster_text(), {}), kept)
    (tmp_path / "p.toml").write_text('fusion = "learned"\n[learned]\nmodel = "lambdamart"\n'
                                     f'file = "{kept}"\n')
    model = get_pipeline(str(tmp_path / "p.toml")).params.stored_model()
    assert model.feature_names == names


# ---- 11. no internal error, no unbounded message -----------------------------------------------

def test_a_npy_header_claiming_a_huge_shape_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    ds = _vectors_dataset(tmp_path / "ds")
    with open(ds / "vectors" / "corpus.npy", "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 384)})
        handle.write(b"\0" * 64)
    status, _, err = rwb(capsys, "index", ds, "--embedder", "precomputed", "--quiet")
    line = one_line_error(status, err)
    assert "header claims shape" in line and "MemoryError" not in line


def test_error_lines_cut_long_values_from_data(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    ds = _vectors_dataset(tmp_path / "ds")
    huge_id = "x" * 1_000_000
    (ds / "vectors" / "corpus_ids.txt").write_text(f"a\nb\n{huge_id}\n")
    status, _, err = rwb(capsys, "index", ds, "--embedder", "precomputed", "--quiet")
    line = one_line_error(status, err)
    assert len(line) < 400 and "(1000000 characters)" in line
    for argv, length in ((["judge", TINY, "q" * 100_000, "d01", "1"], "(100000 characters)"),
                         (["judge", TINY, "q1", "d01", "9" * 5_000], "(5000 characters)"),
                         (["judge", TINY, "q1", "d01", "9" * 4_000], "4000 digits")):
        status, _, err = rwb(capsys, *argv)
        line = one_line_error(status, err)
        assert len(line) < 300 and length in line, line


def test_clip_shows_short_values_whole_and_long_ones_cut():
    from retrieval.limits import clip

    assert clip("q1") == "'q1'"
    assert clip("é" * 80) == repr("é" * 80)
    assert clip("a" * 81) == repr("a" * 80) + "… (81 characters)"
    assert clip(10**1000) == "an integer of 1001 digits"
    assert clip(2.5) == "2.5"


# ---- 6. an interrupt ends every command with 130 / 143 and one line, always -------------------

LEARN = ["learn", str(TINY), "--model", "lambdamart", "--folds", "2", "--inner-folds", "2",
         "--quiet"]
TUNE = ["tune", str(TINY), "--pipeline", "rrf", "--folds", "2", "--inner-folds", "2",
        "--trials", "10000", "--quiet"]


@pytest.mark.parametrize("argv,sig,delay", [
    (LEARN, signal.SIGINT, 0.4), (LEARN, signal.SIGINT, 1.5), (LEARN, signal.SIGINT, 3.0),
    (LEARN, signal.SIGTERM, 2.0), (TUNE, signal.SIGINT, 2.0), (TUNE, signal.SIGINT, 5.0),
])
def test_learn_and_tune_end_in_one_line_whenever_the_signal_lands(argv, sig, delay, tmp_path,
                                                                  rwb_home):
    assert main(["index", str(TINY), "--quiet"]) == 0  # built: the signal lands in the work
    out = tmp_path / "learned.toml"
    env = {**os.environ, "RWB_HOME": str(rwb_home), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "eval.cli", *argv,
                             *(["--out", str(out)] if argv is LEARN else [])],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    if proc.poll() is not None:  # a fast machine finished first: nothing was interrupted
        _, err = proc.communicate()
        assert proc.returncode == 0 and out.is_file(), err
        return
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:  # the command had returned (its output complete): the signal is moot
        assert argv is LEARN and err == "" and out.is_file()
        return
    expected = {signal.SIGINT: (130, "rwb: interrupted"),
                signal.SIGTERM: (143, "rwb: terminated")}[sig]
    assert (proc.returncode, err.strip()) == expected


LIBRARY = """
import os, signal, time

def callback(value):  # a library's Python code, called back from native code
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.3)  # the signal arrives here
    with open("callback-finished", "w") as handle:
        handle.write("yes")
    return value
"""

COMMAND = """
import json, sys, time
import eval.cli as cli
import library

def command(args):
    json.loads('{"a": 1}', object_hook=library.callback)  # C code calling a library callback
    time.sleep(5)  # the workbench's own code: the deferred interrupt lands here
    return 0

def parser():
    p = cli.Parser(prog="rwb")
    p.add_subparsers(dest="command").add_parser("work").set_defaults(func=command)
    return p

cli.build_parser = parser
sys.exit(cli.main())
"""


def test_an_interrupt_is_never_raised_inside_a_library_callback(tmp_path):
    # "terminate called after throwing an instance of 'pybind11::error_already_set'": Python raised
    # KeyboardInterrupt inside a callback a native extension had called, and the C++ code could
    # not unwind it. The handler now raises only in the workbench's own code.
    (tmp_path / "library.py").write_text(LIBRARY)
    (tmp_path / "command.py").write_text(COMMAND)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "command", "work"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}:{tmp_path}"})
    assert (done.returncode, done.stderr.strip()) == (130, "rwb: interrupted")
    assert (tmp_path / "callback-finished").read_text() == "yes"  # the callback ran to its end
    assert time.monotonic() - started < 4.5  # and the command did not run on


AFTER_THE_COMMAND = """
import os, signal, sys, threading, time
import eval.cli as cli

def command(args):
    # a thread the command leaves behind (as native libraries do) takes the signal while the
    # interpreter shuts down
    threading.Thread(target=lambda: (time.sleep(0.2), os.kill(os.getpid(), signal.SIG{name})),
                     daemon=False).start()
    return 0

def parser():
    p = cli.Parser(prog="rwb")
    p.add_subparsers(dest="command").add_parser("work").set_defaults(func=command)
    return p

cli.build_parser = parser
status = cli.main()
time.sleep(0.5)  # the signal arrives after main returned
sys.exit(status)
"""


@pytest.mark.parametrize("name", ["INT", "TERM"])
def test_a_signal_after_the_command_returned_never_kills_the_process(name, tmp_path):
    script = tmp_path / "after.py"
    script.write_text(AFTER_THE_COMMAND.format(name=name))
    done = subprocess.run([sys.executable, "-m", "after", "work"], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    # the command completed: its status stands, and the signal is neither fatal nor a traceback
    assert (done.returncode, done.stderr.strip()) == (0, "")


# ---- 8. text from data is text on every page: the Reports page after Generate ------------------

BEACON = "![beacon](http://127.0.0.1:9/b.png) <img src=http://127.0.0.1:9/i.png>"


def test_the_reports_page_after_generate_renders_no_markup_from_data(tmp_path, monkeypatch):
    import streamlit as st
    from markdown_it import MarkdownIt
    from streamlit.testing.v1 import AppTest

    ds = tmp_path / "evil"
    shutil.copytree(TINY, ds)
    card = (ds / "dataset.toml").read_text("utf-8")
    (ds / "dataset.toml").write_text(card.replace('name = "tiny"', f"name = {json.dumps(BEACON)}"))
    monkeypatch.setenv("RWB_DATASET", str(ds))
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/reports.py").run()
    at = next(b for b in at.button if b.label == "Generate").click().run()
    assert not at.exception
    report = Path(at.session_state["reports_file"]["md"]).read_text("utf-8")
    assert "beacon" in report  # the name is in the report
    rendered = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    shown = [e.value for e in (*at.markdown, *at.caption, *at.info, *at.warning, *at.error)]
    for text in shown:
        assert "<img" not in rendered.render(text), text
        assert "## Method" not in text  # report.md is not rendered as Markdown
    at = at.toggle(key="reports_preview").set_value(True).run()  # the preview, when asked for
    assert [c.value for c in at.code if "## Method" in c.value] == [report.rstrip("\n")]
    st.cache_data.clear()
    st.cache_resource.clear()


# ---- what held in round 4 stays held -----------------------------------------------------------

RUNS = ROOT / "tests" / "fixtures" / "runs"


def _import_runs(dest: Path, dense: Path):
    from eval.importers.runs import import_runs

    return import_runs(dest, corpus=RUNS / "corpus.jsonl", queries=RUNS / "queries.jsonl",
                       qrels=RUNS / "qrels.tsv",
                       run=[f"dense={dense}", f"sparse={RUNS / 'sparse.run'}"])


def test_held_trec_runs_malformed_nan_duplicate_crlf_bom(tmp_path, monkeypatch):
    from eval.importers.runs import read_trec_run

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    dense = (RUNS / "dense.run").read_text()
    first = dense.splitlines()[0]
    same = {"CRLF line ends": dense.replace("\n", "\r\n"), "a byte-order mark": "\ufeff" + dense}
    refused = {
        "3 columns": (dense + "q1 Q0 d1\n", "x.run:13: row: expected 6 columns"),
        "NaN score": (dense + "q1 Q0 d8 9 nan t\n", "x.run:13: score: expected a finite number"),
        "inf score": (dense + "q1 Q0 d8 9 inf t\n", "x.run:13: score: expected a finite number"),
        "a pair twice": (dense + first + "\n", "x.run:13: docid: 'd1' listed twice"),
        "a pair twice, other score": (dense + " ".join(first.split()[:4] + ["9", "t"]) + "\n",
                                      "x.run:13: docid: 'd1' listed twice"),
    }
    for i, (what, text) in enumerate(same.items()):
        (tmp_path / "x.run").write_text(text, newline="")
        result = _import_runs(tmp_path / f"same{i}", tmp_path / "x.run")
        assert read_trec_run(result.dest / "runs" / "dense.run") == \
            read_trec_run(RUNS / "dense.run"), what
    for i, (what, (text, message)) in enumerate(refused.items()):
        (tmp_path / "x.run").write_text(text)
        with pytest.raises(ValueError) as caught:
            _import_runs(tmp_path / f"bad{i}", tmp_path / "x.run")
        assert message in str(caught.value) and "\n" not in str(caught.value), what
        assert not (tmp_path / f"bad{i}").exists()  # nothing half-written


def _big_run(path: Path, lines: int) -> None:
    with open(path, "w") as handle:
        handle.write((RUNS / "dense.run").read_text())
        handle.write("".join(f"q{i % 5000 + 10} Q0 x{i} {i} {1 - i * 1e-7:.7f} t\n"
                             for i in range(lines)))


def test_held_a_run_of_many_lines_imports_and_counts_what_it_dropped(tmp_path, monkeypatch):
    # the campaign used 1,000,000 lines (7.4 s on the project machine); 200,000 here
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    _big_run(tmp_path / "big.run", 200_000)
    result = _import_runs(tmp_path / "out", tmp_path / "big.run")
    assert result.skipped["dense run lines of queries not imported"] == 200_000
    assert len((result.dest / "runs" / "dense.run").read_text().splitlines()) == 12


def test_held_a_pickled_npy_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    ds = _vectors_dataset(tmp_path / "ds")
    marker = tmp_path / "unpickled"
    np.save(ds / "vectors" / "corpus.npy",
            np.array([[Marker(str(marker))]] * 3, dtype=object), allow_pickle=True)
    status, _, err = rwb(capsys, "index", ds, "--embedder", "precomputed", "--quiet")
    one_line_error(status, err)
    assert not marker.exists()  # never unpickled


class Marker:
    """Unpickling it would create a file."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_held_hostile_ubi_text_is_data_or_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    dest = _import_runs(tmp_path / "mine", RUNS / "dense.run").dest
    hostile = [BEACON, "<script>alert(1)</script>", "'; DROP TABLE x; --", "a\x00b", "\ud800",
               "x" * 100_000, "../../etc/passwd"]
    queries = [{"query_id": f"h{i}", "user_query": text, "query_response_hit_ids": [text, "d1"]}
               for i, text in enumerate(hostile)]
    queries.append({"query_id": "a1", "user_query": "how does rank fusion combine the paths",
                    "query_response_hit_ids": ["d1", "d2"]})
    events = [{"action_name": "click", "query_id": q["query_id"], "client_id": text,
               "event_attributes": {"object": {"object_id": "d1", "object_id_field": "_id"},
                                    "position": {"ordinal": 1}}}
              for q, text in zip(queries, [*hostile, "c"])]
    logs = tmp_path / "q.jsonl", tmp_path / "e.jsonl"
    logs[0].write_text("".join(json.dumps(q) + "\n" for q in queries))
    logs[1].write_text("".join(json.dumps(e) + "\n" for e in events))
    status, out, err = rwb(capsys, "import", "ubi", dest, "--queries", logs[0],
                           "--events", logs[1])
    if status != 0:
        one_line_error(status, err)
    assert len(out) + len(err) < 5_000  # nothing echoed whole
    assert {p.name for p in tmp_path.iterdir()} <= {"e.jsonl", "home", "mine", "q.jsonl"}


def test_held_an_interrupted_import_leaves_no_dataset_and_no_temporary(tmp_path):
    _big_run(tmp_path / "big.run", 300_000)
    out = tmp_path / "out"
    env = {**os.environ, "RWB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "eval.cli", "import", "runs", str(out), "--corpus",
         str(RUNS / "corpus.jsonl"), "--queries", str(RUNS / "queries.jsonl"), "--qrels",
         str(RUNS / "qrels.tsv"), "--run", f"dense={tmp_path / 'big.run'}",
         "--run", f"sparse={RUNS / 'sparse.run'}", "--quiet"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:  # the import had finished: a signal after that is ignored (by design)
            assert out.is_dir() and "interrupted" not in err
        else:
            assert (proc.returncode, err.strip()) == (130, "rwb: interrupted")
            assert not out.exists()
    else:  # a fast machine finished first
        assert proc.returncode == 0 and out.is_dir()
    debris = [p.name for p in tmp_path.iterdir() if p.name.startswith(".") or "importing" in p.name]
    assert debris == []


def test_held_an_interrupted_export_ends_in_one_line(tmp_path):
    (tmp_path / "p.toml").write_text('base = "rrf"\nname = "mine"\n')
    env = {**os.environ, "RWB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()   # the interpreter's own start-up, before any of our code runs
    subprocess.run([sys.executable, "-c", "import eval"], env=env, check=True)
    startup = time.perf_counter() - start
    for delay in (startup + 0.05, startup + 0.3, startup + 0.8):
        proc = subprocess.Popen([sys.executable, "-m", "eval.cli", "export", "--to", "qdrant",
                                 "--out", str(tmp_path / "q.json"), str(tmp_path / "p.toml")],
                                env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        # interrupted (130, one line), or it had finished and its output is whole
        assert (proc.returncode, err.strip()) == (130, "rwb: interrupted") or (
            proc.returncode == 0 and json.loads((tmp_path / "q.json").read_text()))
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


GRADER = """
import sys
from eval.stores.judgments import JudgmentStore
from retrieval.dataset import load_dataset
store = JudgmentStore(load_dataset(sys.argv[1]))
for doc in sys.argv[3:]:
    store.grade(sys.argv[2], doc, 2, author=sys.argv[2])
"""


def test_held_concurrent_graders_lose_no_grade(tmp_path):
    env = {**os.environ, "RWB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    docs = [f"d{i:02d}" for i in range(1, 11)]
    procs = [subprocess.Popen([sys.executable, "-c", GRADER, str(TINY), q, *docs], env=env)
             for q in ("q1", "q2", "q3", "q4")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    from eval.stores.judgments import JudgmentStore
    from retrieval.dataset import load_dataset

    merged = JudgmentStore(load_dataset(TINY), home=tmp_path / "home").qrels()
    assert {(q, d): merged[q][d] for q in ("q1", "q2", "q3", "q4") for d in docs} == \
        {(q, d): 2 for q in ("q1", "q2", "q3", "q4") for d in docs}


def test_held_a_damaged_snapshot_or_tries_file_is_one_line(tmp_path, monkeypatch):
    from eval.stores.snapshots import SnapshotStore
    from eval.stores.tries import TryStore
    from retrieval.dataset import load_dataset

    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    dataset = load_dataset(TINY)
    snapshots = SnapshotStore(dataset)
    snapshots.folder.mkdir(parents=True)
    for i, damage in enumerate(["", "{", "[1, 2]", '{"queries": 3}', "\x00\xff" * 10,
                                "[" * 100_000]):
        (snapshots.folder / f"s{i}.json").write_bytes(damage.encode("utf-8", "surrogatepass"))
        with pytest.raises(ValueError) as caught:
            snapshots.load(f"s{i}")
        assert "\n" not in str(caught.value) and len(str(caught.value)) < 400
    tries = TryStore(dataset)
    tries.path.parent.mkdir(parents=True, exist_ok=True)
    for damage in ("[1, 2]", "{", "[" * 100_000):
        tries.path.write_text(damage)
        with pytest.raises(ValueError, match="damaged"):
            tries.tries()
