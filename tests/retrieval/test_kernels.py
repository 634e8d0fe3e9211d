"""The compiled ranking and metric kernels equal the NumPy implementation they replaced, bit for
bit (``tests/numpy_reference.py``), on random tables full of ties, ±inf and NaN scores, min
scores with kept rows, per-query caps and token budgets — and a sweep's batched evaluation
equals ranking and scoring each configuration on its own."""

from __future__ import annotations

import numpy as np
import pytest

from eval.metrics.measure import judge, mean_metrics, per_query
from eval.metrics.measure import config_values
from eval.search.space import ParamSpec, Space
from eval.search.sweep import sweep
from retrieval.kernels import INSERTION_MAX
from retrieval.pipeline import PIPELINES, run_pipeline, with_params
from retrieval.ranking import rank_rows
from tests.conftest import make_candidates
from tests.numpy_reference import per_query_numpy, rank_rows_numpy

FIELDS = ("rows", "query_idx", "rank", "score", "total_tokens")
METRICS = ("ndcg@1", "ndcg@5", "ndcg@10", "recall@3", "recall@20", "precision@5", "mrr@10", "hit_rate@3",
           "map@10", "map", "ndcg_burges@5")


def random_table(seed: int, n_queries: int = 12, widest: int = 120):
    """Queries of 0 … ``widest`` rows with integer scores (many ties), some ±inf, NaN and −0.0,
    document ids not in row order, token counts 0–30, graded qrels."""
    rng = np.random.default_rng(seed)
    queries, qrels = [], {}
    for qi in range(n_queries):
        docs = rng.choice(500, size=int(rng.integers(0, widest)), replace=False)
        queries.append([{"id": f"d{d:03d}", "token_count": int(rng.integers(0, 30))} for d in docs])
        judged = rng.choice(500, size=int(rng.integers(0, 12)), replace=False)
        qrels[f"q{qi}"] = {f"d{d:03d}": int(rng.integers(0, 4)) for d in judged}
    c = make_candidates(queries)
    score = rng.integers(0, 6, c.n_rows).astype(np.float64)
    for value, share in ((np.inf, 0.03), (-np.inf, 0.1), (np.nan, 0.03), (-0.0, 0.05)):
        score[rng.random(c.n_rows) < share] = value
    return c, qrels, score, rng


def assert_same_ranking(a, b):
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype, name
        assert np.array_equal(x, y, equal_nan=True), name


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("max_results", [1, 5, INSERTION_MAX, INSERTION_MAX + 1, 100, 1000])
def test_rank_rows_equals_the_numpy_ranking(seed, max_results):
    """Both selection paths (sorted buffer up to INSERTION_MAX results, merge sort above)."""
    c, _, score, rng = random_table(seed)
    keep = rng.random(c.n_rows) < 0.3
    for min_score, token_budget, kept in ((None, None, None), (2.0, None, keep), (None, 60, None), (1.0, 25, keep)):
        assert_same_ranking(rank_rows(c, score, max_results, min_score, token_budget, kept),
                            rank_rows_numpy(c, score, max_results, min_score, token_budget, kept))


@pytest.mark.parametrize("seed", range(4))
def test_per_query_caps_and_budgets_equal_the_numpy_ranking(seed):
    c, _, score, rng = random_table(seed)
    caps = rng.integers(0, 80, c.n_queries)
    budgets = rng.integers(-1, 120, c.n_queries)  # −1: no budget for that query
    assert_same_ranking(rank_rows(c, score, caps, None, budgets), rank_rows_numpy(c, score, caps, None, budgets))
    assert_same_ranking(rank_rows(c, score, caps, 1.0, 50), rank_rows_numpy(c, score, caps, 1.0, 50))


def test_ties_plus_inf_and_nan_by_hand():
    """Equal scores: lower document id first. +inf takes the first place but is not kept (only
    finite scores rank), so the first kept result has rank 1; NaN and −inf are never kept."""
    c = make_candidates([[{"id": i} for i in ["d4", "d2", "d3", "d1", "d5"]]])
    ranking = rank_rows(c, np.array([1.0, 2.0, np.inf, 2.0, np.nan]), max_results=3)
    assert [c.doc_ids[int(c.doc_idx[r])] for r in ranking.rows] == ["d1", "d2"]  # d3 (+inf) held place 0
    assert ranking.rank.tolist() == [1, 2]


@pytest.mark.parametrize("seed", range(6))
def test_metrics_equal_the_numpy_evaluator(seed):
    c, qrels, score, _ = random_table(seed)
    judged = judge(c, qrels)
    for max_results in (3, 10, 60):
        ranking = rank_rows(c, score, max_results)
        new, old = per_query(c, judged, ranking, METRICS), per_query_numpy(c, judged, ranking, METRICS)
        for metric in METRICS:
            assert np.array_equal(new[metric], old[metric], equal_nan=True), metric


@pytest.fixture(scope="module")
def tiny_pool(tiny_index, tiny):
    from retrieval.candidates import build_candidates

    return tiny, build_candidates(tiny_index, tiny.queries, pool_depth=50)


def test_batched_sweep_values_equal_one_pipeline_at_a_time(tiny_pool):
    """Every named pipeline (routes, min scores, budgets, routed adaptive profiles) and a few
    edited ones, scored in one batch, equal run_pipeline + per_query one by one."""
    dataset, c = tiny_pool
    judged = judge(c, dataset.qrels)
    configs = list(PIPELINES.values()) + [with_params(PIPELINES["rrf"], {"min_score": 0.03}),
                                          with_params(PIPELINES["rrf"], {"token_budget": 40}),
                                          with_params(PIPELINES["rrf"], {"max_results": 1})]
    for metric in ("ndcg@5", "recall@10", "mrr@3", "map", "ndcg_burges@10", "precision@1", "hit_rate@5"):
        batch = np.concatenate(list(config_values(c, judged, configs, metric)))
        for b, config in enumerate(configs):
            alone = per_query(c, judged, run_pipeline(c, config).ranking, (metric,))[metric]
            assert np.array_equal(batch[b], alone, equal_nan=True), (metric, config.name)


def test_sweep_scores_equal_the_mean_of_each_points_ranked_run(tiny_pool):
    dataset, c = tiny_pool
    judged = judge(c, dataset.qrels)
    space = Space((ParamSpec("rrf.rrf_k", 10.0, 100.0, 10.0), ParamSpec("max_results", 3, 9, 3, integer=True)))
    result = sweep(c, dataset.qrels, PIPELINES["rrf"], space, "ndcg@5", folds=2)
    for point, score in zip(result.points, result.scores):
        config = with_params(PIPELINES["rrf"], {"rrf.rrf_k": float(point[0]), "max_results": int(point[1])})
        values = per_query(c, judged, run_pipeline(c, config).ranking, ("ndcg@5",))["ndcg@5"][judged.judged]
        assert score == np.concatenate([values, np.zeros(judged.n_missing)]).mean()


def test_all_metrics_of_a_batch_in_one_pass_equal_each_ranking(tiny_pool):
    """``fused_values`` asked for every metric and cutoff at once (the Tune page asks for five)
    equals ``per_query`` of each pipeline's own ranking, metric for metric, bit for bit — and
    so does ``evaluate_config``, the Tune page's re-score, with its ranked run built on demand."""
    from eval.metrics.measure import fused_values
    from eval.experiments.live import evaluate_config
    from retrieval.pipeline import fuse

    dataset, c = tiny_pool
    judged = judge(c, dataset.qrels)
    configs = list(PIPELINES.values()) + [with_params(PIPELINES["rrf"], {"min_score": 0.03}),
                                          with_params(PIPELINES["rrf"], {"token_budget": 40})]
    values = fused_values(judged, [fuse(c, config) for config in configs], METRICS)
    assert list(values) == list(METRICS)
    for b, config in enumerate(configs):
        alone = per_query(c, judged, run_pipeline(c, config).ranking, METRICS)
        live = evaluate_config(c, judged, config, METRICS)
        for metric in METRICS:
            assert np.array_equal(values[metric][b], alone[metric], equal_nan=True), (metric, config.name)
            assert np.array_equal(live.values[metric], alone[metric], equal_nan=True), (metric, config.name)
        assert live.run.ranking.rows.tolist() == run_pipeline(c, config).ranking.rows.tolist()
        assert live.means == mean_metrics(c, judged, run_pipeline(c, config).ranking, METRICS)
