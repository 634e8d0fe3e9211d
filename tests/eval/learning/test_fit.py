"""Fitting the learned models (eval/learning/fit.py): the linear model recovers known weights, and
every model's scores are what the learned fusion gives for the same model."""

from __future__ import annotations

import numpy as np
import pytest

from eval.learning.fit import Spec, Training, fit, moe_grid, scores, specs
from eval.metrics.measure import judge
from retrieval.fusion.learned import LearnedParams, learned
from retrieval.pipeline import PipelineConfig, fixed_pipeline_features
from tests.conftest import make_candidates

TRUE = {"log_access": 6.0, "log_reinforcement": 3.0}  # per unit of log(1 + count)
SD_UNIFORM = np.sqrt(1 / 12)  # a U(0, 1) feature's standard deviation


def logistic_table(n_queries=200, per_query=20, seed=1):
    """Relevance drawn from a logistic model of two features, u1 = log(1 + access count) and
    u2 = log(1 + reinforcement), each U(0, 1): P(relevant) = σ(6·u1 + 3·u2 − 5)."""
    rng = np.random.default_rng(seed)
    queries, qrels = [], {}
    for qi in range(n_queries):
        u1, u2 = rng.random(per_query), rng.random(per_query)
        relevant = rng.random(per_query) < 1 / (
            1 + np.exp(-(TRUE["log_access"] * u1 + TRUE["log_reinforcement"] * u2 - 5.0))
        )
        order = rng.permutation(per_query)
        queries.append(
            [
                {
                    "id": f"d{qi}_{j}",
                    "dense_rank": int(order[j]),
                    "dense_sim": 0.5,
                    "access_count": float(np.expm1(u1[j])),
                    "reinforcement": float(np.expm1(u2[j])),
                }
                for j in range(per_query)
            ]
        )
        qrels[f"q{qi}"] = {f"d{qi}_{j}": 1 for j in np.flatnonzero(relevant)}
    return make_candidates(queries), qrels


def training(c, qrels):
    return Training(c, judge(c, qrels), PipelineConfig("learned", "learned", depth=30), "ndcg@5")


def test_the_linear_model_recovers_known_weights():
    c, qrels = logistic_table()
    t = training(c, qrels)
    weights = {w.name: w.weight for w in fit(Spec("linear", 1.0), t, np.arange(c.n_queries))}
    # over standardised features the weights are the true ones × the features' standard deviation
    for name, value in TRUE.items():
        assert weights[name] == pytest.approx(value * SD_UNIFORM, rel=0.15)
    others = [abs(v) for k, v in weights.items() if k not in TRUE]
    assert max(others) < 0.25 * TRUE["log_reinforcement"] * SD_UNIFORM


def test_every_model_scores_as_the_learned_fusion_scores_it(tmp_path):
    c, qrels = logistic_table(n_queries=30, per_query=10)
    t = training(c, qrels)
    everything = np.arange(c.n_queries)
    linear = fit(Spec("linear", 0.1), t, everything)
    fused = learned(c, t.visible, t.depth, LearnedParams(weights=linear), fixed=fixed_pipeline_features(c)).score
    assert np.array_equal(scores(linear, t), fused)
    tree = fit(Spec("lambdamart"), t, everything)
    moe = fit(Spec("moe", 10.0), t, everything)
    from retrieval.fusion.learned import model_scores

    for model in (tree, moe):
        assert np.allclose(scores(model, t), model_scores(c, t.visible, t.depth, model, fixed_pipeline_features(c)).score)


def test_a_fit_sees_only_the_rows_of_its_queries():
    """LambdaMART trained on queries whose only relevant rows carry a signal learns it; trained on
    queries without any relevant row it learns nothing (every score equal)."""
    c, qrels = logistic_table(n_queries=40, per_query=10)
    t = training(c, qrels)
    none = np.array([q for q in range(c.n_queries) if not qrels[f"q{q}"]])
    some = np.array([q for q in range(c.n_queries) if qrels[f"q{q}"]])
    assert len(some)
    if len(none):
        flat = scores(fit(Spec("lambdamart"), t, none), t)
        assert np.ptp(flat[t.visible]) == 0.0
    learned_scores = scores(fit(Spec("lambdamart"), t, some), t)
    assert np.ptp(learned_scores[t.visible]) > 0.0


def test_the_candidates_of_each_model_choice():
    assert [str(s) for s in specs("linear")] == ["linear C=0.01", "linear C=0.1", "linear C=1"]
    assert [s.model for s in specs("auto")] == ["linear"] * 3 + ["lambdamart"] + ["moe"] * 3
    with pytest.raises(ValueError, match="--model must be one of"):
        specs("xgboost")
    grid = moe_grid()
    # 5³ − 1 weight triples (not all zero) × 3 penalty strengths, every value in [0, 1]
    assert grid.shape == (124 * 3, 4) and grid.min() == 0.0 and grid.max() == 1.0


def mixed_table(n_queries=24, per_query=12, seed=7):
    """Rows that differ in everything the MoE weighs: both paths' ranks and scores, age,
    confidence and vitality on both sides of the strong penalty's thresholds."""
    rng = np.random.default_rng(seed)
    queries, qrels = [], {}
    for qi in range(n_queries):
        dense, bm25 = rng.permutation(per_query), rng.permutation(per_query)
        queries.append(
            [
                {
                    "id": f"d{qi}_{j}",
                    "dense_rank": int(dense[j]),
                    "dense_sim": float(0.9 - dense[j] / 20),
                    "bm25_rank": int(bm25[j]) if bm25[j] < per_query - 3 else -1,
                    "bm25_score": float(12 - bm25[j]) if bm25[j] < per_query - 3 else 0.0,
                    "age_days": float(rng.integers(0, 400)),
                    "confidence": float(rng.choice([0.4, 0.7, 0.95])),
                    "vitality": float(rng.choice([20.0, 50.0, 90.0])),
                    "access_count": float(rng.integers(0, 9)),
                }
                for j in range(per_query)
            ]
        )
        qrels[f"q{qi}"] = {f"d{qi}_{j}": 1 for j in rng.choice(per_query, 2, replace=False)}
    return make_candidates(queries), qrels


def test_the_moe_grid_values_are_each_points_scored_one_at_a_time():
    """The grid's values (computed from inputs shared by every point) equal, bit for bit, each
    point's own ranking scored alone: every query given that point, the score the sum of
    ``moe_parts``' components, as a fitted MoE is scored."""
    from retrieval.fusion.learned.model import moe_parts

    c, qrels = mixed_table()
    t = training(c, qrels)
    grid = moe_grid()
    values = t.moe_values()
    assert values.shape == (c.n_queries, len(grid))
    for g, point in enumerate(grid):
        parts = moe_parts(c, t.visible, t.depth, np.tile(point, (c.n_queries, 1)))
        score = np.where(t.visible, parts["dense"] + parts["sparse"] + parts["time"], -np.inf)
        assert np.array_equal(values[:, g], np.nan_to_num(t.values(score))), point
    assert len({tuple(np.round(values[:, g], 9)) for g in range(len(grid))}) > 10  # points differ


def test_scoring_some_queries_scores_their_rows_as_scoring_all_of_them():
    c, qrels = mixed_table()
    t = training(c, qrels)
    some = np.array([1, 4, 5, 11, 20])
    rows = np.zeros(c.n_rows, dtype=bool)
    rows[t.rows_of(some)] = True
    for spec in (Spec("linear", 0.1), Spec("lambdamart"), Spec("moe", 10.0)):
        model = fit(spec, t, np.arange(0, c.n_queries, 2))
        every, only = scores(model, t), scores(model, t, some)
        assert np.array_equal(only[rows], every[rows]), spec
        assert np.all(only[~rows] == -np.inf) and np.all(np.isfinite(only[rows])), spec
