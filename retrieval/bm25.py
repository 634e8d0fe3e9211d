"""BM25 keyword index on Tantivy with a bilingual analyzer.

Two analysed fields hold the same text:
- ``words``: Han characters one by one, and Latin/digit runs split at ``_ . / -``
  (``ERR_CONN_REFUSED`` → ``err conn refused``), lower-cased;
- ``idents``: identifiers kept whole (``user_id``, ``err_conn_refused``, ``utils/retry.py``).
A query is analysed with the same analyzers and built from term queries, never parsed,
so any user string is a valid query. The analyzers are registered again on every open:
Tantivy forgets custom analyzers, and an index opened without them silently finds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import tantivy

from retrieval.dataset import scrub_text
from retrieval.limits import MAX_DEPTH, check_size

ANALYZER_VERSION = "bilingual-v1"
WORDS_PATTERN = r"\p{Han}|[A-Za-z0-9]+"
IDENTS_PATTERN = r"[A-Za-z0-9_]+(?:[./:\-][A-Za-z0-9_]+)*"
MAX_QUERY_TERMS = 256


def _analyzer(pattern: str) -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(pattern))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.remove_long(64))
        .build()
    )


WORDS = _analyzer(WORDS_PATTERN)
IDENTS = _analyzer(IDENTS_PATTERN)


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("words", tokenizer_name="rwb_words", index_option="freq")
    builder.add_text_field("idents", tokenizer_name="rwb_idents", index_option="freq")
    for name in ("scope", "project", "grp"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    return builder.build()


def _register(index: tantivy.Index) -> None:
    index.register_tokenizer("rwb_words", WORDS)
    index.register_tokenizer("rwb_idents", IDENTS)


@dataclass(frozen=True)
class Filters:
    """Exact-match prefilters; an empty value means no filter."""

    scope: str = ""
    project: str = ""
    group: str = ""


@dataclass(frozen=True)
class IndexedDoc:
    id: str
    text: str
    scope: str = ""
    project: str = ""
    group: str = ""


def query_terms(text: str) -> list[tuple[str, str]]:
    """(field, term) pairs for a user string, deduplicated, capped at MAX_QUERY_TERMS."""
    text = scrub_text(text)
    terms = [("words", t) for t in WORDS.analyze(text)]
    terms += [("idents", t) for t in IDENTS.analyze(text) if not t.isalnum() or len(t) > 1]
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


class BM25Index:
    def __init__(self, index: tantivy.Index):
        self._index = index
        self._schema = index.schema
        self._searcher = index.searcher()

    @classmethod
    def build(cls, path: Path, docs: Iterable[IndexedDoc]) -> "BM25Index":
        path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(_schema(), path=str(path))
        _register(index)
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for doc in docs:
            text = doc.text
            writer.add_document(tantivy.Document(
                id=doc.id, words=text, idents=text, scope=doc.scope, project=doc.project, grp=doc.group,
            ))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        return cls(index)

    @classmethod
    def open(cls, path: Path) -> "BM25Index":
        index = tantivy.Index.open(str(path))
        _register(index)
        index.reload()
        return cls(index)

    @property
    def num_docs(self) -> int:
        return self._searcher.num_docs

    def _query(self, text: str, filters: Filters) -> tantivy.Query | None:
        terms = query_terms(text)
        if not terms:
            return None
        should = [(tantivy.Occur.Should, tantivy.Query.term_query(self._schema, f, t)) for f, t in terms]
        clauses = [(tantivy.Occur.Must, tantivy.Query.boolean_query(should))]
        for field, value in (("scope", filters.scope), ("project", filters.project), ("grp", filters.group)):
            if value:
                clauses.append((tantivy.Occur.Must, tantivy.Query.term_query(self._schema, field, scrub_text(value))))
        return tantivy.Query.boolean_query(clauses)

    def search(self, text: str, depth: int, filters: Filters = Filters()) -> list[tuple[str, float]]:
        """Top ``depth`` (doc id, BM25 score), best first; empty when nothing matches.

        ``depth`` must lie in ``[0, MAX_DEPTH]`` (Tantivy allocates for ``depth`` hits up front)."""
        depth = check_size("depth", depth, 0, MAX_DEPTH)
        query = self._query(text, filters)
        if query is None or depth == 0:
            return []
        searcher = self._searcher
        hits = searcher.search(query, depth).hits
        return [(searcher.doc(address)["id"][0], float(score)) for score, address in hits]
