"""What every benchmark gets: the mode, the benchmark home, and state shared between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Context:
    full: bool
    home: Path
    state: dict = field(default_factory=dict)   # e.g. real vectors one benchmark encoded for another
    smoke: bool = False                          # tiny sizes, for tests/bench/test_bench_smoke.py

    @property
    def mode(self) -> str:
        return "smoke" if self.smoke else ("full" if self.full else "quick")

    def pick(self, quick, full, smoke=None):
        """A size or count by mode."""
        if self.smoke:
            return quick if smoke is None else smoke
        return full if self.full else quick


def fixture_path() -> Path:
    return Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tiny"


def eval_datasets(ctx: Context) -> dict[str, Path]:
    """Labelled query sets for re-scoring and sweeps: devmem (+ LoCoMo in full mode)."""
    from bench.data import devmem_path, locomo_grouped

    if ctx.smoke:
        return {"tiny": fixture_path()}
    out = {}
    if devmem_path():
        out["devmem"] = devmem_path()
    if ctx.full or not out:
        locomo = locomo_grouped()
        if locomo:
            out["locomo"] = locomo
    return out
