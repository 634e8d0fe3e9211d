"""The one line an error becomes (``rwb: error: <line>``): shared by the command line's error
policy (``eval.cli``) and by ``rwb check``, whose JUnit report and summary carry the same line."""

from __future__ import annotations

from retrieval.dataset import DatasetError


def one_line(text) -> str:
    """The first non-blank line of ``text``, stripped ("" when there is none)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def dataset_error(error: DatasetError) -> str:
    """``invalid dataset: <first problem> (and N more; …)``."""
    first = one_line(error.problems[0]) if error.problems else "invalid dataset"
    more = len(error.problems) - 1
    return f"invalid dataset: {first}" + (f" (and {more} more; `rwb validate` lists them all)" if more > 0 else "")


def error_line(error: BaseException) -> str:
    """What ``rwb: error:`` says for ``error`` (a bad input: a ``DatasetError``, a ``ValueError``,
    an ``OSError``)."""
    if isinstance(error, DatasetError):
        return dataset_error(error)
    return one_line(error) or type(error).__name__
