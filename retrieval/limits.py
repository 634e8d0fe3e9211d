"""Bounds on sizes that library functions accept (checked where the size is used).

A depth or a result count of 10⁹ would make Tantivy or LanceDB try a multi-gigabyte
allocation and abort the process; every function that takes one refuses it with a
``ValueError`` naming the allowed range instead.
"""

from __future__ import annotations

import math
import numbers

MAX_DEPTH = 10_000
"""Largest per-path candidate depth / result count any search accepts."""


def check_size(name: str, value, lo: int = 1, hi: int = MAX_DEPTH) -> int:
    """``value`` as an int in ``[lo, hi]``; ValueError with the allowed range otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be an integer between {lo} and {hi}, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"{name} must be an integer between {lo} and {hi}, got {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {value}")
    return int(value)
