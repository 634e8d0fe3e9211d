"""The BM25 path's names that code without Tantivy needs: the keyword match modes and the
default analyzer (``retrieval.bm25`` owns what they mean; the candidate table only names them)."""

MATCH_MODES = ("any", "all", "technical")
DEFAULT_ANALYZER = "bigram"
"""Chosen by measurement (BENCHMARKS.md, "Chinese BM25: unigrams vs unigrams + character
bigrams"): bigrams gain on Chinese QA (CMRC2018) far more than they lose on mixed devmem, where
Chinese questions about English memories match unrelated Chinese notes through common bigrams
(我们/怎么/哪些); sets without Han text score the same under both."""
