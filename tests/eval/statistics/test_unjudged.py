"""Issue 40: a comparison says whether its verdict survives the documents nobody judged."""

from __future__ import annotations

import pytest

from eval.statistics.unjudged import verdict_bounds
from retrieval.pipeline import get_pipeline, run_pipeline
from tests.conftest import make_candidates


def table(n=4):
    """Each query: r (judged relevant) first for the vector path, u2 (never judged) first for
    BM25 — the vector path misses u2 — and u1 second for the vector path."""
    rows = [{"id": "r", "dense_rank": 0, "dense_sim": 0.9, "bm25_rank": 1, "bm25_score": 3.0},
            {"id": "u1", "dense_rank": 1, "dense_sim": 0.8, "bm25_rank": -1, "bm25_score": 0.0},
            {"id": "u2", "dense_rank": -1, "dense_sim": 0.1, "bm25_rank": 0, "bm25_score": 5.0}]
    return make_candidates([rows] * n)


def test_a_verdict_that_one_unjudged_document_per_query_can_undo():
    """nDCG@1, A = vector, B = BM25. As judged: A 1 (r first), B 0 (u2 counted non-relevant) on
    each of 4 queries: Δ = −1 everywhere, a significant loss (every difference equal: p 0). With
    u2 graded for B (relevant, grade 1): B's top is relevant too, Δ = 0, no difference. So the
    loss depends on the 4 unjudged u2 — the pairs to judge first."""
    c = table()
    qrels = {f"q{i}": {"r": 1} for i in range(4)}
    a = run_pipeline(c, get_pipeline("vector")).ranking
    b = run_pipeline(c, get_pipeline("bm25")).ranking
    bounds = verdict_bounds(c, qrels, a, b, "ndcg@1")
    assert (bounds.delta, bounds.delta_for_a, bounds.delta_for_b) == (-1.0, -1.0, 0.0)
    assert bounds.verdicts == ("loss", "loss", "none") and not bounds.holds
    assert bounds.unjudged == tuple((f"q{i}", "u2") for i in range(4))
    assert bounds.text() == ("ndcg@1: the verdict depends on 4 unjudged documents "
                             "(Δ -1.000 … +0.000; judge them first)")


def test_a_verdict_with_both_tops_judged_holds():
    """u2 judged non-relevant (grade 0): nothing in either top 1 is unjudged; the loss stands."""
    c = table()
    qrels = {f"q{i}": {"r": 1, "u2": 0} for i in range(4)}
    a = run_pipeline(c, get_pipeline("vector")).ranking
    b = run_pipeline(c, get_pipeline("bm25")).ranking
    bounds = verdict_bounds(c, qrels, a, b, "ndcg@1")
    assert bounds.holds and bounds.unjudged == () and bounds.delta == -1.0
    assert bounds.text() == "ndcg@1: every document of both tops is judged"


def test_bounds_at_depth_two_by_hand():
    """nDCG@2, A = (r, u1), B = (u2, r) on 6 queries, r judged relevant. With l = 1/log2(3):
    as judged, A = 1 and B = l / 1 = 0.6309: Δ = −0.3691, a loss on every query. Graded for A
    (u1 relevant, u2 not): A = (1 + l)/(1 + l) = 1, B = l/(1 + l) = 0.3869: Δ = −0.6131. Graded
    for B (u2 relevant, u1 not): B = 1, A = 1/(1 + l) = 0.6131: Δ = +0.3869, a gain. The loss
    depends on the 12 unjudged documents."""
    c = table(6)
    qrels = {f"q{i}": {"r": 1} for i in range(6)}
    a = run_pipeline(c, get_pipeline("vector")).ranking
    b = run_pipeline(c, get_pipeline("bm25")).ranking
    bounds = verdict_bounds(c, qrels, a, b, "ndcg@2")
    l = 0.6309297535714575
    assert bounds.delta == pytest.approx(l - 1.0)
    assert bounds.delta_for_a == pytest.approx(l / (1 + l) - 1.0)
    assert bounds.delta_for_b == pytest.approx(1.0 - 1.0 / (1 + l))
    assert bounds.verdicts == ("loss", "loss", "gain") and not bounds.holds
    assert len(bounds.unjudged) == 12


def test_rankings_given_as_id_lists_are_bounded_as_the_pool_is():
    """``rwb check`` bounds a snapshot's frozen top ids against today's: ``list_bounds`` (scored
    by ranx) gives the first test's figures by hand — Δ −1 as judged and graded for A, 0 graded
    for B, the 4 u2 to judge first — and equals ``verdict_bounds`` on the same rankings."""
    from eval.metrics.ranx_io import ranked_lists
    from eval.statistics.unjudged import list_bounds

    c = table()
    qrels = {f"q{i}": {"r": 1} for i in range(4)}
    a = run_pipeline(c, get_pipeline("vector")).ranking
    b = run_pipeline(c, get_pipeline("bm25")).ranking
    listed = list_bounds(ranked_lists(c, a), ranked_lists(c, b), qrels, "ndcg@1")
    assert (listed.delta, listed.delta_for_a, listed.delta_for_b) == (-1.0, -1.0, 0.0)
    assert listed.unjudged == tuple((f"q{i}", "u2") for i in range(4)) and not listed.holds
    pooled = verdict_bounds(c, qrels, a, b, "ndcg@1")
    assert listed.to_json() == pooled.to_json()
