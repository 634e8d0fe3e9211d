"""The fusion registry: one module per method, found by scanning this package.

Each public module defines ``FUSION = Fusion(name, ParamsClass, score_function, …)``;
adding a method is adding a module (plus its test file) — the pipeline schema, the Tune
knobs, the Sweep axes, ``--param`` and the conformance suite all read ``FUSIONS``.
"""

from __future__ import annotations

import importlib
import pkgutil

from retrieval.fusion._base import Fusion, NoParams, Scored

FUSIONS: dict[str, Fusion] = {}
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("_"):
        continue
    _entry = getattr(importlib.import_module(f"{__name__}.{_info.name}"), "FUSION", None)
    if isinstance(_entry, Fusion):
        if _entry.name in FUSIONS:
            raise RuntimeError(f"two fusion modules register {_entry.name!r}")
        FUSIONS[_entry.name] = _entry


def get_fusion(name: str) -> Fusion:
    """The registered fusion ``name``; ``ValueError`` listing the choices otherwise."""
    if not isinstance(name, str) or name not in FUSIONS:
        raise ValueError(f"unknown fusion {name!r}; choose from {sorted(FUSIONS)}")
    return FUSIONS[name]


__all__ = ["FUSIONS", "Fusion", "NoParams", "Scored", "get_fusion"]
