"""The importer registry: one module per format, found by scanning this package.

Each public module defines ``IMPORTER = Importer(name, summary, run, …)`` with its options;
``rwb import KIND`` and the Data page's import form both read ``IMPORTERS``, so adding a
format is adding a module (plus its test file).
"""

from __future__ import annotations

import importlib
import pkgutil

from eval.importers._base import Importer, ImportResult, Option

IMPORTERS: dict[str, Importer] = {}
for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("_"):
        continue
    _entry = getattr(importlib.import_module(f"{__name__}.{_info.name}"), "IMPORTER", None)
    if isinstance(_entry, Importer):
        if _entry.name in IMPORTERS:
            raise RuntimeError(f"two importer modules register {_entry.name!r}")
        IMPORTERS[_entry.name] = _entry


def get_importer(name: str) -> Importer:
    """The registered importer ``name``; ``ValueError`` listing the choices otherwise."""
    if not isinstance(name, str) or name not in IMPORTERS:
        raise ValueError(f"unknown import kind {name!r}; choose from {sorted(IMPORTERS)}")
    return IMPORTERS[name]


__all__ = ["IMPORTERS", "Importer", "ImportResult", "Option", "get_importer"]
