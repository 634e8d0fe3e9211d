"""Export a tuned pipeline to the engine a user runs: one module per engine, found by scan.

Each public module defines ``EXPORTER = Exporter(engine, summary, write, suffix, ...)`` with
its declarations (``_base``); ``write(config, analyzer)`` returns the engine's own
configuration (a Python snippet or JSON) or raises ``NotExpressible`` naming what the engine
cannot express. ``rwb export`` reads
``EXPORTERS``; README "Export to your engine" tabulates what each engine can express.
"""

from __future__ import annotations

from eval.export._base import Exporter, NotExpressible
from retrieval.registry import pick, scan

EXPORTERS: dict[str, Exporter] = scan(__name__, __path__, "EXPORTER", Exporter, "engine")


def export_config(config, engine: str, analyzer: str | None = None, notes: tuple[str, ...] = ()) -> str:
    """``config`` in ``engine``'s own form; ``ValueError`` for an unknown engine. ``analyzer``:
    the BM25 analyzer the pipeline was tuned with, which the export names in the engine's terms
    or refuses (None: not part of the export); ``notes``: lines for the file's reader."""
    return pick(EXPORTERS, engine, "engine").export(config, analyzer, tuple(notes))


__all__ = ["EXPORTERS", "Exporter", "NotExpressible", "export_config"]
