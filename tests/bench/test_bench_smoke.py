"""A tiny run of every benchmark's code path on tests/fixtures/tiny.

Checks the output format only (figures present, last line of ``key=value`` ratios); it never
looks at a time: timings on a shared test machine mean nothing.
"""

from __future__ import annotations

import json
import math
import re

import pytest

pytestmark = pytest.mark.slow

KEYS = {"rescore_speedup_vs_ranx", "sweep_speedup_vs_ranx", "hybrid_latency_ratio_vs_lancedb",
        "indexing_throughput_vs_encode", "reindex_speedup_vs_first_build"}
LINE = re.compile(r"[a-z0-9_]+=(?:[0-9][0-9.e+-]*|nan)(?: [a-z0-9_]+=(?:[0-9][0-9.e+-]*|nan))*")


def test_smoke_run_prints_every_ratio_and_writes_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RWB_BENCH_HOME", str(tmp_path / "bench-home"))
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "rwb-home"))
    from bench import run

    result = run.main(["--smoke"])
    lines = capsys.readouterr().out.strip().splitlines()

    assert result["errors"] == {}
    assert set(result["sections"]) == set(run.SMOKE)
    last = lines[-1]
    assert LINE.fullmatch(last), last
    ratios = dict(pair.split("=") for pair in last.split())
    assert set(ratios) >= KEYS
    for key in KEYS:
        assert math.isfinite(float(ratios[key])) and float(ratios[key]) > 0
    saved = json.loads((tmp_path / "bench-home" / "results" / "smoke-latest.json").read_text())
    assert saved["ratios"] == result["ratios"]
    assert saved["machine"]["cpu_count"] >= 1 and "lancedb" in saved["machine"]["versions"]
    figures = result["sections"]
    assert figures["rescore"]["figures"]["tiny"]["configs"]["rrf k=30"]["max_metric_diff"] >= 0
    assert {"wsum", "rrf"} <= set(figures["sweep"]["figures"]["tiny"]["best"])
    assert "breakdown_ms" in figures["hybrid"]["figures"]["300"]
    assert {"vector", "bm25", "rrf", "openclaw", "seed-adaptive", "cv-sweep"} <= set(
        figures["quality"]["figures"]["tiny"]["minilm"])
    assert figures["scale"]["figures"]["rows"] == 1000
