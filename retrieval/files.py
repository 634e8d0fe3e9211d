"""Files: reading inside a dataset's root, safe names for paths built from user data, and
atomic, durable writes.

``resolve_inside``/``read_memory_file``: like OpenClaw's ``memory_get``, a workspace-relative
path with an optional line range; absolute paths, ``..`` components and symlinks that resolve
outside the root are refused.

``safe_component``: the ONE way a path component is made from user data (a dataset's name,
an embedder name, a profile or experiment name, a query id): the result is a single plain
file name that can never be absolute, ``.``/``..``, hidden, or contain a separator, so a path
built from it stays inside its root.

``atomic_write`` / ``atomic_write_bytes`` / ``atomic_write_text``: the ONE write path for
every file the workbench keeps: a unique temporary file in the same folder, fsync, rename
over the target, fsync the folder. ``fsync_tree`` makes a folder built aside durable before
it is renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
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


def fsync_tree(root: Path) -> None:
    """fsync every file and folder under ``root`` (a build or an import written aside)."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            if not path.is_symlink():
                fsync_file(path)
        fsync_dir(Path(folder))


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Replace ``path`` with what ``write(handle)`` writes, atomically and durably.

    The temporary file has a unique name in the target's folder (concurrent writers never
    share one), is fsynced, then renamed over ``path``; the folder is fsynced last. On any
    error the temporary file is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically and durably."""
    atomic_write_bytes(path, text.encode("utf-8"))


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
