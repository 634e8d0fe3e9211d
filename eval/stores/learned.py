"""Learned pipelines the workbench keeps for its own pages (``$RWB_HOME/learned/``).

``rwb learn --out FILE.toml`` writes the learned pipeline's TOML and, for a LambdaMART or MoE
model, the model beside it. The Sweep page's Learn mode has no file of its own: ``keep`` writes
both under ``$RWB_HOME/learned/`` — the model as ``<sha1 of its JSON>.model.json``, the pipeline
as ``<sha1 of the TOML>.toml`` naming the model by its absolute path (the same result, the same
files) — and returns the TOML's path, a label ``resolve_config`` reads (so Tune's link restores
the very model), with the configuration it names: Tune, a saved profile and every command score
it. A linear model's weights are inline in the TOML (no model file). Written atomically.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from eval.stores.configs import learned_root
from eval.stores.files import locked
from retrieval.files import atomic_write_text
from retrieval.fusion.learned.model import model_to_json, save_model
from retrieval.pipeline import PipelineConfig, get_pipeline

if TYPE_CHECKING:  # a store keeps what a layer above made; it never calls that layer
    from eval.learning.nested import LearnResult


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def keep(result: LearnResult, home: Path | None = None) -> tuple[str | None, PipelineConfig]:
    """The label and configuration of what ``result`` learned on all its queries, written under
    ``$RWB_HOME/learned/``; ``(None, the default)`` when the guard kept the default."""
    if result.final.kind != "learned":
        return None, result.final_config()
    root = learned_root(home)
    model, model_path = result.stored_model, ""
    if model is not None:
        text = json.dumps(model_to_json(model), sort_keys=True)
        path = root / f"{_digest(text)}.model.json"
        with locked(path):
            if not path.is_file():
                save_model(model, path)
        model_path = str(path.resolve())
    toml = result.to_toml(model_path)
    path = root / f"{_digest(toml)}.toml"
    with locked(path):
        if not path.is_file():
            atomic_write_text(path, toml)
    label = str(path.resolve())
    return label, get_pipeline(label)
