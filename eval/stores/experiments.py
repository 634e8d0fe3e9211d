"""The log of experiments run in the workbench (``ExperimentStore``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from eval.stores.files import locked, read_json
from retrieval.dataset import Dataset
from retrieval.files import atomic_write_text
from retrieval.index import rwb_home
from retrieval.pipeline import PipelineConfig, to_toml


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
            baseline_means: dict[str, float] | None = None, inputs: dict | None = None) -> dict:
        """Add one evaluation: the config as TOML, the dataset and its fingerprint, the embedder,
        the means (and the baseline's, when given) over ``queries`` judged queries, and the
        content hashes of its inputs (``eval.stores.inputs.Inputs.to_json``), when given."""
        record = {
            "name": config.name, "source": source, "dataset": dataset.name, "dataset_path": dataset_path,
            "fingerprint": dataset.fingerprint, "embedder": embedder, "config": to_toml(config),
            "metrics": {k: round(float(v), 6) for k, v in means.items()}, "queries": int(queries),
        }
        if baseline is not None and baseline_means is not None:
            record["baseline"] = baseline.name
            record["baseline_metrics"] = {k: round(float(v), 6) for k, v in baseline_means.items()}
        if inputs is not None:
            record["inputs"] = dict(inputs)
        return self.add(record)

    def list(self) -> list[dict]:
        records = read_json(self.path, [])
        tables = ("metrics", "baseline_metrics")
        if not isinstance(records, list) or not all(
                isinstance(r, dict) and all(isinstance(r.get(k, {}), dict) for k in tables)
                for r in records):
            raise ValueError(f"{self.path}: damaged (not a list of experiment records); "
                             "restore it from a backup or move it aside")
        return records
