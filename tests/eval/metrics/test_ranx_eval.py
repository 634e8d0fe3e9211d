"""Evaluation through ranx (eval/metrics/ranx_eval.py), significance against a baseline, the
router and budget metrics.

Real pool of the tiny fixture (real Tantivy, LanceDB and MiniLM under a tmp RWB_HOME) and
hand-built candidate tables for counts checked by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ttest_rel

from eval.metrics.budget import budget_recall, document_tokens
from eval.statistics.significance import bonferroni, compare_to_baseline, holm, randomization_test
from eval.metrics.ranx_eval import evaluate_pipelines, fast_metrics, intent_of, parse_metrics, resolve_pipelines
from eval.stores.pool import load_pool
from eval.reports.report import eval_summary
from eval.learning.router_eval import INTENT_TO_PROFILE, evaluate_router
from retrieval.pipeline import PipelineConfig, run_pipeline
from retrieval.ranking import rank_rows
from tests.conftest import make_candidates

PIPELINES = ["vector", "bm25", "rrf", "seed-adaptive", "seed-salience", "openclaw", "lingxi"]
NOTHING = PipelineConfig("nothing", "vector", "cosine is at most 1: returns nothing", min_score=2.0)


@pytest.fixture(scope="module")
def pool(tiny, rwb_home):
    return load_pool(tiny)


@pytest.fixture(scope="module")
def evaluation(pool, tiny):
    return evaluate_pipelines(pool, tiny.qrels, resolve_pipelines(PIPELINES + [NOTHING]),
                              parse_metrics("ndcg@5,recall@5,mrr@5,map@10,precision@3,hit_rate@1"),
                              intent_of(tiny.queries))


def test_every_judged_query_counts_and_an_empty_pipeline_scores_zero(evaluation, tiny):
    judged = [q for q, j in tiny.qrels.items() if any(g > 0 for g in j.values())]
    assert evaluation.n_queries == len(judged) == 4
    assert set(evaluation.per_query["nothing"]) == set(judged)
    assert all(v == 0.0 for q in judged for v in evaluation.per_query["nothing"][q].values())
    assert all(v == 0.0 for v in evaluation.results["nothing"].values())


def test_ranx_means_equal_the_fast_evaluator(evaluation, pool, tiny):
    for label, config in evaluation.configs.items():
        fast = fast_metrics(pool, tiny.qrels, config, evaluation.metrics)
        for metric in evaluation.metrics:
            assert evaluation.results[label][metric] == pytest.approx(fast[metric], abs=1e-12)
            values = [evaluation.per_query[label][q][metric] for q in evaluation.query_ids]
            assert evaluation.results[label][metric] == pytest.approx(sum(values) / len(values))


def test_per_intent_means_are_means_of_the_intent_queries(evaluation, tiny):
    intents = {q.id: q.intent for q in tiny.queries}
    assert list(evaluation.per_intent["rrf"]) == ["debug", "timeline", "preference"]
    debug = [q for q in evaluation.query_ids if intents[q] == "debug"]
    assert len(debug) == 2
    for label in evaluation.results:
        expected = sum(evaluation.per_query[label][q]["ndcg@5"] for q in debug) / 2
        assert evaluation.per_intent[label]["debug"]["ndcg@5"] == pytest.approx(expected)


def test_eval_json_schema(evaluation, tiny):
    significance = compare_to_baseline(evaluation, tiny.qrels, "vector", n_permutations=200)
    data = eval_summary(evaluation, significance)
    assert data["dataset"] == "tiny" and data["n_queries"] == 4
    assert data["metrics"] == list(evaluation.metrics)
    labels = set(PIPELINES) | {"nothing"}
    assert set(data["results"]) == set(data["per_intent"]) == set(data["per_query"]) == labels
    assert set(data["significance"]) == labels - {"vector"}
    for label in data["results"]:
        assert set(data["results"][label]) == set(evaluation.metrics)
        assert set(data["per_query"][label]) == set(evaluation.query_ids)
    cell = data["significance"]["rrf"]["ndcg@5"]
    assert {"p_value", "wins", "ties", "losses"} <= set(cell)
    assert cell["wins"] + cell["ties"] + cell["losses"] == 4
    assert 0 < cell["p_value"] <= 1
    assert data["significance_test"]["correction"] == "holm"
    assert data["fingerprint"]["dataset_fingerprint"] == tiny.fingerprint


# ---- significance checked by hand --------------------------------------------------------------

def _two_path_case():
    """Four queries, one relevant document each ("r"); vector and bm25 rank it:

    query  vector rank  bm25 rank   ndcg@5 vector   ndcg@5 bm25   bm25 vs vector
    q0     1            0           1/log2(3)       1             win
    q1     0            0           1               1             tie
    q2     0            2           1               1/log2(4)     loss
    q3     miss         0           0               1             win
    """
    def rows(dense_r, bm25_r):
        docs = {name: {"id": name} for name in ("r", "x", "y")}
        for rank, name in enumerate(dense_r):
            docs[name].update(dense_rank=rank, dense_sim=0.9 - 0.1 * rank)
        for rank, name in enumerate(bm25_r):
            docs[name].update(bm25_rank=rank, bm25_score=9.0 - rank)
        return list(docs.values())

    c = make_candidates([
        rows(["x", "r", "y"], ["r", "x", "y"]),
        rows(["r", "x", "y"], ["r", "y", "x"]),
        rows(["r", "x", "y"], ["x", "y", "r"]),
        rows(["x", "y"], ["r", "x"]),
    ])
    qrels = {f"q{i}": {"r": 1} for i in range(4)}
    return c, qrels


def test_win_tie_loss_counts_by_hand():
    c, qrels = _two_path_case()
    evaluation = evaluate_pipelines(c, qrels, ["vector", "bm25"], ["ndcg@5", "recall@5"])
    vector = [1 / math.log2(3), 1.0, 1.0, 0.0]
    bm25 = [1.0, 1.0, 1 / math.log2(4), 1.0]
    assert list(evaluation.values("vector", "ndcg@5")) == pytest.approx(vector)
    assert list(evaluation.values("bm25", "ndcg@5")) == pytest.approx(bm25)
    significance = compare_to_baseline(evaluation, qrels, "vector", test="student", correction="bonferroni")
    ndcg, recall = significance.cells["bm25"]["ndcg@5"], significance.cells["bm25"]["recall@5"]
    assert (ndcg.wins, ndcg.ties, ndcg.losses) == (2, 1, 1)
    assert (recall.wins, recall.ties, recall.losses) == (1, 3, 0)   # only q3: 0 → 1
    assert ndcg.delta == pytest.approx(np.mean(bm25) - np.mean(vector))
    expected_p = ttest_rel(vector, bm25).pvalue
    assert ndcg.p_values["student"] == pytest.approx(expected_p)
    assert ndcg.p_value == pytest.approx(expected_p)
    # the family is per metric: the one pipeline compared with vector, so Bonferroni × 1 leaves p as it is
    assert ndcg.p_adjusted == pytest.approx(min(1.0, 1 * expected_p))
    assert significance.family_size == 1


def test_identical_runs_give_p_one_not_nan():
    c, qrels = _two_path_case()
    twin = PipelineConfig("vector-twin", "vector")
    evaluation = evaluate_pipelines(c, qrels, ["vector", twin], ["ndcg@5"])
    cell = compare_to_baseline(evaluation, qrels, "vector", test="student").cells["vector-twin"]["ndcg@5"]
    assert cell.p_values == {"fisher": 1.0, "student": 1.0}
    assert (cell.wins, cell.ties, cell.losses) == (0, 4, 0) and not cell.significant


def test_holm_and_bonferroni_by_hand():
    p = [0.01, 0.04, 0.03]
    # sorted: 0.01·3 = 0.03; 0.03·2 = 0.06; 0.04·1 = 0.04 → raised to the running max 0.06
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06])
    assert bonferroni(p) == pytest.approx([0.03, 0.12, 0.09])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_randomization_test_is_seeded_and_exact_in_expectation():
    a = np.array([0.0, 0.0, 0.0])
    b = np.array([1.0, 1.0, 1.0])
    # all differences equal: only the all-kept and all-flipped sign patterns are as extreme, 2 of 2³
    p = randomization_test(a, b, 20_000, seed=7)
    assert p == randomization_test(a, b, 20_000, seed=7)
    assert p == pytest.approx(2 / 2 ** 3, abs=0.01)
    assert randomization_test(a, a, 100, seed=1) == 1.0
    with pytest.raises(ValueError):
        randomization_test(a, b[:2])


def test_bad_significance_options_are_refused(evaluation, tiny):
    with pytest.raises(ValueError, match="test must be one of"):
        compare_to_baseline(evaluation, tiny.qrels, "vector", test="tukey")
    with pytest.raises(ValueError, match="correction must be one of"):
        compare_to_baseline(evaluation, tiny.qrels, "vector", correction="fdr")
    with pytest.raises(ValueError, match="baseline 'weighted' was not evaluated"):
        compare_to_baseline(evaluation, tiny.qrels, "weighted")


def test_the_baseline_is_added_first_and_names_must_be_unique():
    assert list(resolve_pipelines(["rrf"], baseline="vector")) == ["vector", "rrf"]
    assert list(resolve_pipelines(["vector", "rrf"], baseline="vector")) == ["vector", "rrf"]
    with pytest.raises(ValueError, match="two different pipelines are named 'rrf'"):
        resolve_pipelines(["rrf", PipelineConfig("rrf", "vector")])


# ---- router and budget -------------------------------------------------------------------------

def test_router_confusion_and_regret_on_tiny(pool, tiny, evaluation):
    labels = {q.id: q.intent for q in tiny.queries}
    router = evaluate_router(pool, tiny.qrels, labels)
    assert INTENT_TO_PROFILE["preference"] == "concept" and "preference → concept" in router.mapping_note
    # labels debug, preference, timeline, debug; the router says debug, concept, timeline, debug
    assert router.confusion["debug"]["debug"] == 2
    assert router.confusion["concept"]["concept"] == 1
    assert router.confusion["timeline"]["timeline"] == 1
    assert router.by_label["preference"]["concept"] == 1
    assert router.accuracy == 1.0 and router.n_labelled == 4
    # the routed profiles reproduce seed-adaptive itself
    assert router.routed_mean == pytest.approx(evaluation.results["seed-adaptive"]["ndcg@5"])
    assert all(r >= 0 for r in router.regret.values())
    assert router.oracle_mean == pytest.approx(router.routed_mean + router.regret_mean)


def test_budget_recall_by_hand():
    # tokens 10, 20, 30 in rank order; budget 35 delivers the first two (10 + 20 ≤ 35 < 60)
    c = make_candidates([[{"id": "a", "token_count": 10}, {"id": "b", "token_count": 20},
                          {"id": "c", "token_count": 30}]])
    ranking = rank_rows(c, np.array([3.0, 2.0, 1.0]), 10)
    qrels = {"q0": {"b": 1, "c": 2}}
    score = budget_recall(c, qrels, ranking, 35)
    assert score.mean == pytest.approx(1 / 2)          # b delivered, c not
    assert score.mean_tokens == 10 + 20
    assert score.ceiling == pytest.approx(1 / 2)       # b and c together need 50 > 35
    assert budget_recall(c, qrels, ranking, 60).mean == 1.0
    assert budget_recall(c, qrels, ranking, 9).mean == 0.0
    with pytest.raises(ValueError):
        budget_recall(c, qrels, ranking, 0)


def test_budget_recall_on_tiny_respects_the_pipeline_budget(pool, tiny):
    run = run_pipeline(pool, resolve_pipelines(["seed-salience"])["seed-salience"])
    tokens = document_tokens(tiny.documents)
    at_pipeline_budget = budget_recall(pool, tiny.qrels, run.ranking, 1500, tokens)
    assert at_pipeline_budget.mean_tokens <= 1500
    assert 0.0 <= at_pipeline_budget.mean <= at_pipeline_budget.ceiling <= 1.0
