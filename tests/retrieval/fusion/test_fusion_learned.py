"""The learned fusion (retrieval/fusion/learned/__init__.py): its formula by hand, its weights as knobs, its
TOML form, a stored model beside the TOML, and the refusal of a pool with another feature set."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from retrieval.fusion.learned.features import feature_matrix, feature_names, feature_set_id
from retrieval.pipeline import fixed_pipeline_features
from retrieval.fusion.learned import FeatureWeight, LearnedParams, learned
from retrieval.fusion.learned.model import MoEModel, TreeModel, load_model, model_to_json, save_model
from retrieval.fusion.learned.features import QUERY_FEATURES
from retrieval.pipeline import (
    PipelineConfig,
    from_toml,
    get_pipeline,
    knobs,
    run_pipeline,
    to_toml,
    with_params,
)
from tests.conftest import everything_visible, make_candidates, score_of


def table(types=("fact", "fact", "procedure")):
    """One query, three documents: A found by both paths, B by the vector path, C by BM25."""
    c = make_candidates(
        [
            [
                {
                    "id": "A",
                    "dense_rank": 0,
                    "dense_sim": 0.8,
                    "bm25_rank": 1,
                    "bm25_score": 4.0,
                    "access_count": 3,
                },
                {"id": "B", "dense_rank": 1, "dense_sim": 0.6, "access_count": 0},
                {"id": "C", "dense_sim": 0.2, "bm25_rank": 0, "bm25_score": 8.0, "access_count": 7},
            ]
        ]
    )
    return dataclasses.replace(c, doc_types=tuple(types))


def test_linear_score_is_the_weighted_sum_of_standardised_features_by_hand():
    c = table()
    weights = (
        FeatureWeight("dense_sim", 2.0, mean=0.5, scale=0.25),
        FeatureWeight("both", 1.0),
        FeatureWeight("log_access", -0.5, mean=1.0, scale=2.0),
    )
    score = learned(c, everything_visible(c), 20, LearnedParams(weights=weights), fixed=fixed_pipeline_features(c)).score
    # A: 2·(0.8−0.5)/0.25 + 1·1 − 0.5·(ln 4 − 1)/2;  B: 2·(0.6−0.5)/0.25 + 0 − 0.5·(0 − 1)/2
    assert score_of(c, score, "A") == pytest.approx(2.4 + 1.0 - 0.25 * (math.log(4) - 1))
    assert score_of(c, score, "B") == pytest.approx(0.8 + 0.25)
    assert score_of(c, score, "C") == pytest.approx(
        2 * (0.2 - 0.5) / 0.25 - 0.25 * (math.log(8) - 1)
    )


def test_unseen_rows_score_minus_infinity_and_components_sum_to_the_score():
    c = table()
    visible = np.array([True, False, True])
    scored = learned(c, visible, 20, LearnedParams(), fixed=fixed_pipeline_features(c))
    assert scored.score[1] == -np.inf
    total = sum(np.asarray(v) for v in scored.components.values())
    assert np.allclose(total[visible], scored.score[visible])


def test_the_default_untrained_model_is_combsum_of_min_max_scores():
    c = table()
    score = learned(c, everything_visible(c), 20, LearnedParams(), fixed=fixed_pipeline_features(c)).score
    # min-max per path over its hits: dense A 1, B 0 (C missed: 0); BM25 C 1, A 0
    assert [score_of(c, score, d) for d in "ABC"] == pytest.approx([1.0, 0.0, 1.0])


def test_weights_are_knobs_and_round_trip_through_toml():
    config = PipelineConfig(
        "mine",
        "learned",
        params=LearnedParams(
            weights=(FeatureWeight("dense_sim", 1.5, 0.5, 0.2), FeatureWeight("recency", 0.25))
        ),
    )
    paths = [k.path for k in knobs(config)]
    assert "learned.weights.dense_sim.weight" in paths and "learned.weights.recency.weight" in paths
    moved = with_params(config, {"learned.weights.recency.weight": 2.0})
    assert moved.params.weights[1] == FeatureWeight("recency", 2.0)
    assert moved.params.weights[0] == config.params.weights[0]
    again = from_toml(to_toml(moved))
    assert again.params == moved.params
    # a table {feature = weight} is accepted too; an unknown key is refused with the allowed ones
    short = from_toml('fusion = "learned"\n[learned.weights]\ndense_sim = 0.5\nboth = 1.0\n')
    assert short.params.weights == (FeatureWeight("dense_sim", 0.5), FeatureWeight("both", 1.0))
    with pytest.raises(ValueError, match="unknown key"):
        from_toml('fusion = "learned"\n[[learned.weights]]\nname = "both"\nwieght = 1.0\n')


def test_a_bad_model_is_refused_where_it_is_defined():
    with pytest.raises(ValueError, match="model must be one of"):
        LearnedParams(model="xgboost")
    with pytest.raises(ValueError, match="needs file"):
        LearnedParams(model="lambdamart")
    with pytest.raises(ValueError, match="twice"):
        LearnedParams(weights=(FeatureWeight("both", 1.0), FeatureWeight("both", 2.0)))
    with pytest.raises(ValueError, match="scale must be > 0"):
        FeatureWeight("both", 1.0, scale=0.0)


def test_a_pool_with_another_feature_set_is_refused_not_scored():
    c = table()
    tied = LearnedParams(
        feature_set=feature_set_id(feature_names(c)), weights=(FeatureWeight("dense_sim", 1.0),)
    )
    assert np.isfinite(learned(c, everything_visible(c), 20, tied, fixed=fixed_pipeline_features(c)).score).all()
    other = table(types=("fact", "fact", "entity"))  # another dataset's memory types
    with pytest.raises(ValueError, match="feature set .* rerun rwb learn"):
        learned(other, everything_visible(other), 20, tied, fixed=fixed_pipeline_features(other))
    with pytest.raises(ValueError, match="does not have"):
        learned(
            c,
            everything_visible(c),
            20,
            LearnedParams(weights=(FeatureWeight("no_such_feature", 1.0),)),
            fixed=fixed_pipeline_features(c),
        )


def _tree_model(c):
    import lightgbm

    x = feature_matrix(c, everything_visible(c), 20, fixed_pipeline_features(c))
    ranker = lightgbm.LGBMRanker(
        objective="lambdarank",
        n_estimators=5,
        num_leaves=3,
        min_child_samples=1,
        num_threads=1,
        deterministic=True,
        verbose=-1,
    )
    ranker.fit(x, np.array([2, 0, 1]), group=[3])
    names = feature_names(c)
    return TreeModel(names, feature_set_id(names), ranker.booster_.model_to_string(), {}), x, ranker


def test_a_lambdamart_model_beside_the_toml_scores_as_lightgbm_predicts(tmp_path):
    c = table()
    model, x, ranker = _tree_model(c)
    save_model(model, tmp_path / "m.model.json")
    (tmp_path / "m.toml").write_text(
        'fusion = "learned"\ndepth = 20\n[learned]\nmodel = "lambdamart"\nfile = "m.model.json"\n',
        "utf-8",
    )
    config = get_pipeline(str(tmp_path / "m.toml"))
    run = run_pipeline(c, config)
    assert np.allclose(run.scored.score, ranker.predict(x))
    assert isinstance(load_model(tmp_path / "m.model.json"), TreeModel)


def test_a_saved_profile_reads_its_model_beside_it(tmp_path, monkeypatch):
    from eval.stores.profiles import ProfileStore

    monkeypatch.chdir(tmp_path)  # not the profiles folder: a relative file was read from here
    c = table()
    model, x, ranker = _tree_model(c)
    store = ProfileStore(tmp_path / "home")
    store.root.mkdir(parents=True)
    save_model(model, store.root / "m.model.json")
    (store.root / "mine.toml").write_text(
        'fusion = "learned"\ndepth = 20\n[learned]\nmodel = "lambdamart"\nfile = "m.model.json"\n',
        "utf-8",
    )
    run = run_pipeline(c, store.load("mine"))
    assert np.allclose(run.scored.score, ranker.predict(x))


def test_the_same_toml_in_two_folders_is_two_configurations(tmp_path):
    """Each folder holds its own m.model.json (fitted to opposite labels): the two configurations
    read from the same text load different models, so they are not equal and a cache keyed by
    the configuration (Tune's live runs) keeps two entries, not one; where they were read from
    is never written to their TOML, nor read from one."""
    import lightgbm

    c = table()
    x = feature_matrix(c, everything_visible(c), 20, fixed_pipeline_features(c))
    names = feature_names(c)
    text = 'fusion = "learned"\ndepth = 20\n[learned]\nmodel = "lambdamart"\nfile = "m.model.json"\n'
    configs = []
    for folder, labels in (("a", [2, 0, 1]), ("b", [0, 2, 1])):
        ranker = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=5, num_leaves=3,
                                     min_child_samples=1, num_threads=1, deterministic=True, verbose=-1)
        ranker.fit(x, np.array(labels), group=[3])
        (tmp_path / folder).mkdir()
        save_model(TreeModel(names, feature_set_id(names), ranker.booster_.model_to_string(), {}),
                   tmp_path / folder / "m.model.json")
        (tmp_path / folder / "m.toml").write_text(text, "utf-8")
        configs.append(get_pipeline(str(tmp_path / folder / "m.toml")))
    a, b = configs
    scores = [run_pipeline(c, config).scored.score for config in configs]
    assert not np.array_equal(scores[0], scores[1])
    assert a != b and len({a: "a", b: "b"}) == 2
    assert a == get_pipeline(str(tmp_path / "a" / "m.toml"))
    assert to_toml(a) == to_toml(b) and "folder" not in to_toml(a)
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['folder'\]"):
        from_toml(text + f'folder = "{tmp_path / "b"}"\n')


def test_a_model_file_may_not_leave_the_toml_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.toml").write_text(
        'fusion = "learned"\n[learned]\nmodel = "lambdamart"\nfile = "../x.model.json"\n', "utf-8"
    )
    config = get_pipeline(str(tmp_path / "a" / "m.toml"))
    c = table()
    with pytest.raises(ValueError, match="leaves"):
        run_pipeline(c, config)


def test_a_damaged_model_file_is_a_clear_error(tmp_path):
    (tmp_path / "m.model.json").write_text('{"format": "something else"}', "utf-8")
    with pytest.raises(ValueError, match="not an rwb learned model"):
        load_model(tmp_path / "m.model.json")


def test_moe_applies_the_predicted_profile_per_query_by_hand():
    """Two grid points; the intercepts alone pick one, so every query gets it: w = (1, 0, 0) with
    strength 0 scores clip(cos) exactly; w = (0, 1, 0) with strength 1 scores BM25/best × F."""
    c = dataclasses.replace(table(), doc_types=())
    names = feature_names(c)
    width = len(QUERY_FEATURES)
    grid = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0]])

    def model(first_wins: bool) -> MoEModel:
        return MoEModel(
            names,
            feature_set_id(names),
            grid,
            np.zeros((2, width)),
            np.array([1.0, 0.0] if first_wins else [0.0, 1.0]),
            np.zeros(width),
            np.ones(width),
            {},
        )

    from retrieval.fusion.learned import model_scores

    dense = model_scores(c, everything_visible(c), 20, model(True), fixed_pipeline_features(c)).score
    assert [score_of(c, dense, d) for d in "ABC"] == pytest.approx([0.8, 0.6, 0.2])
    sparse = model_scores(c, everything_visible(c), 20, model(False), fixed_pipeline_features(c)).score
    # confidence 1.0 (F_conf 1), vitality 50 (F_vit 1): BM25 / the best BM25
    assert [score_of(c, sparse, d) for d in "ABC"] == pytest.approx([0.5, 0.0, 1.0])
    assert model_to_json(model(True))["kind"] == "moe"


def test_a_rows_linear_score_is_its_own_whatever_rows_share_the_call():
    """``standardised_sum`` adds each row's terms in weight order: any subset of rows scores
    exactly as it does within the whole table, and the components add up to the score exactly."""
    from retrieval.fusion.learned import standardised_sum

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1003, 7))
    weights = tuple(
        FeatureWeight(f"f{j}", float(rng.normal()), float(rng.normal()), float(rng.uniform(0.5, 2)))
        for j in range(5)
    )
    cols = np.array([6, 0, 3, 2, 5])
    every = standardised_sum(x, cols, weights)
    for rows in (np.arange(5), np.arange(1, 1003, 3), rng.permutation(1003)[:17]):
        assert np.array_equal(standardised_sum(x[rows], cols, weights), every[rows])
    by_hand = sum(w.weight * (x[:, j] - w.mean) / w.scale for j, w in zip(cols, weights))
    assert np.allclose(every, by_hand, rtol=1e-12, atol=1e-12)
    c = table()
    two = (
        FeatureWeight("dense_sim", 2.0, mean=0.5, scale=0.25),
        FeatureWeight("log_access", -0.5, mean=1.0, scale=2.0),
    )
    scored = learned(c, everything_visible(c), 20, LearnedParams(weights=two), fixed=fixed_pipeline_features(c))
    assert np.array_equal(sum(scored.components.values()), scored.score)


def test_the_fixed_pipelines_are_features_a_model_can_reproduce():
    """``fixed:rrf`` is rrf's own score min-maxed per query, ``fixed_rrank:rrf`` 1/(1 + its rank)
    in rrf's own ranking: a linear model weighting only the latter ranks exactly as rrf does."""
    from retrieval.pipeline import get_pipeline, run_pipeline

    c = make_candidates([
        [{"id": "a", "dense_rank": 0, "bm25_rank": 2, "bm25_score": 1.0},
         {"id": "b", "dense_rank": 1, "bm25_rank": 0, "bm25_score": 3.0},
         {"id": "c", "dense_rank": 2, "bm25_rank": -1},
         {"id": "d", "dense_rank": -1, "bm25_rank": 1, "bm25_score": 2.0}]])
    names = feature_names(c)
    x = feature_matrix(c, everything_visible(c), 30, fixed_pipeline_features(c))
    at = {n: x[:, names.index(n)] for n in ("fixed:rrf", "fixed_rrank:rrf")}
    rrf = {"a": 1 / 61 + 1 / 63, "b": 1 / 62 + 1 / 61, "c": 1 / 63, "d": 1 / 62}
    order = sorted(rrf, key=lambda d: -rrf[d])                      # b, a, d, c
    lo, hi = min(rrf.values()), max(rrf.values())
    for row, doc in enumerate(c.doc_ids[i] for i in c.doc_idx):
        assert at["fixed:rrf"][row] == pytest.approx((rrf[doc] - lo) / (hi - lo))
        assert at["fixed_rrank:rrf"][row] == pytest.approx(1 / (1 + order.index(doc)))
    from retrieval.pipeline import PipelineConfig

    config = PipelineConfig("learned", "learned", params=LearnedParams(
        weights=(FeatureWeight("fixed_rrank:rrf", 1.0),)))
    ranked = run_pipeline(c, config).ranking
    assert [c.doc_ids[c.doc_idx[r]] for r in ranked.rows] == order
    assert [c.doc_ids[c.doc_idx[r]] for r in run_pipeline(c, get_pipeline("rrf")).ranking.rows] == order
