"""``RWB_HOME=s3://bucket/prefix`` against a real S3 endpoint: moto's server (``moto[server]``,
a dev extra) started on 127.0.0.1 by this module as a separate process — never an in-process
mock. Skipped, with the reason, when it is not installed or does not start.

One devmem index is built twice: under a local ``RWB_HOME`` and under the s3:// home (the
second build reuses the first's embedding cache, so MiniLM encodes the corpus once). Every
other test works on a server-side copy of the published objects under its own prefix.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # an S3 server and a devmem build; `make test` runs it

ROOT = Path(__file__).resolve().parents[2]
DEVMEM = ROOT / "datasets" / "devmem"
BUCKET = "rwb-team"
AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
       "AWS_ALLOW_HTTP": "true", "AWS_EC2_METADATA_DISABLED": "true",
       "AWS_CONFIG_FILE": "/nonexistent/rwb-test", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/rwb-test"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on a free local port, the AWS environment pointing at it, one bucket."""
    try:
        import boto3
        import moto.server  # noqa: F401
    except ImportError as error:
        pytest.skip(f"moto[server] is not installed ({error}); pip install -e '.[dev]'")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(os.devnull, "wb")
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).read()
                break
            except urllib.error.HTTPError:  # it answers
                break
            except OSError as error:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.skip(f"the moto S3 server did not start on {url} ({error})")
                time.sleep(0.2)
        with pytest.MonkeyPatch.context() as patch:
            for name, value in {**AWS, "AWS_ENDPOINT_URL": url}.items():
                patch.setenv(name, value)
            client = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
            client.create_bucket(Bucket=BUCKET)
            yield client
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def _use(monkeypatch, home: str, cache: Path) -> None:
    monkeypatch.setenv("RWB_HOME", home)
    monkeypatch.setenv("RWB_CACHE", str(cache))


def _mirror(home: str) -> Path:
    from retrieval.object_store import mirror_of, parse_home
    return mirror_of(parse_home(home))


def _seed_embeddings(local: Path, home: str) -> None:
    """The local home's embedding cache (model + text hash → vector) under the s3 home's mirror,
    so a build there encodes nothing; the cache is SQLite, copied by its backup API."""
    import sqlite3
    _mirror(home).mkdir(parents=True, exist_ok=True)
    source, target = sqlite3.connect(local / "embeddings.sqlite"), sqlite3.connect(_mirror(home) / "embeddings.sqlite")
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()


def _rwb(*argv: str) -> tuple[int, str, str]:
    from eval.cli import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["--quiet", *argv])
    return status, out.getvalue(), err.getvalue()


def _copy_prefix(client, source: str, target: str) -> None:
    """Server-side copy of every object under ``source/`` to ``target/`` (a second home)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{source}/"):
        for item in page.get("Contents", []):
            client.copy_object(Bucket=BUCKET, Key=f"{target}/{item['Key'][len(source) + 1:]}",
                               CopySource={"Bucket": BUCKET, "Key": item["Key"]})


def _keys(client, prefix: str) -> list[str]:
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        found += [item["Key"] for item in page.get("Contents", [])]
    return found


def _pointer(client, prefix: str) -> tuple[str, bytes]:
    [key] = [k for k in _keys(client, f"{prefix}/indexes/") if k.endswith("/current.json")]
    return key, client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


@pytest.fixture(scope="module")
def published(s3, tmp_path_factory):
    """devmem indexed (and its pool built) under a local RWB_HOME, then by `rwb index` under
    ``s3://rwb-team/team`` with the local embedding cache; the local home and its eval JSON."""
    base = tmp_path_factory.mktemp("s3home")
    local = base / "local"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(local))
        status, out, err = _rwb("index", str(DEVMEM))
        assert status == 0, err
        home = f"s3://{BUCKET}/team"
        _use(patch, home, base / "cache-a")
        _seed_embeddings(local, home)
        status, out, err = _rwb("index", str(DEVMEM))
        assert status == 0, err
        assert "0 texts encoded" in out and "candidate pool: 120 queries" in out
    return {"home": home, "local": local, "base": base, "cache": base / "cache-a"}


SECOND_PROCESS = r"""
import json, sys
from eval.stores.pool import load_pool, pool_path
from retrieval.candidates import build_candidates
from retrieval.dataset import load_dataset
from retrieval.index import open_index
dataset = load_dataset(sys.argv[1])
handle = open_index(dataset, "minilm")
encoded = handle.embedder.encoded
fresh = build_candidates(handle, dataset.queries, 50)       # retrieved on the downloaded index
fresh.save(sys.argv[2] + "/fresh.npz")
stages = []
pool = load_pool(dataset, "minilm", progress=lambda stage, done, total: stages.append(stage))
print(json.dumps({"path": str(handle.path), "encoded": encoded, "stages": stages,
                  "pool": str(pool_path(dataset, "minilm", 50))}))
"""


def _columns_equal(a, b) -> None:
    from retrieval.candidate_table import Candidates
    a, b = Candidates.load(a), Candidates.load(b)
    assert a.doc_ids == b.doc_ids and a.query_ids == b.query_ids
    assert np.array_equal(a.offsets, b.offsets)
    assert sorted(a.cols) == sorted(b.cols)
    for name in a.cols:
        assert np.array_equal(a.cols[name], b.cols[name], equal_nan=True), name


def test_a_second_process_opens_the_shared_index_with_local_results(s3, published, tmp_path):
    from eval.stores.pool import pool_path
    from retrieval.dataset import load_dataset

    key, pointer = _pointer(s3, "team")
    build_id = json.loads(pointer)["build"]
    env = {**os.environ, "RWB_HOME": published["home"], "RWB_CACHE": str(tmp_path / "cache-b"),
           "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-c", SECOND_PROCESS, str(DEVMEM), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    # it served the published build, downloaded into its own cache, and encoded nothing
    assert seen["path"].endswith(f"/builds/{build_id}") and seen["path"].startswith(str(tmp_path / "cache-b"))
    assert seen["encoded"] == 0
    # the candidate pool came from the bucket, not retrieved again
    assert seen["stages"] == []
    assert Path(seen["pool"]).read_bytes() == s3.get_object(
        Bucket=BUCKET, Key=f"team/candidates/{Path(seen['pool']).name}")["Body"].read()
    # the downloaded index retrieves exactly what the local build retrieved, so every metric agrees
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RWB_HOME", str(published["local"]))
        local_pool = pool_path(load_dataset(DEVMEM), "minilm", 50)
    _columns_equal(tmp_path / "fresh.npz", local_pool)
    _columns_equal(Path(seen["pool"]), local_pool)
    # and so every pipeline's per-query metrics are the local ones
    from eval.metrics.measure import judge, per_query
    from retrieval.candidate_table import Candidates
    from retrieval.pipeline import PIPELINES, run_pipeline
    qrels = load_dataset(DEVMEM).qrels
    shared, own = Candidates.load(tmp_path / "fresh.npz"), Candidates.load(local_pool)
    for name in ("rrf", "vector", "bm25"):
        a = per_query(shared, judge(shared, qrels), run_pipeline(shared, PIPELINES[name]).ranking)
        b = per_query(own, judge(own, qrels), run_pipeline(own, PIPELINES[name]).ranking)
        assert a.keys() == b.keys() and all(np.array_equal(a[m], b[m], equal_nan=True) for m in a), name
    # the table on S3 is a complete LanceDB table that LanceDB opens at its s3:// URL
    import lancedb
    from retrieval.object_store import lance_storage_options
    lance_url = f"s3://{BUCKET}/{key.rsplit('/', 1)[0]}/builds/{build_id}/lance"
    assert lancedb.connect(lance_url, storage_options=lance_storage_options()).open_table("memories") \
        .count_rows() == 348


@pytest.mark.parametrize("damaged", ["bm25/", "lance/memories.lance/data/"])
def test_a_changed_byte_on_s3_is_caught_by_the_manifest_check(s3, published, tmp_path, monkeypatch, damaged):
    from retrieval.dataset import load_dataset
    from retrieval.index import open_index

    prefix = f"damaged-{damaged.split('/')[0]}"
    _copy_prefix(s3, "team", prefix)
    key, pointer = _pointer(s3, prefix)
    build_id = json.loads(pointer)["build"]
    folder = f"{key.rsplit('/', 1)[0]}/builds/{build_id}/"
    target = max((k for k in _keys(s3, folder + damaged)
                  if not k.endswith(("meta.json", ".managed.json"))),
                 key=lambda k: s3.head_object(Bucket=BUCKET, Key=k)["ContentLength"])
    data = bytearray(s3.get_object(Bucket=BUCKET, Key=target)["Body"].read())
    data[len(data) // 2] ^= 0x01
    s3.put_object(Bucket=BUCKET, Key=target, Body=bytes(data))

    home = f"s3://{BUCKET}/{prefix}"
    _use(monkeypatch, home, tmp_path / "cache")
    _seed_embeddings(published["local"], home)
    notices: list[str] = []
    handle = open_index(load_dataset(DEVMEM), "minilm", on_notice=notices.append)
    rel = target[len(folder):]
    assert any(f"{rel} does not match its checksum" in n and "is damaged" in n for n in notices), notices
    # a new build was made, verified and published in place of the damaged one
    republished = json.loads(_pointer(s3, prefix)[1])["build"]
    assert republished != build_id and handle.path.name == republished
    assert handle.store.count() == 348 and handle.embedder.encoded == 0


def test_a_damaged_local_copy_is_fetched_again(s3, published, monkeypatch):
    from retrieval.dataset import load_dataset
    from retrieval.index import open_index

    _use(monkeypatch, published["home"], published["cache"])
    build_id = json.loads(_pointer(s3, "team")[1])["build"]
    local = next(_mirror(published["home"]).glob(f"indexes/*/minilm/*/builds/{build_id}"))
    ids = local / "ids.json"
    ids.write_text(ids.read_text().replace("m0001", "m0002", 1))
    notices: list[str] = []
    handle = open_index(load_dataset(DEVMEM), "minilm", on_notice=notices.append)
    assert any("local copy" in n and "ids.json" in n for n in notices), notices
    assert handle.path.name == build_id and '"m0001"' in ids.read_text()
    assert json.loads(_pointer(s3, "team")[1])["build"] == build_id  # nothing republished


def test_an_interrupted_publish_leaves_the_published_index_unchanged(s3, published, tmp_path, monkeypatch):
    from botocore.exceptions import EndpointConnectionError

    from retrieval.dataset import load_dataset
    from retrieval.index import open_index
    from retrieval.object_store import bucket_of, parse_home

    _copy_prefix(s3, "team", "interrupted")
    home = f"s3://{BUCKET}/interrupted"
    _use(monkeypatch, home, tmp_path / "cache-1")
    _seed_embeddings(published["local"], home)
    key, before = _pointer(s3, "interrupted")
    uploads = []

    def connection_lost(**kwargs):  # the network goes away after three uploaded files
        uploads.append(1)
        if len(uploads) > 3:
            raise EndpointConnectionError(endpoint_url=os.environ["AWS_ENDPOINT_URL"])

    events = bucket_of(parse_home(home)).client.meta.events
    events.register("before-parameter-build.s3.PutObject", connection_lost)
    try:
        with pytest.raises(ValueError, match="cannot reach the S3 endpoint"):
            open_index(load_dataset(DEVMEM), "minilm", rebuild=True)
    finally:
        events.unregister("before-parameter-build.s3.PutObject", connection_lost)
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == before
    # another machine (a fresh cache) still gets the published build, whole
    _use(monkeypatch, home, tmp_path / "cache-2")
    handle = open_index(load_dataset(DEVMEM), "minilm")
    assert handle.path.name == json.loads(before)["build"] and handle.bm25.num_docs == 348


def test_judgments_and_experiments_are_shared_through_the_bucket(s3, tmp_path, monkeypatch):
    from eval.stores.experiments import ExperimentStore
    from eval.stores.judgments import JudgmentStore, effective_qrels
    from retrieval.dataset import load_dataset

    dataset = load_dataset(DEVMEM)
    home = f"s3://{BUCKET}/stores"
    _use(monkeypatch, home, tmp_path / "alice")
    JudgmentStore(dataset).grade("q001", "m0001", 2, author="alice")
    ExperimentStore().add({"name": "by alice"})
    assert json.loads(s3.get_object(Bucket=BUCKET, Key="stores/experiments.json")["Body"].read())[0]["name"] \
        == "by alice"
    _use(monkeypatch, home, tmp_path / "bob")
    assert effective_qrels(dataset).qrels["q001"]["m0001"] == 2
    assert effective_qrels(dataset).label.startswith("dataset qrels + 1 edit")
    ExperimentStore().add({"name": "by bob"})
    _use(monkeypatch, home, tmp_path / "alice")
    assert [r["name"] for r in ExperimentStore().list()] == ["by alice", "by bob"]
    JudgmentStore(dataset).undo()
    _use(monkeypatch, home, tmp_path / "bob")
    assert "m0001" not in effective_qrels(dataset).qrels.get("q001", {})


def test_two_checkouts_of_one_dataset_share_its_stores_through_the_bucket(s3, tmp_path, monkeypatch):
    """devmem at two paths on two "machines" (two mirrors of one s3 home): one dataset — the
    stores are keyed by its identity, not its folder; a different corpus named devmem is refused."""
    import shutil

    from eval.stores.history import CheckHistory
    from eval.stores.judgments import JudgmentStore, effective_qrels
    from eval.stores.snapshots import SnapshotStore
    from retrieval.dataset import load_dataset

    shutil.copytree(DEVMEM, tmp_path / "ci" / "devmem")
    shutil.copytree(DEVMEM, tmp_path / "laptop" / "devmem")
    home = f"s3://{BUCKET}/identity"
    _use(monkeypatch, home, tmp_path / "runner")
    ci = load_dataset(tmp_path / "ci" / "devmem")
    JudgmentStore(ci).grade("q001", "m0300", 3, author="ci")
    SnapshotStore(ci).save({"name": "release 1", "metrics": {"ndcg@5": 0.5},
                            "queries": {"q001": {"values": {"ndcg@5": 0.5}, "ranking": ["m0001"]}}})
    CheckHistory(ci).add({"pipeline": "rrf", "passed": True, "metrics": {"ndcg@5": 0.5}})
    assert sorted(_keys(s3, "identity/")) == ["identity/datasets/devmem.json", "identity/history/devmem.json",
                                              "identity/judgments/devmem.json",
                                              "identity/snapshots/devmem/release 1.json"]
    _use(monkeypatch, home, tmp_path / "laptop-cache")
    laptop = load_dataset(tmp_path / "laptop" / "devmem")
    assert effective_qrels(laptop).qrels["q001"]["m0300"] == 3
    assert SnapshotStore(laptop).names() == ["release 1"]
    assert [e["pipeline"] for e in CheckHistory(laptop).entries()] == ["rrf"]
    other = tmp_path / "other" / "devmem"
    other.mkdir(parents=True)
    (other / "corpus.jsonl").write_text('{"_id": "x1", "text": "not devmem"}\n', "utf-8")
    status, out, err = _rwb("judge", str(other))
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("rwb: error: dataset ") and "is not the dataset 'devmem'" in err


def test_saved_profiles_are_listed_and_loaded_by_everyone(s3, tmp_path, monkeypatch):
    from eval.stores.configs import delete_profile, save_profile
    from eval.stores.profiles import ProfileStore
    from retrieval.pipeline import PIPELINES

    home = f"s3://{BUCKET}/profiles"
    _use(monkeypatch, home, tmp_path / "alice")
    save_profile("team rrf", PIPELINES["rrf"], origin="rrf")
    assert _keys(s3, "profiles/") == ["profiles/profiles/team rrf.toml"]
    _use(monkeypatch, home, tmp_path / "bob")
    assert ProfileStore().names() == ["team rrf"]
    assert ProfileStore().load("team rrf").fusion == PIPELINES["rrf"].fusion
    _use(monkeypatch, home, tmp_path / "alice")
    delete_profile("team rrf")
    _use(monkeypatch, home, tmp_path / "bob")
    assert ProfileStore().names() == []


def test_a_concurrent_store_write_is_refused_not_lost(s3, tmp_path, monkeypatch):
    from eval.stores.experiments import ExperimentStore
    from retrieval.object_store import bucket_of, parse_home

    home = f"s3://{BUCKET}/race"
    _use(monkeypatch, home, tmp_path / "alice")
    ExperimentStore().add({"name": "first"})
    theirs = json.dumps([{"name": "first"}, {"name": "written by bob meanwhile"}]).encode()

    def bob_writes_first(params, **kwargs):  # between alice's read and her write
        if params["Key"].endswith("experiments.json"):
            s3.put_object(Bucket=BUCKET, Key="race/experiments.json", Body=theirs)

    events = bucket_of(parse_home(home)).client.meta.events
    events.register("before-parameter-build.s3.PutObject", bob_writes_first)
    try:
        with pytest.raises(ValueError, match="another writer changed s3://rwb-team/race/experiments.json"):
            ExperimentStore().add({"name": "alice's second"})
    finally:
        events.unregister("before-parameter-build.s3.PutObject", bob_writes_first)
    assert s3.get_object(Bucket=BUCKET, Key="race/experiments.json")["Body"].read() == theirs
    assert [r["name"] for r in ExperimentStore().list()] == ["first", "written by bob meanwhile"]


@pytest.mark.parametrize("change, expected", [
    ({"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None}, "no AWS credentials for s3://rwb-team/team"),
    ({"AWS_ENDPOINT_URL": "http://127.0.0.1:{closed}"}, "cannot reach the S3 endpoint http://127.0.0.1:"),
    ({"RWB_HOME": "s3://Team_Bucket/x"}, "'Team_Bucket' is not a valid S3 bucket name"),
    ({"RWB_HOME": "s3://rwb-team/a/../b"}, "the prefix part '..' is not a plain name"),
    ({"RWB_HOME": "s3://no-such-bucket/x"}, "bucket 'no-such-bucket' does not exist"),
    ({"AWS_ALLOW_HTTP": None}, "is plain http; set AWS_ALLOW_HTTP=true"),
])
def test_bad_configuration_is_one_line(s3, tmp_path, monkeypatch, change, expected):
    _use(monkeypatch, f"s3://{BUCKET}/team", tmp_path / "cache")
    for name, value in change.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value.replace("{closed}", str(_free_port())))
    status, out, err = _rwb("index", str(DEVMEM), "--no-pool")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rwb: error: ") and expected in err, err
