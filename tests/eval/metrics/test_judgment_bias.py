"""judged@k, condensed-list nDCG'@k and bpref (eval/metrics/judgment_bias.py) by hand on three
queries, bpref against ranx where ranx defines it, and the "clearly below" note."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.metrics.judgment_bias import bias_means, judged_per_query, per_query_bias
from eval.statistics.judged_below import bias_lines, bias_table
from retrieval.ranking import rank_rows
from tests.conftest import make_candidates

# each query's documents in the order the ranking puts them
ORDER = [["a", "b", "c", "d", "e"], ["x", "y", "z"], ["p", "q", "r", "s", "t", "u"]]
QRELS = {
    "q0": {"a": 0, "b": 0, "c": 2, "e": 1, "f": 1, "g": 0},  # f and g never retrieved
    "q1": {"y": 1},  # no judged non-relevant document
    "q2": {"u": 3, "p": 0},  # u ranked 6th, below k = 5
}


def ranked():
    c = make_candidates(
        [
            [{"id": d, "dense_rank": i, "dense_sim": 1.0 - i / 10} for i, d in enumerate(docs)]
            for docs in ORDER
        ]
    )
    return c, rank_rows(c, c.dense_sim.astype(np.float64), 10)


def test_three_queries_by_hand():
    c, ranking = ranked()
    values = per_query_bias(c, QRELS, ranking, 5)
    # judged@5: q0 a, b, c, e of 5; q1 y of 5 (a list of 3 leaves 2 places unjudged); q2 p of 5
    assert values["judged"] == pytest.approx([4 / 5, 1 / 5, 1 / 5])
    # nDCG'@5: q0 condensed [a b c e] → (2/log2 4 + 1/log2 5) / (2 + 1/log2 3 + 1/log2 4);
    # q1 [y] → 1; q2 [p u] → (3/log2 3) / 3: u climbs from 6th to 2nd
    ideal0 = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert values["ndcg_cond"] == pytest.approx(
        [(1.0 + 1 / math.log2(5)) / ideal0, 1.0, 1 / math.log2(3)]
    )
    # bpref: q0 R = 3, N = 3; c and e each have 2 judged non-relevant above: (1/3 + 1/3) / 3;
    # q1 R = 1, N = 0: no non-relevant above y → 1 (trec_eval); q2 R = 1, N = 1: p above u → 0
    assert values["bpref"] == pytest.approx([2 / 9, 1.0, 0.0])
    means = bias_means(c, QRELS, ranking, 5)
    assert means["judged"] == pytest.approx((0.8 + 0.2 + 0.2) / 3)
    # judged@k alone (Tune's card, every knob move); at k = 6, q2's u is in: p and u of 6
    assert judged_per_query(c, QRELS, ranking, 5) == pytest.approx([4 / 5, 1 / 5, 1 / 5])
    assert judged_per_query(c, QRELS, ranking, 6) == pytest.approx([4 / 6, 1 / 6, 2 / 6])


def test_bpref_equals_ranx_where_ranx_defines_it():
    from ranx import Qrels, Run, evaluate

    c, ranking = ranked()
    ours = per_query_bias(c, QRELS, ranking, 5)["bpref"]
    run = {
        q: {d: float(len(docs) - i) for i, d in enumerate(docs)}
        for q, docs in zip(("q0", "q1", "q2"), ORDER)
    }
    # ranx divides by min(R, N): q1 (N = 0) is left out
    kept = ("q0", "q2")
    theirs = evaluate(
        Qrels({q: QRELS[q] for q in kept}),
        Run({q: run[q] for q in kept}),
        "bpref",
        return_mean=False,
    )
    assert ours[[0, 2]] == pytest.approx(list(theirs))


def test_a_pipeline_clearly_below_the_baselines_judged_share_gets_a_note():
    """40 queries; the baseline's top 5 (d0–d4) is all judged; the other pipeline's (d9–d5) holds
    one judged document, d9: a lower mean and p < 0.05."""
    queries, qrels = [], {}
    for i in range(40):
        rows = [
            {
                "id": f"d{j}",
                "dense_rank": j,
                "dense_sim": 1.0 - j / 20,
                "bm25_rank": 9 - j,
                "bm25_score": float(j + 1),
            }
            for j in range(10)
        ]
        queries.append(rows)
        qrels[f"q{i}"] = {**{f"d{j}": (1 if j == 0 else 0) for j in range(5)}, "d9": 0}
    c = make_candidates(queries)
    dense = rank_rows(c, c.dense_sim.astype(np.float64), 10)
    sparse = rank_rows(c, c.bm25_score.astype(np.float64), 10)
    rows = bias_table(c, qrels, {"dense": dense, "sparse": sparse}, "dense", 5)
    assert [r.judged for r in rows] == pytest.approx([1.0, 0.2])
    assert rows[1].clearly_below and not rows[0].clearly_below
    _, _, notes = bias_lines(rows)
    assert len(notes) == 1 and notes[0].startswith(
        "sparse: judged@5 0.200 is clearly below dense's 1.000"
    )
    # the other way round nothing is below its baseline
    assert not any(
        r.clearly_below
        for r in bias_table(c, qrels, {"sparse": sparse, "dense": dense}, "sparse", 5)
    )


def test_a_runs_judged_at_k_is_kept_with_the_run():
    """Tune's judged@5 card reads the baseline's judged@k on every knob move: the run keeps it
    per k (computed once), equal to ``judged_per_query`` of its ranking."""
    from eval.experiments.live import evaluate_config
    from eval.metrics.measure import judge
    from retrieval.pipeline import PIPELINES

    c, _ = ranked()
    ev = evaluate_config(c, judge(c, QRELS), PIPELINES["vector"])
    first = ev.judged_at(c, QRELS, 5)
    assert first == pytest.approx([4 / 5, 1 / 5, 1 / 5])
    assert first.tobytes() == judged_per_query(c, QRELS, ev.run.ranking, 5).tobytes()
    assert ev.judged_at(c, QRELS, 5) is first                      # kept: not computed again
    assert ev.judged_at(c, QRELS, 6) == pytest.approx([4 / 6, 1 / 6, 2 / 6])
