"""Scheduled runs: the per-dataset lock and the history of checks (``CheckHistory``).

``dataset_lock``: one ``fcntl`` lock file per dataset identity (``eval.stores.identity``) under ``$RWB_HOME/locks/``, held by
``rwb check`` and ``rwb report`` for their whole run, so two runs started by cron (or by cron and
a person) on the same dataset never interleave; a run that cannot get it within ``wait`` seconds
fails with one line naming the dataset.

``CheckHistory``: every check of a dataset (its time, pipeline, snapshot, verdict, per metric
the snapshot's and today's mean, and the inputs' hashes) in one JSON document under
``$RWB_HOME/history/``, appended under the store's lock and written atomically and durably
(``retrieval.files.atomic_write_text``: temporary file, fsync, rename, fsync of the folder).
"""

from __future__ import annotations

import fcntl
import json
import time
from contextlib import contextmanager
from pathlib import Path

from eval.stores.files import locked, read_json
from retrieval.dataset import Dataset
from eval.stores.identity import claim, identity_at, key_of, store_path
from retrieval.files import atomic_write_text
from retrieval.index import rwb_home

MAX_ENTRIES = 10_000     # oldest entries are dropped beyond this
DEFAULT_WAIT = 600.0     # seconds a scheduled run waits for another on the same dataset


@contextmanager
def dataset_lock(root: str | Path, wait: float = DEFAULT_WAIT, home: Path | None = None):
    """Hold the run lock of the dataset folder ``root`` (exclusive, inter-process) while the block
    runs; taken before the dataset is read, so a run reads it whole after the one before."""
    if not wait >= 0:
        raise ValueError(f"--lock-wait must be ≥ 0 seconds, got {wait}")
    root = Path(root)
    path = (home or rwb_home()) / "locks" / f"{key_of(identity_at(root))}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a")
    except OSError as error:
        raise ValueError(f"cannot create the run lock {path}: {error.strerror or error} "
                         "(is RWB_HOME writable?)") from None
    with handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise ValueError(f"another rwb check or report is running on dataset {root.resolve().name!r} "
                                     f"(lock {path}); waited {wait:g} s — rerun later or raise --lock-wait") from None
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def merge_states(new: dict, old: dict) -> dict:
    """One check history of two (the earlier layout's ``old`` into ``new``): both in time order."""
    if not new:
        return dict(old)
    checks = list(new.get("checks", []))
    checks += [c for c in old.get("checks", []) if c not in checks]
    checks.sort(key=lambda c: str(c.get("time", "")))
    return {**new, "checks": checks[-MAX_ENTRIES:]}


class CheckHistory:
    """The checks of one dataset, oldest first."""

    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset, self.home = dataset, home
        self.path = store_path(dataset, home, "history", ".json", merge_states)

    def entries(self) -> list[dict]:
        state = read_json(self.path, {"dataset": self.dataset.name, "checks": []})
        if not (isinstance(state, dict) and isinstance(state.get("checks"), list)
                and all(isinstance(e, dict) and isinstance(e.get("metrics", {}), dict) for e in state["checks"])):
            raise ValueError(f"{self.path}: damaged (not a check history); restore it from a backup or move it aside")
        return state["checks"]

    def add(self, entry: dict) -> dict:
        """Append one check (``time`` is set here); returns it as stored."""
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **entry}
        json.dumps(entry)  # refuse what cannot be stored before touching the file
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            checks = self.entries()
            checks.append(entry)
            atomic_write_text(self.path, json.dumps({"dataset": self.dataset.name,
                                                     "checks": checks[-MAX_ENTRIES:]}, ensure_ascii=False))
        return entry
