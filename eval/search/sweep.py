"""Grid and random search over numeric parameters of a pipeline, with k-fold cross-validation.

A pipeline's sweepable parameters are the ones its fusion and its ranking use
(``retrieval.pipeline.sweepable_params``: ``rrf.rrf_k`` on an rrf pipeline,
``adaptive.profiles.debug.quality.conf_low_factor`` on a routed adaptive one,
``candidate_multiplier``, ``min_score``, …); a parameter of another fusion is refused.

A parameter's values are ``lo, lo + step, …`` up to ``hi`` (``name=lo:hi:step``). A sum
constraint (``a+b+c=1``) keeps only the grid points whose values sum to the total, compared
with ``math.isclose`` — never ``==``: in floating point ``0.2 + 0.7 + 0.1`` is
``0.9999999999999999``, which is how ranx's weight grid silently loses combinations (a 3-way
grid at step 0.1 summing to 1 has C(12, 2) = 66 points; ``==`` keeps 62). ``random`` draws
that many distinct points of the same grid, seeded.

Every configuration is scored once per query on the stored pool; folds are then only index
sets. Configurations are evaluated in batches (``config_values``): each is fused as
``run_pipeline`` fuses it, then a whole batch is ranked and scored in one compiled pass
(``eval.metrics.measure.fused_values``) without building a ``Ranking`` — the same values, bit for bit,
as ``per_query`` of each configuration's ranked run. Cross-validation: the counted queries are shuffled with ``seed`` and
split into ``folds`` parts; for each fold the configuration with the best mean on the other
folds (its training queries) is picked, and its mean on the held-out fold is reported. The
held-out means estimate how a tuned configuration does on unseen queries; the final winner
is the best configuration on all queries (an in-sample, optimistic number). Ties go to the
configuration enumerated first.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import numpy as np

from eval.metrics.measure import BATCH_BYTES, config_values, judge, parse_metric
from retrieval.candidates import Candidates
from retrieval.pipeline import (PipelineConfig, fusion_fields, get_param, knobs, sweepable_params, to_toml,
                                with_fusion_fields, with_param)

if TYPE_CHECKING:
    from eval.search.executors import Executor

MAX_POINTS = 1_000_000       # configurations one sweep may evaluate
ENUMERATE_LIMIT = 200_000    # random search lists the grid up to this size, else draws points
_SPEC = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*=\s*([^:]+):([^:]+):([^:]+)\s*$")


def _is_int_param(config: PipelineConfig, name: str) -> bool:
    return next(k.knob.kind == "int" for k in knobs(config) if k.path == name)


def set_param(config: PipelineConfig, name: str, value: float) -> PipelineConfig:
    """``with_param``, validated against the pipeline's own parameters."""
    return with_param(config, name, value)


@dataclass(frozen=True)
class ParamSpec:
    """``name=lo:hi:step``: the values ``lo + i·step`` for ``i = 0 … ⌊(hi − lo)/step⌋``."""

    name: str
    lo: float
    hi: float
    step: float
    integer: bool = False

    def __post_init__(self):
        if not all(math.isfinite(v) for v in (self.lo, self.hi, self.step)):
            raise ValueError(f"--param {self.name}: lo, hi and step must be finite numbers")
        if self.lo > self.hi:
            raise ValueError(f"--param {self.name}: lo ({self.lo:g}) must be ≤ hi ({self.hi:g})")
        if not self.step > 0:
            raise ValueError(f"--param {self.name}: step must be > 0, got {self.step:g}")
        if self.integer and not all(float(v).is_integer() for v in (self.lo, self.hi, self.step)):
            raise ValueError(f"--param {self.name} is an integer parameter: lo, hi and step must be whole numbers")
        span = (self.hi - self.lo) / self.step  # inf for a 1e-320 step or a ±1e308 range
        if not math.isfinite(span) or span + 1 > MAX_POINTS:
            raise ValueError(f"--param {self}: more than {MAX_POINTS:,} values; use a larger step "
                             "or a smaller range")

    @property
    def count(self) -> int:
        """How many values, computed without listing them (at most ``MAX_POINTS``)."""
        return int(math.floor((self.hi - self.lo) / self.step + 1e-9)) + 1

    @property
    def values(self) -> tuple[float, ...]:
        n = self.count
        # rounding: 0.1·3 is 0.30000000000000004; the grid point meant is 0.3
        out = tuple(round(self.lo + i * self.step, 12) for i in range(n))
        return tuple(int(v) for v in out) if self.integer else out

    def __str__(self) -> str:
        return f"{self.name}={self.lo:g}:{self.hi:g}:{self.step:g}"


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


def numeric_param(name: str, config: PipelineConfig, verb: str = "swept") -> str:
    """``name`` when it is one of ``config``'s numeric (sweepable) parameters; otherwise a
    ``ValueError`` naming the fusion it belongs to, or listing the ones that can be ``verb``."""
    valid = sweepable_params(config)
    if name not in valid:
        get_param(config, name)  # names the fusion the parameter belongs to, or lists the valid ones
        kind = {"swept": "sweepable", "tuned": "tunable"}.get(verb, verb)
        raise ValueError(f"{name!r} cannot be {verb} (not a number); {kind}: {', '.join(valid)}")
    return name


def parse_param(text: str, config: PipelineConfig) -> ParamSpec:
    """``name=lo:hi:step`` for a sweepable parameter of ``config``."""
    match = _SPEC.match(text)
    if not match:
        raise ValueError(f"bad --param {text!r}: expected name=lo:hi:step, e.g. rrf.rrf_k=10:100:10")
    name = numeric_param(match.group(1), config)
    try:
        lo, hi, step = (float(match.group(i)) for i in (2, 3, 4))
    except ValueError:
        raise ValueError(f"bad --param {text!r}: lo, hi and step must be numbers (name=lo:hi:step)") from None
    return ParamSpec(name, lo, hi, step, _is_int_param(config, name))


def parse_sum(text: str, specs: Sequence[ParamSpec]) -> SumConstraint:
    """``a+b+c=1`` over swept parameters."""
    left, sep, right = text.partition("=")
    names = tuple(n.strip() for n in left.split("+") if n.strip())
    try:
        total = float(right)
    except ValueError:
        total = math.nan
    if not sep or len(names) < 2 or not math.isfinite(total):
        raise ValueError(f"bad --sum {text!r}: expected name+name[+…]=total, e.g. rrf.w_dense+rrf.w_sparse=1")
    swept = {s.name for s in specs}
    unknown = [n for n in names if n not in swept]
    if unknown:
        raise ValueError(f"--sum {text!r}: {unknown[0]!r} is not a swept parameter; swept: {sorted(swept)}")
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

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    @property
    def raw_size(self) -> int:
        """Grid points before constraints, computed from each axis's count (nothing listed)."""
        return math.prod(s.count for s in self.specs)

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


def make_folds(n_queries: int, folds: int, seed: int) -> np.ndarray:
    """Fold index of each query: a seeded shuffle split into ``folds`` near-equal parts
    (read-only; the same arguments give the same array)."""
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"--folds must be ≥ 2, got {folds}")
    if folds > n_queries:
        raise ValueError(f"--folds {folds} exceeds the number of judged queries ({n_queries})")
    return _folds(int(n_queries), folds, int(seed))


@functools.lru_cache(maxsize=64)
def _folds(n_queries: int, folds: int, seed: int) -> np.ndarray:
    order = np.random.default_rng([seed, 0]).permutation(n_queries)
    fold_of = np.empty(n_queries, dtype=np.int64)
    for f, part in enumerate(np.array_split(order, folds)):
        fold_of[part] = f
    fold_of.flags.writeable = False
    return fold_of


@dataclass(frozen=True)
class FoldResult:
    fold: int
    n_train: int
    n_test: int
    best: dict[str, float]     # parameter values picked on the training queries
    train_mean: float
    test_mean: float           # held-out fold mean of that configuration


@dataclass(frozen=True, eq=False)
class SweepResult:
    base: PipelineConfig
    space: Space
    metric: str
    mode: str                  # "grid" or "random"
    seed: int
    n_queries: int
    points: np.ndarray         # (n_configs, n_params) in evaluation order
    scores: np.ndarray         # (n_configs,) mean over all counted queries
    folds: tuple[FoldResult, ...]
    best_index: int
    best_config: PipelineConfig
    base_score: float          # the untuned pipeline on all counted queries
    seconds: float
    dataset: str = ""
    fingerprint: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def best_params(self) -> dict[str, float]:
        return _as_params(self.space, self.points[self.best_index])

    @property
    def best_score(self) -> float:
        return float(self.scores[self.best_index])

    @property
    def train_mean(self) -> float:
        return float(np.mean([f.train_mean for f in self.folds]))

    @property
    def held_out_mean(self) -> float:
        return float(np.mean([f.test_mean for f in self.folds]))

    @property
    def configs_per_second(self) -> float:
        return len(self.scores) / self.seconds if self.seconds > 0 else float("inf")

    def best_toml(self) -> str:
        return to_toml(self.best_config)

    def to_json(self) -> dict:
        return {
            "dataset": self.dataset, "fingerprint": self.fingerprint, "pipeline": self.base.name,
            "params": [str(s) for s in self.space.specs],
            "constraints": [str(c) for c in self.space.constraints],
            "metric": self.metric, "mode": self.mode, "seed": self.seed, "n_queries": self.n_queries,
            "n_configs": int(len(self.scores)), "seconds": round(self.seconds, 3),
            "configs_per_second": round(self.configs_per_second, 1),
            "base_score": self.base_score,
            "best": {"params": self.best_params, "score": self.best_score, "name": self.best_config.name},
            "cv": {
                "folds": len(self.folds), "train_mean": self.train_mean, "held_out_mean": self.held_out_mean,
                "per_fold": [dataclasses.asdict(f) for f in self.folds],
            },
            "points": [dict(_as_params(self.space, p), score=float(s)) for p, s in zip(self.points, self.scores)],
            "best_toml": self.best_toml(),
        }


def _as_params(space: Space, point) -> dict[str, float]:
    return {s.name: (int(v) if s.integer else float(v)) for s, v in zip(space.specs, point)}


def apply_point(base: PipelineConfig, space: Space, point) -> PipelineConfig:
    config = base
    for name, value in _as_params(space, point).items():
        try:
            config = set_param(config, name, value)
        except ValueError as error:
            raise ValueError(f"{name}={value:g} is not valid for pipeline {base.name!r}: {error}") from None
    return config


def point_setter(base: PipelineConfig, space: Space) -> Callable[[tuple], PipelineConfig]:
    """``apply_point`` for every point of one sweep. When every swept name is a field of the
    fusion's own parameters (the usual sweep), a point replaces those fields only
    (``with_fusion_fields``), once they are known to be among the pipeline's parameters."""
    fields = fusion_fields(base, space.names)
    if fields is None or not set(space.names) <= {ref.path for ref in knobs(base)}:
        return lambda point: apply_point(base, space, point)

    def setter(point) -> PipelineConfig:
        values = _as_params(space, point)
        try:
            return with_fusion_fields(base, **dict(zip(fields, values.values())))
        except ValueError:
            return apply_point(base, space, point)  # the same error, worded as with_param words it
    return setter


def _batches(c: Candidates, judged, configs: Iterator[PipelineConfig], metric: str, total: int,
             executor: "Executor | None" = None) -> Iterator[np.ndarray]:
    """``config_values`` over configurations built lazily (a million points are never all
    held as configs at once), in this process or on ``executor`` (``eval.search.executors``)."""
    per_batch = int(max(1, min(256, BATCH_BYTES // max(1, 8 * c.n_rows))))
    chunks = iter(lambda: list(itertools.islice(configs, per_batch)), [])
    if executor is not None:
        yield from executor.batches(c, judged, chunks, metric)
        return
    for chunk in chunks:
        yield from config_values(c, judged, chunk, metric)


def sweep(c: Candidates, qrels: dict[str, dict[str, int]], base: PipelineConfig, space: Space,
          metric: str = "ndcg@5", random: int | None = None, folds: int = 5, seed: int = 0,
          progress: Callable[[int, int], None] | None = None, name: str | None = None,
          executor: "Executor | None" = None) -> SweepResult:
    """Score every configuration of ``space`` (or ``random`` of them) and cross-validate;
    ``executor`` (``eval.search.executors``: local or Ray) scores the configurations, this process
    everything after their per-query values."""
    parse_metric(metric)
    judged = judge(c, qrels)
    n = judged.n_judged
    if n == 0:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to tune on")
    fold_of = make_folds(n, folds, seed)
    if random is None:
        if space.raw_size > 5 * MAX_POINTS:
            raise ValueError(f"the grid has {space.raw_size:,} points; use --random N or coarser steps")
        points = list(space.grid())
        mode = "grid"
    else:
        points = space.sample(random, seed)
        mode = "random"
    if not points:
        raise ValueError("no grid point satisfies the constraints; check --param ranges and --sum")
    if len(points) > MAX_POINTS:
        raise ValueError(f"{len(points):,} configurations exceed the limit of {MAX_POINTS:,}; use --random N")
    setter = point_setter(base, space)
    for point in (points[0], points[-1]):  # fail early, naming the parameter, on an invalid value
        config = setter(point)
        if config.path_depth > c.pool_depth:
            raise ValueError(f"{', '.join(f'{k}={v:g}' for k, v in _as_params(space, point).items())} takes "
                             f"{config.path_depth} candidates per path but the pool holds {c.pool_depth}; "
                             f"narrow the range or rerun with --pool-depth {config.path_depth}")
    n_fold = np.bincount(fold_of, minlength=folds).astype(np.float64)
    best_train = np.full(folds, -np.inf)
    best_at = np.zeros(folds, dtype=np.int64)
    best_test = np.zeros(folds)
    scores = np.empty(len(points))
    start = time.perf_counter()
    # the base pipeline first, in the same batches: its score needs no pass of its own
    configs = itertools.chain([base], (setter(point) for point in points))
    i = 0
    base_row = None
    for batch in _batches(c, judged, configs, metric, len(points) + 1, executor):
        if base_row is None:
            base_row, batch = batch[0], batch[1:]
            if not len(batch):
                continue
        values = batch[:, judged.judged]
        if judged.n_missing:
            values = np.concatenate([values, np.zeros((len(batch), judged.n_missing))], axis=1)
        size = len(values)
        total = values.sum(axis=1)
        # every configuration's per-fold sums in one bincount: (configuration, fold) slots,
        # each summed over its queries in order, as one bincount per configuration would
        slots = (np.arange(size)[:, None] * folds + fold_of[None, :]).ravel()
        fold_sum = np.bincount(slots, weights=values.ravel(), minlength=size * folds).reshape(size, folds)
        train = (total[:, None] - fold_sum) / (n - n_fold)
        top = np.argmax(train, axis=0)  # per fold, the first best configuration of the batch
        top_train = train[top, np.arange(folds)]
        better = top_train > best_train  # strictly: an earlier configuration keeps a tie
        best_train[better] = top_train[better]
        best_at[better] = i + top[better]
        best_test[better] = fold_sum[top, np.arange(folds)][better] / n_fold[better]
        scores[i:i + size] = total / n
        i += size
        if progress:
            progress(i, len(points))
    seconds = time.perf_counter() - start
    best_index = int(np.argmax(scores))  # first maximum: ties go to the earlier configuration
    tuned = setter(points[best_index])
    label = name or f"{base.name}-tuned"
    summary = ", ".join(f"{k}={v:g}" for k, v in _as_params(space, points[best_index]).items())
    tuned = dataclasses.replace(tuned, name=label, description=(
        f"{base.name} tuned by rwb sweep on {c.dataset} ({metric} {scores[best_index]:.4f} on {n} queries): "
        f"{summary}"))
    fold_results = tuple(
        FoldResult(f, int(n - n_fold[f]), int(n_fold[f]), _as_params(space, points[best_at[f]]),
                   float(best_train[f]), float(best_test[f]))
        for f in range(folds)
    )
    base_score = float(np.concatenate([base_row[judged.judged], np.zeros(judged.n_missing)]).mean())
    return SweepResult(
        base=base, space=space, metric=metric, mode=mode, seed=seed, n_queries=n,
        points=np.asarray(points, dtype=np.float64).reshape(len(points), len(space.specs)), scores=scores,
        folds=fold_results, best_index=best_index, best_config=tuned, base_score=base_score, seconds=seconds,
        dataset=c.dataset, fingerprint=c.fingerprint,
    )
