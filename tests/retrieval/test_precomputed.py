"""``--embedder precomputed``: the dataset's own vectors, no model loaded.

Hand-made 3-d vectors (cosine by hand): q1 = (1, 0, 0) and q2 = (0, 1, 0);
a = (1, 0, 0), b = (1, 1, 0), c = (0, 1, 0), d = (−1, 0.5, 0).
cos(q1, ·): a 1, b 1/√2, c 0, d −1/√1.25  → ranking a b c d;
cos(q2, ·): c 1, b 1/√2, d 0.5/√1.25, a 0 → ranking c b d a.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval.cli import main
from eval.stores.pool import load_pool, pool_path
from retrieval.dataset import load_dataset
from retrieval.precomputed import vectors_label

ROOT = Path(__file__).resolve().parents[2]
DOCS = {"a": [1, 0, 0], "b": [1, 1, 0], "c": [0, 1, 0], "d": [-1, 0.5, 0]}
QUERIES = {"q1": ("which way is east", [1, 0, 0]), "q2": ("which way is north", [0, 1, 0])}


def write_vectors(folder: Path, kind: str, vectors: dict, dtype=np.float32) -> None:
    (folder / "vectors").mkdir(exist_ok=True)
    np.save(folder / "vectors" / f"{kind}.npy", np.array(list(vectors.values()), dtype=dtype))
    (folder / "vectors" / f"{kind}_ids.txt").write_text("".join(f"{k}\n" for k in vectors))


@pytest.fixture
def dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("RWB_HOME", str(tmp_path / "home"))
    root = tmp_path / "compass"
    root.mkdir()
    (root / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": k, "text": f"memory {k} about a direction"}) + "\n" for k in DOCS
        )
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": text}) + "\n" for k, (text, _) in QUERIES.items())
    )
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\ta\t1\nq2\tc\t1\n")
    write_vectors(root, "corpus", DOCS)
    write_vectors(root, "queries", {k: v for k, (_, v) in QUERIES.items()}, np.float64)
    (root / "vectors" / "model.txt").write_text("hand-made-3d\n")
    return root


def dense_ranking(pool, qi: int) -> list[tuple[str, float]]:
    rows = [r for r in range(pool.offsets[qi], pool.offsets[qi + 1]) if pool.dense_rank[r] >= 0]
    rows.sort(key=lambda r: pool.dense_rank[r])
    return [(pool.doc_ids[pool.doc_idx[r]], float(pool.dense_sim[r])) for r in rows]


def test_index_loads_no_model_and_the_pool_has_the_cosine_ranking(dataset):
    code = (
        "import sys; from eval.cli import main; status = main(['index', sys.argv[1], '--embedder', "
        "'precomputed']); print('loaded model:', 'sentence_transformers' in sys.modules); "
        "sys.exit(status)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(dataset)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "0 texts encoded" in done.stdout and f"model {vectors_label(dataset)}" in done.stdout
    assert "loaded model: False" in done.stdout
    pool = load_pool(load_dataset(dataset), "precomputed")
    assert [d for d, _ in dense_ranking(pool, 0)] == ["a", "b", "c", "d"]
    assert [d for d, _ in dense_ranking(pool, 1)] == ["c", "b", "d", "a"]
    assert [s for _, s in dense_ranking(pool, 0)] == pytest.approx(
        [1.0, 1 / math.sqrt(2), 0.0, -1 / math.sqrt(1.25)], abs=1e-6
    )
    assert [s for _, s in dense_ranking(pool, 1)] == pytest.approx(
        [1.0, 1 / math.sqrt(2), 0.5 / math.sqrt(1.25), 0.0], abs=1e-6
    )


def test_search_with_a_query_vector_and_refusing_free_text(dataset, capsys):
    assert (
        main(
            [
                "search",
                str(dataset),
                "which way is north",
                "--embedder",
                "precomputed",
                "--pipeline",
                "vector",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert [line.split()[2] for line in out.splitlines()[1:5]] == ["c", "b", "d", "a"]
    assert main(["search", str(dataset), "where is the sun", "--embedder", "precomputed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and err.count("\n") == 1
    assert "needs a query vector or an embedder of the same model (hand-made-3d)" in err


def test_the_vectors_are_part_of_the_fingerprint(dataset):
    data = load_dataset(dataset)
    before, path = vectors_label(dataset), pool_path(data, "precomputed", 50)
    write_vectors(dataset, "corpus", {**DOCS, "d": [2, 0, 0]})  # d now points east too
    assert vectors_label(dataset) != before and pool_path(data, "precomputed", 50) != path
    pool = load_pool(data, "precomputed")
    assert [d for d, _ in dense_ranking(pool, 0)][:2] in (["a", "d"], ["d", "a"])


@pytest.mark.parametrize(
    "change, message",
    [
        (
            lambda r: write_vectors(r, "corpus", {**DOCS, "c": [np.nan, 0, 0]}),
            "vectors/corpus.npy: row 2 (id 'c', 0-based) holds NaN or infinity",
        ),
        (
            lambda r: write_vectors(r, "corpus", {**DOCS, "b": [0, 0, 0]}),
            "vectors/corpus.npy: row 1 (id 'b', 0-based) is a zero vector",
        ),
        (
            lambda r: write_vectors(r, "corpus", {k: v for k, v in DOCS.items() if k != "d"}),
            "vectors/corpus_ids.txt: no vector for document 'd'",
        ),
        (
            lambda r: write_vectors(r, "corpus", {**DOCS, "zz": [0, 0, 1]}),
            "vectors/corpus_ids.txt:5: 'zz' is not a document of the dataset",
        ),
        (
            lambda r: (r / "vectors" / "corpus_ids.txt").write_text("a\nb\na\nd\n"),
            "vectors/corpus_ids.txt:3: id 'a' listed twice (first on line 1)",
        ),
        (
            lambda r: (r / "vectors" / "corpus_ids.txt").write_text("a\nb\nc\n"),
            "vectors/corpus_ids.txt: 3 ids but corpus.npy has 4 rows",
        ),
        (
            lambda r: write_vectors(r, "queries", {"q1": [1, 0], "q2": [0, 1]}),
            "vectors/queries.npy: 2 dimensions, corpus.npy has 3",
        ),
        (
            lambda r: write_vectors(r, "queries", {"q1": [1, 0, 0]}),
            "vectors/queries_ids.txt: no vector for query 'q2'",
        ),
        (
            lambda r: np.save(r / "vectors" / "corpus.npy", np.arange(12).reshape(4, 3)),
            "vectors/corpus.npy: expected a 2-D float array",
        ),
    ],
)
def test_bad_vectors_are_refused_naming_file_and_row(dataset, capsys, change, message):
    change(dataset)
    assert main(["index", str(dataset), "--embedder", "precomputed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rwb: error:") and err.count("\n") == 1 and message in err, err


def test_rwb_index_opens_hashes_and_loads_the_vectors_once(dataset, monkeypatch, capsys):
    """``rwb index`` builds the index and the pool from one open index: the vectors are hashed
    once, loaded once, the build checked once and opened once — a second open while the first
    handle lives would hold a second copy of the vectors. LanceDB's table is written from the
    saved ``vectors.npy``, memory-mapped (float32, no copy), and the handle keeps no copy of the
    documents' vectors besides that file."""
    import retrieval.index as index
    import retrieval.precomputed as precomputed
    import eval.stores.pool as pool
    from retrieval.vector_store import VectorStore

    calls: dict[str, int] = {}
    built: list[np.ndarray] = []
    handles: list = []

    def counted(owner, name):
        inner = getattr(owner, name)

        def spy(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            result = inner(*args, **kwargs)
            if name == "_open_build":
                handles.append(result)
            return result
        monkeypatch.setattr(owner, name, spy)

    for owner, name in ((index, "_open_build"), (index, "_check"), (precomputed, "load_vectors")):
        counted(owner, name)
    for owner in (precomputed, pool):
        monkeypatch.setattr(owner, "vectors_label", lambda root, inner=precomputed.vectors_label: (
            calls.__setitem__("vectors_label", calls.get("vectors_label", 0) + 1) or inner(root)))
    build = VectorStore.build
    monkeypatch.setattr(VectorStore, "build", lambda path, rows, vectors, **kw: (
        built.append(vectors) or build(path, rows, vectors, **kw)))

    assert main(["index", str(dataset), "--embedder", "precomputed"]) == 0
    assert "candidate pool: 2 queries" in capsys.readouterr().out
    # load_vectors twice: the corpus and the queries
    assert calls == {"vectors_label": 1, "load_vectors": 2, "_check": 1, "_open_build": 1}
    (vectors,), handle = built, handles[0]
    assert isinstance(vectors, np.memmap) and vectors.dtype == np.float32 and vectors.shape == (4, 3)
    assert Path(vectors.filename).name == "vectors.npy" and Path(vectors.filename).parent.parent == handle.path.parent
    assert handle.embedder.documents == {} and np.array_equal(handle.vectors, vectors)
    assert np.linalg.norm(handle.vectors, axis=1) == pytest.approx([1, 1, 1, 1])

    calls.clear()
    assert main(["index", str(dataset), "--embedder", "precomputed"]) == 0  # built: checked, opened once
    assert calls == {"vectors_label": 1, "load_vectors": 2, "_check": 1, "_open_build": 1}
    assert len(built) == 1


@pytest.mark.parametrize("layout", ["C", "F", ">f8"])
def test_load_vectors_reads_blocks_to_the_same_bits(tmp_path, monkeypatch, layout):
    """The corpus is read and normalised a block of rows at a time: across block boundaries, for
    a C-ordered, a Fortran-ordered and a big-endian file, each vector is its float64 norm's
    quotient cast to float32, bit for bit (7 rows, blocks of 3)."""
    import retrieval.precomputed as precomputed

    monkeypatch.setattr(precomputed, "UNIT_ROWS", 3)
    rows = np.arange(1, 22, dtype=np.float64).reshape(7, 3) * [[1], [1e-3], [1e3], [1], [2], [3], [4]]
    array = {"C": rows.astype(np.float32), "F": np.asfortranarray(rows.astype(np.float32)),
             ">f8": rows.astype(">f8")}[layout]
    ids = [f"d{i}" for i in range(7)]
    write_vectors(tmp_path, "corpus", dict(zip(ids, array)), array.dtype)
    np.save(tmp_path / "vectors" / "corpus.npy", array)  # the layout itself, not rows rebuilt
    got = np.stack(list(precomputed.load_vectors(tmp_path, "corpus", ids).values()))
    wide = np.asarray(array, dtype=np.float64)
    expected = (wide / np.linalg.norm(wide, axis=1)[:, None]).astype(np.float32)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), expected.view(np.uint32))
