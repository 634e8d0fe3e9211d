"""Ctrl-C and SIGTERM for ``rwb`` run as its own process: raised only at a safe point.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when it runs a
signal's handler: inside a native library's callback too (a pybind11 module's call back into
Python, a LightGBM ctypes callback, a native module's import). The exception then crosses C++
code that cannot unwind it, and the process aborts ("terminate called after throwing an
instance of 'pybind11::error_already_set'"). So, while a command runs:

- The worker threads the command starts never take the signals: ``threading.Thread.start``
  starts each thread with SIGINT and SIGTERM blocked, so the kernel delivers them to the main
  thread, whose blocking waits (a future, a lock, a sleep) they interrupt.
- The handler raises (``KeyboardInterrupt`` for SIGINT, ``Terminated`` for SIGTERM) only when
  the main thread is in the workbench's own code (``eval``, ``retrieval``, the program run as
  ``__main__``), possibly below
  standard-library frames it called (a wait, a lock) and with no import in progress. Anywhere
  else (a library's code, which may have been called from native code) it notes the signal,
  and a watcher thread delivers it again every ``RETRY`` seconds until it lands in a safe place.
- ``close`` (when the command has returned): the handlers only note, then both signals are
  ignored, and a signal noted is returned, so that ``main`` ends with 130 / 143 and its one
  line instead of the process dying of the signal during the interpreter's shutdown.
"""

from __future__ import annotations

import os
import signal
import sys
import sysconfig
import threading
import time
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RETRY = 0.02


class Terminated(BaseException):
    """SIGTERM arrived: unwinds like Ctrl-C (``finally`` blocks remove temporaries)."""


_OURS = tuple(str(Path(__file__).resolve().parents[2] / name) + os.sep
              for name in ("eval", "retrieval"))
_STDLIB = tuple({str(Path(sysconfig.get_paths()[key]).resolve()) + os.sep
                 for key in ("stdlib", "platstdlib")})
_LIBRARIES = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)

_state = {"closing": False, "noted": 0, "deferred": 0, "watcher": None, "start": None,
          "program": ""}


def _kind(filename: str) -> str:
    """``ours``, ``std`` (standard library, exec'd source), ``import`` or ``library``."""
    if filename.startswith("<frozen importlib"):
        return "import"
    if filename.startswith("<"):
        return "std"
    path = os.path.realpath(filename)
    if path.startswith(_OURS) or path == _state["program"]:
        return "ours"
    if path.startswith(_STDLIB) and not any(part in path for part in _LIBRARIES):
        return "import" if f"{os.sep}importlib{os.sep}" in path else "std"
    return "library"


def safe(frame) -> bool:
    """Whether raising in ``frame`` (the main thread's innermost Python frame) unwinds through
    Python code only: the first frame outside the standard library is the workbench's own, and
    no import is in progress anywhere in the stack."""
    first = None
    while frame is not None:
        kind = _kind(frame.f_code.co_filename)
        if kind == "import":
            return False
        if first is None and kind != "std":
            first = kind
        frame = frame.f_back
    return first == "ours"


def _error(signum: int) -> BaseException:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _handler(signum, frame) -> None:
    if _state["closing"]:
        _state["noted"] = _state["noted"] or signum
        return
    if safe(frame):
        _state["deferred"] = 0
        raise _error(signum)
    _state["deferred"] = signum


def _watch() -> None:
    """Deliver a deferred signal again until the handler has raised it."""
    while True:
        time.sleep(RETRY)
        signum = _state["deferred"]
        if signum and not _state["closing"]:
            os.kill(os.getpid(), signum)


def _start_masked(self, *args, **kwargs):
    """``threading.Thread.start``, the new thread with SIGINT and SIGTERM blocked."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        return _state["start"](self, *args, **kwargs)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def install() -> None:
    """Install the handlers (main thread, at the start of a standalone command)."""
    program = getattr(sys.modules.get("__main__"), "__file__", None)
    _state.update(closing=False, noted=0, deferred=0,
                  program=os.path.realpath(program) if program else "")
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    if _state["start"] is None:
        _state["start"] = threading.Thread.start
        threading.Thread.start = _start_masked
    for signum in SIGNALS:
        signal.signal(signum, _handler)
    if _state["watcher"] is None:
        watcher = threading.Thread(target=_watch, name="rwb-signals", daemon=True)
        watcher.start()
        _state["watcher"] = watcher


def _flush() -> int:
    """Python code to run: a signal already caught has its handler called here, at the latest
    (a handler runs between two steps of the main thread's Python code)."""
    total = 0
    for step in range(3):
        total += step
    return total


def close() -> int:
    """The command returned: from now on a signal only ends the process with ``main``'s line.
    Returns the signal that arrived since (or was still deferred), 0 when none did. Both
    signals are then ignored, process-wide: a native library's thread that takes one during the
    interpreter's shutdown (when Python puts back the default action) cannot kill the process."""
    _state["closing"] = True
    _flush()
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    late = _state["noted"] or _state["deferred"]
    _state["deferred"] = 0
    return late

