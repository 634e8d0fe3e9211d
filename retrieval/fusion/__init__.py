"""The fusion registry: one module per method, found by scanning this package.

Each public module defines ``FUSION = Fusion(name, ParamsClass, score_function, …)``;
adding a method is adding a module (plus its test file) — the pipeline schema, the Tune
knobs, the Sweep axes, ``--param`` and the conformance suite all read ``FUSIONS``.
"""

from __future__ import annotations

from retrieval.fusion._base import Fusion, NoParams, Scored
from retrieval.registry import pick, scan

FUSIONS: dict[str, Fusion] = scan(__name__, __path__, "FUSION", Fusion, "name")


def get_fusion(name: str) -> Fusion:
    """The registered fusion ``name``; ``ValueError`` listing the choices otherwise."""
    return pick(FUSIONS, name, "fusion")


__all__ = ["FUSIONS", "Fusion", "NoParams", "Scored", "get_fusion"]
