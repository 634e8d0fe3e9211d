"""Where a sweep is scored (eval/search/executors.py): query shards score their queries exactly as the
whole table does, and a local Ray cluster of 2 workers gives the local executor's sweep result
bit for bit — on the tiny fixture's real pool. The Ray tests skip when Ray is not installed
(``pip install -e '.[distributed]'``)."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys

import numpy as np
import pytest

from eval.cli import main as rwb_main
from eval.search.executors import RAY_MISSING, LocalExecutor, RayExecutor, query_shard, shard_bounds
from eval.metrics.measure import judge
from eval.stores.pool import load_pool
from eval.metrics.measure import config_values
from eval.search.space import Space, parse_param
from eval.search.sweep import sweep
from retrieval.pipeline import PIPELINES

from tests.conftest import TINY

try:
    HAS_RAY = importlib.util.find_spec("ray") is not None
except ValueError:       # sys.modules["ray"] is None: blocked, as if not installed
    HAS_RAY = False
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="Ray is not installed (pip install -e '.[distributed]')")
NAMES = ("rrf", "weighted", "seed-salience", "seed-adaptive")


@pytest.fixture(scope="module")
def pool(tiny, rwb_home):
    return load_pool(tiny)


def _values(c, judged, configs):
    return np.concatenate(list(config_values(c, judged, configs, "ndcg@5")))


def test_query_shards_score_their_queries_as_the_whole_table_does(tiny, pool):
    judged = judge(pool, tiny.qrels)
    configs = [PIPELINES[name] for name in NAMES]
    whole = _values(pool, judged, configs)
    n = pool.n_queries
    for bounds in ([(0, 1), (1, n)], [(0, n // 2), (n // 2, n)], [(q, q + 1) for q in range(n)]):
        parts = [_values(*query_shard(pool, judged, lo, hi), configs) for lo, hi in bounds]
        assert np.array_equal(np.concatenate(parts, axis=1), whole, equal_nan=True)   # every cell, bit for bit
    shard, shard_judged = query_shard(pool, judged, 1, 3)
    assert shard.query_ids == pool.query_ids[1:3] and shard.n_rows == pool.offsets[3] - pool.offsets[1]
    assert shard.query_idx.min() == 0 and shard.query_idx.max() == 1            # counted from the shard's start
    assert shard_judged.ideal.shape[1] == judged.ideal.shape[1]                 # full width: same ideal DCG terms
    assert pool.query_idx[pool.offsets[1]] == 1                                 # the whole table is untouched


def test_shard_bounds_cover_every_query_once_in_order(pool):
    for shards in (1, 2, 3, pool.n_queries, pool.n_queries + 5):
        bounds = shard_bounds(pool, shards)
        assert bounds[0][0] == 0 and bounds[-1][1] == pool.n_queries
        assert all(a < b for a, b in bounds) and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))
        assert len(bounds) == min(shards, pool.n_queries)


def test_the_local_executor_is_the_default_sweep(tiny, pool):
    space = Space((parse_param("rrf.rrf_k=10:60:10", PIPELINES["rrf"]),))
    plain = sweep(pool, tiny.qrels, PIPELINES["rrf"], space, folds=2)
    local = sweep(pool, tiny.qrels, PIPELINES["rrf"], space, folds=2, executor=LocalExecutor())
    assert np.array_equal(plain.scores, local.scores) and plain.folds == local.folds


@pytest.mark.parametrize("args, reason", [
    (["--executor", "local", "--workers", "2"], "--address and --workers need --executor ray"),
    (["--address", "ray://head:10001"], "--address and --workers need --executor ray"),
    (["--executor", "ray", "--workers", "0"], "--workers must be ≥ 1, got 0"),
    (["--executor", "spark"], "argument --executor: invalid choice: 'spark'"),
])
def test_bad_executor_flags_give_one_line(capsys, args, reason):
    assert rwb_main(["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and reason in err and len(err.strip().splitlines()) == 1


def test_executor_ray_without_ray_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)        # as if the extra were not installed: import fails
    assert rwb_main(["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10",
                     "--executor", "ray"]) == 2
    assert capsys.readouterr().err == f"rwb: error: {RAY_MISSING}\n"
    assert RAY_MISSING == "--executor ray needs Ray: pip install -e '.[distributed]'"


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 2 CPUs for this module (executors join it), shut down after."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@needs_ray
@pytest.mark.parametrize("name, params, shards", [
    ("rrf", ("rrf.rrf_k=10:100:10", "rrf.w_dense=0:1:0.5"), 2),    # 30 configs: 2 slices × 2 query shards
    ("rrf", ("rrf.rrf_k=10:100:10", "rrf.w_dense=0:1:0.5"), 1),    # configurations split only
    ("seed-adaptive", ("adaptive.profiles.debug.w_dense=0:1:0.25", "min_score=0:0.2:0.1"), 3),
])
def test_a_two_worker_ray_sweep_equals_the_local_one(tiny, pool, ray_cluster, name, params, shards):
    base = PIPELINES[name]
    space = Space(tuple(parse_param(text, base) for text in params))
    local = sweep(pool, tiny.qrels, base, space, folds=3, seed=1)
    with RayExecutor(workers=2, query_shards=shards) as executor:
        remote = sweep(pool, tiny.qrels, base, space, folds=3, seed=1, executor=executor)
    assert ray_cluster.is_initialized()                          # joined the running cluster: not shut down
    assert len(remote.scores) == len(local.scores) == space.raw_size
    assert np.array_equal(remote.scores, local.scores)           # every configuration's mean, bit for bit
    assert remote.best_index == local.best_index and remote.best_params == local.best_params
    assert remote.folds == local.folds                           # each fold's pick, train and held-out mean
    assert remote.held_out_mean == local.held_out_mean and remote.base_score == local.base_score


@needs_ray
def test_rwb_sweep_on_ray_writes_the_local_json(tiny, pool, ray_cluster, tmp_path, capsys):
    args = ["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", "--param", "rrf.w_dense=0:1:0.5",
            "--folds", "2", "--seed", "3"]
    assert rwb_main([*args, "--json", str(tmp_path / "local.json")]) == 0
    assert rwb_main([*args, "--executor", "ray", "--workers", "2", "--json", str(tmp_path / "ray.json")]) == 0
    assert "on Ray (2 workers)" in capsys.readouterr().out
    local, remote = (json.loads((tmp_path / f"{k}.json").read_text("utf-8")) for k in ("local", "ray"))
    for data in (local, remote):
        del data["seconds"], data["configs_per_second"]
    assert remote == local and local["n_configs"] == 6 * 3


@needs_ray
def test_an_address_where_no_cluster_answers_is_one_line(capsys):
    with socket.socket() as probe:                      # a port that was just free: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert rwb_main(["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10",
                     "--executor", "ray", "--address", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rwb: error: --address 127.0.0.1:{port}: no Ray cluster answers there")
    assert len(err.strip().splitlines()) == 1


@needs_ray
def test_more_workers_than_the_cluster_has_is_refused(ray_cluster, capsys):
    assert rwb_main(["sweep", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10",
                     "--executor", "ray", "--workers", "3"]) == 2
    assert "--workers 3 exceeds the Ray cluster's 2 CPUs" in capsys.readouterr().err



@needs_ray
def test_rwb_tune_on_ray_equals_the_local_tuning(tiny, pool, ray_cluster, tmp_path, capsys):
    """``rwb tune --executor ray`` runs the searches (one per outer fold plus the final one) as
    Ray tasks; every fold's choice, the held-out values and the tests equal the local run's."""
    from eval.search.tune import tune

    args = ["tune", str(TINY), "--pipeline", "rrf", "--param", "rrf.rrf_k=10:60:10", "--trials", "4",
            "--folds", "2", "--inner-folds", "2", "--seed", "5"]
    assert rwb_main([*args, "--json", str(tmp_path / "local.json")]) == 0
    assert rwb_main([*args, "--executor", "ray", "--workers", "2", "--json", str(tmp_path / "ray.json")]) == 0
    local, remote = (json.loads((tmp_path / f"{k}.json").read_text("utf-8")) for k in ("local", "ray"))
    for data in (local, remote):
        data.pop("seconds", None)
    assert remote == local and len(local["outer"]) == 2
    base = PIPELINES["rrf"]
    with RayExecutor(workers=2) as executor:
        on_ray = tune(pool, tiny.qrels, base, trials=4, folds=2, inner_folds=2, seed=5, sampler="random",
                      executor=executor)
    here = tune(pool, tiny.qrels, base, trials=4, folds=2, inner_folds=2, seed=5, sampler="random")
    assert np.array_equal(on_ray.held_out, here.held_out) and on_ray.outer == here.outer
    assert on_ray.final == here.final and on_ray.final_config == here.final_config
