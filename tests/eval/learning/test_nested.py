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
from retrieval.pipeline import from_toml, get_pipeline, run_pipeline, to_toml
from tests.conftest import make_candidates

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"
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
        assert (fold.kind == "default") == (max(fold.choice.record["inner"].values()) <= fold.choice.inner_default + 1e-12)
    learned = learn(c, qrels, "linear", folds=3, seed=0, default="vector")
    assert all(f.kind == "learned" for f in learned.outer) and learned.final.kind == "learned"


def one_fit_after_another(c, qrels, model, folds, seed, inner_folds=3, default="seed-adaptive"):
    """The procedure as the module docstring states it, written plainly: for each outer fold,
    then on all queries, every candidate fitted on each inner training part in turn and scored
    on its inner held-out part; the winner guarded, refitted and scored on the outer fold."""
    from eval.learning.fit import Training, fit, scores, specs
    from eval.search.nested import seed_of
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
        inner = make_folds(len(positions), inner_folds, seed_of(seed, where, -2))
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
        assert [(f.applied if f.kind == "learned" else "default", f.choice.record["inner"]) for f in result.outer] == [
            (chosen, means) for chosen, means in outer
        ]
        assert (str(result.final.pick) if result.final.kind == "learned" else "default",
                result.final.record["inner"]) == (final, final_means)


def test_threads_change_how_long_it_takes_never_the_result():
    c, qrels = signal_table()
    filters = list(warnings.filters)
    one = learn(c, qrels, "auto", folds=3, seed=4, threads=1)
    three = learn(c, qrels, "auto", folds=3, seed=4, threads=3)
    assert warnings.filters == filters  # silenced while fitting, restored after
    assert np.array_equal(one.held_out, three.held_out) and one.n_fits == three.n_fits
    assert one.outer == three.outer
    assert (one.final.pick, one.final.record, one.final_score) == (
        three.final.pick, three.final.record, three.final_score
    )
    assert one.to_toml() == three.to_toml()
    with pytest.raises(ValueError, match="threads must be a positive integer"):
        learn(c, qrels, "linear", folds=3, threads=0)


def test_the_same_seed_gives_the_same_result():
    c, qrels = signal_table()
    a = learn(c, qrels, "auto", folds=3, seed=4)
    b = learn(c, qrels, "auto", folds=3, seed=4)
    assert np.array_equal(a.held_out, b.held_out) and [f.applied for f in a.outer] == [
        f.applied for f in b.outer
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
    assert "learned" in printed.out and "judged@5" in printed.out and "in-sample" in printed.out
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
    assert "memorisation check: not run — the folds hold each group whole" in printed
    record = json.loads(data.read_text())
    assert record["fold_groups"] == 3 and record["judgments"]["source"] == "explicit"
    assert record["memorisation_check"] is None


def collapse_table(seed=7):
    """Three kinds of queries (a, b, c; 16 each) whose relevant document is the one with the
    highest access count, and one kind ("odd", 8 queries) whose relevant document has the
    LOWEST access count and a vitality of 95 — a feature constant (50) on every other kind. The
    default (the vector path) ranks every odd query's relevant document first and the other
    kinds' at random. A model fitted without the odd kind ranks the odd kind's relevant
    document last: it collapses on that kind."""
    rng = np.random.default_rng(seed)
    queries, qrels, kinds = [], {}, {}
    sizes = {"a": 16, "b": 16, "c": 16, "odd": 8}
    for kind, size in sizes.items():
        for _ in range(size):
            qi = len(queries)
            access = rng.permutation(PER_QUERY).astype(float)
            target = int(np.argmin(access) if kind == "odd" else np.argmax(access))
            order = rng.permutation(PER_QUERY)
            if kind == "odd":  # the vector path puts the relevant document first
                order[[int(np.flatnonzero(order == 0)[0]), target]] = order[[target, int(np.flatnonzero(order == 0)[0])]]
            queries.append([
                {"id": f"d{j}", "dense_rank": int(order[j]), "dense_sim": 0.9 - order[j] / 20,
                 "access_count": access[j],
                 "vitality": 95.0 if (kind == "odd" and j == target) else 50.0}
                for j in range(PER_QUERY)])
            qrels[f"q{qi}"] = {f"d{target}": 1}
            kinds[f"q{qi}"] = kind
    return make_candidates(queries, query_kinds=[kinds[f"q{i}"] for i in range(len(queries))]), qrels, kinds


def test_the_guard_refuses_a_model_that_collapses_on_one_kind_of_query():
    """Folds by query: every inner fold holds some odd queries, and the model fitted on them and
    the others scores the odd kind well (access count and vitality separate it) — no collapse
    to refuse. With the per-kind check the guard still compares each kind on its own."""
    c, qrels, kinds = collapse_table()
    result = learn(c, qrels, "linear", folds=4, seed=0, inner_folds=3, default="vector", kinds=kinds)
    assert result.final.kind == "learned"
    assert result.final.record["kinds"] == ["a", "b", "c", "odd"]
    assert result.held_out_mean > 0.9                              # vector alone: ~0.5


def test_a_model_is_never_applied_to_a_kind_it_was_not_fitted_on():
    """Folds by kind (each kind held out whole, outer and inner). On main the outer fold holding
    the odd kind out applied the model fitted on a, b, c to it: it ranks the odd kind's relevant
    document last (held-out 0.0–0.2 there where the vector path scores 1). Now a model is
    applied only to kinds its training part holds; the odd queries get the fallback (the vector
    path here) and keep its 1.0. The inner folds are by kind too, so no model is ever scored on
    a kind it saw: the guard keeps the fallback everywhere, and the procedure equals it."""
    c, qrels, kinds = collapse_table()
    options = dict(folds=4, seed=0, inner_folds=3, default="vector", fold_by=kinds, kinds=kinds)
    result = learn(c, qrels, "linear", guard=False, **options)   # the model applied where it may be
    odd_fold = next(f for f in result.outer if kinds[f.test_ids[0]] == "odd")
    assert odd_fold.kind == "learned"                 # a model was chosen on a, b, c …
    assert odd_fold.test_mean == pytest.approx(1.0)   # … and never met the odd kind
    assert result.per_kind()["odd"]["applied"] == {"vector": 8}
    assert result.per_kind()["odd"]["held_out"] == pytest.approx(result.per_kind()["odd"]["vector"])
    guarded = learn(c, qrels, "linear", **options)
    assert np.allclose(guarded.held_out, guarded.default_values)


def test_the_learned_pipeline_routes_an_unseen_kind_to_its_fallback():
    """The model fitted on kinds a, b and c alone, written as a pipeline: its TOML records the
    kinds and the fallback, and scoring a table whose odd queries carry their kind gives those
    queries the fallback's ranking (vector: the relevant document first, nDCG 1), the others
    the model's."""
    c, qrels, kinds = collapse_table()
    seen = {q: g for q, g in qrels.items() if kinds[q] != "odd"}
    result = learn(c, seen, "linear", folds=4, seed=0, inner_folds=3, default="vector",
                   guard=False, kinds=kinds)
    config = result.final_config()
    assert config.params.kinds == ("a", "b", "c") and config.params.fallback == "vector"
    assert from_toml(to_toml(config)).params.kinds == ("a", "b", "c")
    routed = run_pipeline(c, config)
    vector = run_pipeline(c, get_pipeline("vector"))
    odd = [i for i, q in enumerate(c.query_ids) if kinds[q] == "odd"]
    def docs(run, qi):
        return [c.doc_ids[c.doc_idx[r]] for r in run.ranking.for_query(qi)]

    for qi in odd:
        assert docs(routed, qi) == docs(vector, qi)
    unrouted = run_pipeline(dataclasses.replace(c, query_kinds=()), config)  # kinds unknown
    assert any(docs(unrouted, qi)[0] != docs(vector, qi)[0] for qi in odd)


def shared_passage_table(groups=6, per_group=20, seed=11):
    """``groups`` passages a0…; every query ranks all of them plus four distractors, at random
    (no signal), and its relevant document is its group's passage. A group's queries share a
    pool feature (their best cosine, ``q_dense_max``), so a tree can learn "queries like these →
    passage a_k" from a group's other queries: memorising the passage, which tells nothing about
    a new group."""
    rng = np.random.default_rng(seed)
    docs = [f"a{k}" for k in range(groups)] + [f"x{k}" for k in range(4)]
    tokens = {d: int(t) for d, t in zip(docs, rng.permutation(np.arange(100, 100 + 37 * len(docs), 37)))}
    queries, qrels = [], {}
    for k in range(groups):
        for _ in range(per_group):
            order = rng.permutation(len(docs))
            top = 0.5 + 0.05 * k
            queries.append([{"id": d, "dense_rank": int(order[j]), "dense_sim": top - order[j] / 100,
                             "token_count": tokens[d]} for j, d in enumerate(docs)])
            qrels[f"q{len(queries) - 1}"] = {f"a{k}": 1}
    return make_candidates(queries), qrels


def test_a_model_that_memorises_shared_passages_is_caught():
    from eval.learning.leakage import fold_groups, shared_relevance_groups
    from eval.cli.learn import print_learn
    from retrieval.dataset import Query

    c, qrels = shared_passage_table()
    shared = shared_relevance_groups(qrels)
    assert len(set(shared.values())) == 6 and shared["q0"] == shared["q19"] != shared["q20"]
    result = learn(c, qrels, "lambdamart", folds=5, seed=0, guard=False, leak_groups=shared)
    m = result.memorisation
    assert m["model"] == "lambdamart" and m["groups"] == 6
    assert m["by_query"] > m["by_group"] + 0.2 and m["warn"]
    # folds by group: the held-out figure is the by-group one; the check's by-query fits run
    # only when asked for (they would only say how far a by-query figure is inflated)
    grouped = learn(c, qrels, "lambdamart", folds=3, seed=0, guard=False, fold_by=shared,
                    check_memorisation=True)
    assert grouped.memorisation["warn"] and grouped.held_out_mean < result.held_out_mean - 0.2
    plain = learn(c, qrels, "lambdamart", folds=3, seed=0, guard=False, fold_by=shared)
    assert plain.memorisation is None and plain.n_fits == grouped.n_fits - 3  # the check: 3 fits
    assert np.array_equal(plain.held_out, grouped.held_out)
    # rwb learn's default folds keep them whole (clear: 6 groups ≥ 2 × 3 folds), --fold-by none opts out
    qs = [Query(q, "text") for q in qrels]
    chosen = fold_groups(qs, qrels, 3, None)
    assert chosen.fold_by == shared and "share a relevant document" in chosen.note
    assert fold_groups(qs, qrels, 3, "none").fold_by is None
    assert fold_groups(qs, qrels, 5, None).fold_by is None  # 6 groups < 2 × 5 folds: by query
    import io, contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_learn(result)
    assert "WARNING: memorisation check (lambdamart, 6 groups)" in out.getvalue()
    # the Learn mode's view (the page draws it) says the same, as a warning
    from eval.experiments.views import learn_view
    from eval.learning.leakage import fold_choices
    from eval.learning.transfer import LearnReport

    view = learn_view(LearnReport(result, fold_groups(qs, qrels, 5, "none"), None, (result,)))
    assert view.memorisation_warn and view.memorisation.startswith(
        f"Memorisation check (lambdamart, 6 groups): held-out {m['by_query']:.4f} with folds by "
        f"query, {m['by_group']:.4f} with folds by group")
    assert view.grouping.startswith("Folds by query: each of the 120 judged queries is held out on "
                                    "its own · 120 of 120 judged queries share a relevant document")
    assert view.guard[0].startswith("Fold 0: no guard: applied the inner-CV winner lambdamart")
    assert fold_choices([Query("a", "x", intent="debug"), Query("b", "y", lang="en")]) == [
        "auto", "none", "intent", "lang"]


def test_a_linear_model_shows_its_weights_by_feature_name():
    from retrieval.fusion.learned import FeatureWeight, LearnedParams, feature_weights

    params = LearnedParams(weights=(FeatureWeight("rrf", 0.5), FeatureWeight("both", -2.0),
                                    FeatureWeight("graph", 0.5)))
    assert feature_weights(params) == [("both", -2.0), ("graph", 0.5), ("rrf", 0.5)]
    c, qrels = signal_table()
    result = learn(c, qrels, "linear", folds=3, seed=0)
    weights = dict(result.weights())
    assert max(weights, key=lambda f: abs(weights[f])) == "log_access"  # access count decides
    assert result.to_json()["weights"][0] == {"feature": "log_access", "weight": weights["log_access"]}
    assert "fixed:seed-adaptive" in result.feature_names and "fixed_rrank:rrf" in result.feature_names


def test_cli_learn_reports_transfer_stability_and_weights(tmp_path, rwb_home, capsys):
    data = tmp_path / "learned.json"
    assert rwb_main(["learn", str(TINY), "--model", "linear", "--folds", "2", "--inner-folds", "2",
                     "--repeats", "2", "--json", str(data), "--quiet"]) == 0
    printed = capsys.readouterr().out
    record = json.loads(data.read_text())
    # tiny's four queries: debug ×2, preference, timeline — each kind held out whole
    assert record["leave_one_kind_out"]["kinds"] == 3 and "leave one kind out (3 kinds" in printed
    assert sorted(record["per_kind"]) == ["debug", "preference", "timeline"]
    assert record["per_kind"]["debug"]["n"] == 2
    assert record["stability"]["seeds"] == [0, 1] and len(record["stability"]["held_out"]) == 2
    assert "stability over fold seeds [0, 1]" in printed
    assert set(record["fixed_pipelines"]) >= {"seed-adaptive", "rrf", "wsum", "vector", "bm25"}
    assert "(in-sample" in printed
    assert rwb_main(["learn", str(TINY), "--kind-by", "nosuchfield", "--folds", "2"]) == 2
    assert rwb_main(["learn", str(TINY), "--repeats", "0"]) == 2


def test_the_guard_needs_a_gain_beyond_the_corrected_standard_error():
    """Inner differences (model − default) on 100 queries: 0.012 ± 0.1, the same on two fold
    seeds of 3 inner folds. The plain standard error (sd/√n ≈ 0.1005/10) makes 0.012 a gain of
    1.19 standard errors, which a one-standard-error rule takes; the models scoring those
    values were fitted on overlapping queries, and the corrected standard error (Nadeau &
    Bengio: s/√n · √(1/r + k/(k − 1)) = 0.10025/10 · √(1/2 + 3/2)) is 0.0142, so the gain is
    0.85 of it: the default is kept. 0.032 is 2.26 corrected standard errors: the model passes."""
    from eval.learning.nested import GUARD_Z, guard_detail, guard_passes, guard_verdict

    row = 0.012 + 0.1 * np.where(np.arange(100) % 2 == 0, 1.0, -1.0)
    detail = guard_detail(np.stack([row, row]), None, inner_folds=3)
    assert detail["mean"] == pytest.approx(0.012)
    assert detail["se_naive"] == pytest.approx(0.1 * math.sqrt(100 / 99) / 10)
    assert detail["se"] == pytest.approx(0.1 * math.sqrt(200 / 199) / 10 * math.sqrt(2))
    assert detail["mean"] > detail["se_naive"]                  # the plain one-SE rule: through
    assert guard_verdict(detail) == "unsure" and not guard_passes(detail)
    better = guard_detail(np.stack([row, row]) + 0.02, None, inner_folds=3)
    assert better["mean"] / better["se"] == pytest.approx(0.032 / detail["se"])
    assert better["mean"] > GUARD_Z * better["se"] and guard_passes(better)
    # one fold seed, no fold count: the plain standard error, as before
    assert guard_detail(row)["se"] == pytest.approx(detail["se_naive"])


def test_a_correction_is_boosted_on_top_of_the_default_and_scores_the_same_once_stored():
    """``--model correction``: LambdaMART whose base margin (LightGBM's init_score) is scale × the
    default's min-max score. Its score is that base plus the trees', in training and in the
    model read back from its JSON (what the learned pipeline scores with)."""
    import lightgbm

    from eval.learning.fit import Spec, Training, fit, scores
    from eval.metrics.measure import judge
    from retrieval.fusion.learned.model import model_from_json, model_to_json
    from retrieval.pipeline import PipelineConfig

    c, qrels = signal_table()
    t = Training(c, judge(c, qrels), PipelineConfig("learned", "learned", depth=30), "ndcg@5")
    model = fit(Spec("correction", 4.0), t, np.arange(30))
    assert model.meta["base"] == "fixed:seed-adaptive" and model.meta["base_scale"] == 4.0
    rows = np.flatnonzero(t.visible)
    trees = lightgbm.Booster(model_str=model.booster).predict(t.x[rows])
    base = t.x[rows, t.names.index("fixed:seed-adaptive")]
    assert np.allclose(scores(model, t)[rows], 4.0 * base + trees)
    again = model_from_json(model_to_json(model), "m.json")
    assert np.array_equal(again.predict(t.x[rows]), model.predict(t.x[rows]))
    with pytest.raises(ValueError, match="meta.base must name one of the features"):
        model_from_json({**model_to_json(model), "meta": {"base": "nosuch", "base_scale": 1}}, "m.json")
    result = learn(c, qrels, "correction", folds=3, seed=0)  # access count decides: it learns
    assert result.held_out_mean > 0.9 and result.final.kind == "learned"
    with pytest.raises(ValueError, match="boosts on top of the default's score"):
        learn(c, qrels, "correction", folds=3, default="vector")
