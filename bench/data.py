"""Where the benchmark data comes from.

- ``datasets/devmem``: the project's default dataset (in the repo).
- ``../shared/datasets`` (override with ``RWB_SHARED_DATASETS``): LoCoMo, SciFact, CoSQA and
  CMRC2018 in BEIR layout, read-only. They are never copied into the repo; the one derived
  copy the benchmarks need (LoCoMo with ``group`` = ``sample_id``, so retrieval stays inside
  each conversation, and ``created_at`` = the turn's session date) is written under the
  benchmark home (``.rwb-bench/`` by default, gitignored).
- Scaling corpora for latency and scale benchmarks: real texts (documents of SciFact, CoSQA
  and LoCoMo, then sentences / line windows / turn windows of them); real embeddings where the
  embedding cache holds them, otherwise unit-normalised random perturbations of real
  embeddings (the parent document's when there is one). Say so next to every figure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from bench.common import log

REPO = Path(__file__).resolve().parents[1]
SCALING_SOURCES = ("scifact", "cosqa", "locomo")


def shared_root() -> Path:
    return Path(os.environ.get("RWB_SHARED_DATASETS", REPO.parent / "shared" / "datasets")).resolve()


def bench_home() -> Path:
    """The benchmark's RWB_HOME: indexes, candidate pools and the embedding cache."""
    return Path(os.environ.get("RWB_BENCH_HOME", REPO / ".rwb-bench")).resolve()


def use_bench_home() -> Path:
    home = bench_home()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["RWB_HOME"] = str(home)
    return home


def devmem_path() -> Path | None:
    path = REPO / "datasets" / "devmem"
    return path if (path / "corpus.jsonl").is_file() and (path / "queries.jsonl").is_file() else None


def shared_path(name: str) -> Path | None:
    path = shared_root() / name
    return path if (path / "corpus.jsonl").is_file() else None


def _jsonl(path: Path) -> Iterable[dict]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _iso_utc(value: str | None) -> str | None:
    if not value:
        return None
    return value if re.search(r"(Z|[+-]\d\d:\d\d)$", value) else value + "+00:00"


def locomo_grouped() -> Path | None:
    """LoCoMo as a dataset the loader reads with per-conversation retrieval.

    ``group`` = ``sample_id`` on documents and queries (``build_candidates`` filters both
    paths by the query's group) and ``created_at`` = the turn's ``timestamp_iso``. Made by
    ``eval.importers.beir.import_beir`` (which maps exactly these fields) when it is there, else
    by a small converter here; written once under the benchmark home, never in the repo."""
    source = shared_path("locomo")
    if source is None:
        return None
    target = bench_home() / "datasets" / "locomo"
    stamp = f"{(source / 'corpus.jsonl').stat().st_mtime_ns}-{(source / 'queries.jsonl').stat().st_mtime_ns}-v2"
    if (target / "corpus.jsonl").is_file() and (bench_home() / "datasets" / "locomo.STAMP").is_file() \
            and (bench_home() / "datasets" / "locomo.STAMP").read_text() == stamp:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        from eval.importers.beir import import_beir
    except ImportError:
        import_beir = None
    if import_beir is not None:
        import_beir(source, target, force=True, name="locomo")
    else:
        _convert_locomo(source, target)
    (bench_home() / "datasets" / "locomo.STAMP").write_text(stamp)
    return target


def _convert_locomo(source: Path, target: Path) -> None:
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "qrels").mkdir(parents=True)

    def docs():
        for obj in _jsonl(source / "corpus.jsonl"):
            row = {"_id": obj["_id"], "title": obj.get("title", ""), "text": obj["text"],
                   "group": obj.get("sample_id", "")}
            created = _iso_utc(obj.get("timestamp_iso"))
            if created:
                row["created_at"] = created
            yield row

    def queries():
        for obj in _jsonl(source / "queries.jsonl"):
            yield {"_id": obj["_id"], "text": obj["text"], "group": obj.get("sample_id", ""),
                   "intent": obj.get("category_name", "")}

    _write_jsonl(tmp / "corpus.jsonl", docs())
    _write_jsonl(tmp / "queries.jsonl", queries())
    shutil.copy(source / "qrels" / "test.tsv", tmp / "qrels" / "test.tsv")
    (tmp / "dataset.toml").write_text('name = "locomo"\nlicense = "CC BY-NC 4.0"\n', "utf-8")
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)


@lru_cache(maxsize=None)
def load(path: str):
    from retrieval.dataset import load_dataset

    return load_dataset(path)


def quality_datasets(full: bool) -> dict[str, Path]:
    """Datasets the quality benchmark evaluates (quick: devmem only)."""
    out: dict[str, Path] = {}
    if devmem_path():
        out["devmem"] = devmem_path()
    if full:
        locomo = locomo_grouped()
        if locomo:
            out["locomo"] = locomo
        for name in ("scifact", "cosqa", "cmrc2018"):
            if shared_path(name):
                out[name] = shared_path(name)
    return out


# ---- embeddings ------------------------------------------------------------------------

@lru_cache(maxsize=None)
def cached_embedder(name: str):
    """The engine's CachedEmbedder on the benchmark home's embedding cache."""
    from retrieval.embedders import CachedEmbedder, EmbeddingCache, load_embedder

    return CachedEmbedder(load_embedder(name), EmbeddingCache(bench_home() / "embeddings.sqlite"))


def lookup_cached(name: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
    """Vectors the embedding cache already holds for ``texts`` (index → vector); encodes nothing."""
    from retrieval.embedders import EmbeddingCache, text_hash

    path = bench_home() / "embeddings.sqlite"
    if not path.is_file():
        return {}
    cache = EmbeddingCache(path)
    try:
        hashes = [text_hash(t) for t in texts]
        found = cache.get_many(name, list(dict.fromkeys(hashes)))
    finally:
        cache.close()
    return {i: found[h] for i, h in enumerate(hashes) if h in found}


def warm_embeddings(embedders: Sequence[str], paths: dict[str, Path], chunk: int = 256) -> None:
    """Encode every document and query text of ``paths`` into the benchmark embedding cache,
    in chunks, so an interrupted run keeps what it encoded."""
    from retrieval.index import index_text

    for embedder_name in embedders:
        embedder = cached_embedder(embedder_name)
        for name, path in paths.items():
            dataset = load(str(path))
            texts = [index_text(d) for d in dataset.documents] + [q.text for q in dataset.queries]
            texts = list(dict.fromkeys(texts))
            have = lookup_cached(embedder.model_id, texts)
            todo = [t for i, t in enumerate(texts) if i not in have]
            log(f"warm {embedder_name} {name}: {len(texts)} texts, {len(todo)} to encode")
            start = time.perf_counter()
            for lo in range(0, len(todo), chunk):
                embedder.encode(todo[lo:lo + chunk])
                done = min(lo + chunk, len(todo))
                rate = done / (time.perf_counter() - start)
                log(f"  {embedder_name} {name}: {done}/{len(todo)} ({rate:.1f} texts/s)")


# ---- scaling corpora -------------------------------------------------------------------

def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", text)
    return [p.strip() for p in parts if len(p.split()) >= 5]


def _line_windows(text: str, width: int = 4) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    return ["\n".join(lines[i:i + width]) for i in range(0, len(lines), width) if len(lines) > width]


@lru_cache(maxsize=4)
def real_documents() -> tuple[tuple[str, str], ...]:
    """(source, index text) of every SciFact, CoSQA and LoCoMo document, interleaved by source
    so any prefix mixes long abstracts, code and short dialogue turns."""
    from retrieval.index import index_text

    per_source = []
    for name in SCALING_SOURCES:
        path = shared_path(name)
        if path is None:
            continue
        per_source.append([(name, index_text(d)) for d in load(str(path)).documents])
    out = []
    for i in range(max((len(s) for s in per_source), default=0)):
        for source in per_source:
            if i < len(source):
                out.append(source[i])
    return tuple(out)


def scaling_texts(n: int) -> tuple[list[str], list[int]]:
    """``n`` real texts and, for each, the index of its parent document (itself for a document).

    Documents first; then sentences of SciFact abstracts, 4-line windows of CoSQA functions
    and 3-turn windows of LoCoMo dialogues, round-robin, until ``n``."""
    docs = real_documents()
    if not docs:
        raise RuntimeError(f"no scaling corpus: {shared_root()} lacks {SCALING_SOURCES}")
    texts = [t for _, t in docs[:n]]
    parents = list(range(len(texts)))
    if len(texts) >= n:
        return texts, parents
    seen = set(texts)
    derived: list[list[tuple[int, str]]] = [[], [], []]
    locomo_idx = [i for i, (s, _) in enumerate(docs) if s == "locomo"]
    for i, (source, text) in enumerate(docs):
        if source == "scifact":
            derived[0].extend((i, s) for s in _sentences(text))
        elif source == "cosqa":
            derived[1].extend((i, w) for w in _line_windows(text))
    for a, b, c in zip(locomo_idx, locomo_idx[1:], locomo_idx[2:]):
        derived[2].append((b, "\n".join((docs[a][1], docs[b][1], docs[c][1]))))
    width = 1
    while len(texts) < n:
        added = False
        for stream in derived:
            for parent, text in stream:
                if len(texts) >= n:
                    break
                if text not in seen:
                    seen.add(text)
                    texts.append(text)
                    parents.append(parent)
                    added = True
        if not added:  # every derived text used: widen windows over the corpus (rarely needed)
            width += 1
            for i in range(0, len(docs) - width, width):
                if len(texts) >= n:
                    break
                text = "\n".join(t for _, t in docs[i:i + width])
                if text not in seen:
                    seen.add(text)
                    texts.append(text)
                    parents.append(i)
    return texts, parents


def perturb(base: np.ndarray, rng: np.random.Generator, sigma: float = 0.5) -> np.ndarray:
    """Unit vectors near ``base`` rows: ``normalise(b + sigma · g / sqrt(d))``, g ~ N(0, I)
    (cosine to the base ≈ 1/sqrt(1 + sigma²) ≈ 0.89 for sigma 0.5)."""
    noise = rng.standard_normal(base.shape, dtype=np.float32) * np.float32(sigma / np.sqrt(base.shape[1]))
    out = base.astype(np.float32) + noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def blend(base: np.ndarray, n: int, rng: np.random.Generator, sigma: float = 0.3) -> np.ndarray:
    """``n`` unit vectors spread over the span of real embeddings (for the 1M scale run):
    ``normalise(a·b_i + (1 − a)·b_j + sigma · g / sqrt(d))`` with i, j random rows, a ~ U(0.5, 1)
    and g ~ N(0, I). Plain perturbed copies would form tight clusters of ~60 near-duplicates
    per real vector at 1M rows, which no quantised index can order (recall@10 ≈ 0.26 at 100k);
    blends give graded neighbour distances, closer to a real corpus."""
    i = rng.integers(len(base), size=n)
    j = rng.integers(len(base), size=n)
    a = rng.uniform(0.5, 1.0, size=(n, 1)).astype(np.float32)
    out = a * base[i] + (1 - a) * base[j]
    out += rng.standard_normal(out.shape, dtype=np.float32) * np.float32(sigma / np.sqrt(base.shape[1]))
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32, copy=False)


def scaling_vectors(texts: Sequence[str], parents: Sequence[int], embedder: str, fallback: np.ndarray,
                    seed: int = 0) -> tuple[np.ndarray, int, int]:
    """Vectors for a scaling corpus: the real embedding from the cache where it exists, else a
    perturbed copy of the parent document's real embedding, else of a random row of
    ``fallback`` (real embeddings). Returns (vectors, n_real, n_perturbed)."""
    rng = np.random.default_rng(seed)
    docs = real_documents()
    cached = lookup_cached(embedder, list(texts))
    parent_texts = [docs[p][1] for p in parents]
    parent_cached = lookup_cached(embedder, parent_texts)
    dim = fallback.shape[1]
    out = np.empty((len(texts), dim), dtype=np.float32)
    real = np.zeros(len(texts), dtype=bool)
    base = np.empty((len(texts), dim), dtype=np.float32)
    for i in range(len(texts)):
        if i in cached:
            out[i] = cached[i]
            real[i] = True
        elif i in parent_cached:
            base[i] = parent_cached[i]
        else:
            base[i] = fallback[rng.integers(len(fallback))]
    todo = np.flatnonzero(~real)
    for lo in range(0, len(todo), 65536):
        part = todo[lo:lo + 65536]
        out[part] = perturb(base[part], rng)
    return out, int(real.sum()), int(len(todo))


def real_queries(n: int) -> list[str]:
    """``n`` real query texts, round-robin from SciFact, CoSQA and LoCoMo."""
    per_source = []
    for name in SCALING_SOURCES:
        path = shared_path(name)
        if path is not None:
            per_source.append([q.text for q in load(str(path)).queries])
    out: list[str] = []
    for i in range(max((len(s) for s in per_source), default=0)):
        for source in per_source:
            if i < len(source) and len(out) < n:
                out.append(source[i])
    return out


def pool(path: Path, embedder: str = "minilm", pool_depth: int | None = None):
    """(dataset, stored candidate pool) under the benchmark home: built once, then loaded."""
    from eval.stores.pool import load_pool
    from retrieval.candidates import DEFAULT_POOL_DEPTH

    dataset = load(str(path))
    depth = pool_depth or DEFAULT_POOL_DEPTH

    def progress(stage, done, total):
        if done == total or done % 500 == 0:
            log(f"  {dataset.name}/{embedder} {stage}: {done}/{total}")

    return dataset, load_pool(dataset, embedder, depth, progress=progress)
