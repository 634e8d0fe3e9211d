"""Export a tuned pipeline to the engine a user runs: one module per engine, found by scan.

Each public module defines ``EXPORTER = Exporter(engine, summary, export, suffix)``;
``export(config)`` returns the engine's own configuration (a Python snippet or JSON) or
raises ``NotExpressible`` naming what the engine cannot express. ``rwb export`` reads
``EXPORTERS``; README "Export to your engine" tabulates what each engine can express.
"""

from __future__ import annotations

import importlib
import pkgutil

from eval.export._base import Exporter, NotExpressible

EXPORTERS: dict[str, Exporter] = {}
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("_"):
        continue
    _entry = getattr(importlib.import_module(f"{__name__}.{_info.name}"), "EXPORTER", None)
    if isinstance(_entry, Exporter):
        EXPORTERS[_entry.engine] = _entry


def export_config(config, engine: str) -> str:
    """``config`` in ``engine``'s own form; ``ValueError`` for an unknown engine."""
    if engine not in EXPORTERS:
        raise ValueError(f"unknown engine {engine!r}; choose from {sorted(EXPORTERS)}")
    return EXPORTERS[engine].export(config)


__all__ = ["EXPORTERS", "Exporter", "NotExpressible", "export_config"]
