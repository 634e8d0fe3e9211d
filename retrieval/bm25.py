"""BM25 keyword index on Tantivy with a bilingual analyzer, and the keyword match mode.

Fields holding the same text:
- ``words``: Han characters one by one, and Latin/digit runs split at ``_ . / -``
  (``ERR_CONN_REFUSED`` → ``err conn refused``), lower-cased;
- ``idents``: identifiers kept whole (``user_id``, ``err_conn_refused``, ``utils/retry.py``);
- ``bigrams`` (analyzer ``bigram`` only): every pair of adjacent Han characters within a run
  of Han text (``深色主题`` → ``深色 色主 主题``), so a query's word order counts in Chinese,
  where there are no spaces to split words at;
- ``segments`` (analyzer ``jieba`` only): the words of two or more characters that jieba's
  dictionary segmentation finds in each run of Han text (``保存资料时报错`` → ``保存 资料 时报``),
  segmented in Python and indexed as whitespace-separated text; a query's Han runs are segmented
  the same way. Single characters are already in ``words``. jieba (its bundled dictionary,
  nothing fetched) is imported and its dictionary built on first use, once per process, with its
  log quiet; its own disk cache (a pickle-like file in the shared temp folder, trusted without a
  check) is not used.

Latin text has no Han runs, so an English corpus gets the same scores under every analyzer.

The analyzer is part of an index's identity (``ANALYZERS``; recorded in the manifest, in the
index folder's path and in the candidate pool's key): an index opened with an analyzer it was
not built with is refused. A query is analysed with the same analyzers and built from term
queries, never parsed, so any user string is a valid query. The analyzers are registered
again on every open: Tantivy forgets custom analyzers, and an index opened without them
silently finds nothing.

Match modes (``MATCH_MODES``): ``any`` finds a document holding at least one query term (OR);
``all`` finds only documents holding every *word* of the query — each ``words`` term, a Han
character or a Latin/digit run — which is how OpenClaw's ``buildFtsQuery`` joins a query's
tokens with AND (seed 002). Identifier and bigram terms add to the score in both modes but
are never required. A document found in both modes has the same BM25 score in both (the same
term clauses match), so the ``all`` hits are the ``any`` hits that hold every word, in the
same order.

``technical`` (Lingxi's keyword path, seed 004: a grep "以当前用户消息中的技术词/短语为查询" —
"技术词、错误码、配置项名等为主"; an error code is the strongest signal a message carries) searches
the query's *technical terms* (``technical_terms``), each matched whole in ``idents``:

- an **error code**, weighted ``TERM_WEIGHTS["error-code"]`` (the most): capitals and digits
  (``E11000``, ``ORA-00942``, ``TS2304``), a capitalised ``_`` constant that names an error
  (``ERR_CONN_REFUSED``, ``E_FAIL``) or an errno (``ECONNREFUSED``), an exception class
  (``KeyError``, ``NullPointerException``), and a number after ``HTTP``, ``status``,
  ``error code``, ``errno``, ``exit code``, ``错误码``, ``状态码`` … (``HTTP 502`` → ``502``);
- an **identifier** by its shape: a digit, one of ``_ . / : -`` inside it, or a capital after its
  first letter (``max_results``, ``userId``, ``os.path.join``, ``utils/retry.py``, ``v1.2.3``,
  ``LanceDB``, ``API``);
- a **name**, a plain Latin word the user wrote as a technical noun: any Latin word in a message
  that also holds Han text (``用 ruff 检查 Python`` → ``ruff``, ``python``), a capitalised word
  that does not open a sentence (``How do we lint Python code?`` → ``python``), and a word in
  backticks or quotes; English function words (scikit-learn's ``ENGLISH_STOP_WORDS``) never.

A document must hold at least one of those terms to be a keyword hit. The query's Han bigrams
(analyzer ``bigram``, free of the function characters ``HAN_FUNCTION``; weighted
``TERM_WEIGHTS["bigram"]``) or its jieba words (analyzer ``jieba``, those not made of function
characters only; ``TERM_WEIGHTS["word"]``) then add to the score of those hits, but never make
a hit alone: a note sharing
``保存``/``资料``/``报错`` with the message is not "technical" for it, and the vector path covers
wording. So a purely Chinese message without such a term has no keyword path (and with no
vectors, no answer — Lingxi's silence). Chinese technical nouns cannot be told from other Chinese
words without a dictionary; that is the rule's known gap. The seed leaves the extraction to the
agent ("由 Agent 自然语言理解后执行"); these rules are our choice.
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import tantivy

from retrieval.dataset import scrub_text
from retrieval.keyword_names import DEFAULT_ANALYZER, MATCH_MODES  # noqa: F401 (named here too)
from retrieval.limits import MAX_DEPTH, check_size

WORDS_PATTERN = r"\p{Han}|[A-Za-z0-9]+"
IDENTS_PATTERN = r"[A-Za-z0-9_]+(?:[./:\-][A-Za-z0-9_]+)*"
HAN_RUN_PATTERN = r"\p{Han}+"
MAX_QUERY_TERMS = 256
HAN_FUNCTION = frozenset("的了是在我你他她它们这那么吗呢吧啊呀和与或及也都就还很个一不没怎什哪谁何")
_TECHNICAL = re.compile(r"\d|[_./:\-]|.[A-Z]")


@dataclass(frozen=True)
class Analyzer:
    """How text becomes terms: ``name`` is what a user picks, ``version`` what the manifest and
    the pool key record (a change of either builds a separate index and pool)."""

    name: str
    version: str
    bigrams: bool
    summary: str
    segments: bool = False


ANALYZERS: dict[str, Analyzer] = {a.name: a for a in (
    Analyzer("unigram", "bilingual-v1", False, "Han characters one by one + Latin words + whole identifiers"),
    Analyzer("bigram", "bilingual-bigram-v1", True,
             "as unigram, plus every pair of adjacent Han characters (Chinese word order counts)"),
    Analyzer("jieba", "bilingual-jieba0.42.1-v1", False,
             "as unigram, plus the Chinese words jieba's dictionary segments each Han run into", segments=True),
)}
ANALYZER_VERSION = ANALYZERS[DEFAULT_ANALYZER].version
"""The default analyzer's version (a pool or index records its own: ``Candidates.analyzer``)."""


def get_analyzer(name: str) -> Analyzer:
    """The analyzer called ``name``; ``ValueError`` listing the known ones otherwise."""
    if not isinstance(name, str) or name not in ANALYZERS:
        raise ValueError(f"unknown analyzer {name!r}; choose from {sorted(ANALYZERS)}")
    return ANALYZERS[name]


def analyzer_of_version(version: str) -> Analyzer | None:
    """The analyzer a manifest's ``analyzer`` entry names, None when it is unknown (stale)."""
    return next((a for a in ANALYZERS.values() if a.version == version), None)


def _analyzer(pattern: str, max_bytes: int | None = 64) -> tantivy.TextAnalyzer:
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(pattern)).filter(tantivy.Filter.lowercase())
    if max_bytes is not None:
        builder = builder.filter(tantivy.Filter.remove_long(max_bytes))
    return builder.build()


WORDS = _analyzer(WORDS_PATTERN)
IDENTS = _analyzer(IDENTS_PATTERN)
HAN_RUNS = _analyzer(HAN_RUN_PATTERN, max_bytes=None)  # a run of any length; only split into pairs
BIGRAM_TOKENS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()


def han_bigrams(text: str) -> list[str]:
    """Adjacent Han character pairs within each run of Han text, in order (repeats kept)."""
    return [run[i:i + 2] for run in HAN_RUNS.analyze(text) for i in range(len(run) - 1)]


@functools.cache
def _jieba():
    """jieba's tokenizer with its bundled dictionary, built once per process (seconds). jieba
    logs the build to stderr at DEBUG: its logger is set to WARNING first."""
    import jieba  # on first use: only the jieba analyzer needs it

    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.FREQ, tokenizer.total = tokenizer.gen_pfdict(tokenizer.get_dict_file())
    tokenizer.initialized = True  # built here, bypassing jieba's cache file in the temp folder
    return tokenizer


def han_words(text: str) -> list[str]:
    """jieba's words of two or more characters within each run of Han text, in order (repeats
    kept); the same for a document and a query."""
    runs = HAN_RUNS.analyze(text)
    if not runs:
        return []
    cut = _jieba().lcut
    return [w for run in runs for w in cut(run) if len(w) > 1]


def _schema(analyzer: Analyzer) -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("words", tokenizer_name="rwb_words", index_option="freq")
    builder.add_text_field("idents", tokenizer_name="rwb_idents", index_option="freq")
    if analyzer.bigrams:
        builder.add_text_field("bigrams", tokenizer_name="rwb_bigrams", index_option="freq")
    if analyzer.segments:
        builder.add_text_field("segments", tokenizer_name="rwb_bigrams", index_option="freq")
    for name in ("scope", "project", "grp"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    return builder.build()


def _register(index: tantivy.Index) -> None:
    index.register_tokenizer("rwb_words", WORDS)
    index.register_tokenizer("rwb_idents", IDENTS)
    index.register_tokenizer("rwb_bigrams", BIGRAM_TOKENS)


def _has_field(schema: tantivy.Schema, name: str) -> bool:
    try:
        tantivy.Query.term_query(schema, name, "x")
    except ValueError:
        return False
    return True


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


def query_terms(text: str, analyzer: str = DEFAULT_ANALYZER) -> list[tuple[str, str]]:
    """(field, term) pairs for a user string, deduplicated, capped at MAX_QUERY_TERMS:
    words first (the terms ``all`` requires), then identifiers, then Han bigrams or jieba words."""
    text = scrub_text(text)
    spec = get_analyzer(analyzer)
    terms = [("words", t) for t in WORDS.analyze(text)]
    terms += [("idents", t) for t in IDENTS.analyze(text) if not t.isalnum() or len(t) > 1]
    if spec.bigrams:
        terms += [("bigrams", t) for t in han_bigrams(text)]
    if spec.segments:
        terms += [("segments", t) for t in han_words(text)]
    return list(dict.fromkeys(terms))[:MAX_QUERY_TERMS]


TERM_WEIGHTS = {"error-code": 4.0, "identifier": 1.0, "name": 1.0, "bigram": 0.5, "word": 0.5}
"""Tantivy boost of each kind of technical term in the ``technical`` query: an error code
outweighs everything else a message holds (seed 004: the strongest signal); bigrams only re-rank."""

_ERROR_CODE = re.compile(
    r"[A-Z]{1,6}[-_]?\d{2,}"                               # E11000, ORA-00942, TS2304, HTTP502
    r"|E[A-Z]{3,}"                                         # errno: ENOENT, ECONNREFUSED
    r"|[A-Z][A-Za-z0-9]*(?:Error|Exception|Fault)")        # KeyError, NullPointerException
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # an _ constant: an error code if it names one
_ERROR_WORDS = frozenset({"E", "ERR", "ERROR", "ERRNO", "FAIL", "FAILED", "FAILURE", "EXCEPTION",
                          "REFUSED", "DENIED", "TIMEOUT", "TIMEDOUT", "INVALID", "UNAVAILABLE"})
_CODE_AFTER = re.compile(r"(?i)(?:\bHTTP(?:/[\d.]+)?|\bstatus(?:\s+code)?|\berror\s+code|\berrno|"
                         r"\bexit\s+code|\breturn\s+code|错误码|状态码|返回码|退出码|错误代码)"
                         r"\s*[:=：]?\s*(-?\d{1,6})(?![\d.])")
_QUOTED = re.compile(r"`([^`]+)`|\"([^\"]+)\"|“([^”]+)”|'([^'\s][^']*)'")
_SENTENCE_END = re.compile(r"(?:^|[.!?。！？\n])[\s\"'“‘(（\[]*$")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


@functools.cache
def _function_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS  # imported on first use: ~1 s

    return frozenset(ENGLISH_STOP_WORDS)


def _is_error_code(token: str) -> bool:
    if _ERROR_CODE.fullmatch(token):
        return True
    return bool(_CONSTANT.fullmatch(token)) and not _ERROR_WORDS.isdisjoint(token.split("_"))


def technical_terms(text: str, analyzer: str = DEFAULT_ANALYZER) -> list[tuple[str, str, str]]:
    """The ``(kind, field, term)`` triples mode ``technical`` searches for, kinds as in
    ``TERM_WEIGHTS``: error codes, identifiers and names (whole, in ``idents``), then Han bigrams
    (analyzer ``bigram``) or jieba words (analyzer ``jieba``); each term once, with the strongest
    kind it was found as; capped at MAX_QUERY_TERMS (see the module docstring for the rules)."""
    text = scrub_text(text)
    kinds: dict[str, str] = {}

    def add(term: str, kind: str) -> None:
        term = term.lower()
        if len(term.encode()) > 64:
            return
        if term not in kinds or TERM_WEIGHTS[kind] > TERM_WEIGHTS[kinds[term]]:
            kinds[term] = kind

    for match in _CODE_AFTER.finditer(text):
        add(match.group(1).lstrip("-"), "error-code")
    quoted = {m.start(): m.end() for m in _QUOTED.finditer(text)}
    mixed = bool(_HAN.search(text))
    function_words = None
    for match in re.finditer(IDENTS_PATTERN, text):
        token = match.group()
        if _is_error_code(token):
            add(token, "error-code")
        elif _TECHNICAL.search(token):
            add(token, "identifier")
        elif len(token) > 1 and token.isalpha():
            inside_quotes = any(a < match.start() and match.end() < b for a, b in quoted.items())
            proper = token[0].isupper() and not _SENTENCE_END.search(text[:match.start()])
            if mixed or proper or inside_quotes:
                function_words = function_words or _function_words()
                if token.lower() not in function_words:
                    add(token, "name")
    terms = [(kind, "idents", term) for term, kind in kinds.items()]
    spec = get_analyzer(analyzer)
    if terms and spec.bigrams:
        terms += [("bigram", "bigrams", t) for t in dict.fromkeys(han_bigrams(text))
                  if not HAN_FUNCTION.intersection(t)]
    if terms and spec.segments:
        terms += [("word", "segments", t) for t in dict.fromkeys(han_words(text)) if not HAN_FUNCTION.issuperset(t)]
    return terms[:MAX_QUERY_TERMS]


class BM25Index:
    def __init__(self, index: tantivy.Index, analyzer: str = DEFAULT_ANALYZER):
        self._index = index
        self._schema = index.schema
        self._searcher = index.searcher()
        self.analyzer = get_analyzer(analyzer).name

    @classmethod
    def build(cls, path: Path, docs: Iterable[IndexedDoc], analyzer: str = DEFAULT_ANALYZER) -> "BM25Index":
        spec = get_analyzer(analyzer)
        path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(_schema(spec), path=str(path))
        _register(index)
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for doc in docs:
            text = doc.text
            fields = dict(id=doc.id, words=text, idents=text, scope=doc.scope, project=doc.project, grp=doc.group)
            if spec.bigrams:
                fields["bigrams"] = " ".join(han_bigrams(scrub_text(text)))
            if spec.segments:
                fields["segments"] = " ".join(han_words(scrub_text(text)))
            writer.add_document(tantivy.Document(**fields))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        return cls(index, spec.name)

    @classmethod
    def open(cls, path: Path, analyzer: str = DEFAULT_ANALYZER) -> "BM25Index":
        """Open an index built with ``analyzer``; ``ValueError`` when it was built with another."""
        spec = get_analyzer(analyzer)
        index = tantivy.Index.open(str(path))
        if _has_field(index.schema, "bigrams") != spec.bigrams or _has_field(index.schema, "segments") != spec.segments:
            raise ValueError(f"the BM25 index at {path} was not built with the {spec.name!r} analyzer")
        _register(index)
        index.reload()
        return cls(index, spec.name)

    @property
    def num_docs(self) -> int:
        return self._searcher.num_docs

    def _query(self, text: str, filters: Filters, match: str) -> tantivy.Query | None:
        if match not in MATCH_MODES:
            raise ValueError(f"match must be one of {list(MATCH_MODES)}, got {match!r}")
        if match == "technical":
            clause = self._technical_clause(text)
        else:
            terms = query_terms(text, self.analyzer)
            required = tantivy.Occur.Must if match == "all" else tantivy.Occur.Should
            clause = tantivy.Query.boolean_query(
                [(required if f == "words" else tantivy.Occur.Should, tantivy.Query.term_query(self._schema, f, t))
                 for f, t in terms]) if terms else None
        if clause is None:
            return None
        clauses = [(tantivy.Occur.Must, clause)]
        for field, value in (("scope", filters.scope), ("project", filters.project), ("grp", filters.group)):
            if value:
                clauses.append((tantivy.Occur.Must, tantivy.Query.term_query(self._schema, field, scrub_text(value))))
        return tantivy.Query.boolean_query(clauses)

    def _technical_clause(self, text: str) -> tantivy.Query | None:
        """Some error code, identifier or name is required (each boosted by its kind's weight);
        the bigrams or jieba words only add to a hit's score."""
        def term(kind: str, field: str, value: str) -> tantivy.Query:
            return tantivy.Query.boost_query(tantivy.Query.term_query(self._schema, field, value), TERM_WEIGHTS[kind])

        terms = technical_terms(text, self.analyzer)
        required = [(tantivy.Occur.Should, term(*t)) for t in terms if t[0] not in ("bigram", "word")]
        if not required:
            return None
        extra = [(tantivy.Occur.Should, term(*t)) for t in terms if t[0] in ("bigram", "word")]
        return tantivy.Query.boolean_query([(tantivy.Occur.Must, tantivy.Query.boolean_query(required)), *extra])

    def search(self, text: str, depth: int, filters: Filters = Filters(),
               match: str = "any") -> list[tuple[str, float]]:
        """Top ``depth`` (doc id, BM25 score), best first; empty when nothing matches.

        ``match`` is ``any`` (a document holding some query term), ``all`` (every query
        word) or ``technical`` (some technical term of the query). ``depth`` must lie in
        ``[0, MAX_DEPTH]`` (Tantivy allocates for ``depth`` hits up front)."""
        depth = check_size("depth", depth, 0, MAX_DEPTH)
        query = self._query(text, filters, match)
        if query is None or depth == 0:
            return []
        searcher = self._searcher
        hits = searcher.search(query, depth).hits
        return [(searcher.doc(address)["id"][0], float(score)) for score, address in hits]
