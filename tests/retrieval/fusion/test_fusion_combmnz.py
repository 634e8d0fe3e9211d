"""CombMNZ (Fox & Shaw 1994; ranx ``mnz``), by hand: the sum times the paths that found the document."""

from __future__ import annotations

import pytest

from retrieval.fusion.combmnz import CombMnzParams, combmnz
from retrieval.pipeline import PIPELINES, run_pipeline
from tests.conftest import everything_visible, ranked_ids, score_of, two_path_table


def test_combmnz_of_minmax_scores_with_the_overlap_multiplier():
    c = two_path_table()
    scored = combmnz(c, everything_visible(c), 20, CombMnzParams())
    assert [score_of(c, scored.score, d) for d in "ABCD"] == pytest.approx(
        [(1 + 0) * 2, ((0.5 - 0.25) / 0.5 + 1) * 2, (0 + 0) * 1, (0 + (6 - 2) / 8) * 1])
    assert [score_of(c, scored.multipliers["paths"], d) for d in "ABCD"] == [2, 2, 1, 1]
    for d in "ABCD":  # the components carry the multiplier and add up to the score
        assert score_of(c, scored.components["dense"] + scored.components["sparse"], d) == pytest.approx(
            score_of(c, scored.score, d))


def test_combmnz_of_rank_scores():
    c = two_path_table()
    score = combmnz(c, everything_visible(c), 20, CombMnzParams(norm="rank")).score
    assert [score_of(c, score, d) for d in "ABCD"] == pytest.approx(
        [(1 / 1 + 1 / 3) * 2, (1 / 2 + 1 / 1) * 2, (1 / 3) * 1, (1 / 2) * 1])


def test_the_combmnz_pipeline():
    c = two_path_table()
    assert ranked_ids(c, run_pipeline(c, PIPELINES["combmnz"]).ranking) == ["B", "A", "D", "C"]  # 3, 2, 0.5, 0


def test_zscores_are_not_offered():
    """A negative z-score sum times 2 would rank a document found by both paths lower."""
    with pytest.raises(ValueError, match="norm must be one of"):
        CombMnzParams(norm="zscore")
