"""Export a tuned pipeline to the engine a user runs: one module per engine, found by scan.

Each public module defines ``EXPORTER = Exporter(engine, summary, export, suffix)``;
``export(config)`` returns the engine's own configuration (a Python snippet or JSON) or
raises ``NotExpressible`` naming what the engine cannot express. ``rwb export`` reads
``EXPORTERS``; README "Export to your engine" tabulates what each engine can express.
"""

from __future__ import annotations

from eval.export._base import Exporter, NotExpressible
from retrieval.registry import pick, scan

EXPORTERS: dict[str, Exporter] = scan(__name__, __path__, "EXPORTER", Exporter, "engine")


def export_config(config, engine: str) -> str:
    """``config`` in ``engine``'s own form; ``ValueError`` for an unknown engine."""
    return pick(EXPORTERS, engine, "engine").export(config)


__all__ = ["EXPORTERS", "Exporter", "NotExpressible", "export_config"]
