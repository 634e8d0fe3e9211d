"""The S3 home's local mirror is this user's own folder, and names from the bucket are checked
before they become local paths (a real S3 endpoint: moto's server, as in
tests/retrieval/test_object_store.py).

Was (issue 46, class 5): with the mirror folder a symlink, ``rwb judge`` exited 0 and the grade
never reached the bucket (kept on this machine only, silently); one object with a 300-character
name in the bucket's snapshot folder made every other machine's ``check --against NAME`` fail
with ``[Errno 36] File name too long``.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.campaigns.conftest import TINY, one_line_error, rwb
from tests.retrieval.test_object_store import BUCKET, _keys, _mirror, _use, s3  # noqa: F401 (s3: a fixture)

pytestmark = pytest.mark.slow  # an S3 server; `make test` runs it


def test_a_symlinked_mirror_is_refused_not_written_locally(s3, tmp_path, monkeypatch, capsys):  # noqa: F811
    home = f"s3://{BUCKET}/symlinked"
    _use(monkeypatch, home, tmp_path / "cache")
    mirror = _mirror(home)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    mirror.parent.mkdir(parents=True)
    mirror.symlink_to(elsewhere)
    line = one_line_error(*rwb(capsys, "--quiet", "judge", TINY, "q1", "d09", "2")[::2])
    assert "symbolic link" in line and str(mirror) in line
    assert _keys(s3, "symlinked/") == [] and list(elsewhere.rglob("*.json")) == []


@pytest.mark.skipif(os.getuid() != 0, reason="giving the mirror to another user needs root")
def test_another_users_mirror_is_refused(s3, tmp_path, monkeypatch, capsys):  # noqa: F811
    home = f"s3://{BUCKET}/foreign"
    _use(monkeypatch, home, tmp_path / "cache")
    mirror = _mirror(home)
    mirror.mkdir(parents=True)
    os.chown(mirror, 54321, 54321)
    line = one_line_error(*rwb(capsys, "--quiet", "judge", TINY, "q1", "d09", "2")[::2])
    assert "belongs to another user (uid 54321)" in line
    assert _keys(s3, "foreign/") == []


def test_a_foreign_object_name_in_the_bucket_breaks_no_listing(s3, tmp_path, monkeypatch):  # noqa: F811
    from eval.stores.snapshots import SnapshotStore
    from retrieval.dataset import load_dataset

    home = f"s3://{BUCKET}/names"
    _use(monkeypatch, home, tmp_path / "alice")
    store = SnapshotStore(load_dataset(TINY))
    folder = store.folder.relative_to(_mirror(home)).as_posix()
    record = {"name": "kept", "queries": {"q1": {"values": {"ndcg@5": 1.0}, "ranking": ["d01"]}}, "metrics": {}}
    s3.put_object(Bucket=BUCKET, Key=f"names/{folder}/kept.json", Body=json.dumps(record).encode())
    s3.put_object(Bucket=BUCKET, Key=f"names/{folder}/{'x' * 300}.json", Body=b"{}")
    _use(monkeypatch, home, tmp_path / "bob")  # another machine
    store = SnapshotStore(load_dataset(TINY))
    assert store.names() == ["kept"]
    assert store.load("kept")["queries"]["q1"]["values"]["ndcg@5"] == 1.0
