"""One judgment store for the whole product (``eval.stores.judgments``): a grade given through
``JudgmentStore`` (what the Tune and Data pages call) or ``rwb judge`` changes ``rwb eval``'s figure
by the same amount as the workbench's, and every output says which judgments it used.

On the tiny fixture (4 queries, one relevant memory each, grade 3), with the ``bm25`` pipeline:
q1 is ``ERR_CONN_REFUSED`` and only d03 holds that identifier, so BM25 ranks d03 first and q1's
nDCG@5 is 1. Grading d04 (ECONNRESET, no query word: BM25 never returns it) 3 for q1 makes
q1's ideal DCG 3 + 3/log2(3) = 4.8928 while its DCG stays 3: nDCG@5 3/4.8928 = 0.6131, so the
mean over the 4 judged queries falls by (1 − 0.6131)/4 = 0.0967.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.stores.judgments import JudgmentStore, default_rater, effective_qrels, judgments_version, trec_qrels
from eval.stores.pool import load_pool
from retrieval.dataset import load_dataset
from retrieval.pipeline import PIPELINES
from tests.conftest import rwb_here

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "fixtures" / "tiny"
Q1_AFTER = 3 / (3 + 3 / math.log2(3))       # 0.6131
DROP = (1 - Q1_AFTER) / 4                   # 0.0967


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private RWB_HOME: grades given here must not reach other tests."""
    home = tmp_path / "home"
    monkeypatch.setenv("RWB_HOME", str(home))
    return home


def eval_bm25(home: Path, out: Path) -> tuple[float, str]:
    proc = rwb_here(home, "eval", str(TINY), "--pipeline", "bm25", "--metrics", "ndcg@5",
               "--permutations", "100", "--bootstrap", "100", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    return data["results"]["bm25"]["ndcg@5"], proc.stdout


def workbench_bm25(home: Path) -> float:
    """What the Tune page shows: the pool judged with ``effective_qrels`` (_state.get_judged)."""
    dataset = load_dataset(TINY)
    pool = load_pool(dataset)
    judged = judge(pool, effective_qrels(dataset, home).qrels)
    return evaluate_config(pool, judged, PIPELINES["bm25"]).means["ndcg@5"]


def test_a_workbench_grade_moves_rwb_eval_by_the_same_amount_and_the_output_says_so(home, tmp_path):
    dataset = load_dataset(TINY)
    before, text = eval_bm25(home, tmp_path / "a.json")
    assert before == pytest.approx(workbench_bm25(home), abs=1e-9)
    assert "Judgments: dataset qrels\n" in text
    assert json.loads((tmp_path / "a.json").read_text())["settings"]["judgments"] == "dataset qrels"

    JudgmentStore(dataset, home).grade("q1", "d04", 3, author="tune page")
    workbench = workbench_bm25(home)
    after, text = eval_bm25(home, tmp_path / "b.json")
    assert after - before == pytest.approx(workbench - before, abs=1e-9)
    assert after - before == pytest.approx(-DROP, abs=1e-4)
    head = effective_qrels(dataset, home).head
    assert len(head) == 8
    rater = default_rater()                # a grade's rater when none is given: the OS user
    assert f"Judgments: dataset qrels + 1 edit (history head {head}; raters: {rater})" in text
    settings = json.loads((tmp_path / "b.json").read_text())["settings"]
    assert settings["judgments"] == f"dataset qrels + 1 edit (history head {head}; raters: {rater})"


def test_rwb_judge_grades_undoes_and_exports_what_the_workbench_reads(home, tmp_path):
    dataset = load_dataset(TINY)
    proc = rwb_here(home, "judge", str(TINY), "q1", "d04", "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "q1 d04: - → 3"
    assert effective_qrels(dataset, home).qrels["q1"] == {"d03": 3, "d04": 3}  # the workbench too
    rwb_here(home, "judge", str(TINY), "q2", "d01", "0")     # q2's only judgment: now "not relevant"
    used = effective_qrels(dataset, home)
    assert (used.edits, used.qrels["q2"]) == (2, {"d01": 0})   # judged, not unjudged

    out = tmp_path / "combined.tsv"
    proc = rwb_here(home, "judge", str(TINY), "--export", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == ("q1\t0\td03\t3\nq1\t0\td04\t3\nq2\t0\td01\t0\n"
                               "q3\t0\td08\t3\nq4\t0\td06\t3\n")
    last = proc.stdout.splitlines()[-1]
    assert last == f"judgments: dataset qrels + 2 edits (history head {used.head}; raters: {default_rater()})"

    proc = rwb_here(home, "judge", str(TINY), "--undo")
    assert proc.stdout.splitlines()[0] == "undone: q2 d01: 0 → 3"
    assert effective_qrels(dataset, home).qrels == {**dataset.qrels, "q1": {"d03": 3, "d04": 3}}
    rwb_here(home, "judge", str(TINY), "--undo")
    back = effective_qrels(dataset, home)
    assert (back.label, back.qrels) == ("dataset qrels", dataset.qrels)


def test_regrading_to_the_dataset_grade_is_no_edit(home):
    dataset = load_dataset(TINY)
    store = JudgmentStore(dataset, home)
    store.grade("q1", "d03", 2)
    store.grade("q1", "d03", 3)   # back to the dataset's own grade
    used = effective_qrels(dataset, home)
    assert (used.label, used.edits, len(store.history())) == ("dataset qrels", 0, 2)


def test_the_judgments_version_changes_with_a_grade_and_the_count_follows(home):
    # the pages' caches of judged pools and evaluations are keyed on this version
    dataset = load_dataset(TINY)
    before = judgments_version(dataset, "explicit", home)
    assert judgments_version(dataset, "explicit", home) == before
    assert effective_qrels(dataset, home).count == 4           # tiny's qrels: 4 lines
    JudgmentStore(dataset, home).grade("q1", "d04", 1)          # a new pair
    assert judgments_version(dataset, "explicit", home) != before
    assert effective_qrels(dataset, home).count == 5


@pytest.mark.parametrize("args, message", [
    (("q1", "d04", "high"), "GRADE must be an integer 0–3, got 'high'"),
    (("q1", "d04", "7"), "grade must be an integer 0–3, got 7"),
    (("q9", "d04", "1"), "unknown query 'q9'"),
    (("q1", "d04"), "give QUERY_ID DOC_ID GRADE together"),
])
def test_rwb_judge_refuses_bad_input_in_one_line(home, args, message):
    proc = rwb_here(home, "judge", str(TINY), *args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"rwb: error: {message}"


def test_implicit_judgments_are_a_separate_source(home, tiny_copy):
    dataset = load_dataset(tiny_copy)
    with pytest.raises(ValueError, match="no implicit judgments"):
        effective_qrels(dataset, home, source="implicit")
    (tiny_copy / "qrels" / "implicit.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td05\t1\nq1\td03\t1\n")
    assert effective_qrels(dataset, home, source="implicit").qrels == {"q1": {"d05": 1, "d03": 1}}
    both = effective_qrels(dataset, home, source="both")
    assert both.qrels["q1"] == {"d05": 1, "d03": 3}                       # the explicit grade wins
    with pytest.raises(ValueError, match="judgment source must be one of"):
        effective_qrels(dataset, home, source="clicks")


def test_trec_export_is_sorted_qid_0_docid_grade():
    assert trec_qrels({"b": {"y": 1, "x": 2}, "a": {"z": 3}}) == (
        "a\t0\tz\t3\nb\t0\tx\t2\nb\t0\ty\t1\n")


# ---- issue 33.1: a grade of 0 is a judgment ("judged not relevant"), never a removal ------------

def eval_vector_bias(home: Path, out: Path) -> dict:
    proc = rwb_here(home, "eval", str(TINY), "--pipeline", "vector", "--metrics", "ndcg@5",
               "--permutations", "100", "--bootstrap", "100", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    return {**data["judgment_bias"][0], "ndcg@5": data["results"]["vector"]["ndcg@5"]}


def test_a_grade_of_0_from_rwb_judge_is_stored_counted_exported_and_undone(home, tmp_path):
    """vector on tiny ranks q2 [d02 d01 d04 d09 d03]; q2's one judgment is d01 = 3. Grading d02 0
    (d02 is "Mina prefers tabs", not her colour scheme): judged@5 of q2 goes 1/5 → 2/5, so the
    mean over the 4 queries 3/20 → 4/20 (q1, q4: 1/5 each; q3's d08 is below 5); q2's bpref 1 → 0
    (one judged non-relevant above its one relevant: 1 − min(1, 1)/min(1, 1)), the mean 1 → 3/4;
    q2's nDCG'@5 condensed list [d02 d01] → (3/log2 3)/3, the mean (3 + 1/log2 3)/4; nDCG@5 is
    unchanged (a 0 is not relevant, so ranx's figure stays)."""
    dataset = load_dataset(TINY)
    before = eval_vector_bias(home, tmp_path / "a.json")
    assert (before["judged@5"], before["bpref"], before["nDCG'@5"]) == pytest.approx((3 / 20, 1, 1))
    vector_top = [("q2", "d02")]
    holes_out = tmp_path / "holes.json"
    assert rwb_here(home, "holes", str(TINY), "--pipeline", "rrf", "--pipeline", "vector",
               "--json", str(holes_out)).returncode == 0
    queued = [(h["query_id"], h["doc_id"]) for h in json.loads(holes_out.read_text())["holes"]]
    assert vector_top[0] in queued

    proc = rwb_here(home, "judge", str(TINY), "q2", "d02", "0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "q2 d02: - → 0"
    used = effective_qrels(dataset, home)
    assert used.qrels["q2"] == {"d01": 3, "d02": 0}
    assert (used.edits, used.count) == (1, 5)                       # an edit, a fifth judgment
    assert proc.stdout.splitlines()[-1] == (f"judgments: dataset qrels + 1 edit (history head {used.head}; "
                                            f"raters: {default_rater()})")

    after = eval_vector_bias(home, tmp_path / "b.json")
    assert after["judged@5"] == pytest.approx(4 / 20)
    assert after["bpref"] == pytest.approx(3 / 4)
    assert after["nDCG'@5"] == pytest.approx((3 + 1 / math.log2(3)) / 4)
    assert after["ndcg@5"] == pytest.approx(before["ndcg@5"])
    assert rwb_here(home, "holes", str(TINY), "--pipeline", "rrf", "--pipeline", "vector",
               "--json", str(holes_out)).returncode == 0
    queued = [(h["query_id"], h["doc_id"]) for h in json.loads(holes_out.read_text())["holes"]]
    assert vector_top[0] not in queued                               # judged: off the queue

    out = tmp_path / "judged.tsv"
    proc = rwb_here(home, "judge", str(TINY), "--export", str(out))
    assert out.read_text() == ("q1\t0\td03\t3\nq2\t0\td01\t3\nq2\t0\td02\t0\n"
                               "q3\t0\td08\t3\nq4\t0\td06\t3\n")
    assert f"wrote {out}: 5 judgments as TREC qrels" in proc.stdout

    proc = rwb_here(home, "judge", str(TINY), "--undo")
    assert proc.stdout.splitlines()[0] == "undone: q2 d02: 0 → -"
    assert effective_qrels(dataset, home).qrels == dataset.qrels


def test_an_explicit_0_wins_over_an_implicit_grade(home, tmp_path):
    """Issue 35.5: implicit judgments fill only the pairs nobody judged explicitly, a 0 included."""
    import shutil

    folder = tmp_path / "tiny-clicks"
    shutil.copytree(TINY, folder)
    (folder / "qrels" / "implicit.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq2\td02\t3\nq1\td05\t2\n")
    dataset = load_dataset(folder)
    JudgmentStore(dataset, home).grade("q2", "d02", 0, author="test")
    both = effective_qrels(dataset, home, "both").qrels
    assert both["q2"] == {"d01": 3, "d02": 0}                  # the explicit 0, not the clicks' 3
    assert both["q1"] == {"d03": 3, "d05": 2}                   # nobody judged q1 d05: implicit
    assert effective_qrels(dataset, home, "implicit").qrels["q2"] == {"d02": 3}
