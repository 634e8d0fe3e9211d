"""Seed 000's access-count write-back (§4 访问频率: "每次搜索结果返回时自动 +1"), kept under
``$RWB_HOME``.

Where it is written: one JSON document per dataset, ``$RWB_HOME/access/<identity>.json``
(``eval.stores.identity``)
(``{"added": {doc id: increments}, "writes": searches written back}``), beside the judgments and
never in the dataset folder: the corpus file is what the dataset's fingerprint, its indexes and
its candidate pools are keyed by, so rewriting it on every search would rebuild them all. A
memory's access count is the corpus's ``access_count`` plus its increments here
(``with_access_counts``); ``rwb search`` reads it on every query, so a write-back changes the
salience of the next search. Evaluations stay frozen on the corpus's counts (``rwb eval
--replay`` simulates the write-backs in memory instead). Every change is a read-modify-write
under the store's lock, written atomically and durably (``retrieval.files.atomic_write_text``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterable

from eval.stores.files import locked, read_json
from retrieval.dataset import Dataset
from eval.stores.identity import claim, store_path
from retrieval.files import atomic_write_text


class AccessStore:
    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset, self.home = dataset, home
        self.path = store_path(dataset, home, "access", ".json", merge_states)

    def _load(self) -> dict:
        state = read_json(self.path, {"dataset": self.dataset.name, "added": {}, "writes": 0})
        if not (isinstance(state, dict) and isinstance(state.get("added"), dict)
                and all(isinstance(v, int) and v >= 0 for v in state["added"].values())):
            raise ValueError(f"{self.path}: damaged (not an access-count file); move it aside")
        return state

    def added(self) -> dict[str, int]:
        """Increments written back so far, by memory id."""
        return dict(self._load()["added"])

    def write_back(self, doc_ids: Iterable[str]) -> int:
        """Add 1 to the access count of each memory in ``doc_ids`` (each once); returns how many."""
        known = {d.id for d in self.dataset.documents}
        ids = list(dict.fromkeys(d for d in doc_ids if d in known))
        if not ids:
            return 0
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            state = self._load()
            for doc_id in ids:
                state["added"][doc_id] = state["added"].get(doc_id, 0) + 1
            state["writes"] = int(state.get("writes", 0)) + 1
            atomic_write_text(self.path, json.dumps(state, ensure_ascii=False, indent=1))
        return len(ids)


def merge_states(new: dict, old: dict) -> dict:
    """One access-count file of two (the earlier layout's ``old`` into ``new``): increments and
    write-backs added up."""
    if not new:
        return dict(old)
    added = dict(new.get("added", {}))
    for doc_id, count in old.get("added", {}).items():
        added[doc_id] = added.get(doc_id, 0) + count
    return {**new, "added": added, "writes": int(new.get("writes", 0)) + int(old.get("writes", 0))}


def with_access_counts(dataset: Dataset, added: dict[str, int]) -> Dataset:
    """``dataset`` whose memories carry the corpus's access count plus ``added`` (same fingerprint:
    the indexes do not hold access counts)."""
    if not added:
        return dataset
    documents = tuple(dataclasses.replace(d, access_count=d.access_count + added[d.id])
                      if d.id in added else d for d in dataset.documents)
    return dataclasses.replace(dataset, documents=documents)
