"""Retrieval engine: dataset → index → candidates → scoring → ranking."""

import os as _os
import sys as _sys


def _hide_data_folder() -> None:
    """Keep the data folder ``datasets/`` from passing for the Hugging Face ``datasets`` library.

    When the project root is on ``sys.path`` — pytest (``pythonpath = ["."]``), ``streamlit run
    app.py`` (the script's folder), ``python -m …`` from the root — the folder (no
    ``__init__.py``) is an importable namespace package. transformers then reports HF datasets
    as installed and imports the folder, and LanceDB, seeing a ``datasets`` module loaded,
    fails on ``from datasets import Dataset``. The path-entry finder of the project root is
    wrapped so it never finds ``datasets``; everything else it finds as before, and a real HF
    datasets in site-packages (not a dependency) is still found there. The ``rwb`` script does
    not put the root on ``sys.path``, so it never needs this. Runs once, on the first
    ``import retrieval``, which comes before any import of transformers or LanceDB."""
    root = _os.path.dirname(_os.path.dirname(_os.path.realpath(__file__)))
    for entry in list(_sys.path):
        key = entry or _os.getcwd()
        if _os.path.realpath(key) != root:
            continue
        finder = _sys.path_importer_cache.get(key)
        if isinstance(finder, _RootFinder):
            continue
        if finder is None:
            for hook in _sys.path_hooks:
                try:
                    finder = hook(key)
                    break
                except ImportError:
                    continue
        if finder is not None:
            _sys.path_importer_cache[key] = _RootFinder(finder)
    loaded = _sys.modules.get("datasets")
    if loaded is not None and getattr(loaded, "__file__", None) is None:  # the folder, imported already
        del _sys.modules["datasets"]


class _RootFinder:
    """The project root's path-entry finder, minus the data folder ``datasets``."""

    def __init__(self, inner):
        self._inner = inner

    def find_spec(self, fullname, target=None):
        return None if fullname == "datasets" else self._inner.find_spec(fullname, target)

    def invalidate_caches(self) -> None:
        self._inner.invalidate_caches()

    def __getattr__(self, name):
        return getattr(self._inner, name)


_hide_data_folder()
