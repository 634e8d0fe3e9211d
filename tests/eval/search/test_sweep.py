"""Grid and random search with cross-validation (eval/search/sweep.py) on the tiny fixture's real pool."""

from __future__ import annotations


import numpy as np
import pytest

from eval.metrics.ranx_eval import fast_metrics
from eval.metrics.measure import judge, per_query
from eval.stores.pool import load_pool
from eval.search.space import Space, SumConstraint, parse_param, parse_sum, point_values
from eval.search.sweep import make_folds, sweep
from retrieval.pipeline import (PIPELINES, from_toml, get_param, get_pipeline, run_pipeline,
                                sweepable_params, with_params)

RRF = PIPELINES["rrf"]
ADAPTIVE = PIPELINES["seed-adaptive"]


@pytest.fixture(scope="module")
def pool(tiny, rwb_home):
    return load_pool(tiny)


def test_sweepable_params_are_the_ones_the_pipeline_uses():
    names = sweepable_params(ADAPTIVE)   # routed: every profile's weights and factors, not the fixed one
    for expected in ("adaptive.profiles.debug.w_sparse", "adaptive.profiles.concept.quality.conf_low_factor",
                     "adaptive.half_life_days", "candidate_multiplier", "min_score"):
        assert expected in names
    assert not any(n.startswith(("rrf.", "adaptive.profile.")) for n in names)
    fixed = sweepable_params(PIPELINES["adaptive"])
    assert "adaptive.profile.quality.conf_low_factor" in fixed and "adaptive.profiles.debug.w_sparse" not in fixed
    assert sweepable_params(RRF) == ["max_results", "candidate_multiplier", "depth", "min_score", "min_similarity",
                                     "token_budget", "rrf.rrf_k", "rrf.w_dense", "rrf.w_sparse"]


def test_invalid_values_name_the_parameter(pool, tiny):
    space = Space((parse_param("rrf.rrf_k=0:10:5", RRF),))
    with pytest.raises(ValueError, match="rrf.rrf_k=0 is not valid.*rrf.rrf_k must be > 0"):
        sweep(pool, tiny.qrels, RRF, space, folds=2)


def test_folds_are_checked_and_seeded():
    with pytest.raises(ValueError, match="--folds must be ≥ 2"):
        make_folds(10, 1, 0)
    with pytest.raises(ValueError, match="exceeds the number of judged queries"):
        make_folds(4, 5, 0)
    folds = make_folds(10, 3, seed=5)
    assert sorted(np.bincount(folds)) == [3, 3, 4]
    assert (folds == make_folds(10, 3, seed=5)).all()


@pytest.mark.parametrize("with_fixed", [False, True], ids=["grid-alone", "with-fixed-pipelines"])
def test_cross_validation_picks_on_training_and_reports_held_out(pool, tiny, with_fixed):
    space = Space((parse_param("rrf.rrf_k=1:101:20", RRF), parse_param("rrf.w_dense=0:1:0.25", RRF)))
    result = sweep(pool, tiny.qrels, RRF, space, folds=2, seed=3, fixed=None if with_fixed else {})
    assert len(result.scores) == 6 * 5 and result.mode == "grid" and result.n_queries == 4
    # brute force: every candidate's per-query ndcg@5 — the fixed pipelines first (the start
    # pipeline, then the named presets), then the grid — and each fold's choice by hand
    judged = judge(pool, tiny.qrels)
    points = list(space.grid())
    fixed = [RRF, *(cfg for name, cfg in PIPELINES.items() if name not in ("rrf", "seed-adaptive-learned")
                    and cfg.path_depth <= pool.pool_depth)] if with_fixed else []
    assert [cfg.name for cfg in result.fixed] == [cfg.name for cfg in fixed]
    configs = fixed + [with_params(RRF, point_values(space, p)) for p in points]
    table = np.array([per_query(pool, judged, run_pipeline(pool, cfg).ranking, ("ndcg@5",))["ndcg@5"][judged.judged]
                      for cfg in configs])
    assert np.allclose(result.scores, table[len(fixed):].mean(axis=1))
    fold_of = make_folds(4, 2, seed=3)
    for fold in result.folds:
        train, test = fold_of != fold.fold, fold_of == fold.fold
        train_means = table[:, train].mean(axis=1)
        chosen = int(np.argmax(train_means))              # first best: a fixed pipeline keeps a tie
        if chosen < len(fixed):
            assert (fold.fixed, fold.best) == (fixed[chosen].name, {})
        else:
            assert (fold.fixed, fold.best) == ("", dict(zip(space.names, points[chosen - len(fixed)])))
        assert fold.train_mean == pytest.approx(train_means[chosen])
        assert fold.test_mean == pytest.approx(table[chosen, test].mean())
        assert (fold.n_train, fold.n_test) == (int(train.sum()), int(test.sum()))
    assert result.train_mean == pytest.approx(np.mean([f.train_mean for f in result.folds]))
    assert result.held_out_mean == pytest.approx(np.mean([f.test_mean for f in result.folds]))
    assert result.best_score == pytest.approx(table[len(fixed):].mean(axis=1).max())
    assert np.allclose(result.fixed_scores, table[:len(fixed)].mean(axis=1))
    overall = int(np.argmax(table.mean(axis=1)))
    assert result.recommended.name == (fixed[overall].name if overall < len(fixed) else "rrf-tuned")
    assert result.recommended_score == pytest.approx(table[overall].mean())
    assert result.base_score == pytest.approx(fast_metrics(pool, tiny.qrels, RRF, ["ndcg@5"])["ndcg@5"])


def test_a_fixed_pipeline_better_than_every_setting_is_recommended_and_kept_in_each_fold(pool, tiny):
    """A sweep of bm25's min_score on tiny: every setting scores nDCG@5 0.5, as bm25 itself does,
    while the adaptive preset (intent profiles) scores higher on all four queries' mean. The sweep
    recommends the preset, every fold keeps a fixed pipeline, and the TOML written is the preset's."""
    bm25 = PIPELINES["bm25"]
    space = Space((parse_param("min_score=0:0.5:0.5", bm25),))
    result = sweep(pool, tiny.qrels, bm25, space, folds=2, seed=0)
    judged = judge(pool, tiny.qrels)
    means = {cfg.name: per_query(pool, judged, run_pipeline(pool, cfg).ranking, ("ndcg@5",))["ndcg@5"][judged.judged].mean()
             for cfg in result.fixed}
    assert list(result.scores) == pytest.approx([0.5, 0.5]) and means["bm25"] == pytest.approx(0.5)
    best_fixed = max(means, key=means.get)                      # the first of the best, as the sweep picks
    assert means[best_fixed] > result.best_score
    assert result.chosen_fixed == best_fixed and result.recommended.name == best_fixed
    assert result.recommended_score == pytest.approx(means[best_fixed])
    assert from_toml(result.best_toml()) == PIPELINES[best_fixed]
    assert all(f.fixed and f.best == {} and f.choice == f.fixed for f in result.folds)
    data = result.to_json()
    assert data["recommended"] == {"name": best_fixed, "score": result.recommended_score, "fixed": True}
    assert data["fixed"] == pytest.approx(means)


def test_seeded_random_search_is_reproducible(pool, tiny):
    space = Space((parse_param("rrf.rrf_k=1:200:1", RRF), parse_param("rrf.w_sparse=0:2:0.1", RRF)))
    one = sweep(pool, tiny.qrels, RRF, space, random=25, folds=2, seed=11)
    two = sweep(pool, tiny.qrels, RRF, space, random=25, folds=2, seed=11)
    other = sweep(pool, tiny.qrels, RRF, space, random=25, folds=2, seed=12)
    assert one.mode == "random" and len(one.scores) == 25 and len({tuple(p) for p in one.points}) == 25
    assert (one.points == two.points).all() and (one.scores == two.scores).all()
    assert one.folds == two.folds and one.best_params == two.best_params
    assert not (one.points == other.points).all()
    assert all(1 <= k <= 200 and 0 <= w <= 2 for k, w in one.points)


def test_random_search_on_a_small_grid_takes_every_point(pool, tiny):
    space = Space((parse_param("rrf.rrf_k=10:30:10", RRF),))
    assert len(sweep(pool, tiny.qrels, RRF, space, random=50, folds=2).scores) == 3


def test_exported_toml_round_trips_and_reproduces_the_score(pool, tiny, tmp_path):
    space = Space((parse_param("adaptive.profiles.debug.w_sparse=0:1:0.5", ADAPTIVE),
                   parse_param("adaptive.half_life_days=10:30:10", ADAPTIVE),
                   parse_param("min_score=0:0.2:0.1", ADAPTIVE)))
    result = sweep(pool, tiny.qrels, ADAPTIVE, space, metric="mrr@5", folds=2, fixed={})  # the grid alone
    text = result.best_toml()
    assert from_toml(text) == result.best_config
    path = tmp_path / "best.toml"
    path.write_text(text, "utf-8")
    loaded = get_pipeline(str(path))
    assert loaded.name == "seed-adaptive-tuned"
    for name, value in result.best_params.items():
        assert (loaded.min_score if name == "min_score" else get_param(loaded, name)) == value
    assert fast_metrics(pool, tiny.qrels, loaded, ["mrr@5"])["mrr@5"] == pytest.approx(result.best_score, abs=1e-12)


def test_sum_constraint_syntax_and_an_empty_constrained_grid(pool, tiny):
    specs = (parse_param("rrf.w_dense=0:1:0.5", RRF), parse_param("rrf.w_sparse=0:1:0.5", RRF))
    assert parse_sum("rrf.w_dense+rrf.w_sparse=1", specs) == SumConstraint(("rrf.w_dense", "rrf.w_sparse"), 1.0)
    for bad in ("rrf.w_dense+rrf.w_sparse", "rrf.w_dense=1", "rrf.w_dense+rrf.w_sparse=x", "rrf.w_dense+rrf.k=1"):
        with pytest.raises(ValueError, match="--sum"):
            parse_sum(bad, specs)
    space = Space(specs, (SumConstraint(("rrf.w_dense", "rrf.w_sparse"), 5.0),))
    with pytest.raises(ValueError, match="no grid point satisfies"):
        sweep(pool, tiny.qrels, RRF, space, folds=2)


def test_a_range_needing_a_deeper_pool_is_refused_up_front(pool, tiny):
    space = Space((parse_param("candidate_multiplier=1:40:1", RRF),))
    # max_results 10 × multiplier 40 = 400 candidates per path; the pool holds 50
    with pytest.raises(ValueError, match="candidate_multiplier=40 takes 400 candidates per path.*--pool-depth 400"):
        sweep(pool, tiny.qrels, RRF, space, folds=2)


def test_make_folds_by_group_keeps_groups_whole_and_balances_sizes():
    from eval.search.sweep import make_folds

    labels = ["a"] * 4 + ["b"] * 3 + ["c"] * 2 + ["d"] * 2 + ["e"]
    for seed in range(5):
        fold_of = make_folds(len(labels), 2, seed, labels)
        by_group = {g: {int(f) for f, x in zip(fold_of, labels) if x == g} for g in set(labels)}
        assert all(len(folds) == 1 for folds in by_group.values())    # no group split
        sizes = sorted(int((fold_of == f).sum()) for f in range(2))
        assert sizes[0] >= 4 and sum(sizes) == 12                     # greedy: never 1 vs 11
    assert list(make_folds(4, 2, 0, ["x", "x", "y", "y"])) in ([0, 0, 1, 1], [1, 1, 0, 0])
    with pytest.raises(ValueError, match="exceeds the number of groups"):
        make_folds(4, 3, 0, ["x", "x", "y", "y"])
