"""``rwb check --explain`` (``eval.experiments.explain``): a metric's change since a snapshot split
into the parts of the inputs that changed, summing to the change.

Hand-built case, the tiny fixture (4 judged queries, one relevant memory each, grade 3) with
``bm25`` (see tests/eval/stores/test_judgments.py): grading d04 3 for q1 — a memory BM25 never
returns — leaves q1's DCG@5 at 3 and raises its ideal DCG to 3 + 3/log2(3) = 4.8928, so q1's
nDCG@5 falls from 1 to 0.6131 and the mean over the 4 queries by 0.0967. Only the judgments
changed: all of it is theirs; the other parts are 0.

devmem with the judgments and the pipeline changed at once (snapshot: rrf; now: vector, with
a third of the judged pairs removed): with the corpus unchanged every cell exists, and the
Shapley value of the judgments is the mean of their two steps, ½[(rrf on the new judgments −
the snapshot) + (today − vector on the old judgments)], the pipeline's the rest.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from eval.cli import main as rwb_main
from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.stores.configs import resolve_config
from eval.stores.history import CheckHistory
from eval.stores.judgments import effective_qrels
from eval.stores.pool import load_pool
from eval.stores.snapshots import frozen_value
from retrieval.dataset import load_dataset

ROOT = Path(__file__).resolve().parents[3]
DEVMEM = ROOT / "datasets" / "devmem"
TINY = ROOT / "tests" / "fixtures" / "tiny"
DROP = (1 - 3 / (3 + 3 / math.log2(3))) / 4      # 0.0967


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("explain-home")
        patch.setenv("RWB_HOME", str(path))
        yield path


def rwb(capsys, *args) -> tuple[int, str, str]:
    status = rwb_main(["--quiet", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


def test_only_changed_judgments_take_the_whole_change(home, tmp_path, capsys):
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    snap = tmp_path / "bm25.json"
    assert rwb(capsys, "snapshot", root, "--pipeline", "bm25", "--out", snap)[0] == 0
    assert rwb(capsys, "judge", root, "q1", "d04", "3")[0] == 0
    status, out, err = rwb(capsys, "check", root, "--pipeline", "bm25", "--against", snap, "--explain",
                           "--fail-if", "ndcg@5:-1", "--json", tmp_path / "c.json", "--summary", tmp_path / "s.md")
    assert status == 0, err
    explain = json.loads((tmp_path / "c.json").read_text())["explain"]["ndcg@5"]
    assert explain["total"] == pytest.approx(-DROP, abs=1e-6)
    assert explain["parts"] == {"corpus_index": 0.0, "judgments": pytest.approx(-DROP, abs=1e-6),
                                "queries": 0.0, "pipeline": 0.0}
    assert explain["orders"] == [["judgments"]]
    assert out.splitlines()[1] == f"explain ndcg@5 {-DROP:+.4f}: judgments {-DROP:+.4f}"
    assert "| judgments | -0.0967 |" in (tmp_path / "s.md").read_text()
    entry = CheckHistory(load_dataset(root)).entries()[-1]
    assert entry["explain"]["ndcg@5"]["judgments"] == pytest.approx(-DROP, abs=1e-6)


def test_judgments_and_pipeline_changed_at_once_are_both_named_and_sum_to_the_change(home, tmp_path, capsys):
    root = tmp_path / "devmem"
    shutil.copytree(DEVMEM, root)
    snap = tmp_path / "rrf.json"
    assert rwb(capsys, "snapshot", root, "--pipeline", "rrf", "--out", snap)[0] == 0
    old = load_dataset(root).qrels
    lines = (root / "qrels" / "test.tsv").read_text("utf-8").splitlines()
    (root / "qrels" / "test.tsv").write_text(
        "\n".join(line for i, line in enumerate(lines) if i == 0 or i % 3) + "\n", "utf-8")
    status, out, err = rwb(capsys, "check", root, "--pipeline", "vector", "--against", snap, "--explain",
                           "--fail-if", "ndcg@5:-1", "--json", tmp_path / "c.json", "--permutations", "2000")
    assert status in (0, 1), err
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["changed_inputs"] == ["judgments", "pipeline"]
    explain = data["explain"]["ndcg@5"]
    parts = explain["parts"]
    assert abs(sum(parts.values()) - explain["total"]) < 1e-9
    assert explain["total"] == pytest.approx(data["checks"][0]["delta"], abs=2e-6)
    assert parts["corpus_index"] == 0.0 and parts["queries"] == 0.0
    assert abs(parts["judgments"]) > 1e-3 and abs(parts["pipeline"]) > 1e-3
    assert sorted(map(tuple, explain["orders"])) == [("judgments", "pipeline"), ("pipeline", "judgments")]

    # the judgments' Shapley value, from the four cells computed here
    dataset = load_dataset(root)
    pool = load_pool(dataset, "minilm")
    new = effective_qrels(dataset).qrels
    def values(pipeline, qrels):
        ev = evaluate_config(pool, judge(pool, qrels), resolve_config(pipeline), ("ndcg@5",))
        return dict(zip(pool.query_ids, ev.values["ndcg@5"]))
    frozen = {q: v["values"]["ndcg@5"] for q, v in json.loads(snap.read_text())["queries"].items()}
    rrf_new, vector_old, vector_new = values("rrf", new), values("vector", old), values("vector", new)
    paired = [q for q in frozen if frozen[q] is not None and frozen_value(vector_new[q]) is not None]
    assert explain["n"] == len(paired)
    shares = [((rrf_new[q] - frozen[q]) + (frozen_value(vector_new[q]) - vector_old[q])) / 2 for q in paired]
    assert parts["judgments"] == pytest.approx(float(np.mean(shares)), abs=1e-9)
    intents = explain["intents"]
    assert sum(row["n"] for row in intents.values()) == len(paired)
    for row in intents.values():
        assert abs(sum(row["parts"].values()) - row["total"]) < 1e-9


def test_the_orders_are_those_whose_every_step_can_be_scored():
    from eval.experiments.explain import _orders

    parts = ["corpus_index", "judgments", "pipeline"]
    # today's pipeline on the snapshot's corpus cannot be scored: the corpus goes before the pipeline
    def scorable(state):
        return not ("pipeline" in state and "corpus_index" not in state)
    groups, orders = _orders(parts, scorable)
    assert groups == [("corpus_index",), ("judgments",), ("pipeline",)]
    assert sorted(tuple(g[0] for g in o) for o in orders) == [
        ("corpus_index", "judgments", "pipeline"), ("corpus_index", "pipeline", "judgments"),
        ("judgments", "corpus_index", "pipeline")]
    # and without the snapshot's judgments, the snapshot's corpus with today's judgments is all
    # that can be scored besides the two ends: the judgments first, then the corpus, the pipeline
    def without_old_judgments(state):
        return scorable(state) and "judgments" in state
    _, orders = _orders(parts, without_old_judgments)
    assert [tuple(g[0] for g in o) for o in orders] == [("judgments", "corpus_index", "pipeline")]
    # nothing between the ends: the parts are reported together
    groups, orders = _orders(["corpus_index", "judgments"], lambda state: False)
    assert groups == [("corpus_index", "judgments")] and orders == [(("corpus_index", "judgments"),)]
