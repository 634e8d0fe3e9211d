"""The importer registry: one module per format, found by scanning this package.

Each public module defines ``IMPORTER = Importer(name, summary, run, …)`` with its options;
``rwb import KIND`` and the Data page's import form both read ``IMPORTERS``, so adding a
format is adding a module (plus its test file).
"""

from __future__ import annotations

from eval.importers._base import Importer, ImportResult, Option
from retrieval.registry import pick, scan

IMPORTERS: dict[str, Importer] = scan(__name__, __path__, "IMPORTER", Importer, "name")


def get_importer(name: str) -> Importer:
    """The registered importer ``name``; ``ValueError`` listing the choices otherwise."""
    return pick(IMPORTERS, name, "import kind")


__all__ = ["IMPORTERS", "Importer", "ImportResult", "Option", "get_importer"]
