"""``rwb``: the command line. One parser, one error policy, one module per command group.

Error policy, for every command: bad input — a usage error (missing argument, unknown command
or flag, a value of the wrong type), an invalid dataset, a ``ValueError`` / ``OSError`` from
the library — exits 2 with ONE line ``rwb: error: …`` on stderr and no traceback. Anything
else is a bug, reported the same way (``RWB_DEBUG=1`` shows its traceback). Ctrl-C exits 130
with ``rwb: interrupted``, SIGTERM 143 with ``rwb: terminated``: both unwind the command (its
temporaries are removed on the way) and print nothing else; the signal is raised only where
the main thread runs the workbench's own code, never inside a native library's callback, and
once the command has returned no signal can kill the process (``eval.cli.interrupts``).
Progress: ``eval.progress`` — each step named as it starts, bars where it counts (stderr, only
on a terminal, never with ``--quiet``).

Modules: ``engine`` (index, search, show, pipelines, validate), ``experiment`` (eval,
report), ``sweep`` (sweep, tune), ``learn`` (learn), ``holes`` (holes), ``importing``
(import), ``judging`` (judge), ``export`` (export), ``check`` (snapshot, check); shared options and checks in ``_common``.
"""

from __future__ import annotations

import os
import signal
import sys


def _early(signum, frame) -> None:
    """A signal while the program is still importing: nothing was written yet, so it ends here,
    with the command's status and one line."""
    os.write(2, b"rwb: interrupted\n" if signum == signal.SIGINT else b"rwb: terminated\n")
    os._exit(130 if signum == signal.SIGINT else 143)


if os.path.basename(sys.argv[0]) == "rwb" or sys.argv[0] == "-m":
    # run as the program (``rwb``, ``python -m eval.cli``: runpy imports this package before
    # ``__main__``, with argv[0] "-m"), not imported by another program: from here until
    # ``main`` installs ``eval.cli.interrupts``, a signal ends the process in one line
    for _signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_signum, _early)

import argparse  # noqa: E402
import threading  # noqa: E402
import warnings  # noqa: E402

from eval import progress  # noqa: E402
from eval.cli import interrupts  # noqa: E402
from eval.cli._errors import dataset_error as _dataset_error  # noqa: E402
from eval.cli._errors import one_line as _one_line  # noqa: E402
from eval.cli.interrupts import Terminated  # noqa: E402
from retrieval.dataset import DatasetError  # noqa: E402


class UsageError(Exception):
    """A command line argparse refused; its message is one line."""


class Parser(argparse.ArgumentParser):
    """argparse, with usage errors raised (and so reported as one line) instead of printed."""

    def error(self, message: str):
        where = self.prog.removeprefix("rwb").strip()
        raise UsageError(f"{where}: {message}" if where else message)


LONG = ("index", "search", "context", "eval", "report", "sweep", "tune", "learn", "holes", "export", "snapshot",
        "check")
"""Commands whose first step (loading the indexes' and the metrics' libraries) can take seconds."""


def _first_step(argv: list[str] | None) -> None:
    """Name the step before the command modules (LanceDB, Tantivy, ranx, numba) are first imported,
    which on a loaded machine takes seconds with nothing on the screen."""
    words = sys.argv[1:] if argv is None else argv
    command = next((w for w in words if not w.startswith("-")), None)
    imported = "eval.cli.experiment" in sys.modules
    if command in LONG and not {"-h", "--help"} & set(words) and not imported:
        progress.set_quiet("--quiet" in words)
        progress.step(f"starting rwb {command} (loading its libraries)")


def build_parser() -> Parser:
    from eval.cli import check, engine, experiment, export, holes, importing, judging, learn, sweep

    parser = Parser(prog="rwb", description="Retrieval Workbench: index, search, evaluate and tune retrieval "
                                            "fusion on a labelled dataset.")
    parser.add_argument("--quiet", action="store_true", help="no progress bars, no warnings (errors still print)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in (engine, experiment, sweep, learn, holes, importing, judging, export, check):
        group.register(sub)
    return parser


def fail(message: str, status: int = 2) -> int:
    from eval.reports.markup import printable  # a name in the message cannot drive the terminal

    print(f"rwb: error: {printable(message)}", file=sys.stderr)
    return status


def _on_sigterm(signum, frame):
    raise Terminated()


_swallowed: list[int] = []
"""Signals whose exception a finaliser swallowed (see ``_unraisable``), not yet reported."""
_again: list[threading.Timer] = []
_hooks: list = [sys.__unraisablehook__]
"""The hooks ``main`` replaced (the innermost last): they report every other unraisable error."""


def _unraisable(hook_args) -> None:
    """An interrupt that lands in a ``__del__`` or a weakref callback is "ignored" by Python: it
    would print a traceback and let the command run on. Instead it is kept quiet, delivered again
    once the finaliser has returned, and reported by ``_main`` if the command ends first."""
    error = hook_args.exc_value
    if not isinstance(error, (KeyboardInterrupt, Terminated)):
        _hooks[-1](hook_args)
        return
    signum = signal.SIGTERM if isinstance(error, Terminated) else signal.SIGINT
    _swallowed.append(signum)
    again = threading.Timer(0.05, os.kill, (os.getpid(), signum))
    again.daemon = True
    _again.append(again)
    again.start()


def _felt() -> None:
    """The interrupt was reported: forget the swallowed ones, deliver nothing again."""
    _swallowed.clear()
    while _again:
        _again.pop().cancel()


def _interrupted(status: int, message: str, standalone: bool) -> int:
    """One line for an interrupt; a second signal during shutdown is ignored (no traceback
    from an interpreter's exit) when ``rwb`` runs as its own process."""
    print(message, file=sys.stderr)
    if standalone:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        # CPython marks a KeyboardInterrupt that leaves an exec() of source text (dataclasses and
        # namedtuple build their methods that way) as unhandled, and at exit kills the process with
        # SIGINT instead of returning our status, even though we caught it. Running source text
        # again clears that mark.
        exec("None", {})
    return status


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LANCEDB_LOG", "error")
    if threading.current_thread() is not threading.main_thread():
        return _main(argv, False)
    standalone = argv is None
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    if standalone:
        interrupts.install()
    else:
        signal.signal(signal.SIGTERM, _on_sigterm)
        if previous[0] in (signal.SIG_DFL, None):  # a parent or a library reset it
            signal.signal(signal.SIGINT, signal.default_int_handler)
    _felt()  # nothing left over from an earlier call in this process
    _hooks.append(sys.unraisablehook)
    sys.unraisablehook = _unraisable
    try:
        status = _main(argv, standalone)
        if standalone:  # a signal from here on ends the process with its status and one line
            late = interrupts.close()
            if late and status not in (130, 143):
                status = _interrupted(*({signal.SIGINT: (130, "rwb: interrupted"),
                                         signal.SIGTERM: (143, "rwb: terminated")}[late]), True)
    finally:
        sys.unraisablehook = _hooks.pop()
    if not standalone:  # called in-process: leave the caller's handlers as they were
        signal.signal(signal.SIGINT, previous[0] if previous[0] is not None else signal.SIG_DFL)
        signal.signal(signal.SIGTERM, previous[1] if previous[1] is not None else signal.SIG_DFL)
    return status


def _flush_warnings(show: bool) -> None:
    """``_common.flush_warnings`` when a command has loaded it (none did otherwise)."""
    common = sys.modules.get("eval.cli._common")
    if common is not None:
        common.flush_warnings(show)


def _main(argv: list[str] | None, standalone: bool) -> int:
    _flush_warnings(False)  # nothing left over from an earlier call in this process
    try:
        _first_step(argv)
        args = build_parser().parse_args(argv)
        quiet = bool(getattr(args, "quiet", False))
        progress.set_quiet(quiet)
        with warnings.catch_warnings():
            if quiet:  # --quiet: no warning of ours or of a library; errors still print
                warnings.simplefilter("ignore")
            status = args.func(args)
        _flush_warnings(status in (0, 1) and not quiet)  # after the figures they are about; never beside an error
        if _swallowed:  # interrupted inside a finaliser, and the command ended before it was felt
            raise (Terminated() if _swallowed[-1] == signal.SIGTERM else KeyboardInterrupt())
        return status
    except UsageError as error:
        return fail(_one_line(error))
    except DatasetError as error:
        return fail(_dataset_error(error))
    except (ValueError, OSError, RuntimeError) as error:
        if isinstance(error, BrokenPipeError):  # `rwb pipelines | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        return fail(_one_line(error) or type(error).__name__)
    except KeyboardInterrupt:
        _felt()
        return _interrupted(130, "rwb: interrupted", standalone)
    except Terminated:
        _felt()
        return _interrupted(143, "rwb: terminated", standalone)
    except Exception as error:  # last resort: a bug, still one line
        if os.environ.get("RWB_DEBUG"):
            raise
        return fail(f"internal error: {type(error).__name__}: {_one_line(error)} (RWB_DEBUG=1 shows the traceback)")
