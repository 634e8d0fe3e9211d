"""LightGBM's model text, checked before LightGBM parses it.

LightGBM's C++ reader (``GBDT::LoadModelFromString``, ``Tree::Tree(const char*, size_t*)`` in
``src/boosting/gbdt_model_text.cpp`` and ``src/io/tree.cpp``) trusts its input: it seeks to
each tree by the byte counts of ``tree_sizes``, scans a line for ``=`` without a bound, reads
exactly ``num_leaves − 1`` values per node array, and at prediction follows
``left_child``/``right_child`` and indexes the feature row by ``split_feature`` unchecked. A
model cut short or edited can so crash the process (SIGSEGV) or loop. ``check_booster``
refuses, with one line, any text that is not what ``Booster.model_to_string`` writes for a
numerical, single-output tree model over ``n_features`` features:

- the header: ``tree``, ``objective=lambdarank``, ``num_class=1``, ``num_tree_per_iteration=1``,
  ``max_feature_idx = n_features − 1``, ``n_features`` feature names and infos, and
  ``tree_sizes`` equal to the byte size of each tree block;
- each tree ``Tree=i`` (in order, ``i`` from 0): only LightGBM's keys, each once; every node
  array of exactly its length, numbers that parse (finite leaf values); no categorical split
  and no linear leaves (``model_to_string`` of our rankers writes neither); ``split_feature``
  within the features; the children form one binary tree rooted at node 0 (every internal node
  but the root and every leaf reached exactly once, so no cycle);
- ``end of trees`` after the last, then only LightGBM's trailer (feature importances, the
  parameter list, ``pandas_categorical:null``).
"""

from __future__ import annotations

import math
import re

MAX_TEXT = 64 << 20  # characters
MAX_LEAVES = 1 << 17
MAX_TREES = 100_000

_TREE_KEYS = {
    "num_leaves", "num_cat", "split_feature", "split_gain", "threshold", "decision_type",
    "left_child", "right_child", "leaf_value", "leaf_weight", "leaf_count", "internal_value",
    "internal_weight", "internal_count", "is_linear", "shrinkage",
}
_NODE_ARRAYS = {  # key → (length as a function of num_leaves, number type)
    "split_feature": (-1, int), "split_gain": (-1, float), "threshold": (-1, float),
    "decision_type": (-1, int), "left_child": (-1, int), "right_child": (-1, int),
    "internal_value": (-1, float), "internal_weight": (-1, float), "internal_count": (-1, int),
    "leaf_value": (0, float), "leaf_weight": (0, float), "leaf_count": (0, int),
}
_INT = re.compile(r"-?[0-9]{1,10}")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?|[-+]?inf|nan",
                    re.IGNORECASE)
_TRAILER = re.compile(
    r"(?:feature_importances:|parameters:|end of parameters|pandas_categorical:null|"
    r"[A-Za-z0-9_]+=[0-9]{1,12}|\[[A-Za-z0-9_]+: [^\[\]\n]{0,10000}\])"
)


class BoosterTextError(ValueError):
    """The text is not a LightGBM model this workbench writes."""


def _numbers(key: str, value: str, count: int, kind) -> list:
    parts = value.split(" ")
    if len(parts) != count:
        raise BoosterTextError(f"{key} holds {len(parts)} values, expected {count}")
    pattern = _INT if kind is int else _FLOAT
    if not all(pattern.fullmatch(p) for p in parts):
        raise BoosterTextError(f"{key} holds a value that is not a number")
    return [kind(p) for p in parts]


def _check_tree(index: int, lines: list[str], n_features: int) -> None:
    fields: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep or key not in _TREE_KEYS or key in fields or not value:
            raise BoosterTextError(f"tree {index}: line {line[:40]!r} is not one of its fields")
        fields[key] = value
    if "num_leaves" not in fields or not _INT.fullmatch(fields["num_leaves"]):
        raise BoosterTextError(f"tree {index}: num_leaves missing or not a number")
    leaves = int(fields["num_leaves"])
    if not 1 <= leaves <= MAX_LEAVES:
        raise BoosterTextError(f"tree {index}: num_leaves {leaves} out of range")
    if fields.get("num_cat") != "0" or fields.get("is_linear", "0") != "0":
        raise BoosterTextError(f"tree {index}: categorical splits or linear leaves")
    if "shrinkage" in fields and not _FLOAT.fullmatch(fields["shrinkage"]):
        raise BoosterTextError(f"tree {index}: shrinkage is not a number")
    required = {"leaf_value"} | ({"split_feature", "threshold", "decision_type", "left_child",
                                  "right_child"} if leaves > 1 else set())
    if required - set(fields):
        raise BoosterTextError(f"tree {index}: missing {sorted(required - set(fields))}")
    arrays = {}
    for key, (offset, kind) in _NODE_ARRAYS.items():
        if key in fields and (offset == 0 or leaves > 1):
            arrays[key] = _numbers(f"tree {index}: {key}", fields[key], leaves + offset, kind)
    if not all(math.isfinite(v) for v in arrays["leaf_value"]):
        raise BoosterTextError(f"tree {index}: a leaf value is not finite")
    if leaves == 1:
        return
    if not all(0 <= f < n_features for f in arrays["split_feature"]):
        raise BoosterTextError(f"tree {index}: split_feature names a feature the model lacks")
    if not all(0 <= d <= 15 and not d & 1 and (d >> 2) & 3 != 3
               for d in arrays["decision_type"]):
        raise BoosterTextError(f"tree {index}: decision_type is not a numerical split")
    if not all(math.isfinite(t) for t in arrays["threshold"]):
        raise BoosterTextError(f"tree {index}: a threshold is not finite")
    seen_nodes, seen_leaves = {0}, set()
    for child in (*arrays["left_child"], *arrays["right_child"]):
        if child >= 0:
            if child == 0 or child >= leaves - 1 or child in seen_nodes:
                raise BoosterTextError(f"tree {index}: the children do not form a tree")
            seen_nodes.add(child)
        else:
            if ~child >= leaves or ~child in seen_leaves:
                raise BoosterTextError(f"tree {index}: the children do not form a tree")
            seen_leaves.add(~child)
    if len(seen_nodes) != leaves - 1 or len(seen_leaves) != leaves:
        raise BoosterTextError(f"tree {index}: the children do not form a tree")
    # every node reached from the root (a node referenced once, but only from a cycle, is not)
    reached, stack = 0, [0]
    while stack:
        node = stack.pop()
        reached += 1
        if reached > leaves:
            raise BoosterTextError(f"tree {index}: the children do not form a tree")
        for child in (arrays["left_child"][node], arrays["right_child"][node]):
            if child >= 0:
                stack.append(child)
    if reached != leaves - 1:
        raise BoosterTextError(f"tree {index}: the children do not form a tree")


def check_booster(text: str, n_features: int) -> None:
    """``BoosterTextError`` (a ``ValueError``, one line) unless ``text`` is a LightGBM model
    text of the shape described above over ``n_features`` features."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        raise BoosterTextError("not LightGBM model text of a sane size")
    if "\r" in text or "\x00" in text:
        raise BoosterTextError("carriage returns or NUL bytes in LightGBM model text")
    lines = text.split("\n")
    if lines[0] != "tree":
        raise BoosterTextError("LightGBM model text must start with 'tree'")
    header: dict[str, str] = {}
    at = 1
    while at < len(lines) and lines[at]:
        key, sep, value = lines[at].partition("=")
        if not sep or key in header:
            raise BoosterTextError(f"header line {lines[at][:40]!r} is not key=value")
        header[key] = value
        at += 1
    expect = {"num_class": "1", "num_tree_per_iteration": "1", "label_index": "0",
              "max_feature_idx": str(n_features - 1)}
    for key, value in expect.items():
        if header.get(key) != value:
            raise BoosterTextError(
                f"{key}={header.get(key, '(missing)')[:40]}; this model needs {key}={value}")
    if header.get("objective", "").split(" ")[0] != "lambdarank":
        raise BoosterTextError("objective must be lambdarank (rwb learn's ranker)")
    if header.get("version") not in ("v3", "v4"):
        raise BoosterTextError("version must be v3 or v4")
    for key in ("feature_names", "feature_infos"):
        if len(header.get(key, "").split(" ")) != n_features:
            raise BoosterTextError(f"{key} must list {n_features} features")
    offset = [0]  # offset[i]: where line i starts
    for line in lines:
        offset.append(offset[-1] + len(line) + 1)
    blocks: list[tuple[int, int]] = []  # (first line, end line) of each tree
    at += 1  # the blank line after the header
    starts: list[int] = []
    while at < len(lines) and lines[at].startswith("Tree="):
        if lines[at] != f"Tree={len(blocks)}" or len(blocks) >= MAX_TREES:
            raise BoosterTextError(f"line {lines[at][:40]!r}: expected Tree={len(blocks)}")
        first = at + 1
        end = first
        while end < len(lines) and lines[end]:
            end += 1
        blocks.append((first, end))
        starts.append(offset[first - 1])
        at = end
        while at < len(lines) and not lines[at]:
            at += 1
    if not blocks:
        raise BoosterTextError("no Tree= section")
    if at >= len(lines) or lines[at] != "end of trees":
        raise BoosterTextError("'end of trees' missing after the last tree (cut short?)")
    ends = starts[1:] + [offset[at]]
    sizes = [str(end - start) for start, end in zip(starts, ends)]
    if "tree_sizes" in header and header["tree_sizes"].split(" ") != sizes:
        raise BoosterTextError("tree_sizes do not match the trees' sizes")
    for index, (first, end) in enumerate(blocks):
        _check_tree(index, lines[first:end], n_features)
    for line in lines[at + 1:]:
        if line and not _TRAILER.fullmatch(line):
            raise BoosterTextError(f"line {line[:40]!r} after 'end of trees' is not LightGBM's")
