"""The judging queue (eval/experiments/holes.py) by hand, and ``rwb holes`` on the tiny dataset."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from eval.cli import main as rwb_main
from eval.experiments.holes import holes
from retrieval.ranking import rank_rows
from tests.conftest import make_candidates

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"


def test_the_swing_of_each_unjudged_document_by_hand():
    """A's top 2 is [a, b], B's is [b, c]; only b is judged (grade 1). Grading a relevant makes A
    perfect and drops B to 1/(1 + 1/log2 3); grading c relevant does the reverse, less strongly."""
    c = make_candidates(
        [
            [
                {"id": "a", "dense_rank": 0, "dense_sim": 0.9, "bm25_rank": 2, "bm25_score": 1.0},
                {"id": "b", "dense_rank": 1, "dense_sim": 0.8, "bm25_rank": 0, "bm25_score": 3.0},
                {"id": "c", "dense_rank": 2, "dense_sim": 0.1, "bm25_rank": 1, "bm25_score": 2.0},
            ]
        ]
    )
    a = rank_rows(c, c.dense_sim.astype(np.float64), 2)
    b = rank_rows(c, c.bm25_score.astype(np.float64), 2)
    queue = holes(c, {"q0": {"b": 1}}, a, b, 2)
    g = 1 / math.log2(3)
    d0 = g - 1.0  # A [a b] vs B [b c], only b relevant
    assert [(h.doc_id, h.rank_a, h.rank_b) for h in queue] == [("a", 1, None), ("c", None, 2)]
    assert queue[0].delta_if_0 == pytest.approx(d0)
    assert queue[0].delta_if_top == pytest.approx(1.0 - 1 / (1 + g))
    assert queue[0].swing == pytest.approx(1.0 - 1 / (1 + g) - d0)
    assert queue[1].delta_if_top == pytest.approx(g / (1 + g) - 1.0)
    assert queue[1].swing == pytest.approx(abs(g / (1 + g) - 1.0 - d0))
    assert queue[0].swing > queue[1].swing


def test_cli_holes_prints_and_writes_json(tmp_path, rwb_home, capsys):
    out = tmp_path / "holes.json"
    assert (
        rwb_main(
            [
                "holes",
                str(TINY),
                "--pipeline",
                "vector",
                "--pipeline",
                "bm25",
                "--k",
                "3",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert data["k"] == 3 and data["a"] == "vector" and data["b"] == "bm25"
    swings = [h["swing"] for h in data["holes"]]
    assert swings == sorted(swings, reverse=True)
    assert "unjudged (query, document) pairs" in capsys.readouterr().out
    assert rwb_main(["holes", str(TINY), "--pipeline", "vector"]) == 2
