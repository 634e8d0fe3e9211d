"""Salience (seed 000 ``compute_salience``), by hand."""

from __future__ import annotations

import math

import pytest

from retrieval.fusion.salience import SalienceParams, salience
from retrieval.ranking import rank_rows
from tests.conftest import everything_visible, make_candidates, ranked_ids, score_of


def test_salience_by_hand_on_three_documents():
    c = make_candidates([[
        {"id": "A", "dense_rank": 0, "bm25_rank": 0, "bm25_score": 3.0, "reinforcement": 4, "access_count": 12,
         "age_days": 0.0},
        {"id": "B", "dense_rank": 1, "reinforcement": 1, "access_count": 3, "age_days": 30.0},
        {"id": "C", "dense_rank": 2, "bm25_rank": 1, "bm25_score": 1.0, "reinforcement": 0, "access_count": 0,
         "age_days": 60.0},
    ]])
    scored = salience(c, everything_visible(c), 20, SalienceParams())
    rrf_a = 1 / (60 + 0 + 1) + 1 / (60 + 0 + 1)
    rrf_b = 1 / (60 + 1 + 1)
    rrf_c = 1 / (60 + 2 + 1) + 1 / (60 + 1 + 1)
    max_r, max_a = 4, 12
    expected = {
        "A": 0.50 * rrf_a / rrf_a + 0.20 * math.log(4 + 1) / math.log(max_r + 2) + 0.20 * 1.0
             + 0.10 * math.log(12 + 1) / math.log(max_a + 2),
        "B": 0.50 * rrf_b / rrf_a + 0.20 * math.log(1 + 1) / math.log(max_r + 2) + 0.20 * 0.5
             + 0.10 * math.log(3 + 1) / math.log(max_a + 2),
        "C": 0.50 * rrf_c / rrf_a + 0.20 * math.log(0 + 1) / math.log(max_r + 2) + 0.20 * 0.25
             + 0.10 * math.log(0 + 1) / math.log(max_a + 2),
    }
    for doc_id, value in expected.items():
        assert score_of(c, scored.score, doc_id) == pytest.approx(value)
    assert score_of(c, scored.components["recency"], "B") == pytest.approx(0.20 * 0.5)
    assert ranked_ids(c, rank_rows(c, scored.score, 10)) == ["A", "C", "B"]


# ---- ranking: ties, min score, token budget ----------------------------------------------
