"""Graded judgments added in the workbench, with history and undo (``JudgmentStore``)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from eval.stores.files import locked, read_json
from retrieval.dataset import MAX_GRADE, Dataset
from retrieval.files import atomic_write_text, safe_component
from retrieval.index import rwb_home


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
        state = read_json(self.path, {"dataset": self.dataset.name, "overlay": {}, "history": []})
        if not (isinstance(state, dict) and isinstance(state.get("overlay"), dict)
                and isinstance(state.get("history"), list)
                and all(isinstance(v, dict) for v in state["overlay"].values())
                and all(type(g) is int and 0 <= g <= MAX_GRADE
                        for v in state["overlay"].values() for g in v.values())):
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
        doc_ids = {d.id for d in self.dataset.documents}
        for query_id, docs in self._load()["overlay"].items():
            for doc_id, grade in docs.items():
                if doc_id not in doc_ids:  # since removed from the corpus: it cannot be retrieved
                    continue
                if grade > 0:
                    merged.setdefault(query_id, {})[doc_id] = grade
                else:
                    merged.get(query_id, {}).pop(doc_id, None)
        return {q: d for q, d in merged.items() if d}
