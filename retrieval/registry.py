"""Registries found by scanning a package: each public module declares one entry.

The fusions (``retrieval.fusion``), the importers (``eval.importers``) and the engine exporters
(``eval.export``) are collected this way, so adding one is adding a module (and its test)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable


def scan(package: str, path: Iterable[str], attribute: str, kind: type, key: str) -> dict:
    """``{entry.<key>: entry}`` for each module of ``package`` (names not starting with ``_``, in
    name order) whose ``attribute`` is a ``kind``; two modules naming the same key is an error."""
    found: dict = {}
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        entry = getattr(importlib.import_module(f"{package}.{info.name}"), attribute, None)
        if isinstance(entry, kind):
            name = getattr(entry, key)
            if name in found:
                raise RuntimeError(f"two modules of {package} register {name!r}")
            found[name] = entry
    return found


def pick(found: dict, name: object, what: str):
    """``found[name]``; a ``ValueError`` naming the choices when ``name`` is not registered."""
    if not isinstance(name, str) or name not in found:
        raise ValueError(f"unknown {what} {name!r}; choose from {sorted(found)}")
    return found[name]
