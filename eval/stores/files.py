"""The stores' shared file discipline: an inter-process lock, a JSON reader that names a
damaged file, and the one rule for user-given names.

Everything lives under ``$RWB_HOME`` and is written so that a kill at any point
loses nothing already acknowledged: write to a temporary file in the same folder,
fsync it, rename it over the target, fsync the folder (``retrieval.files.atomic_write_text``).
Concurrent writers (two app sessions, or a CLI and the app) serialise on an ``fcntl`` lock
file, so no update is lost.
"""

from __future__ import annotations

import fcntl
import json
import re
from contextlib import contextmanager
from pathlib import Path

from retrieval.files import make_folders
from retrieval.object_store import held, refresh

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")


@contextmanager
def locked(path: Path):
    """Exclusive inter-process lock on ``path`` + ``.lock`` around a store's read-modify-write.

    An ``OSError`` inside (a full disk, a read-only ``$RWB_HOME``) becomes a one-line
    ``ValueError`` naming the file, which every page's save handler shows; the file itself is
    unchanged (``retrieval.files.atomic_write``)."""
    try:
        make_folders(path.parent)  # a new store folder is made durable too
        with open(path.with_name(path.name + ".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                with held(path):  # an s3:// home: read with its ETag, written back conditionally
                    yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError as error:
        raise ValueError(f"cannot write {path}: {error.strerror or error} (is RWB_HOME full or "
                         "read-only?); nothing was changed") from None


def read_json(path: Path, default):
    refresh(path)  # an s3:// home: the local copy follows the shared object
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return default
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"{path}: damaged ({type(error).__name__}: {str(error)[:120]}); "
                         "restore it from a backup or move it aside") from None


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid name {name!r}: use 1–64 letters, digits, spaces, '.', '_' or '-'")
    return name
