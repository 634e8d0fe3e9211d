"""Durable local stores: judgments (with history and undo), named profiles, experiments.

Everything lives under ``$RWB_HOME`` and is written so that a kill at any point
loses nothing already acknowledged: write to a temporary file in the same folder,
fsync it, rename it over the target, fsync the folder. Concurrent writers (two app
sessions, or a CLI and the app) serialise on an ``fcntl`` lock file, so no update is lost.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import time
from contextlib import contextmanager
from pathlib import Path

from retrieval.dataset import Dataset
from retrieval.files import atomic_write_text, safe_component  # noqa: F401 (re-exported)
from retrieval.index import rwb_home
from retrieval.pipeline import PipelineConfig, from_toml, to_toml

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}$")


@contextmanager
def locked(path: Path):
    """Exclusive inter-process lock on ``path`` + ``.lock``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_json(path: Path, default):
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


class JudgmentStore:
    """Graded judgments added in the workbench, layered over a dataset's own qrels.

    The dataset's files are never modified. State is one JSON document holding the
    overlay and its full history; every change is a read-modify-write under the lock.
    """

    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset = dataset
        name = safe_component(dataset.name)
        where = hashlib.sha1(str(dataset.root.resolve()).encode()).hexdigest()[:8]
        self.path = (home or rwb_home()) / "judgments" / f"{name}-{where}.json"

    def _load(self) -> dict:
        state = _read_json(self.path, {"dataset": self.dataset.name, "overlay": {}, "history": []})
        if not (isinstance(state, dict) and isinstance(state.get("overlay"), dict)
                and isinstance(state.get("history"), list)
                and all(isinstance(v, dict) for v in state["overlay"].values())):
            raise ValueError(f"{self.path}: damaged (not a judgments file); restore it from a backup or move it aside")
        return state

    def grade(self, query_id: str, doc_id: str, grade: int, author: str = "") -> None:
        """Set (or, with grade 0, clear to not-relevant) one judgment."""
        if query_id not in {q.id for q in self.dataset.queries}:
            raise ValueError(f"unknown query {query_id!r}")
        if doc_id not in {d.id for d in self.dataset.documents}:
            raise ValueError(f"unknown document {doc_id!r}")
        if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= 3:
            raise ValueError(f"grade must be an integer 0–3, got {grade!r}")
        with locked(self.path):
            state = self._load()
            before = self._current(state, query_id, doc_id)
            state["overlay"].setdefault(query_id, {})[doc_id] = grade
            state["history"].append({"query": query_id, "doc": doc_id, "before": before, "after": grade,
                                     "author": author, "time": time.time()})
            atomic_write_text(self.path, json.dumps(state, ensure_ascii=False, indent=1))

    def undo(self) -> dict | None:
        """Revert the latest change; returns it, or None when there is nothing to undo."""
        with locked(self.path):
            state = self._load()
            if not state["history"]:
                return None
            last = state["history"].pop()
            overlay = state["overlay"].setdefault(last["query"], {})
            if last["before"] is None:
                overlay.pop(last["doc"], None)
            else:
                overlay[last["doc"]] = last["before"]
            atomic_write_text(self.path, json.dumps(state, ensure_ascii=False, indent=1))
            return last

    def _current(self, state: dict, query_id: str, doc_id: str) -> int | None:
        overlay = state["overlay"].get(query_id, {})
        if doc_id in overlay:
            return overlay[doc_id]
        return self.dataset.qrels.get(query_id, {}).get(doc_id)

    def history(self) -> list[dict]:
        return list(self._load()["history"])

    def qrels(self) -> dict[str, dict[str, int]]:
        """The dataset's qrels with the overlay applied (grade 0 removes a judgment)."""
        merged = {q: dict(d) for q, d in self.dataset.qrels.items()}
        for query_id, docs in self._load()["overlay"].items():
            for doc_id, grade in docs.items():
                if grade > 0:
                    merged.setdefault(query_id, {})[doc_id] = grade
                else:
                    merged.get(query_id, {}).pop(doc_id, None)
        return {q: d for q, d in merged.items() if d}


class ProfileStore:
    """Named pipeline configs saved as TOML files."""

    def __init__(self, home: Path | None = None):
        self.root = (home or rwb_home()) / "profiles"

    def save(self, name: str, config: PipelineConfig) -> Path:
        path = self.root / f"{check_name(name)}.toml"
        with locked(path):
            atomic_write_text(path, to_toml(config))
        return path

    def load(self, name: str) -> PipelineConfig:
        path = self.root / f"{check_name(name)}.toml"
        if not path.is_file():
            raise ValueError(f"no saved profile named {name!r}")
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: cannot be read ({error}); move it aside") from None
        if not text.strip():
            raise ValueError(f"{path}: is empty (damaged); save the profile again or delete the file")
        return from_toml(text, str(path))

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.root.glob("*.toml")) if self.root.is_dir() else []


class ExperimentStore:
    """Past evaluations (config, dataset fingerprint, metrics, time), newest last."""

    def __init__(self, home: Path | None = None):
        self.path = (home or rwb_home()) / "experiments.json"

    def add(self, record: dict) -> dict:
        entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **record}
        json.dumps(entry)  # refuse what cannot be stored before touching the file
        with locked(self.path):
            records = self.list()
            records.append(entry)
            atomic_write_text(self.path, json.dumps(records, ensure_ascii=False, indent=1))
        return entry

    def log(self, config: PipelineConfig, means: dict[str, float], source: str, dataset: Dataset,
            dataset_path: str, embedder: str, queries: int, baseline: PipelineConfig | None = None,
            baseline_means: dict[str, float] | None = None) -> dict:
        """Add one evaluation: the config as TOML, the dataset and its fingerprint, the embedder,
        the means (and the baseline's, when given) over ``queries`` judged queries."""
        record = {
            "name": config.name, "source": source, "dataset": dataset.name, "dataset_path": dataset_path,
            "fingerprint": dataset.fingerprint, "embedder": embedder, "config": to_toml(config),
            "metrics": {k: round(float(v), 6) for k, v in means.items()}, "queries": int(queries),
        }
        if baseline is not None and baseline_means is not None:
            record["baseline"] = baseline.name
            record["baseline_metrics"] = {k: round(float(v), 6) for k, v in baseline_means.items()}
        return self.add(record)

    def list(self) -> list[dict]:
        records = _read_json(self.path, [])
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise ValueError(f"{self.path}: damaged (not a list of experiment records); "
                             "restore it from a backup or move it aside")
        return records
