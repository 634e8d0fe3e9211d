"""Seed 003's retriever (issue 12, item 5) on ``tests/fixtures/seedpaths``: three lookups over
memories tagged by ``memory_type``, one context, L1/L2 caches, a replayed query log and a
calibrated threshold. Cosines are recomputed here from the index's own vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.experiments.calibration import calibrate
from eval.cli import main as rwb_main
from eval.experiments.replay import replay_log
from retrieval.cache import TTLCache
from retrieval.dataset import load_dataset
from retrieval.seed003 import MemoryRetriever, Seed003Params, host_key, parent_domain

SEEDPATHS = Path(__file__).resolve().parent / "fixtures" / "seedpaths"
INVOICE = "download the monthly invoice CSV from portal.vendor.example.com"


@pytest.fixture(scope="module")
def seedpaths(rwb_home):
    return load_dataset(SEEDPATHS)


@pytest.fixture(scope="module")
def handle(seedpaths):
    from retrieval.index import open_index

    return open_index(seedpaths)


def cos(handle, text, doc_id) -> float:
    return float(handle.vectors[handle.doc_ids.index(doc_id)] @ handle.embedder.encode([text])[0])


def test_host_keys_and_their_parent():
    assert host_key(INVOICE) == "portal.vendor.example.com"
    assert parent_domain("portal.vendor.example.com") == "vendor.example.com"
    assert parent_domain("example.com") == "" and host_key("what did we do recently") == ""


def test_the_seeds_085_keeps_no_pattern_here_and_the_profile_is_an_exact_key(handle):
    context = MemoryRetriever(handle).retrieve(INVOICE, now=0.0)
    # the best pattern, t01, is below 0.85; so is the best failure f01 below 0.8
    assert cos(handle, INVOICE, "t01") < 0.85 and cos(handle, INVOICE, "f01") < 0.8
    assert (context.similar_tasks, context.known_issues) == ([], [])
    assert (context.site_key, context.site_profile.id, context.site_profile.score) == (
        "portal.vendor.example.com", "s01", 1.0)
    assert context.ids == ["s01"]


def test_lower_thresholds_keep_patterns_and_only_working_failures(handle):
    retriever = MemoryRetriever(handle, Seed003Params(threshold=0.5, failure_threshold=0.5))
    context = retriever.retrieve(INVOICE, now=0.0)
    assert [(h.id, h.score) for h in context.similar_tasks] == [("t01", pytest.approx(cos(handle, INVOICE, "t01")))]
    # f02 is as close (cosine ≥ 0.5) but its solution is a guess: confidence 0.3 ≤ 0.5
    assert cos(handle, INVOICE, "f02") >= 0.5
    assert [h.id for h in context.known_issues] == ["f01"]
    assert context.ids == ["t01", "s01", "f01"]  # patterns, profile, failures


def test_the_site_profile_falls_back_to_the_parent_domain(handle):
    context = MemoryRetriever(handle).retrieve("change my password on accounts.example.com", now=0.0)
    assert (context.site_profile.id, context.site_profile.score) == ("s03", 0.5)  # example.com, not exact
    # L1: the embedding once (1 miss) then reused (1 hit); the exact key and the parent key: 2 misses
    assert context.cache["l1"] == {"hits": 1, "misses": 3, "saved_s": 0.0}


def test_l2_serves_a_repeat_within_300_seconds_and_not_after():
    cache, computed = TTLCache(300.0), []
    for now in (0.0, 100.0, 299.9, 300.0, 450.0):
        cache.get("q", now, lambda n=now: computed.append(n) or n)
    assert computed == [0.0, 300.0]          # stored at 0 → hits at 100 and 299.9; expired at 300 → stored again
    assert (cache.stats.hits, cache.stats.misses) == (3, 2)  # 450 − 300 = 150 < 300: a hit


def test_replaying_the_query_log_in_reference_time_order(seedpaths, handle):
    log = replay_log(MemoryRetriever(handle), seedpaths)
    assert log.query_ids == ("r1", "r2", "r3", "r4", "r5", "r6")
    # r1 10:00:00 three misses (pattern, site, failure); r2 +100 s the same query: three hits;
    # r3 three misses; r4 +401 s after r1's entries: expired, three misses; r5 three misses;
    # r6 has no host: two lookups, two misses → 3 hits / 14 misses
    assert [c.cache["l2"]["hits"] for c in log.contexts] == [0, 3, 0, 0, 0, 0]
    assert (log.l2["hits"], log.l2["misses"]) == (3, 14)
    assert log.l2_hit_rate == pytest.approx(3 / 17)
    assert log.l2["saved_s"] > 0 and log.contexts[1].ids == log.contexts[0].ids
    # L1: an embedding miss and hit per computed request (5), site keys 1 + 1 + 1 + 2 misses
    assert (log.l1["hits"], log.l1["misses"]) == (5, 5 + 5)


def test_a_calibrated_threshold_next_to_the_seeds(seedpaths, handle):
    cal = calibrate(handle, seedpaths.queries, seedpaths.qrels)
    assert cal.n_queries == 6 and cal.seed_threshold == 0.85
    assert cal.best["p100"] < 0.85 and cal.answered["seed"] == 0  # no query reaches 0.85 with MiniLM
    assert cal.threshold < 0.85 and cal.answered["calibrated"] > 0
    assert cal.f1["calibrated"] > cal.f1["seed"] == 0.0


def test_rwb_context_reports_cache_counts(rwb_home, capsys):
    assert rwb_main(["context", str(SEEDPATHS), "--replay", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "L2 hits 3 / misses 14 (hit rate 17.6%)" in out and "L1 hits 5 / misses 10" in out
    assert rwb_main(["context", str(SEEDPATHS), INVOICE, "--quiet"]) == 0
    assert "site profile:\n   1.000  s01" in capsys.readouterr().out
