"""A learned model is never used unchecked.

Was (issue 46, class 7): a booster with an edited leaf and its ``booster_sha256`` key deleted
was used silently — the checksum was checked only when the key was present.
"""

from __future__ import annotations

import json

from tests.campaigns.conftest import one_line_error, rwb
from tests.campaigns.test_hostile_files_and_signals import _booster_text, _resized

NAMES = ("dense_sim", "bm25_score", "confidence", "vitality")


def _saved(path) -> dict:
    from retrieval.fusion.learned.features import feature_set_id
    from retrieval.fusion.learned.model import TreeModel, save_model

    save_model(TreeModel(NAMES, feature_set_id(NAMES), _booster_text(), {}), path)
    return json.loads(path.read_text("utf-8"))


def _edited_leaf(text: str) -> str:
    """``text`` with its first leaf's value raised by 1 (tree sizes fixed: a well-formed booster)."""
    start = text.index("leaf_value=") + len("leaf_value=")
    end = text.index("\n", start)
    values = text[start:end].split(" ")
    values[0] = repr(float(values[0]) + 1.0)
    return _resized(text[:start] + " ".join(values) + text[end:])


def test_a_booster_without_its_checksum_is_refused(tmp_path):
    import pytest

    from retrieval.fusion.learned.model import load_model

    path = tmp_path / "m.model.json"
    data = _saved(path)
    assert load_model(path).feature_names == NAMES  # as written by rwb learn: used
    edited = _edited_leaf(data["booster"])  # an edited leaf…
    del data["booster_sha256"]                                         # …and its checksum gone
    path.write_text(json.dumps({**data, "booster": edited}), "utf-8")
    with pytest.raises(ValueError, match="the booster has no booster_sha256"):
        load_model(path)


def test_a_pipeline_naming_such_a_model_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    data = _saved(tmp_path / "m.model.json")
    del data["booster_sha256"]
    (tmp_path / "m.model.json").write_text(json.dumps(data), "utf-8")
    (tmp_path / "p.toml").write_text('name = "ltr"\nfusion = "learned"\n[learned]\nmodel = "lambdamart"\n'
                                     'file = "m.model.json"\n', "utf-8")
    from tests.campaigns.conftest import TINY

    line = one_line_error(*rwb(capsys, "--quiet", "eval", TINY, "--pipeline", tmp_path / "p.toml")[::2])
    assert "booster_sha256" in line
