"""``rwb tune`` (eval/search/tune.py): nested cross-validation of an Optuna search, on the tiny fixture's
real pool (4 judged queries: q1 … q4, each with one relevant document of grade 3)."""

from __future__ import annotations

from pathlib import Path

import json
import numpy as np
import pytest

from eval.cli import main as rwb_main
from eval.metrics.ranx_eval import evaluate_pipelines
from eval.stores.pool import load_pool
from eval.search.space import ParamSpec
from eval.search.tune import default_space, in_sample_warning, parse_tune_param, tune, tuning_table
from retrieval.dataset import load_dataset
from retrieval.pipeline import PIPELINES, get_pipeline, with_params

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "fixtures" / "tiny"
RRF = PIPELINES["rrf"]
SPACE = (ParamSpec("rrf.rrf_k", 1, 100, 1, False), ParamSpec("rrf.w_dense", 0, 2, 0.25),
         ParamSpec("rrf.w_sparse", 0, 2, 0.25))


@pytest.fixture(scope="module")
def pool(tiny, rwb_home):
    return load_pool(tiny)


@pytest.fixture(scope="module")
def result(pool, tiny):
    # no guard: each outer fold applies its own search winner, so the folds' configurations differ
    return tune(pool, tiny.qrels, "rrf", SPACE, trials=12, folds=2, seed=7, sampler="tpe", guard=False)


def test_every_query_is_held_out_exactly_once(result):
    held = [q for fold in result.outer for q in fold.test_ids]
    assert sorted(held) == ["q1", "q2", "q3", "q4"]          # 2 folds × 2 queries, no query twice
    assert [len(fold.test_ids) for fold in result.outer] == [2, 2]
    assert result.n_queries == 4 and len(result.held_out) == 4


def test_the_held_out_estimate_is_recomputed_by_hand_from_the_fold_configs(result, pool, tiny):
    # each fold's configuration, applied through ranx (not the fast path), on its own held-out queries
    value = {}
    for fold in result.outer:
        config = with_params(RRF, fold.applied)
        ev = evaluate_pipelines(pool, tiny.qrels, {"fold": config}, ["ndcg@5"])
        for q in fold.test_ids:
            value[q] = ev.per_query["fold"][q]["ndcg@5"]
        assert fold.test_mean == pytest.approx(np.mean([value[q] for q in fold.test_ids]))
    by_hand = (value["q1"] + value["q2"] + value["q3"] + value["q4"]) / 4
    assert result.held_out_mean == pytest.approx(by_hand, abs=1e-12)
    # the comparisons are paired on the same four queries, against the fallback on all of them:
    # the best of the untuned pipeline and the named presets (issue 40)
    from eval.search.fallback import fixed_candidates

    fixed = fixed_candidates(pool, None, RRF)
    means = evaluate_pipelines(pool, tiny.qrels, fixed, ["ndcg@5"]).results
    best = max(fixed, key=lambda name: means[name]["ndcg@5"])
    assert result.comparisons[0].pipeline == best
    default = means[best]["ndcg@5"]
    assert result.comparisons[0].mean == pytest.approx(default)
    assert result.comparisons[0].delta == pytest.approx(by_hand - default)
    assert result.comparisons[0].wins + result.comparisons[0].ties + result.comparisons[0].losses == 4


def test_the_guard_falls_back_to_the_default_when_tuning_does_not_hold_up(pool, tiny):
    r = tune(pool, tiny.qrels, "rrf", SPACE, trials=6, folds=2, seed=7, sampler="random", inner_folds=2)
    for fold in r.outer:
        assert fold.kind in ("tuned", "default")
        if fold.kind == "default":  # the inner held-out mean did not beat the default's on the training part
            assert fold.choice.record["inner_tuned"] <= fold.choice.inner_default
            assert fold.applied == {"rrf.rrf_k": 60.0, "rrf.w_dense": 1.0, "rrf.w_sparse": 1.0}
        else:
            assert fold.choice.record["inner_tuned"] > fold.choice.inner_default


def test_the_same_seed_gives_the_same_result(result, pool, tiny):
    again = tune(pool, tiny.qrels, "rrf", SPACE, trials=12, folds=2, seed=7, sampler="tpe", guard=False)
    assert [f.applied for f in again.outer] == [f.applied for f in result.outer]
    assert [f.test_ids for f in again.outer] == [f.test_ids for f in result.outer]
    assert np.array_equal(again.held_out, result.held_out)
    assert again.to_toml() == result.to_toml()


def test_grid_and_random_samplers_stay_on_the_grid(pool, tiny):
    space = (ParamSpec("rrf.rrf_k", 10, 30, 10, False), ParamSpec("rrf.w_dense", 0, 1, 0.5))
    for sampler in ("grid", "random"):
        r = tune(pool, tiny.qrels, "rrf", space, trials=50, folds=2, seed=1, sampler=sampler, guard=False)
        for fold in r.outer:
            assert fold.applied["rrf.rrf_k"] in (10, 20, 30) and fold.applied["rrf.w_dense"] in (0.0, 0.5, 1.0)
    assert r.n_configs <= 3 * 3    # a configuration met again is not scored again


def test_parameters_and_sizes_are_checked():
    assert parse_tune_param("rrf.rrf_k=10:100", RRF) == ParamSpec("rrf.rrf_k", 10, 100, None)
    assert str(parse_tune_param("max_results=3:8:1", RRF)) == "max_results=3:8:1"
    assert [p.name for p in default_space(RRF)] == ["rrf.rrf_k", "rrf.w_dense", "rrf.w_sparse"]
    with pytest.raises(ValueError, match="does not apply to 'rrf'"):
        parse_tune_param("adaptive.half_life_days=1:2", RRF)
    with pytest.raises(ValueError, match="needs lo:hi:step"):
        ParamSpec("rrf.w_dense", 0, 1).grid()


@pytest.mark.parametrize("kwargs, message", [
    (dict(trials=0), "--trials must be ≥ 1"),
    (dict(folds=1), "--folds must be ≥ 2"),
    (dict(folds=5), "exceeds the number of judged queries"),
    (dict(sampler="anneal"), "unknown sampler"),
])
def test_bad_settings_are_refused(pool, tiny, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tune(pool, tiny.qrels, "rrf", SPACE, **{"trials": 2, "folds": 2, **kwargs})


def test_the_exported_toml_round_trips_with_its_tuning_record(result, tmp_path, tiny):
    path = tmp_path / "best.toml"
    path.write_text(result.to_toml(), "utf-8")
    loaded = get_pipeline(str(path))   # the [tuning] table is accepted and ignored for scoring
    assert loaded == result.final_config
    assert loaded.name == "rrf-tuned"
    table = tuning_table(path)
    assert table["space"] == ["rrf.rrf_k=1:100:1", "rrf.w_dense=0:2:0.25", "rrf.w_sparse=0:2:0.25"]
    assert (table["folds"], table["seed"], table["sampler"], table["trials"]) == (2, 7, "tpe", 12)
    assert table["fingerprint"] == tiny.fingerprint
    assert table["held_out"] == pytest.approx(result.held_out_mean, abs=1e-6)
    assert table["pipeline"] == "rrf" and table["n_queries"] == 4


def test_eval_warns_in_sample_on_the_tuning_dataset_only(result, tmp_path, tiny, tiny_copy, rwb_home, capsys):
    path = tmp_path / "best.toml"
    path.write_text(result.to_toml(), "utf-8")
    # provenance is printed beside the figures, --quiet or not (issue 40)
    assert rwb_main(["eval", str(TINY), "--pipeline", str(path), "--metrics", "ndcg@5", "--quiet"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "was tuned on this dataset" in line]
    assert len(lines) == 1 and lines[0].startswith("in-sample: ") and "held-out Δ" in lines[0]

    # another dataset: the same corpus with one more judgment has another fingerprint
    with open(tiny_copy / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("q1\td01\t1\n")
    other = load_dataset(tiny_copy)
    assert other.fingerprint != tiny.fingerprint
    assert in_sample_warning(str(path), other.fingerprint) is None
    assert rwb_main(["eval", str(tiny_copy), "--pipeline", str(path), "--metrics", "ndcg@5", "--quiet"]) == 0
    assert "was tuned on this dataset" not in capsys.readouterr().out


def test_cli_tune_writes_the_toml_and_refuses_bad_sizes(tmp_path, rwb_home, pool, capsys):
    out = tmp_path / "tuned.toml"
    assert rwb_main(["tune", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", "--trials", "4",
                     "--folds", "2", "--seed", "3", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "held-out ndcg@5 (each query held out once, 4 queries)" in printed
    assert "vs default " in printed and "vs best single path" in printed
    table = tuning_table(out)
    kept = "rrf" if table["chosen"] == "tuned" else get_pipeline(table["fallback"]).fusion  # issue 40
    assert get_pipeline(str(out)).fusion == kept and table["trials"] == 4
    assert rwb_main(["tune", str(TINY), "--pipeline", "rrf", "--trials", "100000"]) == 2
    assert capsys.readouterr().err.strip() == "rwb: error: --trials must be ≤ 10,000, got 100,000"


def test_fold_by_keeps_each_group_of_queries_in_one_fold(pool, tiny):
    # q1, q2 one conversation, q3, q4 another: the two outer folds are exactly the two groups
    groups = {"q1": "conv-a", "q2": "conv-a", "q3": "conv-b", "q4": "conv-b"}
    grouped = tune(pool, tiny.qrels, "rrf", SPACE, trials=4, folds=2, seed=7, fold_by=groups)
    assert sorted(sorted(f.test_ids) for f in grouped.outer) == [["q1", "q2"], ["q3", "q4"]]
    assert grouped.n_groups == 2 and grouped.tuning_table()["fold_groups"] == 2
    with pytest.raises(ValueError, match="exceeds the number of groups"):
        tune(pool, tiny.qrels, "rrf", SPACE, trials=4, folds=3, fold_by=groups)


def test_cli_tune_fold_by_a_query_field(tmp_path, rwb_home, pool, capsys):
    # tiny's queries carry no sample_id: a field no query has is one clear error
    assert rwb_main(["tune", str(TINY), "--pipeline", "rrf", "--trials", "2", "--folds", "2",
                     "--fold-by", "sample_id", "--quiet"]) == 2
    assert "--fold-by sample_id: no query has a value for it" in capsys.readouterr().err
    # by intent (tiny labels every query): folds keep each intent's queries together
    assert rwb_main(["tune", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10",
                     "--trials", "2", "--folds", "2", "--fold-by", "intent", "--quiet"]) == 0
    assert "folds keep each of 3 query groups whole" in capsys.readouterr().out  # debug, preference, timeline


def test_cli_tune_says_when_queries_share_a_relevant_document(tmp_path, rwb_home, capsys):
    import shutil

    data = tmp_path / "tiny-shared"
    shutil.copytree(TINY, data)
    (data / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td03\t3\nq2\td03\t2\nq3\td08\t3\nq4\td06\t3\n")
    args = ["tune", str(data), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10",
            "--trials", "2", "--folds", "2", "--quiet"]
    assert rwb_main(args) == 0
    out = capsys.readouterr().out
    # two of the four share d03: one group of two is too few to fold by, so folds stay by query
    assert "2 of 4 judged queries share a relevant document with another" in out
    assert "folds by query" in out and "query groups whole" not in out
    assert rwb_main(args + ["--fold-by", "none"]) == 0
    assert "(--fold-by none)" in capsys.readouterr().out


def test_a_report_marks_the_tuned_file_in_sample_and_says_whether_verdicts_survive_the_unjudged(
        result, tmp_path, rwb_home, capsys):
    """rwb report on the dataset the file was tuned on: its column is headed "· in-sample" with the
    note that names its held-out figure, the plain pipeline's is not; the report says, per pipeline,
    whether its verdict against the baseline survives the unjudged documents (issue 40)."""
    path = tmp_path / "best.toml"
    path.write_text(result.to_toml(), "utf-8")
    out = tmp_path / "report"
    assert rwb_main(["report", str(TINY), "--pipeline", str(path), "--pipeline", "bm25", "--metrics", "ndcg@5",
                     "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    md = (out / "report.md").read_text("utf-8")
    header = next(line for line in md.splitlines() if line.startswith("| metric"))
    assert "rrf-tuned · in-sample" in header and "bm25 · in-sample" not in header and "bm25" in header
    assert "rrf-tuned: in-sample: chosen on these queries by rwb tune; its held-out Δ" in md
    assert "## Unjudged documents" in md
    assert "- bm25: ndcg@5: " in md and "- rrf-tuned: ndcg@5: " in md
    data = json.loads((out / "report.json").read_text("utf-8"))
    assert list(data["settings"]["in_sample"]) == ["rrf-tuned"]


def test_an_export_of_a_tuned_file_says_its_figures_are_in_sample(result, tmp_path, tiny, capsys):
    """rwb export of rwb tune's file: the JSON's notes and the Python file's first comment name
    the dataset whose figures are in-sample and the held-out figure (issue 40); a plain pipeline's
    export says nothing of it; a note cannot end the Python comment and become code."""
    from eval.export._base import with_notes

    path = tmp_path / "best.toml"
    path.write_text(result.to_toml(), "utf-8")
    assert rwb_main(["export", str(path), "--to", "opensearch"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert notes[-1].startswith(f"dataset {tiny.fingerprint[:12]}: in-sample: chosen on these queries by rwb tune; "
                                "its held-out Δ ")
    assert rwb_main(["export", str(path), "--to", "lancedb"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"# dataset {tiny.fingerprint[:12]}: in-sample: ")
    assert rwb_main(["export", "rrf", "--to", "opensearch"]) == 0
    assert not any("in-sample" in n for n in json.loads(capsys.readouterr().out)["notes"])
    assert with_notes('"""doc"""\n', ".py", ("x\nimport os",)) == '# x\\nimport os\n"""doc"""\n'
