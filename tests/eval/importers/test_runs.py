"""``rwb import runs``: your own runs as the candidate table, held equal to ranx.

The fixture (tests/fixtures/runs) has 8 documents, 3 queries and two TREC runs whose scores
are exact binary fractions (so float32 storage loses nothing). RRF of q1 by hand (k = 60,
1-based ranks; dense d1 d2 d3 d4 d5, sparse d3 d1 d6 d2):
d1 = 1/61 + 1/62, d3 = 1/63 + 1/61, d2 = 1/62 + 1/64, d6 = 1/63, d4 = 1/64, d5 = 1/65.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ranx import Qrels, Run, evaluate, fuse

from eval.cli import main
from eval.importers.runs import import_runs, path_roles, runs_label
from eval.metrics.measure import judge, mean_metrics
from eval.stores.pool import load_pool, pool_path
from retrieval.fusion import get_fusion
from retrieval.pipeline import PipelineConfig, run_pipeline
from tests.retrieval.fusion.test_fusion_ranx import CASES, DEPTH, by_score_then_id, on_both_paths, ours

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
QUICK_EVAL = ["--baseline", "bm25", "--permutations", "100", "--bootstrap", "100"]
METRICS = ("ndcg@5", "recall@3", "mrr@10", "precision@2", "map@10", "hit_rate@1")


def import_fixture(dest):
    """``rwb import runs`` of tests/fixtures/runs (dense.run and sparse.run) into ``dest``."""
    return import_runs(dest, corpus=RUNS / "corpus.jsonl", queries=RUNS / "queries.jsonl",
                       qrels=RUNS / "qrels.tsv",
                       run=[f"dense={RUNS / 'dense.run'}", f"sparse={RUNS / 'sparse.run'}"])


@pytest.fixture
def imported(tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    return import_fixture(tmp_path / "mine")


def test_import_writes_the_dataset_and_its_runs(imported):
    dest = imported.dest
    assert (imported.documents, imported.queries, imported.qrels) == (8, 3, 6)
    assert sorted(p.name for p in (dest / "runs").iterdir()) == [
        "dense.run",
        "paths.toml",
        "sparse.run",
    ]
    assert (dest / "runs" / "paths.toml").read_text() == 'dense = "dense"\nsparse = "sparse"\n'


def test_pool_comes_from_the_runs_with_no_index(imported, tmp_path):
    pool = load_pool(imported.dataset, "minilm")  # the embedder asked for does not matter
    assert pool.embedder == runs_label(imported.dest) and pool.embedder.startswith("runs:")
    assert pool_path(imported.dataset, "minilm", 50) == pool_path(
        imported.dataset, "use-multilingual", 50
    )
    assert not (tmp_path / "home" / "indexes").exists()  # no index was built
    q1 = {
        pool.doc_ids[d]: (int(r), float(s))
        for d, r, s in zip(
            pool.doc_idx[pool.offsets[0] : pool.offsets[1]],
            pool.dense_rank[pool.offsets[0] : pool.offsets[1]],
            pool.dense_sim[pool.offsets[0] : pool.offsets[1]],
        )
    }
    assert q1 == {
        "d1": (0, 0.875),
        "d2": (1, 0.8125),
        "d3": (2, 0.6875),
        "d4": (3, 0.375),
        "d5": (4, 0.3125),
        "d6": (-1, 0.0),
    }


def test_rrf_by_hand(imported):
    pool = load_pool(imported.dataset)
    config = PipelineConfig(name="rrf", fusion="rrf", depth=DEPTH, max_results=10)
    run = run_pipeline(pool, config)
    ranking = run.ranking
    ids = [pool.doc_ids[pool.doc_idx[r]] for r in ranking.for_query(0)]
    assert ids == ["d1", "d3", "d2", "d6", "d4", "d5"]
    expected = [1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62 + 1 / 64, 1 / 63, 1 / 64, 1 / 65]
    assert list(ranking.score[ranking.query_idx == 0]) == pytest.approx(expected, rel=1e-12)


def file_run(path: Path, by_rank: bool) -> Run:
    """A run file as ranx reads it; for the rank norms, −rank (the file's order)."""
    run = Run.from_file(str(path), kind="trec")
    if not by_rank:
        return run
    out = {}
    for q_id, scores in run.to_dict().items():
        order = sorted(scores, key=lambda d: (-scores[d], d))
        out[q_id] = {d: -float(i) for i, d in enumerate(order)}
    return Run(out, name=path.stem)


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_runs_and_metrics_equal_ranx(imported, case):
    """Our fusion of the imported runs equals ``ranx.fuse`` of the same files, score for score
    (z-score on the documents both runs returned: the miss rule differs, see
    tests/retrieval/fusion/test_fusion_ranx.py), and our metrics of the ranking equal ``ranx.evaluate``."""
    fusion, params, norm, method, ranx_params, rows = CASES[case]
    pool = load_pool(imported.dataset)
    by_rank = norm in ("rank", None)
    runs = imported.dest / "runs"
    theirs = fuse(
        [file_run(runs / "dense.run", by_rank), file_run(runs / "sparse.run", by_rank)],
        norm=norm,
        method=method,
        params=ranx_params,
    ).to_dict()
    mine = ours(pool, fusion, params)
    for q_id in pool.query_ids:
        keep = [d for d in mine[q_id] if rows == "all" or on_both_paths(pool, q_id, d)]
        assert set(keep) == (set(theirs[q_id]) if rows == "all" else set(keep) & set(theirs[q_id]))
        for d in keep:
            assert mine[q_id][d] == pytest.approx(theirs[q_id][d], rel=1e-9, abs=1e-12), (
                case,
                q_id,
                d,
            )
        if rows == "all":
            assert by_score_then_id(mine[q_id]) == by_score_then_id(theirs[q_id])
    if rows != "all":
        return
    config = PipelineConfig(
        name=case,
        fusion=fusion,
        params=get_fusion(fusion).params(**params),
        depth=DEPTH,
        max_results=10,
    )
    qrels = imported.dataset.qrels
    values = mean_metrics(pool, judge(pool, qrels), run_pipeline(pool, config).ranking, METRICS)
    ordered = {
        q: {d: -float(i) for i, d in enumerate(by_score_then_id(s))} for q, s in theirs.items()
    }
    reference = evaluate(Qrels(qrels), Run(ordered), list(METRICS), make_comparable=True)
    for metric in METRICS:
        assert values[metric] == pytest.approx(reference[metric], rel=1e-12), (case, metric)


def test_path_roles():
    assert path_roles(["sparse", "dense"]) == {"dense": "dense", "sparse": "sparse"}
    assert path_roles(["e5", "splade", "bm25"]) == {"dense": "e5", "sparse": "splade"}
    assert path_roles(["sparse", "colbert"]) == {"dense": "colbert", "sparse": "sparse"}
    assert path_roles(["e5"]) == {"dense": "e5"}


def test_cli_import_runs_then_eval(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    out = tmp_path / "mine"
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 0.5 x\nq1 Q0 d1 2 0.25 x\n")
    common = [
        "--corpus",
        str(RUNS / "corpus.jsonl"),
        "--queries",
        str(RUNS / "queries.jsonl"),
        "--qrels",
        str(RUNS / "qrels.tsv"),
    ]
    assert main(["import", "runs", str(out), *common, "--run", f"dense={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and "bad.run:2" in err and "listed twice" in err
    assert main(["import", "runs", str(out), *common, "--run", "nonsense"]) == 2
    assert "expected NAME=FILE" in capsys.readouterr().err
    assert not out.exists()
    assert (
        main(
            [
                "import",
                "runs",
                str(out),
                *common,
                "--run",
                f"dense={RUNS / 'dense.run'}",
                "--run",
                f"sparse={RUNS / 'sparse.run'}",
            ]
        )
        == 0
    )
    assert "8 documents, 3 queries, 6 qrels" in capsys.readouterr().out
    assert main(["eval", str(out), "--pipeline", "rrf", *QUICK_EVAL]) == 0
    assert "rrf" in capsys.readouterr().out
    assert not (tmp_path / "home" / "indexes").exists()


# ---- ties: the file's rank column; float64 scores --------------------------------------------

RANK_CASES = sorted(c for c in CASES if CASES[c][2] in ("rank", None))  # the rank-based fusions


def import_tied(dest, dense: Path = RUNS / "tied_dense.run"):
    """tests/fixtures/runs/tied_*.run: tied scores whose rank column (= line order) differs
    from document-id order (q1 dense d5 d2 d1 at 0.5, q2 dense d8 d6 at 0.5, q3 dense d5 d2 at
    0.875; q1 sparse d6 d3 at 4.0 and d1 d2 at 2.0, q2 sparse d1 d6, q3 sparse d4 d2 d1)."""
    return import_runs(dest, corpus=RUNS / "corpus.jsonl", queries=RUNS / "queries.jsonl",
                       qrels=RUNS / "qrels.tsv",
                       run=[f"dense={dense}", f"sparse={RUNS / 'tied_sparse.run'}"])


@pytest.mark.parametrize("case", RANK_CASES)
def test_tied_runs_fuse_as_ranx_fuses_the_same_files(tmp_path, monkeypatch, case):
    """ranx reads the user's files (``Run.from_file`` ignores the rank column and keeps the line
    order of tied documents: numba's argsort insertion-sorts these ≤ 15-document lists, which is
    stable); we order ties by the rank column, the same order here. Every rank-based fusion then
    gives every document the same score, and the metrics agree with ``ranx.evaluate``."""
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    imported = import_tied(tmp_path / "tied")
    fusion, params, norm, method, ranx_params, _ = CASES[case]
    user_runs = [Run.from_file(str(RUNS / f"tied_{p}.run"), kind="trec")
                 for p in ("dense", "sparse")]
    assert [list(user_runs[0].to_dict()["q1"])] == [["d4", "d5", "d2", "d1", "d3"]]
    theirs = fuse(user_runs, norm=norm, method=method, params=ranx_params).to_dict()
    pool = load_pool(imported.dataset)
    mine = ours(pool, fusion, params)
    for q_id in pool.query_ids:
        assert set(mine[q_id]) == set(theirs[q_id])
        for d in mine[q_id]:
            assert mine[q_id][d] == pytest.approx(theirs[q_id][d], rel=1e-12), (case, q_id, d)
    config = PipelineConfig(name=case, fusion=fusion, params=get_fusion(fusion).params(**params),
                            depth=DEPTH, max_results=10)
    qrels = imported.dataset.qrels
    values = mean_metrics(pool, judge(pool, qrels), run_pipeline(pool, config).ranking, METRICS)
    ordered = {
        q: {d: -float(i) for i, d in enumerate(by_score_then_id(s))} for q, s in theirs.items()
    }
    reference = evaluate(Qrels(qrels), Run(ordered), list(METRICS), make_comparable=True)
    for metric in METRICS:
        assert values[metric] == pytest.approx(reference[metric], rel=1e-12), (case, metric)


def test_the_rank_column_not_the_line_order_breaks_ties(tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    shuffled = tmp_path / "shuffled.run"  # the same lines, last first
    shuffled.write_text("".join(reversed((RUNS / "tied_dense.run").read_text().splitlines(True))))
    one = import_tied(tmp_path / "one").dest / "runs" / "dense.run"
    two = import_tied(tmp_path / "two", dense=shuffled).dest / "runs" / "dense.run"
    def by_query(path):
        rows = [line.split() for line in path.read_text().splitlines()]
        return {q: [(d, r, s) for q2, _, d, r, s, _ in rows if q2 == q] for q in ("q1", "q2", "q3")}

    assert by_query(one) == by_query(two)
    assert [d for d, _, _ in by_query(one)["q1"]] == [
        "d4", "d5", "d2", "d1", "d3"  # q1: 0.75, then 0.5 at ranks 2, 3, 4, then 0.25
    ]


def test_scores_below_float32_keep_their_order(tmp_path, monkeypatch):
    """1e-50 … 5e-50 are all 0 in float32 (the ranking fell back to document ids); kept as
    float64, min-max spreads them over 0 … 1 and wsum ranks q1 by them."""
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    tiny = tmp_path / "tiny.run"
    tiny.write_text("".join(f"q1 Q0 d{i} {i} {6 - i}e-50 e5\n" for i in range(1, 6)))
    imported = import_runs(tmp_path / "mine", corpus=RUNS / "corpus.jsonl",
                           queries=RUNS / "queries.jsonl", qrels=RUNS / "qrels.tsv",
                           run=[f"dense={tiny}", f"sparse={RUNS / 'sparse.run'}"])
    pool = load_pool(imported.dataset)
    q1 = slice(pool.offsets[0], pool.offsets[1])
    sims = {pool.doc_ids[d]: float(s) for d, s in zip(pool.doc_idx[q1], pool.dense_sim[q1])}
    assert sims == {"d1": 5e-50, "d2": 4e-50, "d3": 3e-50, "d4": 2e-50, "d5": 1e-50, "d6": 0.0}
    fusion, params = CASES["wsum-minmax"][:2]  # ranx's min-max divides by max(range, 1e-9):
    mine = ours(pool, fusion, params)["q1"]      # no reference below 1e-9, so by hand:
    # dense min-max (5, 4, 3, 2, 1 × 1e-50 → 1, .75, .5, .25, 0; d6 not returned: 0);
    # sparse 14.5 11 7.25 3.5 → d3 1, d1 7.5/11, d6 3.75/11, d2 0; wsum .7 · dense + .3 · sparse
    assert mine == pytest.approx({
        "d1": 0.7 + 0.3 * 7.5 / 11, "d2": 0.7 * 0.75, "d3": 0.7 * 0.5 + 0.3,
        "d4": 0.7 * 0.25, "d5": 0.0, "d6": 0.3 * 3.75 / 11,
    }, rel=1e-12, abs=1e-15)
    assert by_score_then_id(mine) == ["d1", "d3", "d2", "d4", "d6", "d5"]
