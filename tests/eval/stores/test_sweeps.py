"""The Sweep page's kept sweeps (eval/stores/sweeps.py): a sweep's record comes back as the same
result, fixed pipelines and recommendation included; the newest entries are kept; a damaged file
is named, never silently replaced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval.search.space import Space, parse_param
from eval.search.sweep import from_record, sweep
from eval.stores.pool import load_pool
from eval.stores.sweeps import KEEP, SweepStore, settings_key
from retrieval.dataset import load_dataset
from retrieval.pipeline import PIPELINES

TINY = Path(__file__).resolve().parents[2] / "fixtures" / "tiny"


@pytest.fixture(scope="module")
def result(tiny, rwb_home):
    bm25 = PIPELINES["bm25"]
    return sweep(load_pool(tiny), tiny.qrels, bm25, Space((parse_param("min_score=0:0.5:0.5", bm25),)), folds=2)


def test_a_kept_sweep_comes_back_as_the_same_result(result, tmp_path):
    store = SweepStore(load_dataset(TINY), tmp_path)
    key = settings_key({"pipeline": "bm25", "x": "min_score", "range": [0, 0.5, 2]})
    assert store.get(key) is None
    assert store.put(key, result.to_record())
    back = from_record(store.get(key)["result"], result.base)
    assert np.array_equal(back.scores, result.scores) and back.folds == result.folds
    assert back.best_config == result.best_config and back.recommended == result.recommended
    assert back.chosen_fixed == result.chosen_fixed == "adaptive"     # tiny: the preset beats every setting
    assert back.fixed == result.fixed and back.fixed_scores == result.fixed_scores


def test_only_the_newest_entries_are_kept_and_a_damaged_file_is_named(result, tmp_path):
    store = SweepStore(load_dataset(TINY), tmp_path)
    record = result.to_record()
    keys = [settings_key({"n": i}) for i in range(KEEP + 2)]
    for key in keys:
        store.put(key, record)
    assert store.get(keys[0]) is None and store.get(keys[1]) is None and store.get(keys[-1]) is not None
    store.path.write_text('{"sweeps": 3}', "utf-8")
    with pytest.raises(ValueError, match="damaged"):
        store.get(keys[-1])
    with pytest.raises(ValueError, match="damaged"):
        store.put(keys[-1], record)
    assert store.path.read_text("utf-8") == '{"sweeps": 3}'             # nothing replaced
