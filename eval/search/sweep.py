"""Grid and random search over numeric parameters of a pipeline, with k-fold cross-validation.

A pipeline's sweepable parameters are the ones its fusion and its ranking use
(``retrieval.pipeline.sweepable_params``: ``rrf.rrf_k`` on an rrf pipeline,
``adaptive.profiles.debug.quality.conf_low_factor`` on a routed adaptive one,
``candidate_multiplier``, ``min_score``, …); a parameter of another fusion is refused.

The search space (``name=lo:hi:step`` ranges, their grid, ``a+b+c=1`` sum constraints) is
``eval.search.space``'s. ``random`` draws that many distinct points of the grid, seeded.

Every configuration is scored once per query on the stored pool; folds are then only index
sets. Configurations are evaluated in batches (``config_values``): each is fused as
``run_pipeline`` fuses it, then a whole batch is ranked and scored in one compiled pass
(``eval.metrics.measure.fused_values``) without building a ``Ranking`` — the same values, bit for bit,
as ``per_query`` of each configuration's ranked run. Cross-validation: the counted queries are shuffled with ``seed`` and
split into ``folds`` parts; for each fold the candidate with the best mean on the other
folds (its training queries) is picked, and its mean on the held-out fold is reported. The
candidates are the grid's configurations and the fixed pipelines the user already has (the
start pipeline and the named presets, ``eval.search.fallback.fixed_candidates``): a grid point
is picked only where it scores strictly higher than every fixed pipeline on the training
queries, so a sweep never recommends a setting over a pipeline that was better on the queries
it looked at. The held-out means estimate how that procedure does on unseen queries; the final
recommendation is the best candidate on all queries (an in-sample, optimistic number). Ties go
to the fixed pipelines, then to the configuration enumerated first.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import numpy as np

from eval.metrics.measure import BATCH_BYTES, config_values, judge, parse_metric
from eval.search.fallback import fixed_candidates
from eval.search.space import MAX_POINTS, ParamSpec, Space, SumConstraint, not_valid, point_values
from retrieval.candidate_table import Candidates
from retrieval.pipeline import ParamError, PipelineConfig, fits, from_toml, to_toml, with_params

if TYPE_CHECKING:
    from eval.search.executors import Executor



def make_folds(n_queries: int, folds: int, seed: int,
               groups: "Sequence[str] | np.ndarray | None" = None) -> np.ndarray:
    """Fold index of each query: a seeded shuffle split into ``folds`` near-equal parts
    (read-only; the same arguments give the same array).

    ``groups`` (one label per query): queries that share a label share a fold, so a held-out
    fold holds whole groups (conversations, passages, users) and nothing learned from a group
    is scored on it. The groups, in a seeded shuffle, each go to the fold with the fewest
    queries so far (the lowest-numbered on a tie)."""
    if not isinstance(folds, int) or folds < 2:
        raise ValueError(f"--folds must be ≥ 2, got {folds}")
    if folds > n_queries:
        raise ValueError(f"--folds {folds} exceeds the number of judged queries ({n_queries})")
    if groups is None:
        return _folds(int(n_queries), folds, int(seed))
    labels = tuple(str(g) for g in groups)
    if len(labels) != n_queries:
        raise ValueError(f"{len(labels)} group labels for {n_queries} queries")
    n_groups = len(set(labels))
    if folds > n_groups:
        raise ValueError(f"--folds {folds} exceeds the number of groups ({n_groups})")
    return _group_folds(labels, folds, int(seed))


QUERY_FIELDS = ("group", "scope", "intent", "lang")
"""Query fields ``query_groups`` reads by name; any other name is looked up in the query's own
extra fields (``sample_id``, ``conversation``…: what its queries.jsonl line carries)."""


def query_groups(queries, field: str) -> dict[str, str]:
    """Query id → the value of ``field``, for folds that keep each value's queries together
    (``--fold-by``); a query without a value is a group of its own."""
    field = (field or "").strip()
    if not field:
        raise ValueError("--fold-by needs a query field name, e.g. --fold-by sample_id")
    out = {}
    for q in queries:
        value = getattr(q, field) if field in QUERY_FIELDS else (q.extra or {}).get(field)
        if value not in (None, ""):
            out[q.id] = f"{field}={value}"
    if not out:
        raise ValueError(f"--fold-by {field}: no query has a value for it (fields: "
                         f"{', '.join(QUERY_FIELDS)} or a key of the queries' JSON lines)")
    return out


def group_labels(query_ids: "Sequence[str]", fold_by: "Mapping[str, str] | None") -> np.ndarray | None:
    """Each query's group for ``make_folds`` (``fold_by``: query id → group, ``query_groups``);
    a query without one is a group of its own; None when folds go by query."""
    if fold_by is None:
        return None
    return np.array([fold_by.get(q) or q for q in query_ids], dtype=object)


def group_count(groups: "Sequence[str] | np.ndarray | None", n_queries: int) -> int:
    """How many folds the queries can make at most: their groups, or the queries themselves."""
    return n_queries if groups is None else len(set(str(g) for g in groups))


@functools.lru_cache(maxsize=64)
def _group_folds(labels: tuple[str, ...], folds: int, seed: int) -> np.ndarray:
    unique = list(dict.fromkeys(labels))
    size = {g: 0 for g in unique}
    for g in labels:
        size[g] += 1
    fold_of_group: dict[str, int] = {}
    filled = np.zeros(folds, dtype=np.int64)
    for i in np.random.default_rng([seed, 1]).permutation(len(unique)):
        g = unique[int(i)]
        f = int(np.argmin(filled))
        fold_of_group[g] = f
        filled[f] += size[g]
    fold_of = np.array([fold_of_group[g] for g in labels], dtype=np.int64)
    fold_of.flags.writeable = False
    return fold_of


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
    best: dict[str, float]     # parameter values picked on the training queries ({} if ``fixed``)
    train_mean: float
    test_mean: float           # held-out fold mean of that configuration
    fixed: str = ""            # the fixed pipeline picked instead of every grid point ("": a grid point)

    @property
    def choice(self) -> str:
        """What the fold picked, as a table shows it."""
        return self.fixed or ", ".join(f"{k}={v:g}" for k, v in self.best.items())


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
    fixed: tuple[PipelineConfig, ...] = ()   # the fixed pipelines every fold also chose from
    fixed_scores: tuple[float, ...] = ()      # their means over all counted queries
    chosen_fixed: str = ""     # the fixed pipeline that beats every grid point on all queries, or ""

    def fixed_config(self, name: str) -> PipelineConfig:
        return next(cfg for cfg in self.fixed if cfg.name == name)

    @property
    def recommended(self) -> PipelineConfig:
        """What the sweep recommends: the best grid point, or the fixed pipeline that beats it."""
        return self.fixed_config(self.chosen_fixed) if self.chosen_fixed else self.best_config

    @property
    def recommended_score(self) -> float:
        if not self.chosen_fixed:
            return self.best_score
        return self.fixed_scores[[cfg.name for cfg in self.fixed].index(self.chosen_fixed)]

    @property
    def fixed_folds(self) -> int:
        """How many folds picked a fixed pipeline over every grid point."""
        return sum(1 for f in self.folds if f.fixed)

    @property
    def best_params(self) -> dict[str, float]:
        return point_values(self.space, self.points[self.best_index])

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
        """The recommended configuration as TOML."""
        return to_toml(self.recommended)

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
            "fixed": {cfg.name: score for cfg, score in zip(self.fixed, self.fixed_scores)},
            "recommended": {"name": self.recommended.name, "score": self.recommended_score,
                            "fixed": bool(self.chosen_fixed)},
            "cv": {
                "folds": len(self.folds), "train_mean": self.train_mean, "held_out_mean": self.held_out_mean,
                "per_fold": [dataclasses.asdict(f) for f in self.folds],
            },
            "points": [dict(point_values(self.space, p), score=float(s))
                       for p, s in zip(self.points, self.scores)],
            "best_toml": self.best_toml(),
        }


    def to_record(self) -> dict:
        """Everything ``from_record`` needs to show this result again (the ranges, points and
        scores exactly; the configurations as TOML): what ``eval.stores.sweeps`` keeps."""
        return {
            "specs": [dataclasses.asdict(s) for s in self.space.specs],
            "constraints": [[list(c.names), c.total] for c in self.space.constraints],
            "metric": self.metric, "mode": self.mode, "seed": self.seed, "n_queries": self.n_queries,
            "points": self.points.tolist(), "scores": self.scores.tolist(),
            "folds": [dataclasses.asdict(f) for f in self.folds], "best_index": self.best_index,
            "best_toml": to_toml(self.best_config), "base_score": self.base_score, "seconds": self.seconds,
            "dataset": self.dataset, "fingerprint": self.fingerprint,
            "fixed_tomls": [to_toml(cfg) for cfg in self.fixed], "fixed_scores": list(self.fixed_scores),
            "chosen_fixed": self.chosen_fixed,
        }


def from_record(record: dict, base: PipelineConfig) -> SweepResult:
    """The result ``SweepResult.to_record`` kept, of a sweep of ``base``; ``ValueError`` for a
    record that is not one."""
    try:
        space = Space(tuple(ParamSpec(**s) for s in record["specs"]),
                      tuple(SumConstraint(tuple(names), float(total)) for names, total in record["constraints"]))
        points = np.asarray(record["points"], dtype=np.float64).reshape(-1, len(space.specs))
        return SweepResult(
            base=base, space=space, metric=str(record["metric"]), mode=str(record["mode"]),
            seed=int(record["seed"]), n_queries=int(record["n_queries"]), points=points,
            scores=np.asarray(record["scores"], dtype=np.float64),
            folds=tuple(FoldResult(**f) for f in record["folds"]), best_index=int(record["best_index"]),
            best_config=from_toml(record["best_toml"], "a kept sweep's winner"),
            base_score=float(record["base_score"]), seconds=float(record["seconds"]),
            dataset=str(record["dataset"]), fingerprint=str(record["fingerprint"]),
            fixed=tuple(from_toml(t, "a kept sweep's fixed pipeline") for t in record.get("fixed_tomls", ())),
            fixed_scores=tuple(float(v) for v in record.get("fixed_scores", ())),
            chosen_fixed=str(record.get("chosen_fixed", "")))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"not a kept sweep ({type(error).__name__}: {error})") from None


def _batches(c: Candidates, judged, configs: Iterator[PipelineConfig], metric: str, total: int,
             executor: "Executor | None" = None, routes: tuple[str, ...] | None = None) -> Iterator[np.ndarray]:
    """``config_values`` over configurations built lazily (a million points are never all
    held as configs at once), in this process or on ``executor`` (``eval.search.executors``)."""
    per_batch = int(max(1, min(256, BATCH_BYTES // max(1, 8 * c.n_rows))))
    chunks = iter(lambda: list(itertools.islice(configs, per_batch)), [])
    if executor is not None:
        yield from executor.batches(c, judged, chunks, metric, routes)
        return
    for chunk in chunks:
        yield from config_values(c, judged, chunk, metric, routes)


def sweep(c: Candidates, qrels: dict[str, dict[str, int]], base: PipelineConfig, space: Space,
          metric: str = "ndcg@5", random: int | None = None, folds: int = 5, seed: int = 0,
          progress: Callable[[int, int], None] | None = None, name: str | None = None,
          executor: "Executor | None" = None, routes: tuple[str, ...] | None = None,
          fixed: "Mapping[str, PipelineConfig] | None" = None) -> SweepResult:
    """Score every configuration of ``space`` (or ``random`` of them) and cross-validate;
    ``executor`` (``eval.search.executors``: local or Ray) scores the configurations, this process
    everything after their per-query values; ``routes``: the learned routes
    (``retrieval.pipeline.fuse``); ``fixed``: the fixed pipelines each fold also chooses from
    (default: ``base`` and the named presets, ``eval.search.fallback.fixed_candidates``; ``{}``:
    the grid alone)."""
    parse_metric(metric)
    judged = judge(c, qrels)
    n = judged.n_judged
    if n == 0:
        raise ValueError("no query has a relevant judgment (grade > 0): nothing to tune on")
    fold_of = make_folds(n, folds, seed)
    points, mode = _points(space, random, seed)
    for point in (points[0], points[-1]):  # fail early, naming the parameter, on an invalid value
        try:
            config = with_params(base, point_values(space, point))
        except ParamError as error:
            raise not_valid(base, error) from None
        values = ", ".join(f"{k}={v:g}" for k, v in point_values(space, point).items())
        fits(config, c.pool_depth, values, "narrow the range or rerun with --pool-depth {depth}")
    fixed = dict(fixed_candidates(c, routes, base) if fixed is None else fixed)
    # the start pipeline's row, then the fixed pipelines' (the start is scored once where it is one)
    skip = int(bool(fixed) and next(iter(fixed.values())) == base)
    head = [base, *list(fixed.values())[skip:]]
    n_fold = np.bincount(fold_of, minlength=folds).astype(np.float64)
    best_train = np.full(folds, -np.inf)
    best_at = np.zeros(folds, dtype=np.int64)   # a grid point's index, or −1 − a fixed pipeline's
    best_test = np.zeros(folds)
    scores = np.empty(len(points))
    start = time.perf_counter()
    # the start pipeline and the fixed ones first, in the same batches: they need no pass of their own
    configs = itertools.chain(head, (with_params(base, point_values(space, point)) for point in points))
    i = 0
    head_rows: list[np.ndarray] = []
    for batch in _batches(c, judged, configs, metric, len(points) + len(head), executor, routes):
        if len(head_rows) < len(head):
            take = len(head) - len(head_rows)
            head_rows.extend(batch[:take])
            batch = batch[take:]
            if len(head_rows) == len(head) and fixed:
                _fold_best(judged.counted(np.stack(head_rows[1 - skip:])), fold_of, n_fold, n, -1,
                           best_train, best_at, best_test)
            if not len(batch):
                continue
        values = judged.counted(batch)
        _fold_best(values, fold_of, n_fold, n, i, best_train, best_at, best_test)
        scores[i:i + len(values)] = values.sum(axis=1) / n
        i += len(values)
        if progress:
            progress(i, len(points))
    seconds = time.perf_counter() - start
    best_index = int(np.argmax(scores))  # first maximum: ties go to the earlier configuration
    tuned = with_params(base, point_values(space, points[best_index]))
    label = name or f"{base.name}-tuned"
    summary = ", ".join(f"{k}={v:g}" for k, v in point_values(space, points[best_index]).items())
    tuned = dataclasses.replace(tuned, name=label, description=(
        f"{base.name} tuned by rwb sweep on {c.dataset} ({metric} {scores[best_index]:.4f} on {n} queries): "
        f"{summary}"))
    names = list(fixed)
    fixed_scores = tuple(float(judged.counted(row).mean()) for row in head_rows[1 - skip:])
    fold_results = tuple(
        FoldResult(f, int(n - n_fold[f]), int(n_fold[f]),
                   {} if best_at[f] < 0 else point_values(space, points[best_at[f]]),
                   float(best_train[f]), float(best_test[f]), names[-1 - best_at[f]] if best_at[f] < 0 else "")
        for f in range(folds)
    )
    top_fixed = int(np.argmax(fixed_scores)) if fixed_scores else -1
    chosen = names[top_fixed] if top_fixed >= 0 and fixed_scores[top_fixed] >= scores[best_index] else ""
    return SweepResult(
        base=base, space=space, metric=metric, mode=mode, seed=seed, n_queries=n,
        points=np.asarray(points, dtype=np.float64).reshape(len(points), len(space.specs)), scores=scores,
        folds=fold_results, best_index=best_index, best_config=tuned,
        base_score=float(judged.counted(head_rows[0]).mean()), seconds=seconds,
        dataset=c.dataset, fingerprint=c.fingerprint,
        fixed=tuple(fixed.values()), fixed_scores=fixed_scores, chosen_fixed=chosen,
    )


def _points(space: Space, random: int | None, seed: int) -> tuple[list, str]:
    """The grid points to score and the search mode ("grid" or "random")."""
    if random is None:
        if space.raw_size > 5 * MAX_POINTS:
            raise ValueError(f"the grid has {space.raw_size:,} points; use --random N or coarser steps")
        points, mode = list(space.grid()), "grid"
    else:
        points, mode = space.sample(random, seed), "random"
    if not points:
        raise ValueError("no grid point satisfies the constraints; check --param ranges and --sum")
    if len(points) > MAX_POINTS:
        raise ValueError(f"{len(points):,} configurations exceed the limit of {MAX_POINTS:,}; use --random N")
    return points, mode


def _fold_best(values: np.ndarray, fold_of: np.ndarray, n_fold: np.ndarray, n: int, offset: int,
               best_train: np.ndarray, best_at: np.ndarray, best_test: np.ndarray) -> None:
    """Fold by fold, keep the candidate of ``values`` (per query, one row each) with the best
    training mean where it beats the best so far strictly (an earlier candidate keeps a tie);
    ``offset``: the first row's index (grid points), or −1 for the fixed pipelines, whose rows are
    recorded as −1, −2, …"""
    size = len(values)
    folds = len(n_fold)
    # every candidate's per-fold sums in one bincount: (candidate, fold) slots, each summed over
    # its queries in order, as one bincount per candidate would
    slots = (np.arange(size)[:, None] * folds + fold_of[None, :]).ravel()
    fold_sum = np.bincount(slots, weights=values.ravel(), minlength=size * folds).reshape(size, folds)
    train = (values.sum(axis=1)[:, None] - fold_sum) / (n - n_fold)
    top = np.argmax(train, axis=0)  # per fold, the first best candidate of these rows
    top_train = train[top, np.arange(folds)]
    better = top_train > best_train
    best_train[better] = top_train[better]
    best_at[better] = (offset - top[better]) if offset < 0 else (offset + top[better])
    best_test[better] = fold_sum[top, np.arange(folds)][better] / n_fold[better]
