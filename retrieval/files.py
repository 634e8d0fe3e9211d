"""Read a memory file of a dataset without ever leaving the dataset's root.

Like OpenClaw's ``memory_get``: a workspace-relative path, optional line range.
Absolute paths, ``..`` components and symlinks that resolve outside the root are refused.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

MAX_FILE_BYTES = 2_000_000


def resolve_inside(root: Path, relative: str) -> Path:
    """The file ``relative`` names under ``root``; ValueError if it would escape."""
    if not isinstance(relative, str) or not relative.strip() or "\x00" in relative:
        raise ValueError("path must be a non-empty relative path")
    pure = PurePosixPath(relative.replace("\\", "/"))
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
    if not path.is_file():
        raise ValueError(f"no file {relative!r} in the dataset folder")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ValueError(f"file {relative!r} is larger than {MAX_FILE_BYTES} bytes")
    lines = path.read_text("utf-8", errors="replace").splitlines()
    start = max(1, line_start)
    end = len(lines) if line_end is None else min(line_end, len(lines))
    return "\n".join(lines[start - 1:end])
