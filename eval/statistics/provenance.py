"""Where a configuration's figures come from: the one owner of the "in-sample" label.

A configuration chosen or fitted on a dataset's queries — ``rwb tune``'s or ``rwb learn``'s
file (its ``[tuning]`` table), a sweep's or a tuning's winner applied from the Sweep page, a
learned model applied from the Learn mode — scores those same queries optimistically: every
figure computed on them is **in-sample**. Its honest figure is the held-out one of the
procedure that chose it (nested or plain cross-validation), when there is one.

``Provenance`` records that: the dataset whose queries chose it (its fingerprint), how, and the
held-out gain with its p against what. Every surface that shows a figure of a configuration
(Tune's cards, Evaluate's columns, ``rwb eval``, reports, exports' comments) asks
``in_sample(...)`` and shows ``Provenance.tag`` / ``note`` / ``headline``; none decides it on
its own.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from eval.statistics.significance import fmt_p

TAG = "in-sample"


@dataclass(frozen=True)
class Provenance:
    """A configuration chosen or fitted on the queries of the dataset ``fingerprint``."""

    fingerprint: str               # the dataset whose queries chose or fitted it
    how: str                       # "rwb tune", "rwb learn", "a sweep's winner", …
    held_out_delta: float | None = None   # the choosing procedure's held-out gain …
    held_out_p: float | None = None       # … its paired p …
    against: str = ""                      # … against this pipeline
    moved: bool = False            # knobs moved by hand since (the held-out figure no longer applies)

    @property
    def tag(self) -> str:
        return TAG

    def headline(self) -> str:
        """The held-out gain and p, the figure to trust ("" when none was measured or the
        configuration was moved since)."""
        if self.moved or self.held_out_delta is None or not math.isfinite(self.held_out_delta):
            return ""
        p = "" if self.held_out_p is None else f" · p {fmt_p(self.held_out_p)}"
        against = f" vs {self.against}" if self.against else ""
        return f"held-out Δ {self.held_out_delta:+.3f}{against}{p}"

    def note(self) -> str:
        """One line: why the figures are in-sample, and the held-out figure to read instead."""
        line = f"{TAG}: chosen on these queries by {self.how}"
        if self.moved:
            return line + ", then moved by hand; no held-out figure applies"
        head = self.headline()
        return line + (f"; its {head}" if head else "; no held-out figure was measured")

    def export_note(self) -> str:
        """The line a file carrying the configuration elsewhere holds (``rwb export``): which
        dataset's figures are in-sample, and the held-out figure to expect instead."""
        return f"dataset {self.fingerprint[:12]}: {self.note()}"

    def moved_by_hand(self) -> "Provenance":
        return Provenance(self.fingerprint, self.how, self.held_out_delta, self.held_out_p,
                          self.against, True)


def from_tuning(table: dict) -> Provenance | None:
    """The provenance a ``[tuning]`` table records (``rwb tune``, ``rwb learn``, a sweep)."""
    fingerprint = table.get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint:
        return None
    held, default = table.get("held_out"), table.get("held_out_default")
    delta = (float(held) - float(default)
             if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (held, default)) else None)
    p = table.get("p_vs_default")
    against = table.get("fallback") or table.get("default_pipeline") or table.get("pipeline") or ""
    return Provenance(fingerprint, str(table.get("tool") or "a tuning procedure"), delta,
                      float(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else None,
                      str(against))


def tuning_table(path: str | Path) -> dict | None:
    """The ``[tuning]`` table of a pipeline TOML file, or None (not a file, unreadable, none)."""
    path = Path(path)
    if path.suffix != ".toml" or not path.is_file():
        return None
    try:
        table = tomllib.loads(path.read_text("utf-8")).get("tuning")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return table if isinstance(table, dict) else None


def of_file(source: str | Path | None) -> Provenance | None:
    """The provenance of a pipeline TOML file (its ``[tuning]`` table), or None."""
    if not source or not isinstance(source, (str, Path)):
        return None
    table = tuning_table(source)
    return from_tuning(table) if table is not None else None


def in_sample(fingerprint: str, *known: Provenance | None, source: str | None = None) -> Provenance | None:
    """The provenance that makes figures on the dataset ``fingerprint`` in-sample: the first of
    ``known`` (a configuration handed over with one), else the ``source`` file's — None when
    the configuration was not chosen on this dataset's queries."""
    for provenance in (*known, of_file(source)):
        if provenance is not None and provenance.fingerprint == fingerprint:
            return provenance
    return None
