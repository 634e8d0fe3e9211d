"""BM25 analyzers from the command line: ``rwb index --analyzer jieba`` builds its own index,
``rwb eval --analyzer A --analyzer B`` compares them side by side as ``--embedder`` does
(runs ``<pipeline>@<analyzer>``, one pool per analyzer, paired-tested against the baseline with
the first analyzer). On the crafted Chinese store ``tests/fixtures/lingxi_zh`` (13 notes, 5
judged queries), MiniLM."""

from __future__ import annotations

import json

from eval.cli import main as rwb_main
from tests.conftest import ROOT
from tests.retrieval.test_embedder_choice import means

LINGXI_ZH = ROOT / "tests" / "fixtures" / "lingxi_zh"
COMMON = ["--quiet", "eval", str(LINGXI_ZH), "--embedder", "minilm", "--metrics", "ndcg@5",
          "--permutations", "500", "--bootstrap", "200"]


def test_rwb_index_builds_a_jieba_index_of_its_own(rwb_home, capsys):
    assert rwb_main(["--quiet", "index", str(LINGXI_ZH), "--embedder", "minilm", "--analyzer", "jieba"]) == 0
    out = capsys.readouterr().out
    assert "analyzer jieba (bilingual-jieba0.42.1-v1)" in out
    # its own folder beside any other analyzer's, the manifest recording it
    manifests = [json.loads(p.read_text()) for p in rwb_home.glob("indexes/lingxi*/minilm/jieba/current/manifest.json")]
    assert [m["analyzer"] for m in manifests] == ["bilingual-jieba0.42.1-v1"]


def test_rwb_eval_compares_analyzers_side_by_side_against_one_baseline(rwb_home, capsys, tmp_path):
    assert rwb_main([*COMMON, "--analyzer", "bigram", "--analyzer", "jieba", "--pipeline", "bm25",
                     "--json", str(tmp_path / "both.json")]) == 0
    out = capsys.readouterr().out
    assert "analyzers bigram, jieba" in out and "baseline vector@bigram" in out
    both = means(out)
    assert list(both) == ["vector@bigram", "bm25@bigram", "vector@jieba", "bm25@jieba"]
    summary = json.loads((tmp_path / "both.json").read_text())
    assert summary["baseline"] == "vector@bigram" and summary["n_queries"] == 5
    assert list(summary["significance"]) == ["bm25@bigram", "vector@jieba", "bm25@jieba"]
    assert both["vector@bigram"] == both["vector@jieba"]        # the analyzer is BM25's alone
    for analyzer in ("bigram", "jieba"):                        # each equals rwb eval with it alone
        assert rwb_main([*COMMON, "--analyzer", analyzer, "--pipeline", "bm25"]) == 0
        alone = means(capsys.readouterr().out)
        assert alone == {"vector": both[f"vector@{analyzer}"], "bm25": both[f"bm25@{analyzer}"]}
    assert rwb_main([*COMMON, "--analyzer", "bigram", "--analyzer", "jieba", "--embedder", "use-multilingual"]) == 2
    assert "repeat --embedder or --analyzer, not both" in capsys.readouterr().err
    assert rwb_main([*COMMON, "--analyzer", "bigram", "--analyzer", "jieba", "--context"]) == 2
    assert "several --analyzer" in capsys.readouterr().err
