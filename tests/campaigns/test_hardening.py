"""Hardening, round 2 (issue 13): paths from metadata, size bounds, one-line errors for hostile
input, durable and concurrent pool writes, optional caches, corrupt index files, imports, and
remote exposure. Real Tantivy, LanceDB and MiniLM throughout; a full disk and a read-only
``RWB_HOME`` are real mounts (a tiny tmpfs / a read-only bind mount in a private mount
namespace) where the machine allows it, else the test is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval.importers._files import MARKER, write_atomically
from eval.importers.beir import import_beir
from eval.stores.pool import load_pool, pool_path
from eval.stores.judgments import JudgmentStore
from retrieval.access import AccessDenied, check_server_address, confine, data_root, is_loopback
from retrieval.candidates import Candidates, PoolCorrupt, build_candidates
from retrieval.dataset import DatasetError, load_dataset
from retrieval.files import atomic_write_text, path_under, safe_component
from retrieval.index import index_dir, open_index, read_manifest
from retrieval.limits import MAX_DEPTH
from retrieval.pipeline import search

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
FIXTURES = ROOT / "tests" / "fixtures"
RWB = [sys.executable, "-m", "eval.cli"]


def _env(home: Path, **extra) -> dict:
    return {**os.environ, "RWB_HOME": str(home), "PYTHONPATH": str(ROOT), "LANCEDB_LOG": "error",
            "HF_HUB_OFFLINE": "1", **extra}


def _one_line_error(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rwb: error:")]
    assert len(errors) == 1, proc.stderr


def _set_line(data: Path, line_no: int, **fields) -> None:
    lines = (data / "corpus.jsonl").read_text("utf-8").splitlines()
    obj = json.loads(lines[line_no - 1])
    obj.update(fields)
    lines[line_no - 1] = json.dumps(obj)
    (data / "corpus.jsonl").write_text("\n".join(lines) + "\n", "utf-8")


def _can_mount() -> str | None:
    """None when a private mount namespace with tmpfs works here, else the reason it does not."""
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt && touch /mnt/x"],
                           capture_output=True, text=True)
    return None if probe.returncode == 0 else f"cannot mount in a private namespace: {probe.stderr.strip()[:100]}"


MOUNT_PROBLEM = _can_mount()
needs_mount = pytest.mark.skipif(MOUNT_PROBLEM is not None, reason=str(MOUNT_PROBLEM))


def _in_namespace(setup: str, argv: list[str], env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``argv`` after the shell ``setup`` (mounts) in a private mount namespace."""
    script = setup + ' && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", *argv], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=timeout)


# ---- 1. paths built from metadata ------------------------------------------------------------

HOSTILE_NAMES = ["/some/abs/path", "../../x", "..", ".", "", "a/../../b", "~/x", "con\x00nul", "\\..\\..\\w",
                 ".hidden", "x" * 500, "名前/../..", "a\nb"]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_safe_component_is_one_plain_file_name(name, tmp_path):
    part = safe_component(name)
    assert part and "/" not in part and "\\" not in part and not part.startswith((".", "-"))
    assert part not in (".", "..") and len(part) <= 70
    assert path_under(tmp_path, name, name).resolve().parent.parent == tmp_path.resolve()


def test_different_names_never_share_a_path():
    names = ["a/b", "a-b", "a b", "a\\b", "a..b", "../a-b"]
    assert len({safe_component(n) for n in names}) == len(names)
    assert safe_component("devmem") == "devmem"  # plain names keep their readable path


@pytest.mark.parametrize("name", ["/tmp/rwb-escape-abs", "../../rwb-escape-rel", ".."])
def test_dataset_name_cannot_move_pools_indexes_or_judgments_out_of_rwb_home(workspace, name, tmp_path):
    data, home = workspace
    card = (data / "dataset.toml").read_text("utf-8").replace('name = "tiny"', f"name = {json.dumps(name)}")
    (data / "dataset.toml").write_text(card, "utf-8")
    dataset = load_dataset(data)
    assert dataset.name == name
    load_pool(dataset, pool_depth=10)
    JudgmentStore(dataset).grade("q1", "d05", 2)
    for path in (index_dir(dataset, "minilm"), pool_path(dataset, "minilm", 10), JudgmentStore(dataset).path):
        assert home.resolve() in path.resolve().parents, path
    assert pool_path(dataset, "minilm", 10).is_file()
    assert not Path("/tmp/rwb-escape-abs").exists() and not (tmp_path.parent / "rwb-escape-rel").exists()
    written = {p.resolve() for p in home.rglob("*")}
    assert written and all(home.resolve() in p.parents for p in written)


def test_import_name_goes_into_the_card_not_a_path(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("RWB_HOME", str(home))
    dest = tmp_path / "imported"
    result = import_beir(FIXTURES / "beir", dest, name="../../../etc/evil")
    assert result.dataset.name == "../../../etc/evil" and dest.is_dir()
    assert home.resolve() in index_dir(result.dataset, "minilm").resolve().parents


# ---- 2. sizes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [10**9, 10**12, MAX_DEPTH + 1, -1, 2.5, float("nan"), True, "10"])
def test_every_search_refuses_an_absurd_depth_with_a_clear_message(tiny_index, depth):
    vector = tiny_index.vectors[0]
    calls = [
        lambda: tiny_index.bm25.search("ERR_CONN_REFUSED", depth),
        lambda: tiny_index.exact.search(vector, depth),
        lambda: tiny_index.store.search(vector, depth),
        lambda: build_candidates(tiny_index, tiny_index.dataset.queries[:1], depth),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"(depth|pool_depth) must be"):
            call()


def test_the_largest_allowed_depth_works(tiny_index):
    assert len(tiny_index.bm25.search("ERR_CONN_REFUSED pool", MAX_DEPTH)) >= 1
    assert len(tiny_index.exact.search(tiny_index.vectors[0], MAX_DEPTH)) == 10
    assert len(tiny_index.store.search(tiny_index.vectors[0], MAX_DEPTH)) == 10
    assert tiny_index.bm25.search("ERR_CONN_REFUSED", 0) == []


def test_load_pool_refuses_a_huge_pool_depth(workspace):
    data, _ = workspace
    with pytest.raises(ValueError, match="pool_depth must be between 1 and 10000, got 1000000000"):
        load_pool(load_dataset(data), pool_depth=10**9)


# ---- 3. hostile dataset values: one error naming file:line: field -----------------------------

@pytest.mark.parametrize("raw, expected", [
    ('{"_id": "x1", "text": "t", "confidence": 1' + "0" * 400 + "}", "corpus.jsonl:11: confidence: a 401-digit"),
    ('{"_id": "x1", "text": "t", "line_start": 2147483648}', "corpus.jsonl:11: line_start: 2147483648 is out of range"),
    ('{"_id": "x1", "text": "t", "access_count": 99999999999999999999}', "corpus.jsonl:11: access_count:"),
    ('{"_id": "x1", "text": "t", "vitality": ' + "9" * 5000 + "}", "corpus.jsonl:11: json: unreadable number"),
    ('{"_id": "x1", "text": "t", "extra": ' + "[" * 50000 + "]" * 50000 + "}", "corpus.jsonl:11: json: nested too deeply"),
    ('{"_id": "x1", "text": "first", "text": "second"}', "corpus.jsonl:11: text: duplicate key 'text'"),
    ('{"_id": "x1", "text": "t", "line_end": 1e999}', "corpus.jsonl:11: line_end:"),
])
def test_hostile_json_values_are_named_by_file_line_field(tmp_path, raw, expected):
    data = tmp_path / "ds"
    shutil.copytree(TINY, data)
    with open(data / "corpus.jsonl", "a", encoding="utf-8") as handle:
        handle.write(raw + "\n")
    with pytest.raises(DatasetError) as caught:
        load_dataset(data)
    assert len(caught.value.problems) == 1 and caught.value.problems[0].startswith(expected), caught.value.problems


def test_duplicate_key_in_queries_is_refused(tmp_path):
    data = tmp_path / "ds"
    shutil.copytree(TINY, data)
    with open(data / "queries.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"_id": "q9", "_id": "q10", "text": "x"}\n')
    with pytest.raises(DatasetError, match=r"queries.jsonl:\d+: _id: duplicate key '_id'"):
        load_dataset(data)


def test_largest_int32_line_start_loads_and_searches(workspace):
    data, _ = workspace
    _set_line(data, 1, line_start=2**31 - 1, line_end=2**31 - 1)
    handle = open_index(load_dataset(data))
    assert search(handle, "深色主题", "rrf").results


@pytest.mark.parametrize("card, field", [('name = 5', "name"), ('languages = "en"', "languages"),
                                         ('name = "a\\u0000b"', "name")])
def test_bad_dataset_card_values_are_named(tmp_path, card, field):
    data = tmp_path / "ds"
    shutil.copytree(TINY, data)
    (data / "dataset.toml").write_text(card + "\n", "utf-8")
    with pytest.raises(DatasetError, match=rf"dataset.toml:1: {field}:"):
        load_dataset(data)


@pytest.mark.parametrize("path", [".", "./", "qrels", "qrels/"])
def test_show_of_a_folder_is_one_line(path):
    proc = subprocess.run([*RWB, "show", str(TINY), path], capture_output=True, text=True,
                          env=_env(Path("/tmp/unused-rwb-home")), cwd=ROOT)
    _one_line_error(proc)
    assert "folder" in proc.stderr


# ---- 5. candidate pools: checksummed, atomic, durable, concurrent -------------------------------

def _flip(path: Path, offset_from_end: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[max(0, len(data) - offset_from_end)] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncate", "empty", "bitflip", "garbage", "old-format"])
def test_damaged_pool_is_detected_and_rebuilt(workspace, damage):
    data, _ = workspace
    dataset = load_dataset(data)
    first = load_pool(dataset, pool_depth=10)
    path = pool_path(dataset, "minilm", 10)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "bitflip":
        _flip(path)
    elif damage == "garbage":
        path.write_bytes(os.urandom(4096))
    else:  # a plain .npz as round 1 wrote it
        np.savez(path, offsets=first.offsets)
    with pytest.raises(PoolCorrupt):
        Candidates.load(path)
    notices = []
    again = load_pool(dataset, pool_depth=10, on_notice=notices.append)
    assert notices and "damaged" in notices[0]
    assert again.n_rows == first.n_rows and np.array_equal(again.doc_idx, first.doc_idx)
    assert Candidates.load(path).n_rows == first.n_rows  # the rebuilt pool was stored again


def test_pool_save_fsyncs_file_and_folder(tmp_path, monkeypatch, tiny_index):
    pool = build_candidates(tiny_index, tiny_index.dataset.queries, 10)
    synced = []
    real_fsync = os.fsync

    def spy(fd):  # observe the OS call, then make it
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    target = tmp_path / "pools" / "p.npz"
    pool.save(target)
    assert any(Path(s).parent == target.parent and Path(s).name.startswith(".p.npz.") for s in synced), synced
    assert str(target.parent) in synced
    assert not [p for p in target.parent.iterdir() if p.name != "p.npz"]  # no temporary file left


_SAVER = """
import sys
from pathlib import Path
from retrieval.candidate_table import Candidates
pool = Candidates.load(Path(sys.argv[1]))
target = Path(sys.argv[2])
errors = 0
for i in range(int(sys.argv[3])):
    try:
        pool.save(target)
        Candidates.load(target)
    except Exception as error:
        errors += 1
        print(type(error).__name__, error, file=sys.stderr)
print(errors)
"""


def test_two_processes_saving_the_same_pool_at_once(workspace, tmp_path):
    data, home = workspace
    dataset = load_dataset(data)
    load_pool(dataset, pool_depth=10)
    source = pool_path(dataset, "minilm", 10)
    target = tmp_path / "shared" / "pool.npz"
    procs = [subprocess.Popen([sys.executable, "-c", _SAVER, str(source), str(target), "60"], env=_env(home),
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [int(out.strip()) for out, _ in outputs] == [0, 0], [err[-1000:] for _, err in outputs]
    assert [p.name for p in target.parent.iterdir()] == ["pool.npz"]


def test_atomic_write_leaves_the_old_file_when_the_disk_is_full(tmp_path, monkeypatch):
    import errno

    target = tmp_path / "state.json"
    atomic_write_text(target, '{"v": 1}')

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the OS boundary: the data never reached the disk
    with pytest.raises(OSError, match="No space left"):
        atomic_write_text(target, '{"v": 2}')
    assert target.read_text() == '{"v": 1}' and [p.name for p in tmp_path.iterdir()] == ["state.json"]


@needs_mount
def test_pool_that_cannot_be_saved_on_a_full_disk_still_evaluates(workspace):
    data, home = workspace
    open_index(load_dataset(data))  # the index fits; the pool folder is a full 4 KiB tmpfs
    (home / "candidates").mkdir()
    code = ("from retrieval.dataset import load_dataset; from eval.stores.pool import load_pool; import sys; "
            f"c = load_pool(load_dataset({str(data)!r}), pool_depth=10); print(c.n_rows)")
    proc = _in_namespace(f"mount -t tmpfs -o size=4k tmpfs {home / 'candidates'}",
                         [sys.executable, "-c", code], _env(home))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.strip()) > 0
    assert "candidate pool not saved" in proc.stderr and "Traceback" not in proc.stderr


# ---- 3 / 6. full disk, read-only RWB_HOME, corrupt or unwritable embedding cache -----------------

@needs_mount
@pytest.mark.parametrize("size_kb", [8, 48, 96, 160])  # full at: Tantivy, SQLite+NumPy, LanceDB, manifest
def test_index_on_a_full_disk_fails_with_one_line_and_leaves_no_partial_build(workspace, size_kb):
    data, home = workspace
    home.mkdir()
    script = (f"mount -t tmpfs -o size={size_kb}k tmpfs {home} && {sys.executable} -m eval.cli index {data} "
              f"--quiet; echo rc=$? >&2; find {home} -name 'tmp-*' 2>/dev/null || true")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=_env(home),
                          cwd=ROOT, timeout=300)
    assert "rc=2" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert [line for line in proc.stderr.splitlines() if line.startswith("rwb: error:")][0].startswith(
        "rwb: error: no space left on the disk"), proc.stderr
    assert "tmp-" not in proc.stdout  # the partial build was removed


@needs_mount
def test_read_only_rwb_home_still_searches(workspace):
    data, home = workspace
    subprocess.run([*RWB, "index", str(data), "--quiet"], check=True, env=_env(home), cwd=ROOT, capture_output=True)
    before = sorted((p.relative_to(home), p.stat().st_mtime_ns) for p in home.rglob("*") if p.is_file())
    proc = _in_namespace(f"mount --bind {home} {home} && mount -o remount,ro,bind {home}",
                         [*RWB, "search", str(data), "ERR_CONN_REFUSED", "--pipeline", "rrf", "--json"], _env(home))
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)["results"]
    assert results and results[0]["id"] == "d03"
    assert "Traceback" not in proc.stderr
    after = sorted((p.relative_to(home), p.stat().st_mtime_ns) for p in home.rglob("*") if p.is_file())
    assert after == before
    # a stale index cannot be rebuilt read-only: one line saying so
    _set_line(data, 1, text="changed text")
    stale = _in_namespace(f"mount --bind {home} {home} && mount -o remount,ro,bind {home}",
                          [*RWB, "search", str(data), "ERR_CONN_REFUSED"], _env(home))
    _one_line_error(stale)
    assert "not writable" in stale.stderr


def test_corrupt_embedding_cache_is_moved_aside_and_search_keeps_vectors(workspace, capfd):
    data, home = workspace
    dataset = load_dataset(data)
    open_index(dataset).embedder.cache.close()
    (home / "embeddings.sqlite").write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        (home / f"embeddings.sqlite{suffix}").unlink(missing_ok=True)
    handle = open_index(dataset)
    response = search(handle, "database connection refused", "vector")
    assert response.results and not any("keyword-only" in n for n in response.degraded)
    assert list(home.glob("embeddings.sqlite.corrupt-*"))
    assert "damaged" in capfd.readouterr().err
    with sqlite3.connect(home / "embeddings.sqlite") as conn:  # the fresh cache works again
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] >= 1  # the query's vector


def test_cache_that_cannot_be_written_keeps_the_computed_embedding(workspace, capfd):
    data, _ = workspace
    handle = open_index(load_dataset(data))
    expected = [r.id for r in search(handle, "which editor colours does Mina like", "vector").results]
    cache = handle.embedder.cache
    pages = cache._conn.execute("PRAGMA page_count").fetchone()[0]
    cache._conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLite's own "database or disk is full"
    with pytest.raises(sqlite3.OperationalError, match="full"):  # use up the last free bytes of the file
        for i in range(10_000):
            with cache._conn:
                cache._conn.execute("INSERT INTO vectors VALUES ('filler', ?, ?)", (str(i), b"x" * 64))
    fresh_query = "which editor colour scheme would Mina pick today"  # not cached: must be encoded and stored
    response = search(handle, fresh_query, "vector")
    assert response.results, response.degraded
    assert not any("keyword-only" in n for n in response.degraded)
    assert any("cannot be written" in n for n in response.degraded)
    assert response.results[0].id == expected[0]
    second = search(handle, fresh_query + " now", "vector")
    assert second.results
    assert capfd.readouterr().err.count("cannot be written") == 1  # warned once


# ---- 7. corrupt index files are detected and rebuilt -----------------------------------------------

def _index_file(build: Path, kind: str) -> Path:
    pattern = {
        "lance-data": "lance/memories.lance/data/*.lance",
        "lance-version": "lance/memories.lance/_versions/*.manifest",
        "lance-transaction": "lance/memories.lance/_transactions/*.txn",
        "bm25-segment": "bm25/*.idx",
        "bm25-meta": "bm25/meta.json",
        "vectors": "vectors.npy",
        "ids": "ids.json",
    }[kind]
    found = sorted(build.glob(pattern))
    assert found, (kind, pattern)
    return found[0]


@pytest.mark.parametrize("kind", ["lance-data", "lance-version", "lance-transaction", "bm25-segment",
                                  "bm25-meta", "vectors", "ids"])
@pytest.mark.parametrize("damage", ["bitflip", "truncate"])
def test_damaged_index_file_is_detected_and_rebuilt(workspace, kind, damage):
    data, _ = workspace
    dataset = load_dataset(data)
    first = open_index(dataset)
    expected = [r.id for r in search(first, "database connection refused", "rrf").results]
    target = _index_file(first.path, kind)
    if damage == "bitflip":
        _flip(target, offset_from_end=min(64, target.stat().st_size))
    else:
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    notices = []
    second = open_index(dataset, on_notice=notices.append)
    assert notices and "damaged" in notices[0], notices
    assert second.path != first.path and second.store is not None and not second.degraded
    assert [r.id for r in search(second, "database connection refused", "rrf").results] == expected


def test_same_shape_vectors_overwrite_is_detected(workspace):
    data, _ = workspace
    dataset = load_dataset(data)
    first = open_index(dataset)
    expected = np.array(first.vectors)      # a copy: the handle's vectors are mapped from the file
    np.save(first.path / "vectors.npy", np.zeros_like(first.vectors))  # same shape, wrong content
    notices = []
    second = open_index(dataset, on_notice=notices.append)
    assert notices and "vectors.npy does not match its checksum" in notices[0]
    assert np.allclose(second.vectors, expected) and np.abs(expected).sum() > 0


def test_reopening_an_index_changes_none_of_its_files(workspace):
    data, _ = workspace
    dataset = load_dataset(data)
    first = open_index(dataset)
    search(first, "ERR_CONN_REFUSED", "rrf")
    second = open_index(dataset)
    assert second.path == first.path
    assert read_manifest(index_dir(dataset, "minilm"))["files"]


def test_index_build_fsyncs_every_file(workspace, monkeypatch):
    import re

    data, _ = workspace
    synced = set()
    real_fsync = os.fsync

    def spy(fd):  # observe the OS call, then make it
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    handle = open_index(load_dataset(data))
    # files are fsynced inside the temporary build folder, before it is renamed into place;
    # files written with atomic_write are fsynced under their temporary name ".NAME.xxxx.tmp"
    inside = set()
    for path in synced:
        found = re.search(r"/builds/tmp-[0-9a-f]+/(.*)$", path)
        if found:
            inside.add(re.sub(r"(^|/)\.([^/]+)\.[^./]+\.tmp$", r"\1\2", found.group(1)))
    files = [p.relative_to(handle.path).as_posix() for p in handle.path.rglob("*")
             if p.is_file() and not p.name.endswith(".lock")]
    assert files and not [f for f in files if f not in inside], sorted(set(files) - inside)


# ---- 9. imports ----------------------------------------------------------------------------------

def test_force_refuses_a_hand_made_dataset_and_user_files_in_an_import(tmp_path):
    hand_made = tmp_path / "mine"
    shutil.copytree(TINY, hand_made)
    with pytest.raises(ValueError, match="was not written by `rwb import`"):
        import_beir(FIXTURES / "beir", hand_made, force=True)
    assert (hand_made / "corpus.jsonl").read_bytes() == (TINY / "corpus.jsonl").read_bytes()

    dest = tmp_path / "imported"
    import_beir(FIXTURES / "beir", dest)
    assert (dest / MARKER).is_file()
    (dest / "my-notes.md").write_text("keep me")
    with pytest.raises(ValueError, match="my-notes.md, which the earlier import did not write"):
        import_beir(FIXTURES / "beir", dest, force=True)
    assert (dest / "my-notes.md").read_text() == "keep me"
    (dest / "my-notes.md").unlink()
    import_beir(FIXTURES / "beir", dest, force=True)  # an untouched earlier import is replaced
    assert (dest / MARKER).is_file()


_SLOW_IMPORT = """
import sys, time
from pathlib import Path
from eval.importers._files import write_atomically
def build(tmp, result):
    (tmp / "corpus.jsonl").write_text('{"_id": "a", "text": "x"}\\n')
    print("building", flush=True)
    time.sleep(600)
write_atomically("beir", Path(sys.argv[1]), build)
"""


def test_sigkilled_import_leaves_temporaries_that_the_next_import_cleans(tmp_path):
    dest = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_IMPORT, str(dest)], cwd=ROOT, env=_env(tmp_path / "h"),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "building"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = [p.name for p in tmp_path.iterdir() if ".importing-" in p.name]
    assert left and str(proc.pid) in left[0]
    result = import_beir(FIXTURES / "beir", dest)
    assert [p.name for p in tmp_path.iterdir() if ".importing-" in p.name] == []
    assert any("killed import" in note for note in result.notes)


def test_killed_swap_restores_the_previous_dataset(tmp_path):
    dest = tmp_path / "out"
    import_beir(FIXTURES / "beir", dest)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    os.rename(dest, tmp_path / f".out.replaced-{dead.pid}-abc")  # killed between the two renames
    with pytest.raises(ValueError, match="already exists"):  # restored first, so DEST exists again
        import_beir(FIXTURES / "beir", dest)
    assert (dest / "corpus.jsonl").is_file() and (dest / MARKER).is_file()


def test_live_import_temporaries_are_left_alone(tmp_path):
    dest = tmp_path / "out"
    live = tmp_path / f".out.importing-{os.getppid()}-xyz"
    live.mkdir()
    write_atomically("beir", dest, lambda tmp, result: shutil.copy(TINY / "corpus.jsonl", tmp / "corpus.jsonl"))
    assert live.is_dir()


# ---- 10. remote exposure -------------------------------------------------------------------------

@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_loopback_is_always_served(address):
    check_server_address(address, env={})


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.168.1.5", "example.org", None, ""])
def test_other_addresses_need_an_explicit_opt_in(address):
    with pytest.raises(AccessDenied, match="RWB_ALLOW_REMOTE=1"):
        check_server_address(address, env={})
    check_server_address(address, env={"RWB_ALLOW_REMOTE": "1"})
    assert not is_loopback(address)


def test_remote_use_confines_paths_to_the_data_root(tmp_path):
    root = tmp_path / "data"
    (root / "ds").mkdir(parents=True)
    (root / "leak").symlink_to("/etc")
    env = {"RWB_ALLOW_REMOTE": "1", "RWB_DATA_ROOT": str(root)}
    assert data_root(env) == root.resolve()
    assert confine(root / "ds", env) == (root / "ds").resolve()
    assert confine("ds/new", env, base=root) == (root / "ds" / "new").resolve()
    for bad in ["/etc/passwd", str(root / ".." / "x"), str(root / "leak" / "passwd"), "~/.ssh", "a\x00b", ""]:
        with pytest.raises(AccessDenied):
            confine(bad, env, base=root)
    # local use (no opt-in, no root): paths are not confined
    assert data_root({}) is None and confine("/etc", {}) == Path("/etc")
    # opting in without a root confines to the repository's datasets/
    assert data_root({"RWB_ALLOW_REMOTE": "1"}) == ROOT / "datasets"


def test_app_refuses_a_non_loopback_address_without_opt_in(monkeypatch):
    from streamlit import config as st_config
    from streamlit.testing.v1 import AppTest

    monkeypatch.delenv("RWB_ALLOW_REMOTE", raising=False)
    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "0.0.0.0")
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    finally:
        st_config.set_option("server.address", before)
    assert not at.exception
    assert at.error and "refusing to serve on 0.0.0.0" in at.error[0].value
    assert not at.sidebar.selectbox  # nothing else ran: no dataset picker, no pages
