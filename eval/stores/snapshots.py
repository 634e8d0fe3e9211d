"""Frozen snapshots (``SnapshotStore``): a configuration's results as they were, not re-scored.

A snapshot keeps, per query, the metric values and the ranked document ids, together with the
configuration (TOML), the dataset fingerprint, the judgments' version (a hash of the qrels it
was scored with) and the content hashes of all its inputs (``eval.stores.inputs``), so comparing
two later shows what each returned then, whatever changed since, and which input changed.
One JSON file per snapshot under ``$RWB_HOME/snapshots/<identity>/`` (``eval.stores.identity``), written atomically; the
same record is what ``rwb snapshot --out FILE`` writes and ``rwb check --against`` reads
(``snapshot_record``, ``read_snapshot``, ``write_snapshot``), so a snapshot frozen on the pages
gates a CI run and one frozen by the command line shows on the pages. The store reads of an
evaluation only what ``Evaluated`` declares (a page's or a command's ``LiveRun`` is one).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Protocol

from eval.stores.files import check_name, locked, read_json
from eval.stores.inputs import Inputs, inputs_of, judgments_hash
from retrieval.candidate_table import Candidates
from retrieval.dataset import Dataset
from eval.stores.identity import claim, migrate_folder, old_key
from retrieval.files import atomic_write_text
from retrieval.index import rwb_home
from retrieval.object_store import refresh_folder
from retrieval.pipeline import PipelineConfig, PipelineRun, to_toml



class Evaluated(Protocol):
    """What a snapshot keeps of an evaluation: its configuration, its ranked run, each metric's
    value per query (NaN where a query does not count) and their means."""

    config: PipelineConfig
    run: PipelineRun
    values: dict
    means: dict[str, float]

KEEP = 10          # ranked ids kept per query
DIGITS = 6         # per-query values and means are kept to this many decimals


def frozen_value(value) -> float | None:
    """A per-query metric value as a snapshot keeps it: rounded, None where it is undefined."""
    value = float(value)
    return None if math.isnan(value) else round(value, DIGITS)


def query_text_hash(text: str) -> str:
    """The short hash of a query's text a snapshot keeps per query (``query_texts``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def snapshot_record(name: str, ev: Evaluated, pool: Candidates, qrels: dict, inputs: Inputs,
                    notes: str = "", queries=()) -> dict:
    """The frozen record of ``ev``'s results on ``pool``: per query the metric values and the
    top ``KEEP`` document ids, the configuration, the judgments' version and the inputs; and
    what ``rwb check --explain`` re-scores with (``eval.experiments.explain``): the judgments
    themselves (``qrels``) and, given the dataset's ``queries``, each one's text hash."""
    ranking = ev.run.ranking
    frozen = {}
    for qi, qid in enumerate(pool.query_ids):
        rows = ranking.for_query(qi)[:KEEP]
        values = {m: frozen_value(v[qi]) for m, v in ev.values.items()}
        ranked = [pool.doc_ids[int(pool.doc_idx[r])] for r in rows]
        frozen[qid] = {"values": values, "ranking": ranked}
    return {"name": name, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "notes": notes,
            "dataset": pool.dataset, "config_name": ev.config.name, "config": to_toml(ev.config),
            "fingerprint": inputs.dataset_fingerprint, "judgments": judgments_hash(qrels),
            "inputs": inputs.to_json(), "embedder": pool.embedder, "analyzer": pool.analyzer,
            "pool_depth": pool.pool_depth,
            "metrics": {k: round(float(v), DIGITS) for k, v in ev.means.items()},
            "queries": frozen, "qrels": {q: dict(d) for q, d in qrels.items()},
            **({"query_texts": {q.id: query_text_hash(q.text) for q in queries}} if queries else {})}


MAX_NAME = 256     # characters of a snapshot's (or its pipeline's) name read from a file


def _finite(value) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and math.isfinite(value))


def check_record(record, where: str) -> dict:
    """``record`` if it is a snapshot (queries → values and ranking; every value a finite number,
    or null where the metric is undefined; a name of at most ``MAX_NAME`` characters); a
    one-line error naming ``where`` otherwise."""
    ok = (isinstance(record, dict) and isinstance(record.get("queries"), dict)
          and isinstance(record.get("metrics", {}), dict)
          and all(isinstance(q, dict) and isinstance(q.get("values"), dict)
                  and isinstance(q.get("ranking"), list)
                  and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                          for v in q["values"].values())
                  for q in record["queries"].values()))
    if not ok:
        raise ValueError(f"{where} is not a frozen snapshot (expected the JSON `rwb snapshot` or the "
                         "Reports page writes)")
    bad = next(((qid, m, v) for qid, q in record["queries"].items() for m, v in q["values"].items()
                if not _finite(v)), None)
    if bad is None:
        bad = next((("(means)", m, v) for m, v in (record.get("metrics") or {}).items() if not _finite(v)), None)
    if bad is not None:
        qid, metric, value = bad
        raise ValueError(f"{where}: {str(metric)[:40]!r} of query {str(qid)[:80]!r} is {value!r}; a snapshot "
                         "holds finite values (null where a metric is undefined): damaged or edited")
    for key in ("name", "config_name"):
        value = record.get(key, "")
        if not isinstance(value, str) or len(value) > MAX_NAME:
            raise ValueError(f"{where}: its {key} is not a name of at most {MAX_NAME} characters")
    return record


def read_snapshot(path: str | Path) -> dict:
    """A snapshot file (``rwb snapshot --out`` or one of the store's); one-line errors."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give the snapshot's JSON file")
    record = read_json(path, None)
    if record is None:
        raise ValueError(f"no snapshot file {path}")
    return check_record(record, str(path))


def write_snapshot(path: str | Path, record: dict) -> None:
    """Write ``record`` to ``path`` atomically (a folder: a one-line error)."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a file name for the snapshot")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(record, ensure_ascii=False, indent=1) + "\n")


class SnapshotStore:
    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset, self.home = dataset, home
        base = (home or rwb_home()) / "snapshots"
        self.folder = base / claim(dataset, home)
        migrate_folder(base / old_key(dataset.name, dataset.root), self.folder, ".json",
                       lambda: claim(dataset, home, register=True))

    def _path(self, name: str) -> Path:
        return self.folder / f"{check_name(name)}.json"

    def names(self) -> list[str]:
        refresh_folder(self.folder, ".json")  # an s3:// home: the snapshots frozen by anyone
        return sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.is_dir() else []

    def record(self, name: str, ev: Evaluated, pool: Candidates, qrels: dict, notes: str = "") -> dict:
        """The record ``freeze`` would keep, not kept: what results not frozen (Tune's current
        knobs) are compared as."""
        inputs = inputs_of(self.dataset, qrels, ev.config, pool.embedder, pool.analyzer)
        return snapshot_record(name, ev, pool, qrels, inputs, notes, self.dataset.queries)

    def freeze(self, name: str, ev: Evaluated, pool: Candidates, qrels: dict,
               notes: str = "") -> dict:
        """Keep ``ev``'s results on ``pool`` under ``name`` (refused when the name is taken)."""
        return self.save(self.record(name, ev, pool, qrels, notes))

    def save(self, record: dict) -> dict:
        """Keep a snapshot record (``snapshot_record``) under its name; refused when it is taken."""
        path = self._path(record.get("name"))
        check_record(record, f"snapshot {record.get('name')!r}")
        claim(self.dataset, self.home, register=True)
        with locked(path):
            if path.exists():
                raise ValueError(f"a snapshot named {record['name']!r} exists; choose another name")
            atomic_write_text(path, json.dumps(record, ensure_ascii=False))
        return record

    def load(self, name: str) -> dict:
        record = read_json(self._path(name), None)
        if record is None:
            raise ValueError(f"no snapshot {name!r}")
        try:
            return check_record(record, f"snapshot {name!r}")
        except ValueError:
            raise ValueError(f"snapshot {name!r} is damaged") from None


def compare(a: dict, b: dict, metric: str) -> list[dict]:
    """Per query both snapshots hold: ``metric`` in A and B, the delta, and their top results;
    the largest change first (|delta| descending, query id on ties, undefined deltas last)."""
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
    return sorted(rows, key=lambda r: (r["delta"] is None, -abs(r["delta"] or 0.0), r["query"]))
