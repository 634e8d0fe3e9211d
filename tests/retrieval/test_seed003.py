"""Seed 003's retriever (issue 12, item 5) on ``tests/fixtures/seedpaths``: three lookups over
memories tagged by ``memory_type``, one context, L1/L2 caches, a replayed query log and a
calibrated threshold. Cosines are recomputed here from the index's own vectors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from eval.experiments.calibration import calibrate
from eval.cli import main as rwb_main
from eval.experiments.replay import replay_log
from retrieval.cache import TTLCache
from retrieval.dataset import load_dataset
from retrieval.seed003 import MemoryRetriever, Seed003Params, host_key, parent_domain

SEEDPATHS = Path(__file__).resolve().parents[1] / "fixtures" / "seedpaths"
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
    # L1: the embedding first (1 miss: the L2 key is made of it), reused by the two vector
    # lookups (2 hits); the exact key and the parent key: 2 misses
    assert context.cache["l1"] == {"hits": 2, "misses": 3, "saved_s": 0.0}


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
    # L1: every request embeds first (6 misses, the L2 key is made of it); each vector lookup L2
    # missed reuses it (2 hits in each of r1, r3, r4, r5, r6); site keys 1 + 1 + 1 + 2 misses
    assert (log.l1["hits"], log.l1["misses"]) == (10, 6 + 5)


def test_a_calibrated_threshold_next_to_the_seeds(seedpaths, handle):
    cal = calibrate(handle, seedpaths.queries, seedpaths.qrels)
    assert cal.n_queries == 6 and cal.seed_threshold == 0.85
    assert cal.best["p100"] < 0.85 and cal.answered["seed"] == 0  # no query reaches 0.85 with MiniLM
    assert cal.threshold < 0.85 and cal.answered["calibrated"] > 0
    assert cal.f1["calibrated"] > cal.f1["seed"] == 0.0


def test_rwb_context_reports_cache_counts(rwb_home, capsys):
    assert rwb_main(["context", str(SEEDPATHS), "--replay", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "L2 hits 3 / misses 14 (hit rate 17.6%)" in out and "L1 hits 10 / misses 11" in out
    assert rwb_main(["context", str(SEEDPATHS), INVOICE, "--quiet"]) == 0
    assert "site profile:\n   1.000  s01" in capsys.readouterr().out


# ---- issue 23: the L2 key, the warm-up, the threshold's default, the context's scores ------------

def test_l2_is_keyed_by_the_first_10_values_of_the_embedding_or_by_the_text(handle):
    """Seed 003: ``cache_key = f"pattern:{hash(tuple(embedding[:10]))}"``."""
    first10 = tuple(float(x) for x in handle.embedder.encode([INVOICE])[0][:10])
    seeded = MemoryRetriever(handle)
    seeded.retrieve(INVOICE, now=0.0)
    assert {("pattern", first10), ("failure", first10), ("site", "portal.vendor.example.com")} \
        <= set(seeded.l2._entries)
    texted = MemoryRetriever(handle, Seed003Params(cache_key="text"))
    texted.retrieve(INVOICE, now=0.0)
    assert ("pattern", INVOICE) in texted.l2._entries
    # a repeat 100 s later hits all three lookups under either key; under the text key the
    # embedding is not even computed (no L1 entry for it)
    none = {"hits": 0, "misses": 0, "saved_s": 0.0}
    assert seeded.retrieve(INVOICE, now=100.0).cache["l1"] == {**none, "misses": 1}
    assert texted.retrieve(INVOICE, now=100.0).cache["l1"] == none
    assert seeded.retrieve(INVOICE, now=200.0).cache["l2"]["hits"] == 3


def test_the_warm_up_stores_the_most_accessed_patterns_by_id_for_an_hour(tmp_path, rwb_home,
                                                                         monkeypatch):
    import json
    import shutil

    from retrieval import seed003
    from retrieval.index import open_index

    root = tmp_path / "seedpaths"
    shutil.copytree(SEEDPATHS, root)
    lines = (root / "corpus.jsonl").read_text().splitlines()
    counts = {"t02": 2, "t03": 7}
    docs = [json.loads(line) for line in lines]
    for doc in docs:
        if doc["_id"] in counts:
            doc["access_count"] = counts[doc["_id"]]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    warm = open_index(load_dataset(root))
    monkeypatch.setattr(seed003, "WARM_LIMIT", 2)
    retriever = MemoryRetriever(warm, Seed003Params(threshold=0.5, failure_threshold=0.5))
    assert retriever.warm_up(now=0.0) == ["t03", "t02"]   # access 7, 2; t01 (0) past the limit
    # t02 is read through its warm entry 3599 s later; after 3600 s it is read from the store
    cart = "add the cheapest item to the cart on shop.example.com"
    assert retriever.retrieve(cart, now=3599.0).cache["records"]["hits"] >= 1
    cold = MemoryRetriever(warm, Seed003Params(threshold=0.5, failure_threshold=0.5))
    cold.warm_up(now=0.0)
    assert cold.retrieve(cart, now=3600.0).cache["records"]["hits"] == 0


def test_the_seeds_085_and_08_are_the_default_and_calibration_is_opt_in(seedpaths, handle):
    """Issue 29 item 8: the default is the seed's pair, whatever the embedder (main calibrated
    in-sample for MiniLM by default)."""
    from eval.experiments.calibration import choose_threshold

    default = choose_threshold(handle, seedpaths.queries, seedpaths.qrels)
    assert (default.threshold, default.failure_threshold) == (0.85, 0.8)
    assert default.how == "seed 003's 0.85 (patterns) / 0.8 (failures)"
    assert choose_threshold(handle, seedpaths.queries, seedpaths.qrels, "literal") == default
    assert choose_threshold(handle, seedpaths.queries, seedpaths.qrels, "0.7").threshold == 0.7
    opted = choose_threshold(handle, seedpaths.queries, seedpaths.qrels, "calibrated")
    calibrated = calibrate(handle, seedpaths.queries, seedpaths.qrels).threshold
    assert (opted.threshold, opted.failure_threshold) == (calibrated, calibrated)
    with pytest.raises(ValueError, match="--threshold must be seed, calibrated or a number"):
        choose_threshold(handle, seedpaths.queries, seedpaths.qrels, "auto")


def test_a_calibrated_threshold_is_never_scored_on_the_labels_it_was_fitted_on(seedpaths, handle):
    """Cross-fitted: six labelled queries in five folds; each fold's threshold is calibrated on
    the other folds' queries only, and each scored context was answered with its own fold's."""
    from eval.experiments.calibration import cross_fit
    from eval.experiments.context_eval import evaluate_contexts_cross_fitted

    cross = cross_fit(handle, seedpaths.queries, seedpaths.qrels)
    held_out = [ids for _, ids in cross.folds]
    assert len(held_out) == 5 and sorted(q for ids in held_out for q in ids) == [f"r{i}" for i in range(1, 7)]
    for threshold, ids in cross.folds:
        train = [q for q in seedpaths.queries if q.id not in ids]
        assert threshold == calibrate(handle, train, seedpaths.qrels).threshold
    log, scores = evaluate_contexts_cross_fitted(
        lambda t: MemoryRetriever(handle, Seed003Params(threshold=t, failure_threshold=t)),
        cross, seedpaths, seedpaths.qrels)
    fitted = cross.threshold_of()
    assert all(c.threshold == fitted[q] for q, c in zip(log.query_ids, log.contexts))
    assert scores.n_queries == 6
    with pytest.raises(ValueError, match="at least 2 labelled queries"):
        cross_fit(handle, seedpaths.queries, {"r1": {"t01": 3}})


def test_a_context_is_scored_per_lookup_and_merged_at_its_size_and_within_the_budget(handle):
    """r1 is judged t01 3, f01 2. At thresholds 0.5 its context is [t01, s01, f01]:
    - context, n = 3: DCG 3/log2(2) + 0 + 2/log2(4) = 4; ideal@3 3 + 2/log2(3) = 4.2619 → 0.9386;
      recall 2/2;
    - patterns [t01]: nDCG@1 3/3 = 1, recall 1/2; failures [f01]: nDCG@1 2/3, recall 1/2;
      profile [s01]: 0;
    - budget 30 tokens: t01 (18) fits, s01 (25) would make 43: the cut context is [t01]: nDCG@1 1,
      recall 1/2."""
    from eval.experiments.context_eval import score_contexts
    from retrieval.candidates import token_count

    retriever = MemoryRetriever(handle, Seed003Params(threshold=0.5, failure_threshold=0.5))
    context = retriever.retrieve(INVOICE, 0.0)
    assert context.ids == ["t01", "s01", "f01"]
    docs = {d.id: d for d in handle.dataset.documents}
    tokens = {d: token_count(docs[d].text) for d in docs}
    assert (tokens["t01"], tokens["s01"]) == (18, 25)
    scores = score_contexts([context], ["r1"], {"r1": {"t01": 3, "f01": 2}}, tokens,
                            token_budget=30)
    m = scores.means
    assert m["context"]["ndcg@size"] == pytest.approx(4 / (3 + 2 / math.log2(3)), abs=1e-6)
    assert (m["context"]["recall@size"], m["context"]["size"], m["context"]["tokens"]) == (
        1.0, 3.0, 18 + 25 + tokens["f01"])
    assert (m["patterns"]["ndcg@size"], m["patterns"]["recall@size"]) == (pytest.approx(1.0), 0.5)
    assert (m["failures"]["ndcg@size"], m["failures"]["recall@size"]) == (pytest.approx(2 / 3), 0.5)
    assert (m["profile"]["ndcg@size"], m["profile"]["recall@size"]) == (0.0, 0.0)
    assert (m["context"]["ndcg@budget"], m["context"]["recall@budget"]) == (pytest.approx(1.0), 0.5)
    assert scores.answered == {"patterns": 1, "profile": 1, "failures": 1, "context": 1}


def test_rwb_eval_context_scores_the_replayed_contexts(rwb_home, capsys):
    assert rwb_main(["eval", str(SEEDPATHS), "--context", "--quiet"]) == 0
    out = capsys.readouterr().out
    # the default, 0.85 / 0.8: no pattern, no failure passes with MiniLM; r1/r2/r4's profile s01
    # and r3's s02, r5's s03 are not judged relevant: every list scores 0
    assert "model minilm; threshold seed 003's 0.85 (patterns) / 0.8 (failures)" in out
    assert "judgments: dataset qrels; 6 judged queries; token budget 1500" in out
    context = next(line for line in out.splitlines() if line.startswith("context "))
    assert context.split()[1:6] == ["0.0000"] * 5 and context.split()[-1] == "5/6"


def test_rwb_eval_context_calibrated_says_it_is_cross_fitted(rwb_home, capsys):
    assert rwb_main(["eval", str(SEEDPATHS), "--context", "--threshold", "calibrated", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "calibrated for minilm, cross-fitted over 5 folds of 6 labelled queries" in out
    assert "judgments: dataset qrels; 6 judged queries; token budget 1500" in out
