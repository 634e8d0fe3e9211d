"""How far ``rwb learn``'s held-out figure carries: to kinds of queries the procedure never saw
(leave one kind out) and to other fold seeds (stability).

- ``leave_one_kind_out``: the nested procedure (``eval.learning.nested.learn``) with folds by kind
  (intent, or any query field): each outer fold holds out every query of one kind, and the inner
  folds also hold out whole kinds, so the guard judges each model on kinds it was not fitted on.
  Its held-out figure is what the procedure gives on a kind of query that appears only later.
- ``stability``: the same procedure over several fold seeds; the held-out figure's mean,
  standard deviation and range, and the model each seed chose.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Mapping

from eval.learning.leakage import FoldGroups, fold_groups
from eval.learning.nested import MAX_FOLDS, LearnResult, learn
from eval.search.sweep import query_groups

NO_KIND = "(none)"
MAX_REPEATS = 20  # fold seeds of one run (rwb learn --repeats, the Learn mode's "Fold seeds")


def kinds_of(qrels: Mapping[str, Mapping[str, int]], kinds: Mapping[str, str]) -> dict[str, str]:
    """Every judged query's kind (``NO_KIND`` where it has none)."""
    return {q: kinds.get(q) or NO_KIND for q in qrels}


def leave_one_kind_out(c, qrels, *, kinds: Mapping[str, str], **options) -> LearnResult | None:
    """The nested procedure with one outer fold per kind (at most ``MAX_FOLDS``) and inner folds
    by kind; None when the judged queries hold fewer than two kinds."""
    labels = kinds_of(qrels, kinds)
    counted = {q for q, docs in qrels.items() if any(g > 0 for g in docs.values())}
    n_kinds = len({labels[q] for q in counted if q in labels})
    if n_kinds < 2:
        return None
    options = {**options, "kinds": kinds, "fold_by": labels, "leak_groups": None}
    return learn(c, qrels, folds=min(n_kinds, MAX_FOLDS), **options)


def stability(results: list[LearnResult]) -> dict:
    """The held-out figure and the chosen models over the runs (one per fold seed)."""
    means = [r.held_out_mean for r in results]
    return {
        "seeds": [r.seed for r in results],
        "held_out": [round(m, 6) for m in means],
        "mean": round(statistics.fmean(means), 6),
        "sd": round(statistics.stdev(means), 6) if len(means) > 1 else 0.0,
        "min": round(min(means), 6),
        "max": round(max(means), 6),
        "final": [r.final.kind if r.final.kind == "default" else str(r.final.pick) for r in results],
        "fold_choices": [[f.applied for f in r.outer] for r in results],
    }


def query_kinds(queries, kind_by: str) -> dict[str, str] | None:
    """Query id → its value of ``kind_by`` (``none``: no kinds). The default field, ``intent``,
    may be absent (None); another field that no query carries is an error."""
    if kind_by.strip().lower() == "none":
        return None
    try:
        return {q: v.split("=", 1)[1] for q, v in query_groups(queries, kind_by).items()}
    except ValueError:
        if kind_by != "intent":
            raise
        return None


@dataclass(frozen=True, eq=False)
class LearnReport:
    result: LearnResult  # the nested CV at the first fold seed
    folding: FoldGroups  # the folds' groups and what was found
    loko: LearnResult | None  # leave one kind out (None: no kinds, or not asked for)
    runs: tuple[LearnResult, ...]  # one per fold seed (the first is ``result``)

    @property
    def stability(self) -> dict | None:
        return stability(list(self.runs)) if len(self.runs) > 1 else None

    def transfer_json(self) -> dict | None:
        """The leave-one-kind-out figures (``rwb learn --json``'s ``leave_one_kind_out``; the
        Learn mode draws the same): its held-out figure, the default's on the same queries with
        the paired p, the model chosen per kind, per kind and every fixed pipeline's mean."""
        loko = self.loko
        if loko is None:
            return None
        d = loko.comparisons[0]
        return {"held_out": round(loko.held_out_mean, 6), "kinds": loko.folds,
                "default": round(d.mean, 6), "p_vs_default": round(d.p_fisher, 6),
                "chosen": [f.applied for f in loko.outer], "per_kind": loko.per_kind(),
                "fixed_pipelines": {k: round(v, 6) for k, v in loko.fixed_means().items()}}


def learn_report(c, qrels, queries, model: str = "auto", *, folds: int = 5, seed: int = 0,
                 fold_by: str | None = None, kind_by: str = "intent", transfer: bool = True,
                 repeats: int = 1, progress: Callable[[str], Callable] | None = None,
                 **options) -> LearnReport:
    """``rwb learn``'s whole run: the folds' groups (``eval.learning.leakage.fold_groups``), the
    nested CV at ``seed`` with the memorisation check, leave one kind out (when the queries
    carry kinds and ``transfer``), and the nested CV at ``repeats − 1`` further fold seeds.
    ``progress(stage)`` gives each stage's progress callback."""
    stage = progress or (lambda name: None)
    folding = fold_groups(queries, qrels, folds, fold_by)
    kinds = query_kinds(queries, kind_by)
    options = {**options, "kinds": kinds, "kind_field": kind_by}
    runs = [learn(c, qrels, model, folds=folds, seed=seed + i, fold_by=folding.fold_by,
                  leak_groups=folding.check,
                  progress=stage("fits" if i == 0 else f"fold seed {seed + i}"), **options)
            for i in range(max(1, repeats))]
    loko = None
    if kinds and transfer:
        options.pop("kinds")
        loko = leave_one_kind_out(c, qrels, kinds=kinds, model=model, seed=seed,
                                  progress=stage("leave one kind out"), **options)
    return LearnReport(runs[0], folding, loko, tuple(runs))
