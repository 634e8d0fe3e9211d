"""Frozen snapshots (``SnapshotStore``): a configuration's results as they were, not re-scored.

A snapshot keeps, per query, the metric values and the ranked document ids, together with the
configuration (TOML), the dataset fingerprint and the judgments' version (a hash of the qrels it
was scored with), so comparing two later shows what each returned then, whatever changed since.
One JSON file per snapshot under ``$RWB_HOME/snapshots/<dataset>/``, written atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path

from eval.experiments.live import LiveRun
from eval.stores.files import check_name, locked, read_json
from retrieval.candidates import Candidates
from retrieval.dataset import Dataset
from retrieval.files import atomic_write_text, safe_component
from retrieval.index import rwb_home
from retrieval.pipeline import to_toml

KEEP = 10          # ranked ids kept per query


def judgments_version(qrels: dict) -> str:
    """A short hash of the judgments (query → doc → grade) a run was scored with."""
    ordered = {q: dict(sorted(d.items())) for q, d in sorted(qrels.items())}
    text = json.dumps(ordered, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


class SnapshotStore:
    def __init__(self, dataset: Dataset, home: Path | None = None):
        where = hashlib.sha1(str(dataset.root.resolve()).encode()).hexdigest()[:8]
        self.dataset = dataset
        self.folder = (home or rwb_home()) / "snapshots" / f"{safe_component(dataset.name)}-{where}"

    def _path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}.json"

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.is_dir() else []

    def freeze(self, name: str, ev: LiveRun, pool: Candidates, qrels: dict,
               notes: str = "") -> dict:
        """Keep ``ev``'s results on ``pool`` under ``name`` (refused when the name is taken)."""
        path = self._path(name)
        ranking = ev.run.ranking
        queries = {}
        for qi, qid in enumerate(pool.query_ids):
            rows = ranking.for_query(qi)[:KEEP]
            values = {m: (None if math.isnan(float(v[qi])) else round(float(v[qi]), 6))
                      for m, v in ev.values.items()}
            ranked = [pool.doc_ids[int(pool.doc_idx[r])] for r in rows]
            queries[qid] = {"values": values, "ranking": ranked}
        record = {"name": name, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "notes": notes,
                  "config_name": ev.config.name, "config": to_toml(ev.config),
                  "fingerprint": self.dataset.fingerprint, "judgments": judgments_version(qrels),
                  "metrics": {k: round(float(v), 6) for k, v in ev.means.items()},
                  "queries": queries}
        with locked(path):
            if path.exists():
                raise ValueError(f"a snapshot named {name!r} exists; choose another name")
            atomic_write_text(path, json.dumps(record, ensure_ascii=False))
        return record

    def load(self, name: str) -> dict:
        record = read_json(self._path(name), None)
        if not isinstance(record, dict) or not isinstance(record.get("queries"), dict):
            raise ValueError(f"no snapshot {name!r}" if record is None
                             else f"snapshot {name!r} is damaged")
        return record


def compare(a: dict, b: dict, metric: str) -> list[dict]:
    """Per query both snapshots hold: ``metric`` in A and B, the delta, and their top results."""
    rows = []
    for qid, qa in a["queries"].items():
        qb = b["queries"].get(qid)
        if qb is None:
            continue
        va, vb = qa["values"].get(metric), qb["values"].get(metric)
        rows.append({"query": qid, "A": va, "B": vb,
                     "delta": None if va is None or vb is None else round(vb - va, 6),
                     "top A": qa["ranking"][0] if qa["ranking"] else "—",
                     "top B": qb["ranking"][0] if qb["ranking"] else "—"})
    return rows
