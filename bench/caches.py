"""What each memo buys: a path timed with the memo as it is and with it bypassed.

A memo is *bypassed* by swapping, while the "off" contestant runs, what refers to it: a key of
the values a candidate table keeps (``Candidates.derived``) by a method that calls ``build()``
for that key and keeps all others; the table's per-depth visibility (``Candidates.at_depth``)
by ``Candidates.visibility``, which makes it afresh; a module-level function keeping its value
(the metric plan, the document table, the DCG discount table) by one that rebuilds it; a
``functools`` LRU by the function it wraps (``__wrapped__``). The code of
the path is otherwise the same, so "off" is what the path costs once that memo is deleted. The
memos a path consults are found by running it once (warm) with recording stand-ins; each memo
is timed on the paths that consult it:

- knob: a Tune knob move on devmem — ``evaluate_config`` then ``ranked`` of its fused scores
  (the ranked run the page renders) — once for each preset that consults the memo;
- rescore: ``evaluate_config`` alone for the same presets (``bench/rescore.py``'s figure);
- batch: ``eval.metrics.measure.config_values`` over the sweep benchmark's 21-point grid
  (judgments computed beforehand), as one batch of a sweep;
- sweep: ``eval.search.sweep.sweep`` of both grids (judging, folds, cross-validation);
- eval: ``eval.experiments.experiment.run_experiment`` (``rwb eval``: rrf and weighted
  against vector), every memo off at once, full mode only (a call takes about a second);
- search: ``retrieval.pipeline.search`` of one free-text query with rrf (full mode; quick
  mode, which does not open the index, times ``doc_table`` alone: what a miss adds to it);
- router: ``eval.learning.router.evaluate_learned_router`` (``rwb eval``'s learned-router
  section, the Evaluate page's on every set of pipelines compared), full mode only.

On and off alternate (``bench.common.interleaved``), ``INNER`` passes over the path per call;
the figure is the median. The ratio is off / on: above 1 the memo pays. On this shared machine
the medians cannot tell a few per cent from noise, so each row also times the builds a bypassed
pass runs (``_misses``: the work the memo saves, measured alone) and gives their share of the
fastest pass with the memo on.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from bench.common import Section, interleaved, loadavg, log, median, ms, ratio
from bench.context import Context, eval_datasets
from bench.data import pool

KNOB_PRESETS = ("rrf", "weighted", "wsum", "openclaw", "seed-salience", "adaptive", "combmnz")
SEARCH_TEXT = "how is the tokenizer configured"
INNER = 8
"""Passes over a path per timed call (20 in full mode): calls of tens of milliseconds, so that
a slow spell of this shared machine is averaged within a call rather than deciding it."""
PAYS = 1.10
"""Off / on above this on some path: the memo pays (below it, the medians of this shared
machine do not tell a difference from noise)."""
SHARE = 0.01
"""Or: its misses, timed alone, cost at least this share of the fastest pass with it on."""


def _where(target) -> list[tuple[object, str]]:
    """Every module-level name in ``retrieval`` and ``eval`` bound to ``target``."""
    found = []
    for module in list(sys.modules.values()):
        if not (getattr(module, "__name__", "") or "").startswith(("retrieval", "eval")):
            continue
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is target:
                found.append((module, name))
    return found


_BUILDS: list[float] | None = None
"""While a list: the seconds of every build a bypassed memo runs (``_built``) are added to it."""


def _built(build: Callable[[], object]):
    """``build()``, timed into ``_BUILDS`` when that is a list."""
    if _BUILDS is None:
        return build()
    start = time.perf_counter()
    value = build()
    _BUILDS.append(time.perf_counter() - start)
    return value


def _timing(fn):
    """``fn`` with each call timed into ``_BUILDS`` (a bypassed memo's function)."""
    def timed(*args, **kwargs):
        return _built(lambda: fn(*args, **kwargs))
    return timed


class _Names:
    """The names bound to one function, found once (outside every timed call), and set at will."""

    def __init__(self, target):
        self.target, self.places = target, _where(target)

    def set(self, value) -> None:
        for module, name in self.places:
            setattr(module, name, value)

    @contextlib.contextmanager
    def bound_to(self, value):
        self.set(value)
        try:
            yield
        finally:
            self.set(self.target)


@dataclass
class Memo:
    """One memo: its name, where it lives, and how to bypass or record it."""

    name: str
    where: str
    off: Callable[[], contextlib.AbstractContextManager]
    record: Callable[[set], contextlib.AbstractContextManager]
    paths: list[str] = field(default_factory=list)


class _Keys:
    """``Candidates.derived``'s stand-in, put in place while any of its keys is bypassed or
    recorded: a bypassed key calls ``build()``, a recorded one is noted; every other call goes
    through."""

    def __init__(self):
        from retrieval.candidate_table import Candidates

        self.owner = Candidates
        self.original = Candidates.derived
        self.off: dict[str, int] = {}
        self.noted: dict[str, tuple[str, set]] = {}
        self.users = 0
        keys = self

        def call(table, key, build, along=None):
            label = key if isinstance(key, str) else key[0]  # a key's name: its first item
            if label in keys.noted:
                name, seen = keys.noted[label]
                seen.add(name)
            if keys.off.get(label):
                return _built(build)
            return keys.original(table, key, build, along)
        self.stand_in = call

    @contextlib.contextmanager
    def using(self, enter: Callable[[], None], leave: Callable[[], None]):
        if not self.users:
            self.owner.derived = self.stand_in
        self.users += 1
        enter()
        try:
            yield
        finally:
            leave()
            self.users -= 1
            if not self.users:
                self.owner.derived = self.original


def _keyed(keys: _Keys, name: str, where: str, label: str) -> Memo:
    """A key of the values a candidate table keeps (``Candidates.derived``), by its label."""
    def off():
        return keys.using(lambda: keys.off.__setitem__(label, keys.off.get(label, 0) + 1),
                          lambda: keys.off.__setitem__(label, keys.off[label] - 1))

    def record(seen):
        return keys.using(lambda: keys.noted.__setitem__(label, (name, seen)),
                          lambda: keys.noted.pop(label))

    return Memo(name, where, off, record)


def _depths(name: str, where: str) -> Memo:
    """The per-depth visibility a table keeps (``Candidates.at_depth``): off makes it afresh on
    every call (``Candidates.visibility``), so the mask is a new array and the values kept along
    it (normalised and weighted paths, the visible index) are made afresh as well."""
    from retrieval.candidate_table import Candidates

    kept = Candidates.at_depth

    @contextlib.contextmanager
    def swapped(value):
        Candidates.at_depth = value
        try:
            yield
        finally:
            Candidates.at_depth = kept

    def record(seen):
        def noting(table, depth):
            seen.add(name)
            return kept(table, depth)
        return swapped(noting)

    return Memo(name, where, lambda: swapped(lambda table, depth: _built(lambda: table.visibility(depth))),
                record)


def _lru(name: str, where: str, fn) -> Memo:
    """A ``functools.lru_cache``: off is the function it wraps."""
    names = _Names(fn)

    def record(seen):
        def noting(*args, **kwargs):
            seen.add(name)
            return fn(*args, **kwargs)
        return names.bound_to(noting)

    return Memo(name, where, lambda: names.bound_to(_timing(fn.__wrapped__)), record)


def _function(name: str, where: str, fn, fresh) -> Memo:
    """A function keeping its result in a module global: off is ``fresh``, which rebuilds it."""
    names = _Names(fn)

    def record(seen):
        def noting(*args, **kwargs):
            seen.add(name)
            return fn(*args, **kwargs)
        return names.bound_to(noting)

    return Memo(name, where, lambda: names.bound_to(_timing(fresh)), record)


def _fresh_discounts(n: int) -> np.ndarray:
    """``eval.metrics.measure.discounts`` without its module-level table: built on every call."""
    return np.log2(np.arange(max(n, 64)) + 2.0)


def memos() -> list[Memo]:
    """Every library memo on a path measured here."""
    import eval.metrics.measure as measure
    import eval.search.sweep as sweep_mod
    from retrieval import params

    from retrieval import candidates

    keyed = [
        ("normalised path", "fusion._base.normalise", "normalise"),
        ("weighted paths", "fusion.weighted.weighted", "weighted"),
        ("judged qrels", "measure.judge", "judged"),
        ("learned routes", "learning.router.cross_val_routes", "learned routes"),
    ]
    keys = _Keys()
    out = [_depths("visibility per depth", "Candidates.at_depth (mask, index, visible tie order)")]
    out += [_keyed(keys, *row) for row in keyed]
    out += [
        _function("metric plan", "measure._plan (Judged.plans)", measure._plan, measure.plan_of),
        _function("document table", "candidates.doc_table (Dataset.prepared)", candidates.doc_table,
                  candidates._build_doc_table),
        _lru("fold split", "search.sweep._folds (lru_cache)", sweep_mod._folds),
        _lru("declared fields", "params._declared (lru_cache)", params._declared),
        _function("DCG discounts", "measure.discounts (_DISC)", measure.discounts,
                  _fresh_discounts),
    ]
    return out


@contextlib.contextmanager
def _all_off(items: list[Memo]):
    with contextlib.ExitStack() as stack:
        for memo in items:
            stack.enter_context(memo.off())
        yield


def _timed(on: Callable[[], object], off: Callable[[], object], repeats: int) -> dict:
    """Median and fastest seconds per call of ``on`` and ``off``, alternating."""
    times = interleaved({"on": on, "off": off}, repeats)
    return {"on": median(times["on"]), "off": median(times["off"]),
            "best_on": min(times["on"]), "best_off": min(times["off"])}


def _misses(memo: Memo, fn: Callable[[], object], passes: int) -> tuple[int, float]:
    """Builds per pass with ``memo`` bypassed, and the seconds they take per pass (the median
    build times their number, so that one slow spell does not count)."""
    global _BUILDS
    _BUILDS = []
    try:
        with memo.off():
            fn()
        builds = _BUILDS
    finally:
        _BUILDS = None
    return len(builds) // passes, median(builds) * len(builds) / passes if builds else 0.0


def _row(t: dict, passes: int) -> dict:
    """Per pass: on and off (medians), their ratio, and the ratio of the fastest calls."""
    return {"on_ms": ms(t["on"] / passes), "off_ms": ms(t["off"] / passes),
            "off_over_on": round(ratio(t["off"], t["on"]), 3),
            "best_off_over_on": round(ratio(t["best_off"], t["best_on"]), 3)}


def run(ctx: Context) -> Section:
    from eval.experiments.experiment import run_experiment
    from eval.experiments.live import evaluate_config
    from eval.metrics.measure import config_values, judge
    from eval.search.space import ParamSpec, Space, SumConstraint
    from eval.search.sweep import sweep
    from retrieval import candidates
    from retrieval.fusion.weighted import WeightedParams
    from retrieval.pipeline import PIPELINES, PipelineConfig, ranked
    from bench.sweep import _grid_configs

    section = Section("caches")
    repeats = ctx.pick(11, 21, smoke=1)
    name, path = next(iter(eval_datasets(ctx).items()))
    dataset, c = pool(path)
    judged = judge(c, dataset.qrels)
    items = memos()
    presets = {label: PIPELINES[label] for label in KNOB_PRESETS
               if PIPELINES[label].path_depth <= c.pool_depth}
    base_w = PipelineConfig("wsum-minmax", "weighted", depth=20,
                            params=WeightedParams(text_norm="minmax"))
    space_w = Space((ParamSpec("weighted.vector_weight", 0.0, 1.0, 0.1),
                     ParamSpec("weighted.text_weight", 0.0, 1.0, 0.1)),
                    (SumConstraint(("weighted.vector_weight", "weighted.text_weight"), 1.0),))
    space_r = Space((ParamSpec("rrf.rrf_k", 10.0, 100.0, 10.0),))
    folds = max(2, min(5, judged.n_judged))
    inner = ctx.pick(INNER, 20, smoke=1)

    def knob(configs):
        def call():
            for _ in range(inner):
                for config in configs:
                    ranked(evaluate_config(c, judged, config).fused)
        return call

    def rescore(configs):
        def call():
            for _ in range(inner):
                for config in configs:
                    evaluate_config(c, judged, config)
        return call

    def batch():
        for _ in range(inner):
            for _values in config_values(c, judged, _grid_configs(), "ndcg@5"):
                pass

    def sweeps():
        for _ in range(inner):
            sweep(c, dataset.qrels, base_w, space_w, "ndcg@5", folds=folds)
            sweep(c, dataset.qrels, PIPELINES["rrf"], space_r, "ndcg@5", folds=folds)

    def experiment():
        run_experiment(c, dataset, ["rrf", "weighted"], "vector")

    if ctx.full:  # opening the index loads the embedding model: seconds, so full mode only
        from retrieval.index import open_index
        from retrieval.pipeline import search as answer

        handle = open_index(dataset, "minilm")

        def search():
            for _ in range(inner):
                answer(handle, SEARCH_TEXT, "rrf")
    else:
        def search():
            for _ in range(inner):
                candidates.doc_table(dataset)  # through the module: the name a bypass swaps

    # which memo each path consults (one recorded pass each)
    consulted: dict[str, set] = {}

    def consults(label: str, fn) -> set:
        fn()  # warm: what the first call alone builds is not a memo the path consults again
        seen: set = set()
        with contextlib.ExitStack() as stack:
            for memo in items:
                stack.enter_context(memo.record(seen))
            fn()
        consulted[label] = seen
        return seen

    for label, config in presets.items():
        consults(f"knob:{label}", knob([config]))
    others = (("batch", batch), ("sweep", sweeps), ("search", search))
    if ctx.full:  # a bypassed call refits five models (about a second): full mode only
        from eval.learning.router import evaluate_learned_router, labels_of, query_vectors

        labels, vectors = labels_of(dataset.queries), query_vectors(c)

        def router():
            evaluate_learned_router(c, dataset.qrels, labels, vectors)

        others += (("router", router),)
    for label, fn in others:
        consults(label, fn)
    log(f"caches {name}: {c.n_queries} queries, {c.n_rows} rows, {len(items)} memos, "
        f"{repeats} repeats")

    rows = {}
    load_start = loadavg()
    for memo in items:
        knob_configs = [config for label, config in presets.items()
                        if memo.name in consulted[f"knob:{label}"]]
        paths = {}
        if knob_configs:
            paths["knob"] = knob(knob_configs)
            paths["rescore"] = rescore(knob_configs)
        for label, fn in others:
            if memo.name in consulted[label]:
                paths[label] = fn
        row = {"where": memo.where, "paths": {}}
        for label, fn in paths.items():
            def off(fn=fn, memo=memo):
                with memo.off():
                    fn()
            row["paths"][label] = entry = _row(t := _timed(fn, off, repeats), inner)
            builds, seconds = _misses(memo, fn, inner)
            entry.update(builds_per_pass=builds, miss_ms=ms(seconds),
                         miss_share=round(ratio(seconds, t["best_on"] / inner), 4))
            if label in ("knob", "rescore"):
                row["paths"][label]["presets"] = [config.name for config in knob_configs]
        best = max((p["off_over_on"] for p in row["paths"].values()), default=float("nan"))
        share = max((p["miss_share"] for p in row["paths"].values()), default=float("nan"))
        row["verdict"] = ("pays" if best > PAYS or share >= SHARE else "no measurable gain"
                          if row["paths"] else "not on these paths")
        rows[memo.name] = row
        key = memo.name.lower().replace(' ', '_').replace('-', '_')
        if row["paths"]:  # a memo on none of this mode's paths has no figure here
            section.ratios[f"cache_{key}"] = best
        log(f"  {memo.name}: " + ", ".join(
            f"{k} {v['on_ms']} → {v['off_ms']} ms "
            f"({v['off_over_on']}×, fastest {v['best_off_over_on']}×; misses {v['miss_ms']} ms, "
            f"{v['miss_share']:.1%})"
            for k, v in row["paths"].items()) + f" → {row['verdict']}")

    # every memo off at once, on each path (rwb eval in full mode only: a call takes about a second)
    everything = {}
    whole = [("knob", knob(list(presets.values())), repeats), ("batch", batch, repeats),
             ("sweep", sweeps, repeats)]
    if ctx.full:
        whole.append(("eval", experiment, 5))
    for label, fn, n in whole:
        def off(fn=fn):
            with _all_off(items):
                fn()
        everything[label] = _row(_timed(fn, off, n), 1 if label == "eval" else inner)
        section.ratios[f"cache_all_off_{label}"] = everything[label]["off_over_on"]
        log(f"  all memos off, {label}: {everything[label]['on_ms']} → "
            f"{everything[label]['off_ms']} ms")
    section.figures[name] = {"queries": c.n_queries, "rows": c.n_rows, "memos": rows,
                             "all_off": everything, "loadavg": [load_start, loadavg()],
                             "when": time.strftime("%H:%M:%S")}
    section.notes.append(f"off / on per memo and path (median of {repeats} alternating calls, "
                         f"{inner} passes each; 'fastest': the ratio of the fastest calls; misses: "
                         f"the builds of one bypassed pass, timed alone, and their share of the "
                         f"fastest pass with the memo on); a memo pays above {PAYS} or {SHARE:.0%}")
    return section
