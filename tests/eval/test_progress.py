"""``eval.progress``: a named step is one line on stderr at once on a terminal, nothing in a pipe
or with ``--quiet``; an open bar is not overwritten by it."""

from __future__ import annotations

import io
import sys

from eval import progress


class Terminal(io.StringIO):
    """A stderr that says it is a terminal (what a user's shell gives ``rwb``)."""

    def isatty(self) -> bool:
        return True


def stderr_on(monkeypatch, stream: io.StringIO, quiet: bool = False) -> io.StringIO:
    """``stream`` as sys.stderr for this test (set in the test itself: pytest's capture puts its
    own back between a fixture's setup and the test)."""
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(progress, "_quiet", False)
    progress.set_quiet(quiet)
    return stream


def test_a_step_is_one_named_line_on_a_terminal(monkeypatch):
    out = stderr_on(monkeypatch, Terminal())
    progress.step("loading dataset datasets/devmem")
    progress.step("scoring 2 pipelines on 40 queries")
    assert out.getvalue() == ("rwb: loading dataset datasets/devmem…\n"
                              "rwb: scoring 2 pipelines on 40 queries…\n")


def test_a_step_is_silent_in_a_pipe(monkeypatch):
    out = stderr_on(monkeypatch, io.StringIO())   # not a terminal: CI, `rwb eval … 2> log`, pages
    progress.step("loading dataset x")
    assert out.getvalue() == ""


def test_a_step_is_silent_with_quiet(monkeypatch):
    out = stderr_on(monkeypatch, Terminal(), quiet=True)
    progress.step("loading dataset x")
    assert out.getvalue() == ""


def test_a_step_during_a_bar_keeps_its_own_line(monkeypatch):
    out = stderr_on(monkeypatch, Terminal())
    with progress.Progress("doc") as bar:
        bar("embed", 3, 10)
        progress.step("scoring")
        bar("embed", 10, 10)
    lines = out.getvalue().replace("\r", "\n").splitlines()
    at = lines.index("rwb: scoring…")                       # whole, not glued to the bar's text
    assert any(line.startswith("embed:") for line in lines[at + 1:])      # the bar, redrawn below
