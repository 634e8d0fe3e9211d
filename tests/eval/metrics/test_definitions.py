"""A metric is declared once (``eval.metrics.definitions``): its label, formula (a sum over a
scale), family and the lists the rest of the code reads are generated from that row."""

from __future__ import annotations

import pytest

from eval.metrics import kernels
from eval.metrics.measure import METRICS, parse_metric

# one query's sums, by hand: k = 5, 2 relevant retrieved of 4, DCG 1.5 of an ideal 3.0,
# first relevant at rank 2, AP sum 1.2, exponential-gain DCG 2.4
SUMS = dict(k=5, hits=2.0, dcg=1.5, rr=0.5, ap=1.2, dcg_exp=2.4, idcg=3.0, safe_rel=4.0, judged=True)
BY_HAND = {"ndcg": 0.5, "recall": 0.5, "mrr": 0.5, "precision": 0.4, "hit_rate": 1.0, "map": 0.3,
           "ndcg_burges": 0.8}


def test_every_declared_metric_has_its_own_label_and_formula():
    from eval.metrics.definitions import DEFINITIONS, metric_label
    from eval.metrics.measure import FORMULAS

    assert METRICS == tuple(d.name for d in DEFINITIONS)          # measure parses what is declared
    assert tuple(FORMULAS) == METRICS
    assert len(set(FORMULAS.values())) == len(METRICS)            # no two metrics are one formula
    labels = [d.label for d in DEFINITIONS]
    assert len(set(labels)) == len(labels) and not {d.name for d in DEFINITIONS} & set(labels)
    for d in DEFINITIONS:
        assert metric_label(f"{d.name}@5") == f"{d.label}@5" and d.definition
    assert metric_label("map") == "MAP" and metric_label("judged@5") == "judged@5"


@pytest.mark.parametrize("name", list(BY_HAND))
def test_the_kernel_computes_each_declared_metric_from_its_sum_and_scale(name):
    """``finish`` knows sums and scales, no metric: each declared pair gives that metric's value."""
    from eval.metrics.measure import FORMULAS

    values = SUMS
    slot, scale = FORMULAS[name]
    got = kernels.finish(scale, values["k"], values[kernels.SUMS[slot]], values["idcg"], values["safe_rel"],
                         values["judged"])
    assert got == pytest.approx(BY_HAND[name])
    assert set(BY_HAND) == set(METRICS)                           # every declared metric is checked


def test_a_formula_the_kernels_cannot_compute_is_refused(monkeypatch):
    """The ideal ordering's sum is known for the DCG sums only: hits over the ideal is refused."""
    from eval.metrics import measure
    from eval.metrics.definitions import DEFINED, Definition

    monkeypatch.setitem(DEFINED, "odd", Definition("odd", "Odd", "hits", "ideal", False, False, "—"))
    with pytest.raises(ValueError, match="^metric odd: its sum must be one of"):
        measure._formula("odd")
    monkeypatch.setitem(DEFINED, "odd", Definition("odd", "Odd", "hits", "squared", False, False, "—"))
    with pytest.raises(ValueError, match="got 'hits' over 'squared'$"):
        measure._formula("odd")


def test_families_default_metrics_and_warm_up_come_from_the_declaration():
    from eval.experiments.experiment import DEFAULT_FAMILIES
    from eval.metrics.definitions import DEFINITIONS
    from eval.metrics.measure import DEFAULT_METRICS
    from eval.metrics.ranx_io import WARM_METRICS

    assert DEFAULT_FAMILIES == ("ndcg", "recall", "mrr", "precision", "hit_rate", "map")
    assert DEFAULT_METRICS == ("ndcg@5", "recall@5", "mrr@5", "precision@5", "hit_rate@5")
    assert {parse_metric(m)[0] for m in WARM_METRICS} == {d.name for d in DEFINITIONS}
