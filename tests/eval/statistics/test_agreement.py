"""Raters and their agreement (``eval.statistics.agreement``, ``rwb judge --rater / --agreement``).

The hand-built two-rater table (tiny fixture), four pairs both graded:

    pair      alice  bob
    q1 d04      1     2
    q1 d05      0     0
    q2 d02      2     2
    q3 d07      2     2

Krippendorff's α, ordinal. Values: alice 1,0,2,2 and bob 2,0,2,2 → n0 = 2, n1 = 1, n2 = 5 (n = 8).
Coincidences (two coders: each unit adds 1 per ordered pair): o00 = 2, o12 = o21 = 1, o22 = 4.
Ordinal distance δ²(c,k) = (Σ_{g=c..k} n_g − (n_c + n_k)/2)²: δ²01 = (3 − 1.5)² = 2.25,
δ²02 = (8 − 3.5)² = 20.25, δ²12 = (6 − 3)² = 9.
Observed D_o = (o12·δ²12 + o21·δ²21) / n = 18 / 8 = 2.25.
Expected D_e = Σ_{c≠k} n_c·n_k·δ²ck / (n(n − 1)) = 2·(2·1·2.25 + 2·5·20.25 + 1·5·9) / 56 = 504 / 56 = 9.
α = 1 − 2.25 / 9 = 0.75.

Cohen's κ, quadratic weights w = (i − j)²: observed Σ w·O = 1 (the one pair 1 vs 2); marginals
alice (1, 1, 2, 0), bob (1, 0, 3, 0), expected E = a_i·b_j / 4: Σ w·E = Σ a_i·b_j·(i − j)² / 4 =
(1·3·4 [alice 0, bob 2] + 1·1·1 [1, 0] + 1·3·1 [1, 2] + 2·1·4 [2, 0]) / 4 = (12 + 1 + 3 + 8) / 4 = 6;
κ = 1 − 1/6 = 0.8333.

Impact with bm25: q1 is ERR_CONN_REFUSED, which only d03 (grade 3) holds, and BM25 never returns
d04 (no query word), so q1's DCG@5 stays 3 (d05, graded 0 by both, adds nothing). Its ideal DCG is
3 + g/log2(3) with d04's grade g: alice (1) 3.6309 → nDCG 0.8262; bob (2) 4.2619 → 0.7039: bob's grades move q1 by −0.1223.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from pathlib import Path

import pytest

from eval.statistics.agreement import agreement
from eval.stores.judgments import JudgmentStore, effective_qrels
from retrieval.dataset import load_dataset
from tests.conftest import rwb_here

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "tests" / "fixtures" / "tiny"
DEVMEM = ROOT / "datasets" / "devmem"
TABLE = (("q1", "d04", 1, 2), ("q1", "d05", 0, 0), ("q2", "d02", 2, 2), ("q3", "d07", 2, 2))
IMPACT = 3 / (3 + 2 / math.log2(3)) - 3 / (3 + 1 / math.log2(3))     # −0.1223


def test_agreement_on_the_hand_built_table():
    alice = {q: {d: a for q2, d, a, _ in TABLE if q2 == q} for q, *_ in TABLE}
    bob = {q: {d: b for q2, d, _, b in TABLE if q2 == q} for q, *_ in TABLE}
    bob["q4"] = {"d06": 1}          # graded by one rater only: not a pair
    found = agreement("alice", alice, "bob", bob)
    assert found.pairs == 4
    assert found.alpha == pytest.approx(0.75, abs=1e-12)
    assert found.kappa == pytest.approx(5 / 6, abs=1e-12)
    assert found.confusion == ((1, 0, 0, 0), (0, 0, 1, 0), (0, 0, 2, 0), (0, 0, 0, 0))


def test_grades_carry_their_rater_and_the_cli_reports_the_agreement(tmp_path):
    home, root = tmp_path / "home", tmp_path / "tiny"
    shutil.copytree(TINY, root)
    for q, d, a, b in TABLE:
        assert rwb_here(home, "judge", root, q, d, a, "--rater", "alice").returncode == 0
        proc = rwb_here(home, "judge", root, q, d, b, "--rater", "bob")
        assert proc.returncode == 0
    out = tmp_path / "agree.json"
    proc = rwb_here(home, "judge", root, "--agreement", "--pipeline", "bm25", "--json", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == ("agreement alice vs bob: 4 pairs graded by both · Krippendorff's α "
                                           "(ordinal) 0.750 · Cohen's κ (quadratic) 0.833")
    [pair] = json.loads(out.read_text())["agreement"]
    assert pair["impact"] == {"q1": pytest.approx(IMPACT, abs=1e-6)}
    # every figure says whose grades it used; the merged view is a pair's last grade, whoever gave it
    dataset = load_dataset(root)
    merged = effective_qrels(dataset, home)
    assert merged.qrels["q1"]["d04"] == 2 and merged.raters == ("alice", "bob")
    assert merged.label.endswith("; raters: alice, bob)")
    only_alice = effective_qrels(dataset, home, raters=("alice",))
    assert only_alice.qrels["q1"]["d04"] == 1 and "raters: alice only, of alice, bob" in only_alice.label
    assert JudgmentStore(dataset, home).raters()["alice"]["q1"] == {"d04": 1, "d05": 0}
    proc = rwb_here(home, "judge", root, "--raters", "carol")
    assert proc.returncode == 2 and proc.stderr.startswith("rwb: error: no grades by rater 'carol'")
    assert proc.stderr.count("\n") == 1


def _ubi_logs(dataset, folder: Path) -> tuple[Path, Path]:
    """UBI logs (read with ``--model coec-rwb``: impressions as ``query_response_hit_ids``): three
    searches of every judged devmem query showing its judged memories and three others, in a
    seeded random order; users click a memory of grade 2 or 3 with probability 0.8, one of grade 1
    with 0.3, anything else with 0.05."""
    rng = random.Random(7)
    doc_ids = [d.id for d in dataset.documents]
    queries, events = [], []
    for query in dataset.queries:
        judged = dataset.qrels.get(query.id, {})
        if not judged:
            continue
        for n in range(3):
            hits = list(judged) + rng.sample([d for d in doc_ids if d not in judged], 3)
            rng.shuffle(hits)
            search = f"{query.id}-{n}"
            queries.append({"query_id": search, "user_query": query.text, "query_response_hit_ids": hits})
            for at, doc in enumerate(hits):
                grade = judged.get(doc, 0)
                if rng.random() < (0.8 if grade >= 2 else 0.3 if grade == 1 else 0.05):
                    events.append({"action_name": "click", "query_id": search, "timestamp": "2026-11-01T10:00:00Z",
                                   "event_attributes": {"object": {"object_id": doc, "object_id_field": "_id"},
                                                        "position": {"ordinal": at}}})
    (folder / "q.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries), "utf-8")
    (folder / "e.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), "utf-8")
    return folder / "q.jsonl", folder / "e.jsonl"


def test_devmem_explicit_against_a_ubi_import_reports_alpha(tmp_path):
    home, root = tmp_path / "home", tmp_path / "devmem"
    shutil.copytree(DEVMEM, root)
    q, e = _ubi_logs(load_dataset(root), tmp_path)
    proc = rwb_here(home, "import", "ubi", root, "--queries", q, "--events", e, "--model", "coec-rwb")
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "agree.json"
    proc = rwb_here(home, "judge", root, "--agreement", "--json", out)
    assert proc.returncode == 0, proc.stderr
    [pair] = json.loads(out.read_text())["agreement"]
    assert (pair["first"], pair["second"]) == ("explicit", "implicit")
    assert pair["pairs"] > 100 and 0 < pair["alpha"] < 1 and 0 < pair["kappa"] < 1
    assert sum(map(sum, pair["confusion"])) == pair["pairs"]
    assert proc.stdout.startswith(f"agreement explicit vs implicit: {pair['pairs']} pairs graded by both · "
                                  f"Krippendorff's α (ordinal) {pair['alpha']:.3f}")
