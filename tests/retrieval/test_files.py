"""retrieval/files.py: the one writer. Regular files are replaced atomically beside the target;
a symlink is written through to its target; a device or FIFO is written in place, never
replaced; a folder, block device or socket is refused; a failed write (a full disk, simulated
with RLIMIT_FSIZE) leaves the previous output whole; killed writes' temporaries are cleaned."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.files import atomic_write_files, atomic_write_text, clean_temporaries, output_target

ROOT = Path(__file__).resolve().parents[2]


def _debris(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "real" / "out.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    chain = tmp_path / "chain.json"  # a link to a link
    chain.symlink_to(link)
    atomic_write_text(link, "one")
    assert link.is_symlink() and target.read_text() == "one"
    atomic_write_text(chain, "two")
    assert chain.is_symlink() and link.is_symlink() and target.read_text() == "two"
    assert _debris(tmp_path) == [] and _debris(target.parent) == []


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "made.json")
    atomic_write_text(link, "x")
    assert link.is_symlink() and (tmp_path / "made.json").read_text() == "x"


def test_a_fifo_is_written_through_never_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # the reader is there first
    try:
        atomic_write_text(fifo, "through the pipe")
        assert os.read(reader, 100) == b"through the pipe"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not a regular file


def test_a_fifo_without_a_reader_is_refused_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="FIFO with no reader"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    link = tmp_path / "to-pipe"  # through a symlink: the same
    link.symlink_to(fifo)
    with pytest.raises(ValueError, match="FIFO with no reader"):
        atomic_write_text(link, "x")
    assert link.is_symlink() and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_character_device_is_written_in_place():
    # /dev/null is only stat'ed and opened for writing: the policy never renames over it
    path, atomic = output_target(Path("/dev/null"))
    assert (path, atomic) == (Path("/dev/null"), False)


def test_folders_and_sockets_are_refused(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        atomic_write_text(tmp_path, "x")
    sock_path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        with pytest.raises(ValueError, match="socket"):
            atomic_write_text(sock_path, "x")
    finally:
        server.close()
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        atomic_write_text(file / "below", "x")


_FULL_DISK = """
import resource, signal, sys
from pathlib import Path
from retrieval.files import atomic_write_files, atomic_write_text
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
out = Path(sys.argv[1])
big = "y" * 10_000
try:
    if sys.argv[2] == "report":
        atomic_write_files({out / "report.json": b"{}", out / "report.md": big.encode(),
                            out / "report.html": b"<p>"})
    else:
        atomic_write_text(out / "out.json", big)
except OSError as error:
    print("refused", error.errno)
"""


@pytest.mark.parametrize("kind", ["single", "report"])
def test_a_full_disk_leaves_the_previous_output_whole(tmp_path, kind):
    names = ["out.json"] if kind == "single" else ["report.json", "report.md", "report.html"]
    for name in names:
        (tmp_path / name).write_text(f"previous {name}")
    done = subprocess.run([sys.executable, "-c", _FULL_DISK, str(tmp_path), kind],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.startswith("refused 27"), done.stderr  # EFBIG
    assert {n: (tmp_path / n).read_text() for n in names} == {n: f"previous {n}" for n in names}
    assert _debris(tmp_path) == []


def test_temporaries_of_killed_writes_are_cleaned_by_the_next_write(tmp_path):
    target = tmp_path / "pool.npz"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".pool.npz.{dead}-abc123.tmp"              # a killed writer's
    stale.write_bytes(b"x" * 800_000)
    live = tmp_path / f".pool.npz.{os.getpid()}-live99.tmp"         # a live writer's: kept
    live.write_bytes(b"y")
    old_style = tmp_path / ".pool.npz.k3j4h5g6.tmp"                 # no pid, two days old
    old_style.write_bytes(b"z")
    os.utime(old_style, (0, 0))
    other = tmp_path / f".other.npz.{dead}-abc123.tmp"              # another target's: kept
    other.write_bytes(b"w")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert sorted(_debris(tmp_path)) == sorted([live.name, other.name])
    clean_temporaries(tmp_path / "other.npz")
    assert _debris(tmp_path) == [live.name]


def test_two_files_written_as_one_output(tmp_path):
    out = {tmp_path / "a.json": b"1", tmp_path / "sub" / "b.md": b"2"}
    atomic_write_files(out)
    assert [p.read_bytes() for p in out] == [b"1", b"2"]


def test_an_interrupt_just_as_the_temporary_file_is_created_leaves_nothing_behind(tmp_path, monkeypatch):
    """Ctrl-C lands between any two bytecodes of our code or the standard library's below it
    (``eval.cli.interrupts``): one that lands right after the temporary file was created,
    inside the call that created it, still has it removed, and the target stays as it was (a
    fresh clone's ``make test`` once found ``.q.json.<pid>-….tmp`` left by an interrupted export)."""
    target = tmp_path / "out.json"
    target.write_text("before")
    real_open = os.open

    def created_then_interrupted(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if str(path).endswith(".tmp"):
            raise KeyboardInterrupt
        return fd

    monkeypatch.setattr(os, "open", created_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_text(target, "after")
    monkeypatch.undo()
    assert target.read_text() == "before"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
