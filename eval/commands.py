"""Harness commands of ``rwb``: eval, sweep, report."""


def add_commands(sub) -> None:
    """Register ``rwb eval``, ``rwb sweep`` and ``rwb report``."""
