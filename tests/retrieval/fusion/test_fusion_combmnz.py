"""CombMNZ (Fox & Shaw 1994; ranx ``mnz``), by hand: the sum times the paths that found the document."""

from __future__ import annotations

import dataclasses

import pytest

from eval.cli import main as rwb_main
from retrieval.params import knob_of

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


@pytest.mark.parametrize("norm", ["zscore", "dbsf"])
def test_norms_that_go_below_0_are_refused_with_the_reason(norm, capsys, tmp_path):
    """A negative sum times 2 would rank a document found by both paths lower; DBSF is
    unclipped (Qdrant), and neither Qdrant nor OpenSearch defines CombMNZ to follow."""
    with pytest.raises(ValueError, match=f"combmnz refuses norm = '{norm}': its values go below 0"):
        CombMnzParams(norm=norm)
    norm_knob = next(knob_of(f) for f in dataclasses.fields(CombMnzParams) if f.name == "norm")
    assert norm not in norm_knob.options                         # not offered on the pages either
    pipeline = tmp_path / "mnz.toml"
    pipeline.write_text(f'fusion = "combmnz"\n[combmnz]\nnorm = "{norm}"\n')
    assert rwb_main(["export", str(pipeline), "--to", "opensearch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rwb: error: ") and "combmnz refuses" in err


def test_l2_is_offered_and_never_below_0():
    """OpenSearch's l2 (vector score (1 + cos) / 2): a negative cosine still gives a value ≥ 0."""
    c = two_path_table()
    score = combmnz(c, everything_visible(c), 20, CombMnzParams(norm="l2")).score
    assert (score[everything_visible(c)] >= 0).all()
