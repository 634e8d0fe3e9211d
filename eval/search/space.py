"""The search space of ``rwb sweep``, ``rwb tune`` and the Sweep page: parameter ranges, their
grid, sum constraints, and a grid point's values (``point_values``) with the refusal of an
invalid one (``not_valid``).

A range is ``name=lo:hi:step`` (``--param``; ``rwb tune`` also takes ``name=lo:hi``, a
continuous range): the values ``lo, lo + step, …`` up to ``hi``. Only a pipeline's sweepable
parameters (``retrieval.pipeline.sweepable_params``) can be searched; an integer parameter's
range is whole numbers and its values are ``int``. A sum constraint (``a+b+c=1``) keeps only the
grid points whose values sum to the total, compared with ``math.isclose`` — never ``==``: in
floating point ``0.2 + 0.7 + 0.1`` is ``0.9999999999999999``, which is how ranx's weight grid
silently loses combinations (a 3-way grid at step 0.1 summing to 1 has C(12, 2) = 66 points;
``==`` keeps 62). A point is set on a configuration by ``retrieval.pipeline.with_params``, the
one setter.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from retrieval.pipeline import ParamError, PipelineConfig, get_param, knobs, sweepable_params

MAX_POINTS = 1_000_000       # values one axis, and configurations one sweep, may hold
ENUMERATE_LIMIT = 200_000    # random search lists the grid up to this size, else draws points
_RANGE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*([^:]+):([^:]+)(?::([^:]+))?\s*$")


@dataclass(frozen=True)
class ParamSpec:
    """``name=lo:hi[:step]``: the values ``lo + i·step`` for ``i = 0 … ⌊(hi − lo)/step⌋``
    (continuous when there is no step; an integer parameter steps by 1 by default)."""

    name: str
    lo: float
    hi: float
    step: float | None = None
    integer: bool = False

    def __post_init__(self):
        ends = (self.lo, self.hi) + ((self.step,) if self.step is not None else ())
        if not all(math.isfinite(v) for v in ends):
            raise ValueError(f"--param {self.name}: lo, hi and step must be finite numbers")
        if self.lo > self.hi:
            raise ValueError(f"--param {self.name}: lo ({self.lo:g}) must be ≤ hi ({self.hi:g})")
        if self.step is not None and not self.step > 0:
            raise ValueError(f"--param {self.name}: step must be > 0, got {self.step:g}")
        if self.integer and not all(float(v).is_integer() for v in ends):
            raise ValueError(f"--param {self.name} is an integer parameter: "
                             "lo, hi and step must be whole numbers")
        step = self.step if self.step is not None else (1 if self.integer else None)
        span = (self.hi - self.lo) / step if step is not None else 0.0  # inf: a 1e-320 step
        if not math.isfinite(span) or span + 1 > MAX_POINTS:
            raise ValueError(f"--param {self}: more than {MAX_POINTS:,} values; use a larger step "
                             "or a smaller range")

    def count(self) -> int:
        """How many grid values, computed without listing them (at most ``MAX_POINTS``)."""
        step = self.step if self.step is not None else (1 if self.integer else None)
        if step is None:
            raise ValueError(f"--param {self.name} has no step: the grid sampler needs lo:hi:step")
        return int(math.floor((self.hi - self.lo) / step + 1e-9)) + 1

    @property
    def values(self) -> tuple:
        """The grid values ``lo, lo + step, …`` up to ``hi``."""
        step = self.step if self.step is not None else (1 if self.integer else None)
        n = self.count()
        # rounding: 0.1·3 is 0.30000000000000004; the grid point meant is 0.3
        out = tuple(round(self.lo + i * step, 12) for i in range(n))
        return tuple(int(v) for v in out) if self.integer else out

    def grid(self) -> tuple:
        """``values`` (the name Optuna's grid sampler is fed from)."""
        return self.values

    def value(self, v) -> int | float:
        """``v`` as the parameter takes it: ``int`` for an integer parameter, else ``float``."""
        return int(v) if self.integer else float(v)

    def contains(self, value) -> bool:
        """Whether ``value`` lies in the range (on the grid, when there is a step)."""
        if value is None or isinstance(value, bool):
            return False
        if not self.lo - 1e-12 <= value <= self.hi + 1e-12:
            return False
        step = self.step if self.step is not None else (1 if self.integer else None)
        if step is None:
            return True
        at = (value - self.lo) / step
        return abs(at - round(at)) < 1e-9

    def __str__(self) -> str:
        step = f":{self.step:g}" if self.step is not None else ""
        return f"{self.name}={self.lo:g}:{self.hi:g}{step}"


def numeric_param(name: str, config: PipelineConfig, verb: str = "swept") -> str:
    """``name`` when it is one of ``config``'s numeric (sweepable) parameters; otherwise a
    ``ValueError`` naming the fusion it belongs to, or listing the ones that can be ``verb``."""
    valid = sweepable_params(config)
    if name not in valid:
        get_param(config, name)  # names the parameter's fusion, or lists the valid ones
        kind = {"swept": "sweepable", "tuned": "tunable"}.get(verb, verb)
        raise ValueError(f"{name!r} cannot be {verb} (not a number); {kind}: {', '.join(valid)}")
    return name


def _is_int(config: PipelineConfig, name: str) -> bool:
    return next(k.knob.kind == "int" for k in knobs(config) if k.path == name)


def parse_param(text: str, config: PipelineConfig, verb: str = "swept",
                optional_step: bool = False) -> ParamSpec:
    """``name=lo:hi:step`` (``name=lo:hi[:step]`` when ``optional_step``) for a sweepable
    parameter of ``config``; ``verb`` words the refusal of a parameter that is not a number."""
    form = "name=lo:hi[:step]" if optional_step else "name=lo:hi:step"
    match = _RANGE.match(text)
    if not match or (match.group(4) is None and not optional_step):
        raise ValueError(f"bad --param {text!r}: expected {form}, e.g. rrf.rrf_k=10:100:10")
    name = numeric_param(match.group(1), config, verb)
    try:
        lo, hi = float(match.group(2)), float(match.group(3))
        step = float(match.group(4)) if match.group(4) is not None else None
    except ValueError:
        raise ValueError(f"bad --param {text!r}: lo, hi and step must be numbers ({form})"
                         ) from None
    return ParamSpec(name, lo, hi, step, _is_int(config, name))


def spaced(name: str, lo: float, hi: float, steps: int, integer: bool) -> ParamSpec:
    """``lo … hi`` in ``steps`` evenly spaced values (whole numbers for an integer parameter)."""
    lo, hi = (float(min(lo, hi)), float(max(lo, hi)))
    if not math.isfinite(hi - lo):  # ±1e308 typed into an axis
        raise ValueError(f"{name}: the range {lo:g} … {hi:g} is too wide; give finite bounds")
    if integer:
        lo, hi = float(math.floor(lo)), float(math.ceil(hi))
        step = max(1.0, float(round((hi - lo) / max(1, steps - 1))))
    else:
        step = (hi - lo) / (steps - 1) if steps > 1 and hi > lo else 1.0
    return ParamSpec(name, lo, hi, step, integer)


def tunable(config: PipelineConfig) -> list[str]:
    """Parameters with a range of their own: the sweepable ones with a slider range."""
    return [k.path for k in knobs(config)
            if k.knob.sweepable and k.knob.lo is not None and k.knob.hi is not None]


def knob_space(config: PipelineConfig, names) -> tuple[ParamSpec, ...]:
    """The named sweepable parameters over their slider ranges and steps (``Knob.lo``–``hi``)."""
    ranged = set(tunable(config))
    refs = {k.path: k for k in knobs(config) if k.path in ranged}
    out = []
    for name in names:
        if name not in refs:
            raise ValueError(f"{name!r} has no range to tune for {config.name!r}; "
                             f"tunable: {', '.join(refs)}")
        knob = refs[name].knob
        out.append(ParamSpec(name, float(knob.lo), float(knob.hi),
                             float(knob.step) if knob.step else None, knob.kind == "int"))
    return tuple(out)


def point_values(specs: Sequence[ParamSpec], point) -> dict[str, int | float]:
    """A grid point as ``{name: value}``, each value as its parameter takes it."""
    return {s.name: s.value(v) for s, v in zip(specs, point)}


def not_valid(base: PipelineConfig, error: ParamError) -> ValueError:
    """A value ``with_params`` refused at a grid point, worded with the pipeline's name."""
    return ValueError(f"{error.path}={error.value:g} is not valid for pipeline {base.name!r}: {error}")


@dataclass(frozen=True)
class SumConstraint:
    """Grid points must satisfy ``Σ names = total`` (``math.isclose``, abs_tol 1e-9)."""

    names: tuple[str, ...]
    total: float

    def holds(self, values: dict[str, float]) -> bool:
        return self.holds_sum(math.fsum(values[n] for n in self.names))

    def holds_sum(self, total: float) -> bool:
        return math.isclose(total, self.total, rel_tol=1e-9, abs_tol=1e-9)

    def holds_sums(self, totals: np.ndarray) -> np.ndarray:
        """``holds_sum`` of many sums (``math.isclose``'s rule, vectorised)."""
        tolerance = np.maximum(1e-9 * np.maximum(np.abs(totals), abs(self.total)), 1e-9)
        return np.abs(totals - self.total) <= tolerance

    def __str__(self) -> str:
        return f"{'+'.join(self.names)}={self.total:g}"


def parse_sum(text: str, specs: Sequence[ParamSpec]) -> SumConstraint:
    """``a+b+c=1`` over swept parameters."""
    left, sep, right = text.partition("=")
    names = tuple(n.strip() for n in left.split("+") if n.strip())
    try:
        total = float(right)
    except ValueError:
        total = math.nan
    if not sep or len(names) < 2 or not math.isfinite(total):
        raise ValueError(f"bad --sum {text!r}: expected name+name[+…]=total, "
                         "e.g. rrf.w_dense+rrf.w_sparse=1")
    swept = {s.name for s in specs}
    unknown = [n for n in names if n not in swept]
    if unknown:
        raise ValueError(f"--sum {text!r}: {unknown[0]!r} is not a swept parameter; "
                         f"swept: {sorted(swept)}")
    return SumConstraint(names, total)


@dataclass(frozen=True)
class Space:
    """The grid of several parameters, with optional sum constraints."""

    specs: tuple[ParamSpec, ...]
    constraints: tuple[SumConstraint, ...] = ()

    def __post_init__(self):
        names = [s.name for s in self.specs]
        if not names:
            raise ValueError("no parameter to sweep; give --param name=lo:hi:step")
        if len(set(names)) != len(names):
            raise ValueError(f"a parameter is given twice: {names}")

    def __iter__(self) -> Iterator[ParamSpec]:
        return iter(self.specs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    @property
    def raw_size(self) -> int:
        return math.prod(s.count() for s in self.specs)  # counted, not listed

    def _ok(self, point: tuple, names: tuple[str, ...] | None = None) -> bool:
        values = dict(zip(names or self.names, point))
        return all(c.holds(values) for c in self.constraints)

    def grid(self) -> Iterator[tuple]:
        """Every point, in ``itertools.product`` order, that meets the constraints."""
        points = itertools.product(*(s.values for s in self.specs))
        if not self.constraints:
            yield from points
            return
        names = self.names
        if self.raw_size <= ENUMERATE_LIMIT:  # every point's sums at once
            grid = list(points)
            matrix = np.array(grid, dtype=np.float64).reshape(len(grid), len(names))
            ok = np.ones(len(grid), dtype=bool)
            for c in self.constraints:
                ok &= c.holds_sums(matrix[:, [names.index(n) for n in c.names]].sum(axis=1))
            yield from itertools.compress(grid, ok.tolist())
            return
        checks = [(tuple(names.index(n) for n in c.names), c) for c in self.constraints]
        for point in points:
            if all(c.holds_sum(math.fsum([point[i] for i in at])) for at, c in checks):
                yield point

    def sample(self, n: int, seed: int) -> list[tuple]:
        """``n`` distinct grid points drawn uniformly (all of them if the grid is smaller)."""
        if n < 1:
            raise ValueError(f"--random must be ≥ 1, got {n}")
        rng = np.random.default_rng([seed, 1])
        if self.raw_size <= ENUMERATE_LIMIT:
            points = list(self.grid())
            if n >= len(points):
                return points
            return [points[i] for i in rng.choice(len(points), size=n, replace=False)]
        values = [s.values for s in self.specs]
        seen: dict[tuple, None] = {}
        for _ in range(1000 * n):
            point = tuple(v[rng.integers(len(v))] for v in values)
            if point not in seen and self._ok(point):
                seen[point] = None
                if len(seen) == n:
                    break
        return list(seen)
