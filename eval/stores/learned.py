"""Learned pipelines the workbench keeps for its own pages (``$RWB_HOME/learned/``).

``rwb learn --out FILE.toml`` writes the learned pipeline's TOML and, for a LambdaMART or MoE
model, the model beside it. The Sweep page's Learn mode has no file of its own: ``keep`` writes
both under ``$RWB_HOME/learned/``, each named by the start of the sha1 of its text — the model
as ``<hash>.model.json``, the pipeline as ``<hash>.toml`` naming the model by its absolute path
(the same result, the same files) — and returns the TOML's path, a label ``resolve_config`` reads (so Tune's link restores
the very model), with the configuration it names: Tune, a saved profile and every command score
it. A linear model's weights are inline in the TOML (no model file). Written atomically. The
store is handed the model and the TOML (``eval.learning.result.LearnResult.keep`` hands them);
it knows nothing of how they were learned.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

from eval.stores.configs import learned_root
from eval.stores.files import locked
from retrieval.files import atomic_write_text
from retrieval.fusion.learned.model import MoEModel, TreeModel, model_to_json, save_model
from retrieval.pipeline import PipelineConfig, get_pipeline


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def keep(model: TreeModel | MoEModel | None, toml_naming: Callable[[str], str],
         home: Path | None = None) -> tuple[str, PipelineConfig]:
    """The label and configuration of a learned pipeline written under ``$RWB_HOME/learned/``:
    ``model`` (None for a linear model, whose weights are in the TOML) and the pipeline's TOML,
    ``toml_naming(path)`` naming the model file by its absolute ``path`` ("" without one)."""
    root = learned_root(home)
    model_path = ""
    if model is not None:
        text = json.dumps(model_to_json(model), sort_keys=True)
        path = root / f"{_digest(text)}.model.json"
        with locked(path):
            if not path.is_file():
                save_model(model, path)
        model_path = str(path.resolve())
    toml = toml_naming(model_path)
    path = root / f"{_digest(toml)}.toml"
    with locked(path):
        if not path.is_file():
            atomic_write_text(path, toml)
    label = str(path.resolve())
    return label, get_pipeline(label)
