"""The Sweep page's last sweeps (``SweepStore``), so a reload or a shared link of the same
settings shows the result again instead of nothing.

An entry is the settings' key (``settings_key``: a hash of everything the result depends on —
the pipeline, the ranges, the objective, the search, the folds and the inputs' content hashes)
and the result's record (``eval.search.sweep.SweepResult.to_record``, with the curve's when one
was run). One JSON document per dataset under ``$RWB_HOME/sweeps/``, the newest ``KEEP``
entries, each change a read-modify-write under the stores' lock, written atomically. A sweep
of more than ``MAX_CONFIGS`` configurations is not kept (its record would be megabytes).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from eval.stores.files import locked, read_json
from eval.stores.identity import claim, store_path
from retrieval.dataset import Dataset
from retrieval.files import atomic_write_text

KEEP = 20
MAX_CONFIGS = 20_000


def settings_key(settings: dict) -> str:
    """The key of a sweep's settings (a JSON-able dict): the same settings, the same key."""
    text = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


class SweepStore:
    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset, self.home = dataset, home
        self.path = store_path(dataset, home, "sweeps", ".json")

    def _load(self) -> list[dict]:
        state = read_json(self.path, {"sweeps": []})
        if not (isinstance(state, dict) and isinstance(state.get("sweeps"), list)):
            raise ValueError(f"{self.path}: damaged (not a sweeps file); restore it from a backup "
                             "or move it aside")
        return state["sweeps"]

    def get(self, key: str) -> dict | None:
        """The entry kept for ``key`` (``{"key", "time", "result", "curve"}``), or None."""
        return next((e for e in reversed(self._load()) if isinstance(e, dict) and e.get("key") == key), None)

    def put(self, key: str, result: dict, curve: dict | None = None) -> bool:
        """Keep ``result`` (and ``curve``) under ``key``, replacing an entry of the same key;
        False when the sweep is too large to keep."""
        if len(result.get("scores", ())) > MAX_CONFIGS:
            return False
        entry = {"key": key, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "result": result, "curve": curve}
        text = json.dumps(entry)          # refuse what cannot be stored before touching the file
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            entries = [e for e in self._load() if isinstance(e, dict) and e.get("key") != key]
            entries = [*entries, json.loads(text)][-KEEP:]
            atomic_write_text(self.path, json.dumps({"sweeps": entries}, ensure_ascii=False))
        return True
