"""Every metric, declared once: the one row from which its name, label, formula code and family
are generated.

ranx keeps a metric in one module with its formula; here a metric is one ``Definition``: its
ranx name, how a page or report labels it (``nDCG@5``), the per-query sums its formula reads
(``eval.metrics.kernels.SUMS``), whether it is also valid without ``@K`` (bare ``map``: the
whole ranking), whether it is one of the default families (``DEFAULT_FAMILIES`` of ``rwb eval``,
``DEFAULT_METRICS`` of the pages and sweeps), and its definition with its source. The formula code is the row's position: ``eval.metrics.kernels`` takes its
constants from ``CODES`` (append a new metric at the end; numba's cache is keyed on
``kernels.py`` alone, so after reordering these rows ``make clean`` drops the compiled
``finish``). ``eval.metrics.measure`` parses and scores names from ``DEFINED``,
``eval.experiments`` labels them with ``metric_label`` and reports ``DEFAULT_FAMILIES``;
``tests/eval/metrics/test_measure.py`` checks every row against ranx on random runs with ties.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Definition:
    """One metric: ``name@K`` (or bare ``name`` when ``uncut``: the whole ranking)."""

    name: str                 # ranx's name
    label: str                # shown on pages and in reports (``label@K``)
    sums: tuple[str, ...]     # the per-query sums it reads (eval.metrics.kernels.SUMS)
    uncut: bool               # also valid without @K
    default: bool             # one of ``rwb eval``'s default families
    definition: str           # formula and source
    code: int = -1            # its formula in eval.metrics.kernels.finish: the row's position


def _numbered(*rows: Definition) -> tuple[Definition, ...]:
    return tuple(replace(row, code=i) for i, row in enumerate(rows))


DEFINITIONS = _numbered(
    Definition("ndcg", "nDCG", ("dcg",), False, True,
               "Σ_{i≤k} rel_i / log2(i+1) over the ideal ordering's same sum "
               "(Järvelin & Kekäläinen 2002; linear gain, ranx ndcg)"),
    Definition("recall", "Recall", ("hits",), False, True, "relevant retrieved in the top k / all relevant"),
    Definition("mrr", "MRR", ("rr",), False, True,
               "1 / rank of the first relevant result in the top k (0 if none)"),
    Definition("precision", "P", ("hits",), False, True, "relevant retrieved in the top k / k"),
    Definition("hit_rate", "Hit", ("hits",), False, True, "1 if any relevant result is in the top k"),
    Definition("map", "MAP", ("ap",), True, True,
               "Σ precision@i over relevant ranks i ≤ k / all relevant; bare map: over the "
               "whole ranking (ranx's and trec_eval's MAP)"),
    Definition("ndcg_burges", "nDCG-exp", ("dcg_exp",), False, False,
               "nDCG with the exponential gain 2^rel − 1 (Burges et al., ICML 2005; ranx ndcg_burges)"),
)
DEFINED = {d.name: d for d in DEFINITIONS}
CODES = {d.name: d.code for d in DEFINITIONS}
LABELS = {d.name: d.label for d in DEFINITIONS}
DEFAULT_FAMILIES = tuple(d.name for d in DEFINITIONS if d.default)
"""``rwb eval``'s metrics when none is asked: every default family at every cutoff (MAP bare)."""
DEFAULT_CUTOFF = 5
DEFAULT_METRICS = tuple(f"{d.name}@{DEFAULT_CUTOFF}" for d in DEFINITIONS if d.default and not d.uncut)
"""The metrics a page shows and a sweep scores when none is asked (``ndcg@5``, …)."""
WARM_METRICS = tuple(d.name if d.uncut else f"{d.name}@{DEFAULT_CUTOFF}" for d in DEFINITIONS)
"""One of each declared metric (ranx compiles per metric, not per cutoff)."""


def metric_label(name: str) -> str:
    """How a page or report shows metric ``name`` (``ndcg@5`` → ``nDCG@5``, ``map`` → ``MAP``);
    a name that is not declared (judged@5, say) is shown as it is."""
    base, _, cutoff = name.partition("@")
    label = LABELS.get(base, base)
    return f"{label}@{cutoff}" if cutoff else label
