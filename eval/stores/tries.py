"""Tries and query notes (``TryStore``): the notebook Tune keeps per dataset, as Quepid does.

A try is one settled configuration with its whole-set metrics (and the baseline's), the
starting point it was moved from and the parameters changed from it; it can be named and
annotated and restored. Notes on queries live beside the tries. One JSON document per dataset
under ``$RWB_HOME/tries/``, every change a read-modify-write under the stores' lock.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from eval.stores.files import locked, read_json
from retrieval.dataset import Dataset
from eval.stores.identity import claim, store_path
from retrieval.files import atomic_write_text
from retrieval.pipeline import PipelineConfig, from_toml, to_toml

MAX_NOTE = 2000


class TryStore:
    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset, self.home = dataset, home
        self.path = store_path(dataset, home, "tries", ".json", merge_states)

    def _load(self) -> dict:
        state = read_json(self.path, {"tries": [], "query_notes": {}})
        if not (isinstance(state, dict) and isinstance(state.get("tries"), list)
                and isinstance(state.get("query_notes"), dict)):
            raise ValueError(f"{self.path}: damaged (not a tries file); "
                             "restore it from a backup or move it aside")
        return state

    def _save(self, state: dict) -> None:
        atomic_write_text(self.path, json.dumps(state, ensure_ascii=False, indent=1))

    def tries(self) -> list[dict]:
        """Every try, oldest first (each with its ``id``, 1, 2, …)."""
        return self._load()["tries"]

    def add(self, config: PipelineConfig, source: str, changes: dict, means: dict[str, float],
            baseline: str, baseline_means: dict[str, float], reason: str = "",
            inputs: dict | None = None) -> dict:
        """Keep ``config`` as a try; the last try itself when it holds the same configuration.
        ``inputs``: the content hashes of what it was scored on (``eval.stores.inputs``)."""
        text = to_toml(config)
        record = {"source": source, "config": text, "changes": changes, "name": "", "notes": reason,
                  "metrics": {k: round(float(v), 6) for k, v in means.items()},
                  "baseline": baseline,
                  "baseline_metrics": {k: round(float(v), 6) for k, v in baseline_means.items()}}
        if inputs is not None:
            record["inputs"] = dict(inputs)
        json.dumps(record)              # refuse what cannot be stored before touching the file
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            state = self._load()
            if state["tries"] and state["tries"][-1]["config"] == text:
                return state["tries"][-1]
            record = {"id": len(state["tries"]) + 1,
                      "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record}
            state["tries"].append(record)
            self._save(state)
        return record

    def get(self, try_id: int) -> dict:
        for record in self.tries():
            if record["id"] == try_id:
                return record
        raise ValueError(f"no try #{try_id}")

    def config(self, try_id: int) -> PipelineConfig:
        return from_toml(self.get(try_id)["config"], f"try #{try_id}")

    def describe(self, try_id: int, name: str | None = None, notes: str | None = None) -> dict:
        """Name and/or annotate a try."""
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            state = self._load()
            record = next((r for r in state["tries"] if r["id"] == try_id), None)
            if record is None:
                raise ValueError(f"no try #{try_id}")
            if name is not None:
                record["name"] = _text(name, 64, "a try's name")
            if notes is not None:
                record["notes"] = _text(notes, MAX_NOTE, "notes")
            self._save(state)
        return record

    def query_notes(self) -> dict[str, str]:
        return self._load()["query_notes"]

    def note_query(self, query_id: str, text: str) -> None:
        """Set (or, with an empty text, remove) the note on a query."""
        text = _text(text, MAX_NOTE, "a query note")
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            state = self._load()
            if text:
                state["query_notes"][query_id] = text
            else:
                state["query_notes"].pop(query_id, None)
            self._save(state)


def merge_states(new: dict, old: dict) -> dict:
    """One tries file of two (the earlier layout's ``old`` into ``new``): the tries of both in
    time order, numbered again from 1; the query notes of both (two notes on one query joined)."""
    if not new:
        return dict(old)
    tries = list(new.get("tries", []))
    tries += [t for t in old.get("tries", []) if not any(
        t.get("time") == u.get("time") and t.get("config") == u.get("config") for u in tries)]
    tries = [{**t, "id": i} for i, t in enumerate(sorted(tries, key=lambda t: str(t.get("time", ""))), start=1)]
    notes = dict(old.get("query_notes", {}))
    for query_id, text in new.get("query_notes", {}).items():
        notes[query_id] = text if notes.get(query_id) in (None, text) else f"{notes[query_id]}\n{text}"
    return {**new, "tries": tries, "query_notes": notes}


def _text(value: str, limit: int, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be text")
    value = value.strip()
    if len(value) > limit:
        raise ValueError(f"{what} is {len(value)} characters; at most {limit}")
    return value
