"""Which dataset a store belongs to: its *identity*, never its folder's path.

Every per-dataset store under ``$RWB_HOME`` (judgments, snapshots, tries, check history,
access counts, the run lock) is keyed by ``store_key``: the dataset's identity
(``Dataset.identity``: ``dataset.toml``'s ``id``, else its ``name``, else the folder's name),
made a safe file name. The same dataset checked out at any path, on any machine sharing the
home (a local folder or an ``s3://`` home), is therefore one dataset with one set of stores.

Two *different* datasets with one identity are told apart by their corpus: the first use of an
identity that keeps anything (a grade, a snapshot, a try, a check, an access count) records a
sketch of its documents (``$RWB_HOME/datasets/<key>.json``: the
``SKETCH`` smallest sha1 values of ``id + text`` of every document — all of them for a corpus
that small — and the number of documents). Another folder is the same dataset when at least half
of the smaller corpus's documents (id and text alike) are in the other one (the overlap
coefficient, estimated from the two sketches as a bottom-k MinHash estimate of the Jaccard
index). So reordering lines, editing judgments or queries, fixing a few documents or adding many
keep a dataset itself; a corpus that shares less than half its documents is another dataset and
is refused with one line naming both folders (give it an ``id`` in ``dataset.toml``). An accepted
corpus that differs becomes the recorded one, so a dataset may drift over many edits.

Stores of the earlier layout (``<name>-<sha1 of the folder's path>``) move to the new key on
first use (``migrate_file``, ``migrate_folder``): their content is merged into the identity's
store (nothing dropped; the merged store remembers the old key in ``migrated_from`` so a rerun
after a crash merges nothing twice) and then the old file is removed. Every write atomic and
durable, under the stores' lock.
"""

from __future__ import annotations

import hashlib
import json
import threading
import tomllib
from pathlib import Path
from typing import Callable

from eval.stores.files import locked, read_json
from retrieval.dataset import Dataset
from retrieval.files import atomic_write_text, fsync_dir, safe_component
from retrieval.index import rwb_home
from retrieval.object_store import refresh

SKETCH = 512          # document hashes kept per identity
SAME = 0.5            # the overlap coefficient from which two corpora are one dataset
MIGRATED = "migrated_from"

_checked: set[tuple] = set()     # (registry path, dataset fingerprint) accepted in this process
_moved: set[Path] = set()        # old-layout paths already looked at in this process
_lock = threading.Lock()


def identity_of(dataset: Dataset) -> str:
    """The dataset's identity (``Dataset.identity``; its name for one made without it)."""
    return dataset.identity or dataset.name


def identity_at(root: str | Path) -> str:
    """The identity of the dataset folder ``root`` from its ``dataset.toml`` alone (for the run
    lock, taken before the dataset is read): ``id``, else ``name``, else the folder's name."""
    root = Path(root).resolve()
    try:
        card = tomllib.loads((root / "dataset.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        card = {}
    for key in ("id", "name"):
        value = card.get(key)
        if isinstance(value, str) and value.strip() and not any(ord(ch) < 32 for ch in value):
            return value
    return root.name


def key_of(identity: str) -> str:
    """The file-name stem every store of ``identity`` uses."""
    return safe_component(identity)


def old_key(name: str, root: Path) -> str:
    """The stem the earlier layout used: the dataset's name and a hash of its folder's path."""
    where = hashlib.sha1(str(Path(root).resolve()).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe_component(name)}-{where}"


def sketch(dataset: Dataset) -> list[str]:
    """The ``SKETCH`` smallest sha1 values (hex) of the documents' ``id`` and ``text``, sorted."""
    found = dataset.prepared.get("identity_sketch")
    if found is None:
        hashes = {hashlib.sha1(f"{d.id}\0{d.text}".encode("utf-8", "surrogatepass")).hexdigest()
                  for d in dataset.documents}
        found = dataset.prepared.setdefault("identity_sketch", sorted(hashes)[:SKETCH])
    return found


def overlap(a: list[str], n_a: int, b: list[str], n_b: int) -> float:
    """The overlap coefficient |A∩B| / min(|A|, |B|) of two corpora, from their sketches: the
    Jaccard index J estimated on the ``SKETCH`` smallest hashes of the union (exact when both
    corpora fit in a sketch), then |A∩B| = J·(|A| + |B|) / (1 + J)."""
    if not n_a or not n_b:
        return 1.0 if n_a == n_b else 0.0
    union = sorted(set(a) | set(b))[:SKETCH]
    if not union:
        return 0.0
    jaccard = len(set(union) & set(a) & set(b)) / len(union)
    return min(1.0, jaccard * (n_a + n_b) / (1 + jaccard) / min(n_a, n_b))


def claim(dataset: Dataset, home: Path | None = None, register: bool = False) -> str:
    """The store key of ``dataset``, once it is known not to be another dataset with its identity
    (a one-line ``ValueError`` otherwise). ``register``: record its corpus as the identity's
    (every store's write does, so the first dataset to keep anything under an identity owns it;
    reading an identity nothing was kept for checks nothing)."""
    identity = identity_of(dataset)
    key = key_of(identity)
    path = (home or rwb_home()) / "datasets" / f"{key}.json"
    seen = (path.resolve(), dataset.fingerprint)
    with _lock:
        if seen in _checked:
            return key
    mine = sketch(dataset)
    record = _registered(path)
    if record is not None:
        _refuse_other(record, dataset, mine)
        if record["sketch"] == mine:
            with _lock:
                _checked.add(seen)
            return key
    if not register:
        return key
    with locked(path):
        record = _registered(path)
        if record is not None:
            _refuse_other(record, dataset, mine)
        folder = str(Path(dataset.root).resolve())
        atomic_write_text(path, json.dumps({
            "identity": identity, "documents": len(dataset.documents), "sketch": mine, "folder": folder,
            "first_folder": (record or {}).get("first_folder") or folder}, ensure_ascii=False))
    with _lock:
        _checked.add(seen)
    return key


def _refuse_other(record: dict, dataset: Dataset, mine: list[str]) -> None:
    share = overlap(record["sketch"], record["documents"], mine, len(dataset.documents))
    if share < SAME:
        raise ValueError(
            f"dataset {dataset.root} is not the dataset {identity_of(dataset)!r} this RWB_HOME keeps "
            f"(first kept from {record.get('first_folder') or record.get('folder', '?')}; {share:.0%} "
            f"of the documents in common): give it its own `id = \"…\"` in its dataset.toml")


def _registered(path: Path) -> dict | None:
    record = read_json(path, None)
    if record is None:
        return None
    if not (isinstance(record, dict) and isinstance(record.get("sketch"), list)
            and isinstance(record.get("documents"), int)):
        raise ValueError(f"{path}: damaged (not a dataset identity record); move it aside")
    return record


def store_path(dataset: Dataset, home: Path | None, folder: str, suffix: str,
               merge: Callable[[dict, dict], dict] | None = None) -> Path:
    """``$RWB_HOME/<folder>/<key><suffix>`` for ``dataset`` (``claim``), with the earlier
    layout's file of the same folder merged in first (``migrate_file``) when ``merge`` is given."""
    base = (home or rwb_home()) / folder
    path = base / f"{claim(dataset, home)}{suffix}"
    if merge is not None:
        migrate_file(base / f"{old_key(dataset.name, dataset.root)}{suffix}", path, merge,
                     lambda: claim(dataset, home, register=True))
    return path


def migrate_file(old: Path, new: Path, merge: Callable[[dict, dict], dict],
                 register: Callable[[], object] = lambda: None) -> None:
    """Merge the earlier layout's JSON store ``old`` into ``new`` and remove ``old``: ``new``'s
    state = ``merge(new or {}, old)`` with ``old``'s name in its ``migrated_from`` (a rerun after
    a crash between the write and the removal only removes). Atomic and durable."""
    old = Path(old)
    if old == new:
        return
    with _lock:
        if old in _moved:
            return
    refresh(old)  # an s3:// home: the object of the old key, if any
    if old.is_file():
        register()  # what is moved in is kept under the identity: this dataset owns it
        with locked(new), locked(old):
            before = read_json(old, None)
            if before is not None:
                state = read_json(new, None)
                done = list((state or {}).get(MIGRATED, [])) if isinstance(state, dict) else []
                if old.name not in done:
                    if not isinstance(before, dict):
                        raise ValueError(f"{old}: damaged (not a store of the earlier layout); move it aside")
                    merged = merge(state if isinstance(state, dict) else {}, before)
                    merged[MIGRATED] = [*done, old.name]
                    atomic_write_text(new, json.dumps(merged, ensure_ascii=False, indent=1))
                old.unlink()
                fsync_dir(old.parent)
    with _lock:
        _moved.add(old)


def migrate_folder(old: Path, new: Path, suffix: str, register: Callable[[], object] = lambda: None) -> None:
    """Move the earlier layout's store folder ``old`` (one file per named entry, e.g. snapshots)
    into ``new``: a file of the same name and content is dropped, one of the same name and other
    content is kept as ``<name>-<old folder's hash>``; each file written before its old copy is
    removed (atomic, durable; a rerun after a crash finds the copy and only removes)."""
    from retrieval.object_store import refresh_folder

    old = Path(old)
    if old == new:
        return
    with _lock:
        if old in _moved:
            return
    refresh_folder(old, suffix)
    if old.is_dir() and any(old.glob(f"*{suffix}")):
        register()
        tag = old.name.rsplit("-", 1)[-1]
        for path in sorted(old.glob(f"*{suffix}")):
            with locked(path):
                data = path.read_text("utf-8")
                target = new / path.name
                for candidate in (target, new / f"{path.stem[:55]}-{tag}{suffix}"):
                    with locked(candidate):
                        refresh(candidate)
                        if not candidate.is_file():
                            atomic_write_text(candidate, data)
                            break
                        if candidate.read_text("utf-8") == data:
                            break
                else:
                    raise ValueError(f"cannot move {path} into {new}: both names are taken; move it by hand")
                path.unlink()
                fsync_dir(old)
    with _lock:
        _moved.add(old)
