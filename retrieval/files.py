"""Files: reading inside a dataset's root, safe names for paths built from user data, and
atomic, durable writes.

``resolve_inside``/``read_memory_file``: like OpenClaw's ``memory_get``, a workspace-relative
path with an optional line range; absolute paths, ``..`` components and symlinks that resolve
outside the root are refused. ``inside_for_write``: the same check for a file a command writes
inside a dataset folder (``rwb import ubi``'s judgments), refused with one line.

``safe_component``: the ONE way a path component is made from user data (a dataset's name,
an embedder name, a profile or experiment name, a query id): the result is a single plain
file name that can never be absolute, ``.``/``..``, hidden, or contain a separator, so a path
built from it stays inside its root.

``atomic_write`` / ``atomic_write_bytes`` / ``atomic_write_text`` / ``atomic_write_files``:
the ONE write path for every file the workbench writes (stores, pools, index files, and the
outputs the user names: ``--json``, ``--out``, reports): a unique temporary file beside the
target (with the target's mode; a new file's follows the umask), fsync, rename over the
target, fsync the folder (and every folder it had to create); a symlink is written through to
its target (atomically beside it), a device or FIFO in place, never replaced
(``output_target``); temporaries of killed writes are cleaned by the next write.
``fsync_tree`` makes a folder built aside durable before it is renamed into place.
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import re
import stat
import time
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable

MAX_FILE_BYTES = 2_000_000
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_component(text: str, max_len: int = 60) -> str:
    """A single, plain path component made from user data (never ``.``, ``..``, hidden or empty).

    Characters outside ``[A-Za-z0-9_.-]`` become ``-``; leading dots and dashes are dropped.
    When anything had to change, a short hash of the original is appended, so two different
    names never share a path (``"a/b"`` and ``"a-b"`` stay apart).
    """
    if not isinstance(text, str):
        raise TypeError(f"a name must be a string, got {type(text).__name__}")
    cleaned = _UNSAFE.sub("-", text).lstrip(".-").rstrip("-")[:max_len].rstrip(".-")
    if cleaned == text and cleaned:
        return cleaned
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned}-{digest}" if cleaned else f"x-{digest}"


def path_under(root: Path, *components: str) -> Path:
    """``root / c1 / c2 …`` with each component made safe; ValueError if it would still escape."""
    base = Path(root)
    target = base.joinpath(*(safe_component(c) for c in components))
    resolved_base = base.resolve()
    resolved = target.resolve()
    if resolved != resolved_base and resolved_base not in resolved.parents:
        raise ValueError(f"{target} resolves outside {base}")
    return target


# ---- atomic, durable writes ----------------------------------------------------------------

def fsync_dir(directory: Path) -> None:
    """Make a folder's entries (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_folders(folder: Path) -> None:
    """``mkdir -p folder``, durably: every folder it creates is fsynced into its parent, so a
    file saved in a new folder (the first profile, the first judgment) survives a crash."""
    folder = Path(folder)
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for new in reversed(missing):
        try:
            new.mkdir()
        except FileExistsError:
            if not new.is_dir():
                raise
            continue  # another writer made it; it fsyncs it
        fsync_dir(new.parent)


def _new_file_mode() -> int:
    """The mode a new file gets under this process's umask (0666 & ~umask)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (a build or an import written aside)."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                fsync_file(path)
        fsync_dir(Path(folder))


_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[^.]+\.tmp$")
STALE_SECONDS = 86_400  # a temporary without a readable pid is removed when older than this


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def clean_temporaries(path: Path) -> None:
    """Remove what killed writes of ``path`` left beside it: ``.NAME.<pid>-….tmp`` files whose
    process is gone, and older-style ``.NAME.….tmp`` files more than a day old."""
    folder, prefix = path.parent, f".{path.name}."
    try:
        entries = [e for e in os.scandir(folder)
                   if e.name.startswith(prefix) and e.name.endswith(".tmp")]
    except OSError:
        return
    for entry in entries:
        found = _TEMP.match(entry.name)
        try:
            if found and found.group("name") == path.name:
                stale = not _alive(int(found.group("pid")))
            else:
                stale = time.time() - entry.stat(follow_symlinks=False).st_mtime > STALE_SECONDS
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            pass


def output_target(path: Path) -> tuple[Path, bool]:
    """Where a write of ``path`` lands, and whether it replaces a regular file atomically.

    The policy, for every file the workbench writes: a symlink is followed (the write goes to
    the file it points to, atomically beside that file; the link itself stays); a regular file
    or a new name is replaced atomically; a character device or a FIFO (``/dev/null``,
    ``/dev/stdout``, a pipe) is written through in place, never replaced; a folder, a block
    device or a socket is refused with a ``ValueError``."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return Path(os.path.realpath(path)), True
    except NotADirectoryError:
        raise ValueError(f"{path}: a part of the path is not a folder") from None
    if stat.S_ISREG(mode):
        return Path(os.path.realpath(path)), True
    if stat.S_ISDIR(mode):
        raise ValueError(f"{path} is a folder; give a file name")
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return path, False
    kind = ("a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "not a regular file")
    raise ValueError(f"{path} is {kind}; refusing to write to it")


def _write_through(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write into a character device or FIFO in place (a FIFO without a reader is refused)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise ValueError(f"{path} is a FIFO with no reader; start the reader first") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as handle:
        write(handle)


def _stage(target: Path, write: Callable[[BinaryIO], None], staged: list[str]) -> str:
    """A fsynced temporary file beside ``target`` holding what ``write`` writes, with the mode
    the target has (a new target: the mode the umask gives a new file). Its name goes into
    ``staged`` before the file is created, so a caller that an interrupt reaches anywhere in
    here (between two bytecodes) can remove it."""
    make_folders(target.parent)
    clean_temporaries(target)
    prefix = f".{target.name}.{os.getpid()}-"
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = _new_file_mode()
    while True:
        staged.append(str(target.parent / f"{prefix}{os.urandom(6).hex()}.tmp"))
        try:
            fd = os.open(staged[-1], os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            break
        except FileExistsError:         # another name (as tempfile.mkstemp retries)
            staged.pop()
    try:
        os.fchmod(fd, mode)
    except OSError:  # a file system without modes (a FAT stick): nothing to keep
        pass
    with os.fdopen(fd, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    return staged[-1]


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Replace ``path`` with what ``write(handle)`` writes, atomically and durably.

    The temporary file ``.NAME.<pid>-….tmp`` sits in the target's folder (concurrent writers
    never share one), is fsynced, then renamed over the target; the folder is fsynced last.
    On any error (a full disk, an interrupt included) the temporary file is removed and the
    target is left as it was; temporaries of killed writes are removed by the next write of the
    same target. Symlinks, devices and FIFOs follow ``output_target``'s policy.
    """
    target, atomic = output_target(Path(path))
    if not atomic:
        _write_through(target, write)
        return
    staged: list[str] = []
    try:
        os.replace(_stage(target, write, staged), target)
    except BaseException:
        for tmp in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


def atomic_write_files(contents: dict[Path, bytes]) -> None:
    """Write several files as one output (a report): every file is staged and fsynced first,
    and only when all are complete are they renamed into place, so a failure (a full disk)
    leaves every previous file as it was."""
    staged: list[str] = []
    ready: list[tuple[str, Path]] = []
    through: list[tuple[Path, bytes]] = []
    try:
        for path, data in contents.items():
            target, atomic = output_target(Path(path))
            if atomic:
                ready.append((_stage(target, lambda handle, d=data: handle.write(d), staged), target))
            else:
                through.append((target, data))
    except BaseException:
        for tmp in staged:
            Path(tmp).unlink(missing_ok=True)
        raise
    for tmp, target in ready:
        os.replace(tmp, target)
    for folder in {target.parent for _, target in ready}:
        fsync_dir(folder)
    for target, data in through:
        _write_through(target, lambda handle, d=data: handle.write(d))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably."""
    atomic_write_bytes(path, text.encode("utf-8"))


def mapped_rows(array, start: int, stop: int):
    """Rows ``start`` to ``stop`` of ``array``; of a memory-mapped C-ordered ``.npy``
    (``np.load(..., mmap_mode="r")``) read from its file rather than through the map. Pages read
    through a map stay in the process's resident set until it is unmapped (the whole file, once
    every row has been read); a read leaves them in the page cache only."""
    import numpy as np

    stop = min(stop, array.shape[0])
    if not isinstance(array, np.memmap) or not array.flags.c_contiguous or array.filename is None:
        return array[start:stop]
    width = math.prod(array.shape[1:])
    rows = np.fromfile(array.filename, dtype=array.dtype, count=max(stop - start, 0) * width,
                       offset=array.offset + start * width * array.dtype.itemsize)
    return rows.reshape((max(stop - start, 0),) + array.shape[1:])


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---- reading inside a dataset ----------------------------------------------------------------

def resolve_inside(root: Path, relative: str) -> Path:
    """The file ``relative`` names under ``root``; ValueError if it would escape."""
    if not isinstance(relative, str) or not relative.strip() or "\x00" in relative:
        raise ValueError("path must be a non-empty relative path")
    pure = PurePosixPath(relative.replace("\\", "/"))
    if not pure.parts:
        raise ValueError(f"path {relative!r} names the dataset folder itself; give a file inside it")
    if pure.is_absolute() or relative.startswith(("/", "~")) or ":" in pure.parts[0]:
        raise ValueError(f"path {relative!r} is absolute; give a path inside the dataset")
    if ".." in pure.parts:
        raise ValueError(f"path {relative!r} leaves the dataset folder")
    base = root.resolve()
    target = (base / pure).resolve()
    if target != base and base not in target.parents:
        raise ValueError(f"path {relative!r} resolves outside the dataset folder (symlink?)")
    return target


def inside_for_write(root: Path, relative: str) -> Path:
    """Where a write of the file ``relative`` inside the dataset folder ``root`` lands: the
    path resolved (symlinks followed, as ``resolve_inside``), so the write cannot leave the
    folder through a symlink inside it (a file, or a folder on its path, that someone else
    may have prepared). A path that resolves outside ``root`` raises a one-line ValueError;
    check every output of one command before writing any, so a refusal changes nothing."""
    try:
        return resolve_inside(root, relative)
    except (ValueError, RuntimeError, OSError):  # RuntimeError: a symlink loop
        raise ValueError(f"{relative} in {root} leads outside the dataset folder (a symlink?); "
                         "refusing to write through it") from None


def read_memory_file(root: Path, relative: str, line_start: int = 1, line_end: int | None = None) -> str:
    """Lines ``line_start``..``line_end`` (1-based, inclusive) of a file inside ``root``."""
    path = resolve_inside(root, relative)
    if path.is_dir():
        raise ValueError(f"{relative!r} is a folder; give a file inside the dataset")
    if not path.is_file():
        raise ValueError(f"no file {relative!r} in the dataset folder")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"file {relative!r} is larger than {MAX_FILE_BYTES} bytes")
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except OSError as error:
        raise ValueError(f"cannot read {relative!r}: {error.strerror or error}") from None
    start = max(1, line_start)
    end = len(lines) if line_end is None else min(line_end, len(lines))
    return "\n".join(lines[start - 1:end])
