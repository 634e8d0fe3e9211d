"""The one nested-CV procedure (``eval.search.nested``) with a plain inner search of our own:
what every caller (``rwb tune``, ``rwb learn``) relies on it for."""

import numpy as np

from eval.search.nested import Choice, compare, nested_cv

IDS = tuple(f"q{i}" for i in range(10))


def remember_training(plan):
    """An inner search that 'picks' the positions it was run on, and sees its inner folds."""
    inner = plan.inner_folds(3)
    return Choice("picked", frozenset(plan.train.tolist()), 0.0, {"inner": inner})


def unseen(choice, plan):
    """1 for a query the choice was not made on, 0 for one it was."""
    return np.array([0.0 if i in choice.pick else 1.0 for i in range(len(IDS))])


def test_every_query_is_held_out_once_by_a_procedure_that_never_saw_it():
    run = nested_cv(IDS, 3, 0, None, remember_training, unseen, applied=lambda c: c.kind)
    assert sorted(q for f in run.outer for q in f.test_ids) == sorted(IDS)
    assert run.held_out.tolist() == [1.0] * 10            # no held-out query was in its training part
    assert [f.test_mean for f in run.outer] == [1.0, 1.0, 1.0]
    assert run.final.pick == frozenset(range(10))          # the final procedure runs on every query
    assert run.final_score == 0.0                          # … so its score there is in-sample
    assert [len(f.test_ids) for f in run.outer] in ([4, 3, 3], [3, 4, 3], [3, 3, 4])


def test_groups_stay_whole_in_the_outer_and_the_inner_folds():
    groups = np.array(["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"])
    run = nested_cv(IDS, 2, 1, groups, remember_training, unseen, applied=lambda c: c.kind)
    for fold in run.outer:
        held = {groups[IDS.index(q)] for q in fold.test_ids}
        trained = {groups[i] for i in fold.choice.pick}
        assert not held & trained
    for plan in run.plans:
        inner = plan.inner_folds(3)
        for group in set(groups[plan.train]):
            assert len(set(inner[groups[plan.train] == group])) == 1   # one inner fold per group


def test_the_same_seed_draws_the_same_folds_and_another_seed_others():
    a = nested_cv(IDS, 3, 7, None, remember_training, unseen, applied=lambda c: c.kind)
    b = nested_cv(IDS, 3, 7, None, remember_training, unseen, applied=lambda c: c.kind)
    c = nested_cv(IDS, 3, 8, None, remember_training, unseen, applied=lambda c: c.kind)
    assert [f.test_ids for f in a.outer] == [f.test_ids for f in b.outer]
    assert [f.test_ids for f in a.outer] != [f.test_ids for f in c.outer]
    assert np.array_equal(a.plans[0].inner_folds(3), b.plans[0].inner_folds(3))
    assert not np.array_equal(a.plans[0].inner_folds(3), a.plans[0].inner_folds(3, repeat=1))


def test_the_comparison_takes_the_better_single_path_and_counts_wins():
    held = np.array([1.0, 1.0, 0.5, 0.0])
    default = np.array([0.5, 1.0, 0.5, 0.5])
    singles = {"vector": np.array([0.0, 0.0, 0.0, 1.0]), "bm25": np.array([1.0, 0.0, 0.0, 0.0])}
    best, (d, s) = compare(held, "rrf", default, singles, 0)
    assert best == "vector"                                 # equal means: the first single path
    assert (d.name, d.mean, d.delta) == ("default rrf", 0.625, 0.0)
    assert (d.wins, d.ties, d.losses) == (1, 2, 1)
    assert (s.name, s.mean, s.delta) == ("best single path vector", 0.25, 0.375)
    assert d.p_fisher_holm >= d.p_fisher and s.p_student_holm >= s.p_student
