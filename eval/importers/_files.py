"""Writing an imported dataset folder safely: every importer builds into a temporary sibling
of DEST, validates it with ``load_dataset`` and only then renames it into place, so a failed
import leaves nothing at DEST (and ``--force`` keeps the old DEST until the new one is ready,
and replaces only a folder an earlier import wrote)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable

import tomli_w

from eval.importers._base import ImportResult, inside
from retrieval.dataset import load_dataset
from retrieval.files import fsync_dir, fsync_tree

MARKER = ".rwb-import.json"
"""Written into every imported folder: ``--force`` replaces only a folder that has it (and
holds nothing but the files it lists), so it never deletes a user's own files."""
_STALE_AGE_S = 24 * 3600  # a temporary folder without a pid in its name is stale after this


def _check_dest(dest: Path, force: bool, sources: Iterable[Path]) -> None:
    resolved = dest.resolve()
    for source in sources:
        source = Path(source).resolve()
        if inside(source, resolved):
            raise ValueError(f"{dest}: DEST must not contain the source {source} (choose another folder)")
    if not (dest.exists() or dest.is_symlink()):
        return
    if not force:
        raise ValueError(f"{dest}: already exists (use --force to replace it)")
    if dest.is_symlink() or not dest.is_dir():
        raise ValueError(f"{dest}: exists and is not a dataset folder; not replacing it")
    if not any(dest.iterdir()):
        return
    if not (dest / "corpus.jsonl").is_file():
        raise ValueError(f"{dest}: exists and does not look like a dataset folder (no corpus.jsonl); not replacing it")
    if not (dest / MARKER).is_file():
        raise ValueError(f"{dest}: was not written by `rwb import` (no {MARKER}); not replacing it — "
                         "move it aside or choose another DEST")
    try:
        listed = set(json.loads((dest / MARKER).read_text("utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(f"{dest}: its {MARKER} is unreadable; not replacing it — move it aside") from None
    for path in sorted(dest.rglob("*")):
        rel = path.relative_to(dest).as_posix()
        if (path.is_file() or path.is_symlink()) and rel != MARKER and rel not in listed:
            raise ValueError(f"{dest}: holds {rel}, which the earlier import did not write; not replacing it "
                             "— move your files out or choose another DEST")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temporaries(dest: Path) -> list[str]:
    """Remove ``.DEST.importing-*`` / ``.DEST.replaced-*`` folders left by a killed import.

    A folder is stale when the pid in its name is not running (or, for a name without a pid,
    when it is older than a day). A stale ``.replaced-`` folder is the previous DEST saved
    aside: it is renamed back when DEST is missing, removed otherwise. Returns what was done."""
    done = []
    parent = dest.parent
    if not parent.is_dir():
        return done
    for kind in ("importing", "replaced"):
        for path in sorted(parent.glob(f".{glob_escape(dest.name)}.{kind}-*")):
            if not path.is_dir() or path.is_symlink():
                continue
            tail = path.name[len(f".{dest.name}.{kind}-"):]
            head = tail.split("-", 1)[0]
            if head.isdigit():
                stale = int(head) != os.getpid() and not _pid_alive(int(head))
            else:
                try:
                    stale = time.time() - path.stat().st_mtime > _STALE_AGE_S
                except OSError:
                    stale = False
            if not stale:
                continue
            if kind == "replaced" and not (dest.exists() or dest.is_symlink()):
                os.rename(path, dest)
                done.append(f"restored {dest} from {path.name} (an import was killed mid-swap)")
            else:
                shutil.rmtree(path, ignore_errors=True)
                done.append(f"removed {path.name} (left by a killed import)")
    return done


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _swap_into_place(tmp: Path, dest: Path) -> None:
    if not (dest.exists() or dest.is_symlink()):
        os.rename(tmp, dest)
        fsync_dir(dest.parent)
        return
    backup = Path(tempfile.mkdtemp(prefix=f".{dest.name}.replaced-{os.getpid()}-", dir=dest.parent))
    backup.rmdir()
    os.rename(dest, backup)
    try:
        os.rename(tmp, dest)
    except BaseException:
        os.rename(backup, dest)
        raise
    fsync_dir(dest.parent)
    shutil.rmtree(backup, ignore_errors=True)


def write_atomically(kind: str, dest: str | Path, build: Callable[[Path, ImportResult], None], *,
                     force: bool = False, sources: Iterable[Path] = (), name: str | None = None,
                     card: dict | None = None) -> ImportResult:
    """Build a dataset into a temporary sibling of ``dest``, validate it, rename it into place.

    ``build(tmp, result)`` writes corpus.jsonl (and queries/qrels) into ``tmp`` and counts
    skips on ``result``; ``dataset.toml`` is written here from ``card`` with the name set,
    and ``MARKER`` lists every file written. Everything is fsynced before the rename. On any
    error the temporary folder is removed and ``dest`` is left as it was; temporary folders
    of earlier, killed imports into the same DEST are cleaned up first.
    """
    dest = Path(dest)
    notes = clean_stale_temporaries(dest)
    _check_dest(dest, force, sources)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.importing-{os.getpid()}-", dir=dest.parent))
    result = ImportResult(kind=kind, dest=dest, dataset=None, notes=notes)  # type: ignore[arg-type]
    try:
        build(tmp, result)
        card = dict(card or {})
        card["name"] = name or card.get("name") or dest.name
        (tmp / "dataset.toml").write_text(tomli_w.dumps(card), "utf-8")
        dataset = load_dataset(tmp)
        files = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file() or p.is_symlink())
        (tmp / MARKER).write_text(json.dumps({"kind": kind, "files": files}, indent=1), "utf-8")
        fsync_tree(tmp)
        _check_dest(dest, force, sources)  # DEST may have appeared while we were building
        _swap_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.dataset = replace(dataset, root=dest)
    return result
