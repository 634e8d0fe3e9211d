"""Your vectors: a dataset's own document and query vectors, used with no model loaded.

``rwb index DATASET --embedder precomputed`` reads a sidecar folder in the dataset::

    vectors/corpus.npy        float array, one row per document (any float dtype, N × d)
    vectors/corpus_ids.txt    the document id of each row, one per line, in row order
    vectors/queries.npy       one row per query (M × d, the same d)
    vectors/queries_ids.txt   the query id of each row
    vectors/model.txt         optional: the model that made them (named in messages)

Every document of ``corpus.jsonl`` and every query of ``queries.jsonl`` needs exactly one
vector; an id missing, extra or listed twice, a row count that differs from the ids, a
dimension that differs between the files, a NaN or infinite value and a zero vector (no
direction, so no cosine) are each refused with a ``ValueError`` naming the file and the row.
Every file is read only inside the dataset's folder (a symlink leaving it is refused), and a
``.npy`` header is checked against the file's size before anything is allocated; ids in
messages are cut (``retrieval.limits.clip``). Vectors are unit-normalised (cosine similarity,
as the bundled models). The model id is
``precomputed:<sha256 of the files>``, so the index and the candidate pool are rebuilt when
a vector changes. A free-text query has no vector: ``encode`` serves the texts of the
dataset's own queries and refuses any other text, saying that it needs a query vector or an
embedder of the same model.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from retrieval.embedders import EmbedderUnavailable
from retrieval.files import mapped_rows, resolve_inside
from retrieval.limits import clip

PRECOMPUTED = "precomputed"
FOLDER = "vectors"
FILES = ("corpus.npy", "corpus_ids.txt", "queries.npy", "queries_ids.txt", "model.txt")
HASH_BLOCK = 1 << 24
"""Bytes read at a time while hashing the sidecar (``vectors_label``)."""
UNIT_ROWS = 1 << 14
"""Rows normalised at a time by ``load_vectors`` (the float64 working copy is this big)."""


def _file(root: str | Path, name: str) -> Path:
    """``vectors/<name>`` of the dataset, read only inside the dataset's folder: ``vectors/``
    or the file as a symlink leaving it is refused (``retrieval.files.resolve_inside``), with
    the same line whether or not what it points to exists."""
    try:
        return resolve_inside(Path(root), f"{FOLDER}/{name}")
    except ValueError:
        raise ValueError(
            f"{Path(root) / FOLDER / name}: resolves outside the dataset folder (a symlink "
            "leaving it); the dataset's vectors must be files inside it"
        ) from None


def vectors_label(root: str | Path) -> str:
    """``precomputed:<hash>`` over the sidecar's files (the index and pool identity)."""
    folder = Path(root) / FOLDER
    if not _file(root, "corpus.npy").is_file():
        raise ValueError(
            f"{folder}/corpus.npy: missing — --embedder precomputed reads the dataset's own "
            "vectors (vectors/corpus.npy + corpus_ids.txt, queries.npy + queries_ids.txt)"
        )
    digest = hashlib.sha256()
    for name in FILES:
        path = _file(root, name)
        if path.is_file():
            digest.update(name.encode() + b"\0")
            with open(path, "rb") as handle:  # streamed: a 1M × 384 corpus.npy is never held whole
                for block in iter(lambda: handle.read(HASH_BLOCK), b""):
                    digest.update(block)
            digest.update(b"\0")
    return f"{PRECOMPUTED}:{digest.hexdigest()[:16]}"


def _read_npy(path: Path, shown: Path) -> np.ndarray:
    """The array of a ``.npy`` file, its header checked against the file's size first (a header
    claiming 10¹² rows would make NumPy try to allocate them); never unpickles."""
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            shape, _, dtype = (np.lib.format.read_array_header_1_0(handle) if version == (1, 0)
                               else np.lib.format.read_array_header_2_0(handle))
            data_bytes = path.stat().st_size - handle.tell()
    except FileNotFoundError:
        raise
    except (OSError, ValueError, SyntaxError, TypeError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{shown}: not a NumPy .npy array ({clip(reason)})") from None
    if dtype.hasobject:
        raise ValueError(f"{shown}: holds Python objects (pickled); give a float array")
    needed = math.prod(shape) * dtype.itemsize
    if needed > data_bytes:
        raise ValueError(
            f"{shown}: its header claims shape {clip(shape)} of {dtype} ({needed} bytes) but the "
            f"file holds {data_bytes} bytes of data (damaged or cut short)"
        )
    return np.load(path, allow_pickle=False, mmap_mode="r")  # pages read as rows are used, not a copy


def _read_ids(resolved: Path, path: Path) -> list[str]:
    try:
        text = resolved.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise ValueError(f"{path}: missing (one id per line, in the rows' order)") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not valid UTF-8 (byte {error.start})") from None
    ids = text.split("\n")
    if ids and ids[-1] == "":
        ids.pop()
    seen: dict[str, int] = {}
    for line, raw in enumerate(ids, start=1):
        value = raw.rstrip("\r")
        if not value.strip() or value != value.strip():
            raise ValueError(f"{path}:{line}: id {clip(value)} is empty or has surrounding spaces")
        if value in seen:
            raise ValueError(
                f"{path}:{line}: id {clip(value)} listed twice (first on line {seen[value]})"
            )
        seen[value] = line
        ids[line - 1] = value
    return ids


def load_vectors(root: str | Path, kind: str, expected: Sequence[str]) -> dict[str, np.ndarray]:
    """``{id: unit vector}`` of ``kind`` (``corpus`` / ``queries``) for exactly the ``expected``
    ids; ``ValueError`` naming the file and row of the first problem."""
    folder = Path(root) / FOLDER
    array_path, ids_path = folder / f"{kind}.npy", folder / f"{kind}_ids.txt"
    try:
        array = _read_npy(_file(root, f"{kind}.npy"), array_path)
    except FileNotFoundError:
        raise ValueError(f"{array_path}: missing (a {len(expected)} × d float array)") from None
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{array_path}: not a NumPy .npy array ({str(error).splitlines()[0][:120]})"
        ) from None
    if array.ndim != 2 or array.shape[1] < 1 or array.dtype.kind != "f":
        raise ValueError(
            f"{array_path}: expected a 2-D float array (rows × dimensions), got shape "
            f"{array.shape} of {array.dtype}"
        )
    ids = _read_ids(_file(root, f"{kind}_ids.txt"), ids_path)
    if len(ids) != array.shape[0]:
        raise ValueError(
            f"{ids_path}: {len(ids)} ids but {array_path.name} has {array.shape[0]} rows"
        )
    wanted = set(expected)
    what = "document" if kind == "corpus" else "query"
    for row, value in enumerate(ids):
        if value not in wanted:
            raise ValueError(
                f"{ids_path}:{row + 1}: {clip(value)} is not a {what} of the dataset (extra vector)"
            )
    present = set(ids)
    missing = [value for value in expected if value not in present]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"{ids_path}: no vector for {what} {clip(missing[0])}{more}")
    unit = np.empty(array.shape, dtype=np.float32)  # the one copy kept
    for start in range(0, array.shape[0], UNIT_ROWS):
        _unit_rows(mapped_rows(array, start, start + UNIT_ROWS), start, unit, array_path, ids)
    return dict(zip(ids, unit))


def _unit_rows(rows: np.ndarray, start: int, unit: np.ndarray, array_path: Path, ids: list[str]) -> None:
    """``rows`` (rows ``start``… of the file) unit-normalised into ``unit``.

    float32 is what is kept; float64 is needed only here, for the norm and the division of
    ``UNIT_ROWS`` rows at a time: they have always run in float64, so a vector's float32 bits
    are those of every index built before (and do not depend on the chunking), and float64 keeps
    a float16/float32 input's tiny or huge components from under- or overflowing in the squares.
    """
    vectors = np.array(rows, dtype=np.float64)  # a copy: divided in place below
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        row = start + int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{array_path}: row {row} (id {clip(ids[row])}, 0-based) holds NaN or infinity"
        )
    norms = np.linalg.norm(vectors, axis=1)
    if (norms == 0).any():
        row = start + int(np.flatnonzero(norms == 0)[0])
        raise ValueError(
            f"{array_path}: row {row} (id {clip(ids[row])}, 0-based) is a zero vector (no "
            "direction, so no cosine)"
        )
    vectors /= norms[:, None]  # in place: the same quotients, no second float64 block
    unit[start:start + len(vectors)] = vectors


@dataclass
class PrecomputedEmbedder:
    """The ``Embedder`` of a dataset's own vectors (``rwb index --embedder precomputed``)."""

    model_id: str
    dim: int
    documents: dict[str, np.ndarray]
    queries: dict[str, np.ndarray]
    by_text: dict[str, np.ndarray]
    query_texts: dict[str, str]
    model: str
    encoded: int = 0  # nothing is ever encoded

    @classmethod
    def of(cls, dataset) -> "PrecomputedEmbedder":
        root = Path(dataset.root)
        label = vectors_label(root)
        documents = load_vectors(root, "corpus", [d.id for d in dataset.documents])
        queries = (
            load_vectors(root, "queries", [q.id for q in dataset.queries])
            if dataset.queries
            else {}
        )
        dim = len(next(iter(documents.values())))
        if queries and len(next(iter(queries.values()))) != dim:
            raise ValueError(
                f"{root / FOLDER}/queries.npy: {len(next(iter(queries.values())))} dimensions, "
                f"corpus.npy has {dim}"
            )
        texts: dict[str, list] = {}
        for query in dataset.queries:
            texts.setdefault(query.text, []).append(queries[query.id])
        by_text = {t: v[0] for t, v in texts.items() if all(np.array_equal(v[0], x) for x in v)}
        model_file = _file(root, "model.txt")
        model = model_file.read_text("utf-8").strip()[:200] if model_file.is_file() else ""
        return cls(
            label,
            dim,
            documents,
            queries,
            by_text,
            {q.id: q.text for q in dataset.queries},
            model or "the model that made vectors/",
        )

    def encode_documents(self, ids: Sequence[str]) -> np.ndarray:
        """The documents' vectors in ``ids``' order: the loaded array itself when that is its
        row order (no copy), else one gathered copy."""
        if not ids:
            return np.empty((0, self.dim), np.float32)
        first = self.documents[ids[0]]
        whole = first.base if first.base is not None and first.base.ndim == 2 else None
        if whole is not None and len(ids) == whole.shape[0] and all(
                self.documents[i].__array_interface__["data"][0] == whole[r].__array_interface__["data"][0]
                for r, i in enumerate(ids)):
            return whole
        return np.stack([self.documents[i] for i in ids])

    def release_documents(self) -> None:
        """Drop the documents' vectors once the index holds them (``retrieval.index`` writes
        ``vectors.npy`` and then builds from that file): what is left answers queries only."""
        self.documents = {}

    def encode_queries(self, queries) -> np.ndarray:
        """The vectors of queries by id (a dataset's queries) or, for others, by exact text."""
        out = []
        for query in queries:
            own = self.query_texts.get(query.id) == query.text
            out.append(self.queries[query.id] if own else self._by_text(query.text))
        return np.stack(out) if out else np.empty((0, self.dim), np.float32)

    def _by_text(self, text: str) -> np.ndarray:
        vector = self.by_text.get(text)
        if vector is None:
            raise EmbedderUnavailable(
                f"precomputed vectors hold no vector for the free-text query {text[:60]!r}: it "
                f"needs a query vector or an embedder of the same model ({self.model}); "
                "--embedder precomputed answers "
                "the dataset's own queries only"
            )
        return vector

    def check_text(self, text: str) -> None:
        """``ValueError`` when a free-text query has no vector (the message says what it needs)."""
        try:
            self._by_text(text)
        except EmbedderUnavailable as error:
            raise ValueError(str(error)) from None

    def encode(self, texts: Sequence[str], progress=None) -> np.ndarray:
        vectors = [self._by_text(t) for t in texts]
        if progress:
            progress(len(texts), len(texts))
        return np.stack(vectors) if vectors else np.empty((0, self.dim), np.float32)
