"""``rwb learn``'s nested cross-validation (eval/learning/nested.py): no model is scored on a query
it was trained on, so labels shuffled across queries bring the held-out score down to chance; the
CLI writes a pipeline that ``rwb eval`` and ``rwb search`` use."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from eval.cli import main as rwb_main
from eval.learning.nested import learn
from tests.conftest import make_candidates

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"
N_QUERIES, PER_QUERY = 60, 10


def signal_table(seed=3):
    """Every query ranks the same ten documents d0…d9 (dense ranks shuffled per query); the one
    relevant document of a query is the one with the highest access count, and every row has a
    value of its own (token count) a model can memorise."""
    rng = np.random.default_rng(seed)
    queries, qrels = [], {}
    for qi in range(N_QUERIES):
        access = rng.permutation(PER_QUERY).astype(float)
        order = rng.permutation(PER_QUERY)
        queries.append(
            [
                {
                    "id": f"d{j}",
                    "dense_rank": int(order[j]),
                    "dense_sim": 0.9 - order[j] / 20,
                    "access_count": access[j],
                    "token_count": int(rng.integers(5, 5000)),
                }
                for j in range(PER_QUERY)
            ]
        )
        qrels[f"q{qi}"] = {f"d{int(np.argmax(access))}": 1}
    return make_candidates(queries), qrels


def random_ranking_ndcg5(n: int, draws: int, seed: int) -> float:
    """The permutation baseline: mean nDCG@5 of one relevant document among ``n`` ranked at
    random."""
    rng = np.random.default_rng(seed)
    ranks = np.array([rng.permutation(n)[0] for _ in range(draws)])
    return float(np.mean(np.where(ranks < 5, 1.0 / np.log2(ranks + 2.0), 0.0)))


def test_with_true_labels_the_held_out_score_is_far_above_chance():
    c, qrels = signal_table()
    result = learn(c, qrels, "linear", folds=5, seed=0, guard=False)
    chance = random_ranking_ndcg5(PER_QUERY, 20_000, 0)
    assert result.held_out_mean > 0.9 > chance + 0.4
    assert sorted(q for f in result.outer for q in f.test_ids) == sorted(qrels)


def test_with_labels_shuffled_across_queries_the_held_out_score_falls_to_chance():
    c, qrels = signal_table()
    ids = sorted(qrels, key=lambda q: int(q[1:]))
    shuffled = dict(zip(ids, (qrels[q] for q in np.random.default_rng(5).permutation(ids))))
    result = learn(c, shuffled, "lambdamart", folds=5, seed=0, guard=False)
    chance = random_ranking_ndcg5(PER_QUERY, 20_000, 0)
    # one relevant document per query: a query's nDCG@5 has sd ≈ 0.37, the mean of 60 ≈ 0.05
    assert abs(result.held_out_mean - chance) < 3 * 0.37 / math.sqrt(N_QUERIES)
    # fitted on the very queries it is scored on, the same model memorises them (in-sample)
    assert result.final_score > chance + 0.25


def test_the_guard_keeps_the_default_when_no_model_beats_it_in_the_inner_folds():
    c, qrels = signal_table()
    ids = sorted(qrels, key=lambda q: int(q[1:]))
    shuffled = dict(zip(ids, (qrels[q] for q in np.random.default_rng(5).permutation(ids))))
    kept = learn(c, shuffled, "linear", folds=3, seed=0, default="vector")
    for fold in kept.outer:
        assert (fold.kind == "default") == (max(fold.inner.values()) <= fold.inner_default + 1e-12)
    learned = learn(c, qrels, "linear", folds=3, seed=0, default="vector")
    assert all(f.kind == "learned" for f in learned.outer) and learned.final.kind == "learned"


def one_fit_after_another(c, qrels, model, folds, seed, inner_folds=3, default="seed-adaptive"):
    """The procedure as the module docstring states it, written plainly: for each outer fold,
    then on all queries, every candidate fitted on each inner training part in turn and scored
    on its inner held-out part; the winner guarded, refitted and scored on the outer fold."""
    from eval.learning.fit import Training, fit, scores, specs
    from eval.learning.nested import _seed
    from eval.metrics.measure import config_values, judge
    from eval.search.sweep import make_folds
    from eval.stores.configs import resolve_config
    from retrieval.pipeline import PipelineConfig

    judged = judge(c, qrels)
    pool_q = np.flatnonzero(judged.judged)
    n = len(pool_q)
    assert judged.n_judged == n  # every judged query is in the pool: positions are pool_q's
    t = Training(c, judged, PipelineConfig("learned", "learned", depth=30), "ndcg@5", seed)
    default_values = next(config_values(c, judged, [resolve_config(default)], "ndcg@5"))[0][pool_q]

    def values(model_, positions):
        return t.values(scores(model_, t))[pool_q[positions]]

    def procedure(positions, where):
        inner = make_folds(len(positions), inner_folds, _seed(seed, where, -2))
        means = {}
        for spec in specs(model):
            held = np.empty(len(positions))
            for j in range(inner_folds):
                part = fit(spec, t, pool_q[positions[inner != j]])
                held[inner == j] = values(part, positions[inner == j])
            means[str(spec)] = float(held.mean())
        best = max(means, key=lambda s: means[s])  # the first on a tie, as max keeps it
        if not means[best] > float(default_values[positions].mean()) + 1e-12:
            return "default", means, None
        spec = next(s for s in specs(model) if str(s) == best)
        return best, means, fit(spec, t, pool_q[positions])

    fold_of = make_folds(n, folds, seed)
    held_out = np.empty(n)
    outer = []
    for k in range(folds):
        test = np.flatnonzero(fold_of == k)
        chosen, means, fitted = procedure(np.flatnonzero(fold_of != k), k)
        held_out[test] = default_values[test] if fitted is None else values(fitted, test)
        outer.append((chosen, means))
    return held_out, outer, procedure(np.arange(n), folds)[:2]


def test_the_procedure_is_its_inner_and_outer_folds_run_one_fit_after_another():
    """However the fits are scheduled, every figure is the plain loop's, exactly."""
    c, qrels = signal_table()
    ids = sorted(qrels, key=lambda q: int(q[1:]))
    half = dict(zip(ids, (qrels[q] for q in np.random.default_rng(5).permutation(ids))))
    half.update({q: qrels[q] for q in ids[::2]})  # half the labels true: the models differ
    for labels in (qrels, half):
        result = learn(c, labels, "auto", folds=3, seed=4, threads=2)
        held_out, outer, (final, final_means) = one_fit_after_another(c, labels, "auto", 3, 4)
        assert np.array_equal(result.held_out, held_out)
        assert [(f.model if f.kind == "learned" else "default", f.inner) for f in result.outer] == [
            (chosen, means) for chosen, means in outer
        ]
        assert (str(result.final.spec) if result.final.kind == "learned" else "default",
                result.final.inner) == (final, final_means)


def test_threads_change_how_long_it_takes_never_the_result():
    c, qrels = signal_table()
    filters = list(warnings.filters)
    one = learn(c, qrels, "auto", folds=3, seed=4, threads=1)
    three = learn(c, qrels, "auto", folds=3, seed=4, threads=3)
    assert warnings.filters == filters  # silenced while fitting, restored after
    assert np.array_equal(one.held_out, three.held_out) and one.n_fits == three.n_fits
    assert [dataclasses.astuple(f) for f in one.outer] == [
        dataclasses.astuple(f) for f in three.outer
    ]
    assert (one.final.spec, one.final.inner, one.final_score) == (
        three.final.spec, three.final.inner, three.final_score
    )
    assert one.to_toml() == three.to_toml()
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        learn(c, qrels, "linear", folds=3, threads=0)


def test_the_same_seed_gives_the_same_result():
    c, qrels = signal_table()
    a = learn(c, qrels, "auto", folds=3, seed=4)
    b = learn(c, qrels, "auto", folds=3, seed=4)
    assert np.array_equal(a.held_out, b.held_out) and [f.model for f in a.outer] == [
        f.model for f in b.outer
    ]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(model="xgboost"), "--model must be one of"),
        (dict(folds=1), "--folds must be"),
        (dict(folds=61), "exceeds the number of judged queries"),
        (dict(depth=80), "pool holds 50"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    c, qrels = signal_table()
    model = kwargs.pop("model", "linear")
    with pytest.raises(ValueError, match=message):
        learn(c, qrels, model, **kwargs)


def test_cli_learn_writes_a_pipeline_eval_and_search_use(tmp_path, rwb_home, capsys):
    out, data = tmp_path / "learned.toml", tmp_path / "learned.json"
    assert (
        rwb_main(
            [
                "learn",
                str(TINY),
                "--model",
                "lambdamart",
                "--folds",
                "2",
                "--inner-folds",
                "2",
                "--no-guard",
                "--out",
                str(out),
                "--json",
                str(data),
                "--quiet",
            ]
        )
        == 0
    )
    record = json.loads(data.read_text())
    for key in (
        "held_out",
        "held_out_default",
        "held_out_best_single_path",
        "p_vs_default",
        "p_vs_best_single_path",
        "fold_choices",
        "comparisons",
        "judged_at_5",
        "feature_set",
    ):
        assert key in record
    assert record["fold_choices"] == ["lambdamart", "lambdamart"]
    assert (tmp_path / "learned.model.json").is_file()
    assert 'file = "learned.model.json"' in out.read_text()
    capsys.readouterr()
    assert (
        rwb_main(["eval", str(TINY), "--pipeline", str(out), "--metrics", "ndcg@5", "--quiet"]) == 0
    )
    printed = capsys.readouterr()
    assert "learned" in printed.out and "judged@5" in printed.out and "in-sample" in printed.err
    assert (
        rwb_main(["search", str(TINY), "ERR_CONN_REFUSED", "--pipeline", str(out), "--json"]) == 0
    )
    report = tmp_path / "report"
    assert rwb_main(["report", str(TINY), "--pipeline", str(out), "--metrics", "ndcg@5",
                     "--bootstrap", "10", "--out", str(report), "--quiet"]) == 0
    assert "## Judgment bias" in (report / "report.md").read_text()
    assert "judgment_bias" in json.loads((report / "report.json").read_text())
    # bad input: one line, exit 2
    assert rwb_main(["learn", str(TINY), "--model", "xgboost"]) == 2
    assert rwb_main(["learn", str(TINY), "--out", str(tmp_path / "x.txt")]) == 2
    assert rwb_main(["learn", str(TINY), "--threads", "0"]) == 2


def test_fold_by_holds_each_group_out_whole():
    c, qrels = signal_table()
    # four "conversations" of consecutive queries
    groups = {f"q{i}": f"conv-{i * 4 // N_QUERIES}" for i in range(N_QUERIES)}
    result = learn(c, qrels, "linear", folds=2, seed=0, inner_folds=2, fold_by=groups)
    for fold in result.outer:
        held = {groups[q] for q in fold.test_ids}
        trained = {groups[q] for f in result.outer if f is not fold for q in f.test_ids}
        assert held and not held & trained          # a conversation is held out whole
    assert result.n_groups == 4 and result.record()["fold_groups"] == 4
    with pytest.raises(ValueError, match="exceeds the number of groups"):
        learn(c, qrels, "linear", folds=5, fold_by=groups)


def test_cli_learn_reads_the_judgments_source_and_folds_by_a_field(tmp_path, rwb_home, capsys):
    data = tmp_path / "learned.json"
    assert rwb_main(["learn", str(TINY), "--model", "linear", "--folds", "2", "--inner-folds", "2",
                     "--fold-by", "intent", "--json", str(data), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "judgments: dataset qrels" in printed          # the one judgment source, named
    assert "folds keep each of 3 query groups whole" in printed   # debug, preference, timeline
    record = json.loads(data.read_text())
    assert record["fold_groups"] == 3 and record["judgments"]["source"] == "explicit"
