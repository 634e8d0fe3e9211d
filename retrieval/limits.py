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
        raise ValueError(f"{name} must be an integer between {lo} and {hi}, got {clip(value)}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"{name} must be an integer between {lo} and {hi}, got {clip(value)}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between {lo} and {hi}, got {clip(value)}")
    return int(value)


MAX_ECHO = 80
"""Characters of a value from user data that an error line shows (``clip``)."""


def clip(value) -> str:
    """How an error line shows a value from user data (an id, a grade, a path): its ``repr``
    when short, else the ``repr`` of its first ``MAX_ECHO`` characters and its length, so a
    50 MB id makes a line of about a hundred characters, not of 50 MB."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 512:
        digits = int((abs(value).bit_length() - 1) * math.log10(2)) + 1
        digits += abs(value) >= 10**digits  # the estimate is at most one short
        return f"an integer of {digits} digits"
    if not isinstance(value, str):
        try:
            value = repr(value)
        except (ValueError, RecursionError):
            return f"a {type(value).__name__}"
        if len(value) <= MAX_ECHO:
            return value
        return f"{value[:MAX_ECHO]}… ({len(value)} characters)"
    if len(value) <= MAX_ECHO:
        return repr(value)
    return f"{value[:MAX_ECHO]!r}… ({len(value)} characters)"
