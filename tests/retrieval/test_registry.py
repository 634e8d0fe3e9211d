"""``retrieval.registry``: one entry per public module of a package, found by scanning."""

from __future__ import annotations

import importlib
import sys

import pytest

from retrieval.registry import pick, scan

ENTRY = ("from dataclasses import dataclass\n\n"
         "@dataclass(frozen=True)\nclass Entry:\n    name: str\n")


def package(tmp_path, monkeypatch, modules: dict[str, str]):
    """A package ``plugins_pkg`` whose ``__init__`` defines ``Entry``, with ``modules``."""
    root = tmp_path / "plugins_pkg"
    root.mkdir()
    (root / "__init__.py").write_text(ENTRY)
    for name, body in modules.items():
        (root / f"{name}.py").write_text("from plugins_pkg import Entry\n" + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("plugins_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("plugins_pkg")


def test_public_modules_with_the_attribute_are_collected_by_key(tmp_path, monkeypatch):
    pkg = package(tmp_path, monkeypatch, {
        "b": "ENTRY = Entry('second')\n", "a": "ENTRY = Entry('first')\n",
        "_private": "ENTRY = Entry('hidden')\n", "other": "ENTRY = 'not an Entry'\n",
        "none": "X = 1\n"})
    found = scan("plugins_pkg", pkg.__path__, "ENTRY", pkg.Entry, "name")
    assert list(found) == ["first", "second"] and found["first"] == pkg.Entry("first")
    assert pick(found, "second", "plugin") == pkg.Entry("second")
    choices = r"unknown plugin 'third'; choose from \['first', 'second'\]"
    with pytest.raises(ValueError, match=choices):
        pick(found, "third", "plugin")


def test_two_modules_with_one_key_are_refused(tmp_path, monkeypatch):
    same = "ENTRY = Entry('same')\n"
    pkg = package(tmp_path, monkeypatch, {"a": same, "b": same})
    with pytest.raises(RuntimeError, match="two modules of plugins_pkg register 'same'"):
        scan("plugins_pkg", pkg.__path__, "ENTRY", pkg.Entry, "name")
