"""Progress for long command-line work on stderr: named steps and tqdm bars, one bar per stage.

``step(name)`` names the step that starts now (``rwb: loading the candidate pool…``), so no
wait goes without a word; a bar follows where the step counts something. Silent when stderr is
not a terminal (pipes, CI, the workbench) or after ``set_quiet(True)`` (``rwb --quiet``).
Library functions take a ``progress`` (or ``step``) callback and never draw bars themselves;
``Progress`` is that callback.
"""

from __future__ import annotations

import sys
from typing import Iterable

_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence every bar of this process (``--quiet``)."""
    global _quiet
    _quiet = bool(quiet)


def quiet() -> bool:
    """Whether ``--quiet`` was given: no bars, no steps, no warnings (errors still print)."""
    return _quiet


def enabled() -> bool:
    return not _quiet and sys.stderr.isatty()


def step(name: str) -> None:
    """Name the step that starts now: one line ``rwb: name…`` on stderr, written at once (through
    tqdm, so an open bar is redrawn below it, not overwritten)."""
    if not enabled():
        return
    from tqdm import tqdm

    tqdm.write(f"rwb: {name}…", file=sys.stderr)
    sys.stderr.flush()


class Progress:
    """``progress(stage, done, total)`` — one tqdm bar per stage; a context manager closing them.

    ``progress.stage(name)`` gives the ``(done, total)`` form that evaluations and sweeps take."""

    def __init__(self, unit: str = "it"):
        self.unit = unit
        self._bars: dict[str, object] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not enabled():
            return
        from tqdm import tqdm

        bar = self._bars.get(stage)
        if bar is None:
            bar = self._bars[stage] = tqdm(total=total, desc=stage, unit=self.unit, file=sys.stderr,
                                           leave=False, mininterval=0.2)
        bar.n = done
        bar.refresh() if done >= total else bar.update(0)

    def stage(self, name: str):
        return lambda done, total: self(name, done, total)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()


def iterate(items: Iterable, desc: str, total: int | None = None, unit: str = "it") -> Iterable:
    """``items`` wrapped in a tqdm bar when bars are enabled; the bare iterable otherwise."""
    if not enabled():
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, total=total, unit=unit, file=sys.stderr, leave=False)
