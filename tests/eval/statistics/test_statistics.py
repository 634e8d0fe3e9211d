"""Statistics as the reference tools do them: a correction per metric across the pipelines
(PyTerrier's ``Experiment(correction=…)``), raw and corrected p, bootstrap confidence intervals,
metric names, cutoffs and nDCG's gain, the fewer-than-k note and the per-intent table (the
metrics themselves against ranx: tests/eval/metrics/test_measure.py).

Hand-built candidate tables (real pipelines, real ranx) with values a reader can check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import ttest_rel

from eval.statistics.bootstrap import bootstrap_ci, bootstrap_intervals, resampled_means
from eval.statistics.significance import compare_to_baseline, holm, randomization_test, randomization_tests
from eval.metrics.ranx_eval import evaluate_pipelines, parse_cutoffs, parse_metrics, with_gain
from eval.experiments.experiment import ExperimentOptions
from eval.reports.report import intent_rows, short_notes
from retrieval.pipeline import PipelineConfig
from tests.conftest import make_candidates

# ---- a hand-built set: eight queries, one relevant document "r" each ------------------------------

DENSE = [1, 0, 2, 0, None, 3, 1, 0]   # rank of r on the dense path (None: missed)
BM25 = [0, 0, 0, 2, 0, 0, 3, 1]       # rank of r on the BM25 path
FILLER = ["a", "b", "c", "d"]


def _case():
    queries = []
    for dense_r, bm25_r in zip(DENSE, BM25):
        dense = [d for d in FILLER if d != "d"]
        if dense_r is not None:
            dense.insert(dense_r, "r")
        bm25 = list(FILLER)
        bm25.insert(bm25_r, "r")
        rows = {d: {"id": d} for d in set(dense) | set(bm25)}
        for rank, d in enumerate(dense):
            rows[d].update(dense_rank=rank, dense_sim=0.9 - 0.1 * rank)
        for rank, d in enumerate(bm25):
            rows[d].update(bm25_rank=rank, bm25_score=9.0 - rank)
        queries.append(sorted(rows.values(), key=lambda r: r["id"]))
    c = make_candidates(queries)
    qrels = {f"q{i}": {"r": 1} for i in range(len(DENSE))}
    return c, qrels


TOP1 = PipelineConfig("vector-top1", "vector", "the dense path's first result only", max_results=1)


@pytest.fixture(scope="module")
def case():
    c, qrels = _case()
    intents = {f"q{i}": ("debug" if i < 3 else "concept") for i in range(len(DENSE))}
    evaluation = evaluate_pipelines(c, qrels, ["vector", "bm25", "rrf", TOP1],
                                    ["ndcg@1", "ndcg@3", "recall@3", "map"], intents)
    return c, qrels, evaluation


def test_the_hand_case_scores_as_written(case):
    _, _, evaluation = case
    # ndcg@3 of one relevant document at 0-based rank r < 3 is 1/log2(r + 2), else 0
    ndcg3 = lambda r: 0.0 if r is None or r >= 3 else 1 / math.log2(r + 2)
    assert list(evaluation.values("vector", "ndcg@3")) == pytest.approx([ndcg3(r) for r in DENSE])
    assert list(evaluation.values("bm25", "ndcg@3")) == pytest.approx([ndcg3(r) for r in BM25])
    # MAP with one relevant document: 1 / (rank + 1) over the whole ranking, 0 when missed
    assert list(evaluation.values("vector", "map")) == pytest.approx([0 if r is None else 1 / (r + 1) for r in DENSE])


def test_holm_per_metric_over_three_pipelines_by_hand(case):
    _, qrels, evaluation = case
    significance = compare_to_baseline(evaluation, qrels, "vector", test="student", correction="holm")
    assert significance.family_size == 3                  # bm25, rrf, vector-top1; not × 4 metrics
    base = evaluation.values("vector", "ndcg@3")
    raw = {p: ttest_rel(base, evaluation.values(p, "ndcg@3")).pvalue for p in ("bm25", "rrf", "vector-top1")}
    raw = {p: 1.0 if math.isnan(v) else v for p, v in raw.items()}
    for p, v in raw.items():
        assert significance.cells[p]["ndcg@3"].p_value == pytest.approx(v)
    # Holm by hand: p sorted ascending p(1) ≤ p(2) ≤ p(3) →
    # 3·p(1), max(3·p(1), 2·p(2)), max(3·p(1), 2·p(2), 1·p(3)), each capped at 1
    (a, pa), (b, pb), (c, pc) = sorted(raw.items(), key=lambda kv: kv[1])
    expected = {a: min(1, 3 * pa), b: min(1, max(3 * pa, 2 * pb)), c: min(1, max(3 * pa, 2 * pb, pc))}
    for p, v in expected.items():
        assert significance.cells[p]["ndcg@3"].p_adjusted == pytest.approx(v)
        assert significance.cells[p]["ndcg@3"].significant == (v <= 0.05)


def test_holm_on_three_p_values_by_hand():
    # 0.01·3 = 0.03; 0.02·2 = 0.04; 0.04·1 = 0.04 (≥ the running max 0.04)
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])


def test_bonferroni_per_metric_multiplies_by_the_pipelines_not_the_metrics(case):
    _, qrels, evaluation = case
    significance = compare_to_baseline(evaluation, qrels, "vector", test="student", correction="bonferroni")
    for cells in significance.cells.values():
        for cell in cells.values():
            assert cell.p_adjusted == pytest.approx(min(1.0, 3 * cell.p_value))   # 3 pipelines, not × 4 metrics
    none = compare_to_baseline(evaluation, qrels, "vector", test="student", correction="none")
    assert all(c.p_adjusted == c.p_value for cells in none.cells.values() for c in cells.values())
    assert "no multiple-comparison correction" in none.describe()


def test_a_pipelines_significance_does_not_depend_on_the_other_metrics_or_its_raw_p_on_the_other_pipelines():
    """The issue's bug: with one family of pipelines × metrics, seed-adaptive's recall@5 p went from
    0.030 (4 pipelines) to 0.074 (8). Now the raw p never depends on what else ran, the corrected p
    never depends on the other metrics, and across pipelines only as the correction says."""
    c, qrels = _case()
    alone = evaluate_pipelines(c, qrels, ["vector", "bm25"], ["ndcg@3"])
    more_metrics = evaluate_pipelines(c, qrels, ["vector", "bm25"], ["ndcg@3", "ndcg@1", "recall@3", "map", "mrr@3"])
    more_pipelines = evaluate_pipelines(c, qrels, ["vector", "bm25", "rrf"], ["ndcg@3"])
    cell = lambda ev, corr: compare_to_baseline(ev, qrels, "vector", correction=corr).cells["bm25"]["ndcg@3"]
    for correction in ("holm", "bonferroni", "none"):
        # more metrics: nothing about bm25's ndcg@3 changes (before: the family grew × 5)
        assert cell(more_metrics, correction) == cell(alone, correction)
    # a third pipeline: bm25's raw p is the same, and with no correction so is its verdict
    assert cell(more_pipelines, "none") == cell(alone, "none")
    assert cell(more_pipelines, "holm").p_value == cell(alone, "holm").p_value
    # with Holm, bm25's corrected p is Holm over the two pipelines on ndcg@3
    rrf_p = compare_to_baseline(more_pipelines, qrels, "vector", correction="none").cells["rrf"]["ndcg@3"].p_value
    assert cell(more_pipelines, "holm").p_adjusted == pytest.approx(holm([cell(alone, "none").p_value, rrf_p])[0])


def test_the_vectorised_randomization_test_equals_one_column_at_a_time():
    rng = np.random.default_rng(3)
    diffs = rng.normal(0.05, 0.3, size=(30, 4))
    diffs[:, 3] = 0.0
    together = randomization_tests(diffs, 2_000, seed=11)
    for j in range(4):
        assert together[j] == randomization_test(np.zeros(30), diffs[:, j], 2_000, seed=11)
    assert together[3] == 1.0


# ---- bootstrap ------------------------------------------------------------------------------------

def test_bootstrap_ci_by_hand():
    # every value equal: every resample has the same mean
    assert bootstrap_ci([0.4, 0.4, 0.4]) == (pytest.approx(0.4), pytest.approx(0.4))
    # [0, 0, 0, 1]: a resample's mean is X/4 with X ~ Binomial(4, 1/4); P(X = 0) = 0.316 > 2.5 %, so the
    # lower bound is 0; P(X ≥ 3) = 0.051 > 2.5 % > P(X = 4) = 0.004, so the upper bound is 3/4
    low, high = bootstrap_ci([0.0, 0.0, 0.0, 1.0], 10_000, seed=5)
    assert (low, high) == (0.0, 0.75)
    assert low <= np.mean([0, 0, 0, 1]) <= high


def test_bootstrap_is_deterministic_for_a_seed_and_contains_the_mean():
    values = np.random.default_rng(0).random(50)
    first = bootstrap_ci(values, 2_000, seed=9)
    assert first == bootstrap_ci(values, 2_000, seed=9)
    assert first != bootstrap_ci(values, 2_000, seed=10)
    assert first[0] < values.mean() < first[1]
    # the interval of the mean shrinks like 1/√n: about ±1.96·σ/√n for a uniform sample (σ ≈ 0.29)
    assert first[1] - first[0] == pytest.approx(2 * 1.96 * values.std() / math.sqrt(50), rel=0.15)
    # each column of a matrix gets the same resamples as on its own
    both = resampled_means(np.column_stack([values, values[::-1]]), 500, seed=1)
    assert np.array_equal(both[:, 0], resampled_means(values.reshape(-1, 1), 500, seed=1)[:, 0])


def test_experiment_intervals_hold_their_means_and_do_not_move_when_a_pipeline_is_added(case):
    c, qrels, evaluation = case
    intervals = bootstrap_intervals(evaluation, "vector", 2_000, seed=42)
    for p in evaluation.results:
        for m in evaluation.metrics:
            low, high = intervals.means[p][m]
            assert low <= evaluation.results[p][m] <= high
    for p in ("bm25", "rrf", "vector-top1"):
        low, high = intervals.deltas[p]["ndcg@3"]
        assert low <= evaluation.results[p]["ndcg@3"] - evaluation.results["vector"]["ndcg@3"] <= high
    fewer = evaluate_pipelines(c, qrels, ["vector", "bm25"], ["ndcg@3"])
    alone = bootstrap_intervals(fewer, "vector", 2_000, seed=42)
    assert alone.deltas["bm25"]["ndcg@3"] == intervals.deltas["bm25"]["ndcg@3"]
    assert alone.means["vector"]["ndcg@3"] == intervals.means["vector"]["ndcg@3"]


def test_metric_names_cutoffs_and_gain():
    assert parse_metrics("ndcg,map", (10, 1)) == ("ndcg@1", "ndcg@10", "map")
    assert parse_metrics("recall@7,ndcg", (5,)) == ("recall@7", "ndcg@5")
    assert parse_cutoffs("20, 5,5,1") == (1, 5, 20)
    for bad in ("0", "x", "5,-1", ""):
        with pytest.raises(ValueError):
            parse_cutoffs(bad)
    assert with_gain(("ndcg@5", "map", "ndcg@10"), "exponential") == ("ndcg_burges@5", "map", "ndcg_burges@10")
    options = ExperimentOptions(metrics=("ndcg", "map"), cutoffs=(5, 10), gain="exponential")
    assert options.metrics == ("ndcg_burges@5", "ndcg_burges@10", "map")
    assert options.primary == "ndcg_burges@5" and options.router_metric == "ndcg_burges@5"
    default = ExperimentOptions()
    assert default.cutoffs == (1, 3, 5, 10, 20) and default.metrics[-1] == "map" and len(default.metrics) == 26
    assert default.primary == "ndcg@5"
    with pytest.raises(ValueError, match="unknown gain"):
        ExperimentOptions(gain="quadratic")
    with pytest.raises(ValueError, match="correction must be one of"):
        ExperimentOptions(correction="fdr")


# ---- notes and tables -------------------------------------------------------------------------------

def test_fewer_than_k_is_counted_per_pipeline_and_cutoff(case):
    _, _, evaluation = case
    # vector-top1 returns one result for each of the 8 queries: fewer than 3 for all 8, never fewer than 1;
    # vector returns the 3 fillers + r when found: 4 results (3 for q4, where r is missed) → none short of 3
    assert evaluation.n_results["vector-top1"] == {f"q{i}": 1 for i in range(8)}
    assert evaluation.short_of() == {"vector-top1": {3: 8}}
    assert short_notes(evaluation) == ["vector-top1: k=3: 8 of 8 queries"]


def test_per_intent_table_by_hand(case):
    _, _, evaluation = case
    header, rows = intent_rows(evaluation, "ndcg@1")
    assert header == ["pipeline", "debug (3)", "concept (5)"]
    # ndcg@1 is 1 when r is ranked first: bm25 ranks it first in q0-q2 (debug) and in q4, q5 of q3-q7
    assert rows[1] == ["bm25", f"{3 / 3:.4f}", f"{2 / 5:.4f}"]


def test_paired_t_is_scipys_ttest_rel_and_a_live_pair_is_not_corrected():
    from scipy.stats import ttest_rel

    from eval.statistics.significance import compare_pair, paired_t

    base = np.array([0.2, 0.5, 0.0, 1.0, 0.3, 0.6])
    cand = np.array([0.4, 0.5, 0.3, 1.0, 0.5, 0.9])
    assert paired_t(base, cand) == pytest.approx(ttest_rel(cand, base).pvalue, rel=1e-9)
    assert paired_t(base, base) == 1.0 and np.isnan(paired_t(base[:1], cand[:1]))
    # d = (0.2, 0, 0.3, 0, 0.2, 0.3): mean 1/6, sd √(0.0177) → t ≈ 3.07 with 5 degrees of freedom
    ps = compare_pair({"ndcg@5": base, "recall@5": base}, {"ndcg@5": cand, "recall@5": base})
    assert ps["ndcg@5"] == pytest.approx(paired_t(base, cand)) and ps["recall@5"] == 1.0   # raw: one system
    fisher = compare_pair({"ndcg@5": base}, {"ndcg@5": cand}, "fisher", 2000, seed=1)["ndcg@5"]
    assert 0.0 < fisher < 0.2                   # 4 nonzero differences, all positive: exact p = 2/16 = 0.125
    with pytest.raises(ValueError, match="test must be"):
        compare_pair({}, {}, "wilcoxon")
