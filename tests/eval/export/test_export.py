"""``rwb export``: a pipeline in each engine's own configuration, and the refusals.

The expected structures follow the engines' documented examples: LanceDB's hybrid query with
``RRFReranker(K)`` / ``LinearCombinationReranker(weight)``; OpenSearch's search pipeline with
``phase_results_processors`` holding a ``normalization-processor`` (``normalization.technique``,
``combination.technique``, ``combination.parameters.weights`` summing to 1) or a
``score-ranker-processor`` (``combination.technique = rrf``, ``rank_constant``); Qdrant's
``points/query`` with ``prefetch`` and ``{"rrf": {"k"}}`` / ``{"fusion": "dbsf"}`` (0-based
ranks: k = rrf_k + 1); Weaviate's hybrid ``alpha`` and ``fusionType``.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from eval.cli import main
from eval.export import export_config
from eval.export.lancedb import verify
from eval.stores.configs import resolve_config
from retrieval.pipeline import with_params


def exported(label: str, engine: str, **changes):
    config = resolve_config(label)
    for path, value in changes.items():
        config = with_params(config, {path.replace("__", "."): value})
    text = export_config(config, engine)
    return text if engine == "lancedb" else json.loads(text)


def test_lancedb_snippets():
    rrf = exported("rrf", "lancedb")
    assert "RERANKER = RRFReranker(K=60)" in rrf and "DEPTH = 20" in rrf and "TOP_K = 10" in rrf
    assert 'query_type="hybrid"' in rrf and '.distance_type("cosine")' in rrf
    assert "LinearCombinationReranker(weight=0.75, fill=1.0)" in exported(
        "relative-score", "lancedb"
    )
    assert "LinearCombinationReranker(weight=0.75, fill=1.0)" in exported(
        "wsum", "lancedb", wsum__w_dense=0.6, wsum__w_sparse=0.2
    )
    assert "LinearCombinationReranker(weight=0.5, fill=1.0)" in exported("combsum", "lancedb")
    compile(rrf, "<export>", "exec")


def test_opensearch_pipelines():
    rrf = exported("rrf", "opensearch", rrf__rrf_k=20.0)
    assert rrf["search_pipeline"]["body"]["phase_results_processors"] == [
        {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 20}}}
    ]
    hybrid = rrf["search"]["body"]["query"]["hybrid"]
    assert rrf["search"]["body"]["size"] == 10 and hybrid["pagination_depth"] == 20
    assert list(hybrid["queries"][0]) == ["match"] and list(hybrid["queries"][1]) == ["knn"]
    mean = exported(
        "opensearch", "opensearch", mean__w_dense=0.3, mean__w_sparse=0.1, mean__mean="harmonic"
    )  # the opensearch preset has mean.semantics = 'opensearch'
    assert mean["search_pipeline"]["body"]["phase_results_processors"] == [
        {
            "normalization-processor": {
                "normalization": {"technique": "min_max"},
                "combination": {
                    "technique": "harmonic_mean",
                    "parameters": {"weights": [0.25, 0.75]},
                },
            }
        }
    ]
    weighted = exported("rrf", "opensearch", rrf__w_dense=3.0)
    combination = weighted["search_pipeline"]["body"]["phase_results_processors"][0][
        "score-ranker-processor"
    ]
    assert combination["combination"]["parameters"]["weights"] == [0.25, 0.75]


def test_qdrant_requests():
    rrf = exported("rrf", "qdrant")["body"]
    assert rrf["query"] == {"rrf": {"k": 61}} and rrf["limit"] == 10
    assert [p["limit"] for p in rrf["prefetch"]] == [20, 20] and [
        p["using"] for p in rrf["prefetch"]
    ] == ["dense", "sparse"]
    assert exported("rrf", "qdrant", rrf__w_sparse=0.5, rrf__weighting="qdrant")["body"]["query"] == {
        "rrf": {"k": 61, "weights": [1.0, 0.5]}
    }
    # equal weights: w / (rrf_k + rank + 1) is a multiple of the unweighted term
    assert exported("rrf", "qdrant", rrf__w_dense=2.0, rrf__w_sparse=2.0)["body"]["query"] == {
        "rrf": {"k": 61}
    }
    # under Qdrant's weighting equal weights ≠ 1 change the curve: written
    assert exported(
        "rrf", "qdrant", rrf__w_dense=2.0, rrf__w_sparse=2.0, rrf__weighting="qdrant"
    )["body"]["query"] == {"rrf": {"k": 61, "weights": [2.0, 2.0]}}
    assert exported("dbsf", "qdrant")["body"]["query"] == {"fusion": "dbsf"}


def test_the_qdrant_request_says_why_its_k_is_rrf_k_plus_1():
    """Issue 42 item 8: "k": 61 for rrf_k 60 explained in the request's own notes."""
    request = exported("rrf", "qdrant", rrf__rrf_k=10)
    assert request["body"]["query"] == {"rrf": {"k": 11}}
    why = [n for n in request["notes"] if n.startswith("k = 11 is rrf_k 10 + 1")]
    assert why and "1 / (p + k)" in why[0] and "1 / (rrf_k + p + 1)" in why[0]
    assert not [n for n in exported("dbsf", "qdrant")["notes"] if "rrf_k" in n]


def test_weaviate_arguments():
    relative = exported("relative-score", "weaviate")
    assert (
        relative["hybrid"]["alpha"] == 0.75
        and relative["hybrid"]["fusionType"] == "relativeScoreFusion"
    )
    assert (
        exported("wsum", "weaviate", wsum__w_dense=0.2, wsum__w_sparse=0.6)["hybrid"]["alpha"]
        == 0.25
    )
    ranked = exported("rrf", "weaviate", rrf__rrf_k=59.0)
    assert ranked["hybrid"] == {
        "query": "<query text>",
        "vector": "<query vector>",
        "alpha": 0.5,
        "fusionType": "rankedFusion",
    }
    assert "fusion_type=HybridFusion.RANKED" in ranked["python"]
    # Weaviate's legs are max(QUERY_HYBRID_MAXIMUM_RESULTS, limit) deep: the export names the
    # setting that makes them the pipeline's path depth
    assert ranked["server"] == {"QUERY_HYBRID_MAXIMUM_RESULTS": 20}
    assert any("QUERY_HYBRID_MAXIMUM_RESULTS=20" in note for note in ranked["notes"])
    assert exported("rrf", "weaviate", rrf__rrf_k=59.0, depth=40)["server"] == {
        "QUERY_HYBRID_MAXIMUM_RESULTS": 40
    }


@pytest.mark.parametrize("engine, analyzer, named", [
    ("opensearch", "jieba", ["the BM25 analyzer 'jieba'", "smartcn", "ik_smart", "--analyzer bigram"]),
    ("lancedb", "bigram", ["the BM25 analyzer 'bigram'", "keep a Han run whole", "--analyzer jieba"]),
    ("lancedb", "unigram", ["the BM25 analyzer 'unigram'"]),
    ("weaviate", "bigram", ["the BM25 analyzer 'bigram'", "trigram only", "leave --analyzer out"]),
    ("weaviate", "jieba", ["the BM25 analyzer 'jieba'", "gse's own dictionary"]),
])
def test_an_analyzer_the_engine_has_no_equivalent_of_is_refused(capsys, engine, analyzer, named):
    assert main(["export", "relative-score", "--to", engine, "--analyzer", analyzer]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"rwb: error: {engine} cannot express")
    assert all(n in err for n in named), err


def test_exports_name_the_engines_analysis_of_the_analyzer():
    """OpenSearch: the standard tokenizer (one token per Han character), plus cjk_bigram with
    unigrams kept for bigram; LanceDB: base_tokenizer jieba/default for jieba; Qdrant: the
    client encodes the sparse vectors with rwb's terms."""
    def opensearch(analyzer):
        return json.loads(export_config(resolve_config("opensearch"), "opensearch", analyzer))

    bigram = opensearch("bigram")["index"]["body"]
    assert bigram["settings"]["analysis"] == {
        "analyzer": {"rwb_text": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "rwb_cjk_bigram"]}},
        "filter": {"rwb_cjk_bigram": {"type": "cjk_bigram", "output_unigrams": True}},
    }
    assert bigram["mappings"]["properties"]["text"] == {"type": "text", "analyzer": "rwb_text"}
    assert opensearch("unigram")["index"]["body"]["settings"]["analysis"] == {
        "analyzer": {"rwb_text": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase"]}}}
    assert "index" not in opensearch(None)
    snippet = export_config(resolve_config("rrf"), "lancedb", "jieba")
    assert 'create_fts_index("text", base_tokenizer="jieba/default")' in snippet
    assert "python -m lance.download jieba" in snippet
    compile(snippet, "<export>", "exec")
    for analyzer in ("unigram", "bigram", "jieba"):
        qdrant = json.loads(export_config(resolve_config("rrf"), "qdrant", analyzer))
        assert any(f"rwb's {analyzer!r} analyzer's terms" in note for note in qdrant["notes"])


def test_every_exporter_declares_every_analyzer():
    """Each rwb analyzer is, for each engine, either declared expressible (and then exported) or
    refused with a declared reason: an analyzer added to ``ANALYZERS`` without a word from an
    exporter is refused there as undeclared."""
    from dataclasses import replace as replace_exporter

    from eval.export import EXPORTERS
    from retrieval.bm25 import ANALYZERS

    config = resolve_config("rrf")
    for exporter in EXPORTERS.values():
        assert set(exporter.analyzers) | set(exporter.no_analyzer) == set(ANALYZERS), exporter.engine
        assert not set(exporter.analyzers) & set(exporter.no_analyzer), exporter.engine
        expressible = resolve_config({"opensearch": "opensearch"}.get(exporter.engine, "rrf"))
        for analyzer in exporter.analyzers:
            assert exporter.export(expressible, analyzer)
    bare = replace_exporter(EXPORTERS["qdrant"], analyzers={})
    with pytest.raises(ValueError, match=r"the BM25 analyzer 'jieba' \(no equivalent declared by this export\)"):
        bare.export(config, "jieba")


@pytest.mark.parametrize("alpha, leg", [(0.0, "keyword"), (1.0, "vector")])
def test_weaviate_with_alpha_0_or_1_says_it_runs_one_leg(alpha, leg):
    """Weaviate's hybrid searcher runs the keyword leg only under alpha < 1 and the vector leg
    only under alpha > 0 (hybrid/searcher.go)."""
    notes = exported("relative-score", "weaviate", relative_score__alpha=alpha)["notes"]
    assert [n for n in notes if "leg only" in n] == [
        f"alpha = {alpha:g}: Weaviate runs the {leg} leg only (hybrid/searcher.go), so a document only "
        "the other path found is never returned (rwb ranks it with weight 0)"]
    assert not any("leg only" in n for n in exported("relative-score", "weaviate")["notes"])


@pytest.mark.parametrize(
    "label, engine, named",
    [
        (
            "seed-salience",
            "lancedb",
            ["fast path (fast_path = True)", "timeline path (timeline_path = True)",
             "token budget (token_budget = 1500)"],
        ),
        ("adaptive", "opensearch", ["fusion 'adaptive'", "confidence/vitality multipliers"]),
        ("openclaw", "qdrant", ["min score (min_score = 0.35)", "keyword match (keyword_match = 'all')"]),
        ("rrf", "weaviate", ["rrf_k = 60", "set rrf.rrf_k = 59"]),
        ("combmnz", "lancedb", ["fusion 'combmnz'", "paths that found the document"]),
        ("lingxi", "weaviate", ["min similarity (min_similarity = "]),
    ],
)
def test_refusals_name_what_cannot_be_expressed(capsys, label, engine, named):
    assert main(["export", label, "--to", engine]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rwb: error: {engine} cannot express") and err.count("\n") == 1
    for text in named:
        assert text in err, err


@pytest.mark.parametrize("engine", ["lancedb", "opensearch", "qdrant", "weaviate"])
def test_technical_keyword_match_is_refused_not_exported_as_a_plain_query(engine):
    """Lingxi's keyword path (only the query's technical terms) is a stage no engine's hybrid
    query runs: exporting it as the plain OR query would deploy another pipeline than the one
    tuned, so every exporter refuses it and names it."""
    config = with_params(resolve_config("rrf"), {"keyword_match": "technical", "rrf.rrf_k": 59.0})
    with pytest.raises(ValueError, match=r"^%s cannot express keyword match \(keyword_match = 'technical'\)" % engine):
        export_config(config, engine)


def test_opensearch_exports_keyword_match_all_as_its_and_operator():
    body = exported("rrf", "opensearch", keyword_match="all")
    assert body["search"]["body"]["query"]["hybrid"]["queries"][0]["match"]["text"]["operator"] == "and"


def test_every_pipeline_stage_declares_what_an_engine_must_support():
    """Each knob of a pipeline says how engines run it (``Knob.engine``); one that does not is
    refused by every exporter, so a stage added without a declaration never exports silently."""
    from dataclasses import dataclass

    from retrieval.params import declared, flag
    from retrieval.pipeline import PipelineConfig

    undeclared = [name for name, knob in declared(PipelineConfig) if knob.engine is None]
    assert undeclared == []

    @dataclass(frozen=True)
    class WithRerank(PipelineConfig):  # a stage added with no engine declaration
        rerank: bool = flag(False, "cross-encoder rerank", group="limits")

    config = WithRerank(name="rrf")
    for engine in ("lancedb", "opensearch", "qdrant", "weaviate"):
        with pytest.raises(ValueError, match=r"cannot express cross-encoder rerank \(rerank = False\)"):
            export_config(config, engine)


def test_a_fusion_parameter_no_export_reads_is_refused():
    """A parameter a fusion declares that an exporter's translation does not read is refused
    (its value would be dropped from the file); the fusions' present parameters are all read."""
    from retrieval.pipeline import PipelineConfig

    from eval.export import EXPORTERS
    from eval.export._base import Exporter

    narrower = Exporter("qdrant", "", EXPORTERS["qdrant"].write, ".json", "rrf",
                        reads={"rrf": frozenset({"rrf_k", "w_dense", "w_sparse"})})
    with pytest.raises(ValueError, match=r"rrf.weighting = 'multiply' \(a parameter this export does not translate\)"):
        narrower.export(PipelineConfig(name="rrf"))
    assert EXPORTERS["qdrant"].export(PipelineConfig(name="rrf")).startswith("{")


def test_rrf_weights_lancedb_cannot_express():
    with pytest.raises(ValueError, match="per-path RRF weights"):
        export_config(
            replace(
                resolve_config("rrf"), params=replace(resolve_config("rrf").params, w_dense=2.0)
            ),
            "lancedb",
        )


def test_cli_writes_the_file(tmp_path, capsys):
    out = tmp_path / "hybrid.py"
    assert main(["export", "relative-score", "--to", "lancedb", "--out", str(out)]) == 0
    assert "LinearCombinationReranker(weight=0.75" in out.read_text()
    assert main(["export", "rrf", "--to", "elastic"]) == 2
    assert "invalid choice: 'elastic'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "label, expected",
    [
        # (queries, same order, tie order only, an all-tied FTS list, same as rwb search)
        ("rrf", (4, 4, 0, 0)),
        (
            "relative-score",
            (4, 3, 0, 1),
        ),  # q4: LanceDB's FTS returns one hit, normalised to 0 there, 1 here
        ("wsum", (4, 3, 0, 1)),
        ("combsum", (4, 3, 0, 1)),
    ],
)
def test_lancedb_export_run_against_lancedb(tiny, rwb_home, tmp_path, label, expected):
    """The exported snippet, run on a LanceDB table of the tiny fixture's indexed vectors and
    texts, returns what our fusion of LanceDB's own two sub-query lists returns, query for query."""
    agreement = verify(tiny, "minilm", resolve_config(label), tmp_path)
    assert (
        agreement.queries,
        agreement.same_inputs,
        agreement.tie_order,
        agreement.tied_path,
    ) == expected
    assert agreement.failed == ()


HOSTILE = [
    'x"""+__import__("os").system("touch MARK")+"""',
    "x'''+__import__('os').system('touch MARK')+'''",
    'x\\"""+__import__("os").system("touch MARK")#',
    'x\n__import__("os").system("touch MARK")\n',
    'x\\\n__import__("os").system("touch MARK")',
    'x\x00\x07\x1b[2J\r\u2028__import__("os").system("touch MARK")',
    "x\\u0022\\u0022\\u0022+__import__('os').system('touch MARK')",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_lancedb_export_writes_values_as_data_never_as_code(tmp_path, monkeypatch, name):
    """Issue 35: a pipeline name (or description) reaches the generated file only inside one
    JSON string literal; compiling and running the file runs no injected call."""
    config = replace(resolve_config("rrf"), name=name, description=name)
    text = export_config(config, "lancedb")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(text, "<hybrid.py>", "exec"), namespace)
    assert not (tmp_path / "MARK").exists()
    assert namespace["PIPELINE"]["name"] == name
    assert namespace["PIPELINE"]["params"] == {
        "rrf_k": 60.0, "w_dense": 1.0, "w_sparse": 1.0, "weighting": "multiply"
    }
    # the file differs from a plain name's only in the one PIPELINE line
    plain = export_config(replace(config, name="x", description="x"), "lancedb").splitlines()
    lines = text.splitlines()
    assert len(lines) == len(plain)
    assert [i for i, (a, b) in enumerate(zip(lines, plain)) if a != b] == [
        next(i for i, line in enumerate(plain) if line.startswith("PIPELINE = json.loads("))
    ]


def test_a_hostile_toml_exports_and_runs_inert(tmp_path, monkeypatch, capsys):
    toml = tmp_path / "colleague.toml"
    toml.write_text(
        "name = 'x\"\"\"+__import__(\"os\").system(\"touch MARK\")+\"\"\"'\nbase = \"relative-score\"\n"
    )
    out = tmp_path / "hybrid.py"
    assert main(["export", str(toml), "--to", "lancedb", "--out", str(out)]) == 0
    monkeypatch.chdir(tmp_path)
    exec(compile(out.read_text(), str(out), "exec"), {})
    assert not (tmp_path / "MARK").exists()
