"""Replay evaluation with seed 000's access_count write-backs (issue 12, item 6), by hand."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from eval.cli import main as rwb_main
from eval.experiments.replay import replay, replay_order
from retrieval.dataset import load_dataset
from retrieval.pipeline import PIPELINES, run_pipeline, with_params
from tests.conftest import make_candidates, ranked_ids

SEEDPATHS = Path(__file__).resolve().parents[2] / "fixtures" / "seedpaths"
# salience with one result per query, so a single write-back decides the next answer
ONE = with_params(PIPELINES["seed-salience"], {"max_results": 1})


def table():
    """q0 retrieves only b; q1 retrieves a (dense rank 0) and b (BM25 rank 0): equal RRF,
    equal age (0 days), no reinforcement, access_count 0 — a tie, broken by id (a first)."""
    return make_candidates([
        [{"id": "b", "dense_rank": 0, "dense_sim": 0.9}],
        [{"id": "a", "dense_rank": 0, "dense_sim": 0.9}, {"id": "b", "bm25_rank": 0, "bm25_score": 3.0}],
    ])


def test_frozen_evaluation_ignores_write_backs():
    c = table()
    assert ranked_ids(c, run_pipeline(c, ONE).ranking, 1) == ["a"]


def test_a_returned_memory_counts_as_accessed_for_the_next_query():
    c = table()
    replayed = replay(c, ONE, [0, 1])
    # q0 returns b → b.access_count 0 + 1; in q1, b's access term is 0.1·log(1+1)/log(max 1 + 2)
    assert ranked_ids(c, replayed.run.ranking, 1) == ["b"]
    b = 0.5 * 1 + 0.2 * 0 + 0.2 * 1 + 0.1 * math.log(2) / math.log(3)   # semantic, reinf., recency, access
    assert replayed.run.ranking.score[replayed.run.ranking.query_idx == 1].tolist() == pytest.approx([b])
    assert replayed.write_backs == 2                                  # b after q0, b after q1
    assert replayed.access_count.tolist() == [0.0, 2.0]               # doc order: a, b


def test_the_order_of_the_log_decides():
    c = table()
    replayed = replay(c, ONE, [1, 0])  # q1 first: the tie goes to a, then q0 returns b
    assert [ranked_ids(c, replayed.run.ranking, qi) for qi in (0, 1)] == [["b"], ["a"]]
    assert replayed.access_count.tolist() == [1.0, 1.0]


def test_replay_order_is_reference_time_order(rwb_home):
    dataset = load_dataset(SEEDPATHS)
    c = make_candidates([[{"id": "x"}]] * 6)
    c = dataclasses.replace(c, query_ids=("r6", "r5", "r4", "r3", "r2", "r1"))
    # r1 10:00:00, r2 10:01:40, r3 10:02:00, r4 10:06:41, r5 10:07:00, r6 18:00 → positions 5, 4, …, 0
    assert replay_order(c, dataset) == [5, 4, 3, 2, 1, 0]


def test_rwb_eval_replay_prints_frozen_and_replayed_metrics(rwb_home, tmp_path, capsys):
    out = tmp_path / "replay.json"
    code = rwb_main(["eval", str(SEEDPATHS), "--pipeline", "seed-salience", "--replay", "--quiet",
                     "--metrics", "ndcg@3", "--json", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "replayed in reference_time order" in printed and "write-backs" in printed
    data = json.loads(out.read_text())
    assert set(data["replay"]) == {"vector", "seed-salience"}
    assert set(data["replay"]["seed-salience"]) == {"frozen", "replay", "write_backs"}
