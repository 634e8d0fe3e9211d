"""Every metric, declared once: the one row from which its name, label, formula and family are
generated.

ranx keeps a metric in one module with its formula; here a metric is one ``Definition``: its
ranx name, how a page or report labels it (``nDCG@5``), its formula as data — the per-query sum
it reads (one of ``eval.metrics.kernels.SUMS``) and what that sum is divided by (one of
``eval.metrics.kernels.SCALES``) —, whether it is also valid without ``@K`` (bare ``map``: the
whole ranking), whether it is one of the default families (``DEFAULT_FAMILIES`` of ``rwb eval``,
``DEFAULT_METRICS`` of the pages and sweeps), and its definition with its source. The kernels
know sums and scales, never a metric's name or position: a metric whose formula is a declared
sum over a declared scale is this one row. ``eval.metrics.measure`` parses and scores names
from ``DEFINED``, ``eval.experiments`` labels them with ``metric_label`` and reports
``DEFAULT_FAMILIES``; ``tests/eval/metrics/test_measure.py`` checks every row against ranx on
random runs with ties.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Definition:
    """One metric: ``name@K`` (or bare ``name`` when ``uncut``: the whole ranking), whose value
    per query is its ``sum`` over its ``scale``."""

    name: str                 # ranx's name
    label: str                # shown on pages and in reports (``label@K``)
    sum: str                  # the per-query sum it reads (eval.metrics.kernels.SUMS)
    scale: str                # what the sum is divided by (eval.metrics.kernels.SCALES)
    uncut: bool               # also valid without @K
    default: bool             # one of ``rwb eval``'s default families
    definition: str           # formula and source


DEFINITIONS = (
    Definition("ndcg", "nDCG", "dcg", "ideal", False, True,
               "Σ_{i≤k} rel_i / log2(i+1) over the ideal ordering's same sum "
               "(Järvelin & Kekäläinen 2002; linear gain, ranx ndcg)"),
    Definition("recall", "Recall", "hits", "relevant", False, True,
               "relevant retrieved in the top k / all relevant"),
    Definition("mrr", "MRR", "rr", "itself", False, True,
               "1 / rank of the first relevant result in the top k (0 if none)"),
    Definition("precision", "P", "hits", "cutoff", False, True, "relevant retrieved in the top k / k"),
    Definition("hit_rate", "Hit", "hits", "any", False, True, "1 if any relevant result is in the top k"),
    Definition("map", "MAP", "ap", "relevant", True, True,
               "Σ precision@i over relevant ranks i ≤ k / all relevant; bare map: over the "
               "whole ranking (ranx's and trec_eval's MAP)"),
    Definition("ndcg_burges", "nDCG-exp", "dcg_exp", "ideal", False, False,
               "nDCG with the exponential gain 2^rel − 1 (Burges et al., ICML 2005; ranx ndcg_burges)"),
)
DEFINED = {d.name: d for d in DEFINITIONS}
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
