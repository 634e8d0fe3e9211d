"""The packages form layers: an import never points up, and modules import in no circle.

From the bottom: the engine (``retrieval``), then in ``eval/`` metrics, statistics, importers,
stores, parameter search and export, learning, experiments, reports, and the command line on
top (the pages sit above all of it and are not imported by it). Every import counts, at module
level or inside a function; one under ``if TYPE_CHECKING:`` (it names a type, never runs) counts
for the direction but not for circles: a module may not even name a type of a layer above it (a
store declares what it reads of what it is handed, ``eval.stores.snapshots.Evaluated``). A registry package that scans its
modules (``retrieval.fusion``, ``eval.importers``, ``eval.export``) imports each of them, and
importing ``a.b.c`` imports the package ``a.b`` first: both count as edges.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LAYERS = (
    ("retrieval",),
    ("eval.progress",),
    ("eval.metrics",),
    ("eval.statistics",),
    ("eval.importers",),
    ("eval.stores",),
    ("eval.search", "eval.export"),
    ("eval.learning",),
    ("eval.experiments",),
    ("eval.reports",),
    ("eval.cli",),
)
RANK = {package: rank for rank, group in enumerate(LAYERS) for package in group}
RANK["eval"] = 0          # the harness's package itself: a docstring, imported before any of it
REGISTRIES = ("retrieval.fusion", "eval.importers", "eval.export")


def _modules() -> dict[str, Path]:
    mods = {}
    for file in [*ROOT.glob("retrieval/**/*.py"), *ROOT.glob("eval/**/*.py")]:
        parts = list(file.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = file
    return mods


def _imports(file: Path, typing: bool = False) -> set[str]:
    """What ``file`` imports when it runs; with ``typing``, what it imports under ``if TYPE_CHECKING:``."""
    tree = ast.parse(file.read_text("utf-8"))
    typing_only = {id(node) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if (id(node) in typing_only) != typing:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    edges = {name: set() for name in mods}
    for name, file in mods.items():
        for target in _imports(file):
            while target and target not in mods:     # `from a.b import name` of a function
                target = target.rpartition(".")[0]
            if not target or target == name:
                continue
            edges[name].add(target)
            parent = target.rpartition(".")[0]
            while parent in mods and not name.startswith(parent + "."):   # a.b runs before a.b.c
                edges[name].add(parent)
                parent = parent.rpartition(".")[0]
    for package in REGISTRIES:
        edges[package] |= {m for m in mods if m.rpartition(".")[0] == package
                           and not m.rpartition(".")[2].startswith("_")}
    return edges


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] == "retrieval" else ".".join(parts[:2])


def test_no_import_points_up_a_layer():
    upward = sorted(f"{source} imports {target}" for source, targets in _graph().items() for target in targets
                    if RANK[_layer(target)] > RANK[_layer(source)])
    assert not upward, "\n".join(upward)


def test_no_type_named_for_checking_points_up_a_layer():
    """An import under ``if TYPE_CHECKING:`` names a type of the layer it comes from: a layer
    below names no type of one above (a store says what it reads, it does not reach up)."""
    mods = _modules()
    upward = set()
    for source, file in mods.items():
        for target in _imports(file, typing=True):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and RANK[_layer(target)] > RANK[_layer(source)]:
                upward.add(f"{source} names {target}")
    assert not upward, "\n".join(sorted(upward))


def _cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_modules_import_in_no_circle():
    cycles = _cycles(_graph())
    assert not cycles, "\n".join(sorted(", ".join(sorted(c)) for c in cycles))


def test_the_check_sees_an_upward_import_and_a_circle():
    """The checks themselves: an edge up a layer and a two-module circle are found."""
    assert RANK[_layer("eval.stores.snapshots")] < RANK[_layer("eval.experiments.live")]
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [frozenset({"a", "b", "c"})]


def test_the_engine_and_the_harness_never_import_streamlit_or_the_pages():
    for name, file in _modules().items():
        bad = {t for t in _imports(file) if t.split(".")[0] in ("streamlit", "pages")}
        assert not bad, f"{name} imports {sorted(bad)}"
