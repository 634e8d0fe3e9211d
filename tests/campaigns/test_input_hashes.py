"""Every input that can move a figure is hashed and named (``eval.stores.inputs``): a change of
each one, and of nothing else, is named as the one changed input.

Was (issue 46, class 2): moving ``dataset.toml``'s ``reference_time`` by a year made
seed-adaptive fail with no changed input named; replacing a learned model's file (another
``booster_sha256``) moved ndcg@5 by +0.1287 and the check said the inputs were the same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.campaigns.conftest import rwb

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
NAMES = ("dense_sim", "bm25_score", "confidence", "vitality")


def _card(root: Path, old: str, new: str) -> None:
    card = root / "dataset.toml"
    text = card.read_text("utf-8")
    assert old in text
    card.write_text(text.replace(old, new), "utf-8")


def _inputs(root: Path, config="rrf", embedder="minilm", analyzer="unigram"):
    from eval.stores.inputs import inputs_of
    from retrieval.dataset import load_dataset
    from retrieval.pipeline import get_pipeline

    dataset = load_dataset(root)
    config = get_pipeline(config) if isinstance(config, str) else config
    return inputs_of(dataset, dataset.qrels, config, embedder, analyzer)


def test_a_moved_reference_time_is_named_by_rwb_check(workspace, capsys, tmp_path):
    data, _ = workspace
    snap = tmp_path / "before.json"
    assert rwb(capsys, "--quiet", "snapshot", data, "--pipeline", "seed-adaptive", "--out", snap)[0] == 0
    _card(data, 'reference_time = "2026-11-20T18:00:00+00:00"', 'reference_time = "2027-11-20T18:00:00+00:00"')
    status, out, err = rwb(capsys, "--quiet", "check", data, "--pipeline", "seed-adaptive", "--against", snap)
    assert status in (0, 1), err
    assert out.rstrip().endswith("changed inputs: card"), out
    assert json.loads(snap.read_text("utf-8"))["inputs"]["card"] != _inputs(data).card


@pytest.mark.parametrize("old,new", [
    ('reference_time = "2026-11-20T18:00:00+00:00"', 'reference_time = "2026-11-21T18:00:00+00:00"'),
    ('languages = ["en", "zh"]', 'languages = ["en"]'),
])
def test_each_card_field_scoring_reads_is_named(tmp_path, old, new):
    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    before = _inputs(root)
    _card(root, old, new)
    from eval.stores.inputs import changed

    assert changed(before, _inputs(root)) == ["card"]


def test_the_card_description_is_no_input(tmp_path):
    from eval.stores.inputs import changed

    root = tmp_path / "tiny"
    shutil.copytree(TINY, root)
    before = _inputs(root)
    _card(root, 'description = "', 'description = "Edited. ')
    assert changed(before, _inputs(root)) == []


def test_the_embedder_and_the_analyzer_are_named(tmp_path, monkeypatch):
    from eval.stores.inputs import changed

    # a home of its own, with no index in it: whether another test built TINY's unigram index in
    # the session's home would otherwise decide whether "index" changes too
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    before = _inputs(TINY)
    assert changed(before, _inputs(TINY, embedder="use-multilingual")) == ["embedder"]
    assert changed(before, _inputs(TINY, analyzer="bigram")) == ["analyzer"]


def _model(path: Path, seed: int) -> str:
    import lightgbm
    import numpy as np

    from retrieval.fusion.learned.features import feature_set_id
    from retrieval.fusion.learned.model import TreeModel, save_model

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, len(NAMES)))
    y = (x[:, 0] + x[:, seed % 3 + 1] > 0).astype(int)
    ranker = lightgbm.LGBMRanker(objective="lambdarank", n_estimators=10, num_leaves=4, min_child_samples=2,
                                 num_threads=1, deterministic=True, verbose=-1)
    ranker.fit(x, y, group=[20, 20, 20])
    text = ranker.booster_.model_to_string()
    save_model(TreeModel(NAMES, feature_set_id(NAMES), text, {}), path)
    return json.loads(path.read_text("utf-8"))["booster_sha256"]


def test_a_replaced_learned_model_file_is_named_as_a_changed_pipeline(tmp_path):
    from eval.stores.inputs import changed
    from retrieval.pipeline import get_pipeline

    folder = tmp_path / "learned"
    folder.mkdir()
    first = _model(folder / "m.model.json", 1)
    toml = folder / "p.toml"
    toml.write_text('name = "ltr"\nfusion = "learned"\n[learned]\nmodel = "lambdamart"\nfile = "m.model.json"\n')
    before = _inputs(TINY, get_pipeline(str(toml)))
    assert _inputs(TINY, get_pipeline(str(toml))) == before  # no false alarm on a rerun
    second = _model(folder / "m.model.json", 2)  # the TOML unchanged, the model file replaced
    assert first != second
    assert changed(before, _inputs(TINY, get_pipeline(str(toml)))) == ["pipeline"]


def test_a_record_from_before_the_card_and_analyzer_raises_no_false_alarm():
    from eval.stores.inputs import changed

    now = _inputs(TINY)
    old = {k: v for k, v in now.to_json().items() if k not in ("card", "analyzer")}
    assert changed(old, now) == [] and changed(now, old) == []
