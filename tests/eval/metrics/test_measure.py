"""The vectorised evaluator (eval/metrics/measure.py) against ranx, metric for metric, and the ranx adapters.

Random candidate tables with many TIED scores are ranked by the engine (ties broken by doc
id), handed to ranx through ``eval.metrics.ranx_io`` and scored by both; every metric at several cutoffs
must agree per query to 1e-9. No mocks: real ranx, real ``rank_rows``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from ranx import Qrels, Run, evaluate

from eval.metrics.measure import METRICS as METRIC_NAMES
from eval.metrics.measure import judge, mean_metrics, parse_metric, per_query
from eval.metrics.ranx_eval import parse_metrics
from eval.metrics.ranx_io import judged_query_ids, ranked_lists, ranx_per_query, to_qrels, to_run
from retrieval.ranking import rank_rows
from tests.conftest import make_candidates

METRICS = [f"{m}@{k}" for m in ("ndcg", "recall", "precision", "mrr", "hit_rate", "map") for k in (1, 3, 5, 10, 20)]


def random_case(seed: int, n_queries: int = 40, n_docs: int = 60):
    """Candidates with tied integer scores, graded qrels (0-3) that include relevant documents
    the pool never retrieved, queries judged only 0, unjudged queries and empty queries."""
    rng = np.random.default_rng(seed)
    queries, qrels, scores = [], {}, []
    for qi in range(n_queries):
        n_rows = int(rng.integers(0, 25))
        docs = rng.choice(n_docs, size=n_rows, replace=False)
        queries.append([{"id": f"d{d:03d}"} for d in docs])
        tied = rng.integers(0, 4, size=n_rows).astype(np.float64)  # 4 distinct values: many ties
        tied[rng.random(n_rows) < 0.1] = -np.inf                 # rows a pipeline does not see
        scores.append(tied)
        kind = rng.random()
        if kind < 0.1:
            continue                                                # unjudged query
        judged = rng.choice(n_docs, size=int(rng.integers(1, 8)), replace=False)
        grades = rng.integers(0, 4, size=len(judged)) if kind > 0.2 else np.zeros(len(judged), dtype=int)
        qrels[f"q{qi}"] = {f"d{d:03d}": int(g) for d, g in zip(judged, grades)}
    c = make_candidates(queries)
    score = np.concatenate(scores) if scores else np.empty(0)
    return c, qrels, score


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_results", [3, 10, 30])
def test_fast_equals_ranx_on_random_runs_with_ties(seed, max_results):
    c, qrels, score = random_case(seed)
    ranking = rank_rows(c, score, max_results, min_score=1.0 if seed % 2 else None)
    fast = per_query(c, judge(c, qrels), ranking, METRICS)
    reference = ranx_per_query(to_qrels(qrels), to_run(c, ranking, qrels, "random"), METRICS)
    counted = judged_query_ids(qrels, c.query_ids)
    assert counted, "the case must have counted queries"
    for metric in METRICS:
        for query_id in counted:
            qi = c.query_ids.index(query_id)
            assert fast[metric][qi] == pytest.approx(reference[metric][query_id], abs=1e-9), (metric, query_id)
        # queries without a relevant judgment do not count in either evaluator
        uncounted = [i for i, q in enumerate(c.query_ids) if q not in counted]
        assert all(math.isnan(fast[metric][i]) for i in uncounted)
        assert set(reference[metric]) == set(counted)
    means = mean_metrics(c, judge(c, qrels), ranking, METRICS)
    for metric in METRICS:
        assert means[metric] == pytest.approx(np.mean(list(reference[metric].values())), abs=1e-9)


def test_run_scores_strictly_decrease_and_keep_the_tie_broken_order():
    # three tied documents: the engine orders them by doc id; ranx must see the same order
    c = make_candidates([[{"id": "c"}, {"id": "a"}, {"id": "b"}]])
    ranking = rank_rows(c, np.array([1.0, 1.0, 1.0]), 10)
    run = to_run(c, ranking, {"q0": {"b": 1}}, "tied")
    docs = dict(run["q0"])
    assert list(docs) == ranked_lists(c, ranking)["q0"] == ["a", "b", "c"]
    assert list(docs.values()) == [3.0, 2.0, 1.0]
    # ranx therefore puts "b" second: reciprocal rank 1/2
    assert ranx_per_query(to_qrels({"q0": {"b": 1}}), run, ["mrr@10"])["mrr@10"]["q0"] == pytest.approx(1 / 2)


def test_ranx_rejects_a_run_missing_a_query_so_the_adapter_adds_it_empty():
    c = make_candidates([[{"id": "a"}], [{"id": "b"}]])
    qrels = {"q0": {"a": 1}, "q1": {"b": 2}}
    nothing_for_q1 = np.array([1.0, -np.inf])
    ranking = rank_rows(c, nothing_for_q1, 10)
    with pytest.raises(AssertionError):  # ranx's own behaviour for a query absent from the run
        evaluate(Qrels(qrels), Run({"q0": {"a": 1.0}}), "ndcg@5", save_results_in_run=False)
    run = to_run(c, ranking, qrels, "partial")
    assert set(run.keys()) == {"q0", "q1"} and dict(run["q1"]) == {}
    scores = ranx_per_query(to_qrels(qrels), run, ["ndcg@5", "recall@5"])
    assert scores["ndcg@5"] == {"q0": 1.0, "q1": 0.0}
    fast = mean_metrics(c, judge(c, qrels), ranking, ("ndcg@5", "recall@5"))
    assert fast == {"ndcg@5": (1.0 + 0.0) / 2, "recall@5": (1.0 + 0.0) / 2}


def test_a_pipeline_returning_nothing_scores_zero_on_every_query():
    c = make_candidates([[{"id": "a"}, {"id": "b"}], [{"id": "c"}], []])
    qrels = {"q0": {"a": 1}, "q1": {"c": 3}, "q2": {"z": 1}}
    ranking = rank_rows(c, np.full(c.n_rows, -np.inf), 10)
    run = to_run(c, ranking, qrels, "empty")  # ranx's own constructor fails on an all-empty run
    reference = ranx_per_query(to_qrels(qrels), run, METRICS)
    fast = mean_metrics(c, judge(c, qrels), ranking, METRICS)
    for metric in METRICS:
        assert reference[metric] == {"q0": 0.0, "q1": 0.0, "q2": 0.0}
        assert fast[metric] == 0.0
    assert judge(c, qrels).n_judged == 3


def test_a_judged_query_missing_from_the_pool_counts_as_zero_in_both():
    c = make_candidates([[{"id": "a"}]])
    qrels = {"q0": {"a": 1}, "elsewhere": {"a": 1}}
    ranking = rank_rows(c, np.array([1.0]), 10)
    judged = judge(c, qrels)
    assert judged.n_judged == 2 and judged.n_missing == 1
    reference = ranx_per_query(to_qrels(qrels), to_run(c, ranking, qrels, "x"), ["ndcg@5"])["ndcg@5"]
    assert reference == {"q0": 1.0, "elsewhere": 0.0}
    assert mean_metrics(c, judged, ranking, ("ndcg@5",))["ndcg@5"] == (1.0 + 0.0) / 2


def test_queries_judged_only_zero_do_not_count():
    qrels = {"q0": {"a": 0, "b": 0}, "q1": {"a": 2, "b": 0}}
    assert judged_query_ids(qrels) == ["q1"]
    assert to_qrels(qrels).get_query_ids() == ["q1"]
    with pytest.raises(ValueError, match="no query has a relevant judgment"):
        to_qrels({"q0": {"a": 0}})


def test_graded_ndcg_by_hand():
    # grades 3 and 1; the run puts the grade-1 document first, the grade-3 one third
    c = make_candidates([[{"id": "low"}, {"id": "x"}, {"id": "high"}]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), 10)
    qrels = {"q0": {"high": 3, "low": 1}}
    dcg = 1 / math.log2(2) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 1 / math.log2(3)
    fast = mean_metrics(c, judge(c, qrels), ranking, ("ndcg@5", "map@5", "mrr@5", "precision@2"))
    assert fast["ndcg@5"] == pytest.approx(dcg / ideal)
    assert fast["map@5"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert fast["mrr@5"] == 1.0
    assert fast["precision@2"] == pytest.approx(1 / 2)


@pytest.mark.parametrize("bad", ["ndcg", "foo@5", "NDCG@5", "ndcg@-1", "ndcg@5x"])
def test_unknown_metric_names_are_refused(bad):
    with pytest.raises(ValueError, match="unknown metric"):
        parse_metric(bad)


@pytest.mark.parametrize("bad", ["ndcg@0", "recall@10001", "ndcg@2147483648"])
def test_cutoffs_outside_one_to_ten_thousand_are_refused(bad):
    with pytest.raises(ValueError, match=r"the cutoff must be 1…10,000"):
        parse_metric(bad)


@pytest.mark.parametrize("seed", range(4))
def test_judging_a_large_set_by_sorted_keys_equals_the_dense_lookup(seed, monkeypatch):
    """``judge`` looks grades up in a dense query × document array for small sets and by
    sorted keys past ``DENSE_KEYS`` slots: both give the same grades and counts."""
    import eval.metrics.measure as fast

    c, qrels, _ = random_case(seed)
    dense = fast._judge(c, qrels)
    monkeypatch.setattr(fast, "DENSE_KEYS", 0)
    keyed = fast._judge(c, qrels)
    assert np.array_equal(dense.grade, keyed.grade) and dense.grade.any()
    assert np.array_equal(dense.ideal, keyed.ideal) and np.array_equal(dense.n_relevant, keyed.n_relevant)
    assert dense.n_missing == keyed.n_missing


def test_a_judgment_edited_after_judging_is_seen_by_the_next_judge():
    """``judge`` returns its last result for equal qrels; grading a document (the Tune page
    edits the labels in place) makes the next call judge again."""
    c, qrels, _ = random_case(1)
    first = judge(c, qrels)
    assert judge(c, {q: dict(j) for q, j in qrels.items()}) is first  # equal labels: the same judgment
    query = next(q for q in qrels if q in c.query_ids
                 and c.offsets[c.query_ids.index(q) + 1] > c.offsets[c.query_ids.index(q)])
    qi = c.query_ids.index(query)
    doc = c.doc_ids[int(c.doc_idx[c.offsets[qi]])]
    qrels[query][doc] = 3
    again = judge(c, qrels)
    assert again is not first
    row = c.offsets[qi]
    assert again.grade[row] == 3.0


# ---- cutoffs, MAP and gain against ranx -------------------------------------------------------------

def test_map_over_the_whole_ranking_by_hand_and_as_ranx():
    # relevant a (grade 1) and c (grade 2) of three relevant documents, ranked 1st and 3rd:
    # AP = (1/1 + 2/3) / 3 = 5/9; nDCG@3 linear = (1 + 2/log2 4) / (2 + 1/log2 3 + 1/log2 4)
    c = make_candidates([[{"id": "a"}, {"id": "b"}, {"id": "c"}]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), 10)
    qrels = {"q0": {"a": 1, "c": 2, "z": 1}}
    ours = per_query(c, judge(c, qrels), ranking, ["map", "ndcg@3", "ndcg_burges@3"])
    assert ours["map"][0] == pytest.approx(5 / 9)
    assert ours["ndcg@3"][0] == pytest.approx((1 + 2 / 2) / (2 + 1 / math.log2(3) + 1 / 2))
    # exponential gain: (2^1 − 1) + (2^2 − 1)/log2 4 over (2^2 − 1) + (2^1 − 1)/log2 3 + (2^1 − 1)/log2 4
    assert ours["ndcg_burges@3"][0] == pytest.approx((1 + 3 / 2) / (3 + 1 / math.log2(3) + 1 / 2))
    reference = evaluate(Qrels(qrels), Run({"q0": {"a": 3.0, "b": 2.0, "c": 1.0}}), ["map", "ndcg@3", "ndcg_burges@3"])
    for m, v in reference.items():
        assert ours[m][0] == pytest.approx(v)


@pytest.mark.parametrize("seed", range(4))
def test_cutoffs_map_and_exponential_gain_equal_ranx_on_random_runs(seed):
    metrics = [*parse_metrics("ndcg,ndcg_burges,recall,precision,mrr,hit_rate,map", (1, 3, 5, 10, 20)), "map"]
    assert len(metrics) == 6 * 5 + 1 + 1 and "map@5" not in metrics            # bare map stays uncut
    assert {parse_metric(m)[0] for m in metrics} == set(METRIC_NAMES)  # every declared metric
    c, qrels, score = random_case(seed)
    ranking = rank_rows(c, score, 30)
    fast = per_query(c, judge(c, qrels), ranking, metrics)
    reference = ranx_per_query(to_qrels(qrels), to_run(c, ranking, qrels, "random"), metrics)
    for metric in metrics:
        for query_id in judged_query_ids(qrels, c.query_ids):
            qi = c.query_ids.index(query_id)
            assert fast[metric][qi] == pytest.approx(reference[metric][query_id], abs=1e-9), (metric, query_id)
