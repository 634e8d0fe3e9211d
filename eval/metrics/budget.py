"""Budget-aware metric: the share of a query's relevant memories delivered within a token budget.

An agent pastes results into its context in rank order until the next one would exceed the
budget (seed 000's budget loop; ``retrieval.ranking.rank_rows`` stops the same way). For a
query with relevant set R (grade > 0) and budget B:

    budget_recall@B = |{r ∈ R : r is delivered, i.e. the tokens of the results up to and
                              including r sum to ≤ B}| / |R|

A counted query with no results scores 0; queries without a relevant judgment do not count
(as in ``eval.metrics.ranx_io``). ``budget_recall`` is capped by the budget itself: when R's memories
together exceed B not even a perfect ranking reaches 1, so ``budget_ceiling`` also reports
the best reachable value, the most relevant memories that fit (smallest first) / |R|.
Token counts are ``retrieval.candidates.token_count`` (one per CJK character, word or
punctuation mark).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from eval.metrics.measure import judge
from retrieval.candidates import Candidates, token_count
from retrieval.ranking import Ranking

DEFAULT_BUDGET = 1500


@dataclass(frozen=True)
class BudgetScore:
    token_budget: int
    mean: float                  # mean budget_recall over counted queries
    ceiling: float               # mean of the best reachable value
    mean_tokens: float           # mean tokens delivered per counted query
    per_query: dict[str, float]


def document_tokens(documents) -> dict[str, int]:
    """Token count of every document, as the candidate table counts them."""
    return {d.id: token_count(d.text) for d in documents}


def budget_recall(c: Candidates, qrels: dict[str, dict[str, int]], ranking: Ranking,
                  token_budget: int = DEFAULT_BUDGET, doc_tokens: Mapping[str, int] | None = None) -> BudgetScore:
    """``budget_recall@token_budget`` of a ranking; see the module docstring.

    ``doc_tokens`` (``document_tokens(dataset.documents)``) sizes relevant memories for the
    ceiling; without it, sizes come from the pool, and a relevant memory no query retrieved
    is left out of the ceiling's numerator (it cannot be placed)."""
    if not isinstance(token_budget, int) or token_budget < 1:
        raise ValueError(f"token budget must be an integer ≥ 1, got {token_budget!r}")
    judged = judge(c, qrels)
    n_q = c.n_queries
    tokens = c.token_count[ranking.rows].astype(np.int64)
    qidx = ranking.query_idx
    running = np.cumsum(tokens)
    first = np.searchsorted(qidx, qidx, side="left")
    before = np.where(first > 0, running[first - 1], 0)
    within = running - before <= token_budget   # token counts are ≥ 0: once over, over for good
    relevant = judged.grade[ranking.rows] > 0
    delivered = np.bincount(qidx[within & relevant], minlength=n_q).astype(np.float64)
    spent = np.bincount(qidx[within], weights=tokens[within], minlength=n_q)
    n_rel = judged.n_relevant.astype(np.float64)
    value = np.divide(delivered, n_rel, out=np.zeros(n_q), where=n_rel > 0)
    ceiling = np.zeros(n_q)
    sizes = _relevant_sizes(c, qrels, doc_tokens)
    for qi in np.flatnonzero(judged.judged):
        fits = np.cumsum(np.sort(sizes[qi])) <= token_budget
        ceiling[qi] = fits.sum() / n_rel[qi]
    mask = judged.judged
    n = judged.n_judged  # counted queries the pool lacks add 0 (see eval.metrics.measure)
    return BudgetScore(
        token_budget=token_budget,
        mean=float(value[mask].sum() / n) if n else 0.0,
        ceiling=float(ceiling[mask].sum() / n) if n else 0.0,
        mean_tokens=float(spent[mask].sum() / n) if n else 0.0,
        per_query={q: float(v) for q, v, m in zip(c.query_ids, value, mask) if m},
    )


def _relevant_sizes(c: Candidates, qrels: dict[str, dict[str, int]],
                    doc_tokens: Mapping[str, int] | None) -> list[np.ndarray]:
    """Token counts of each query's relevant documents."""
    size_of: dict[str, int] = dict(doc_tokens or {})
    if doc_tokens is None:
        for doc, size in zip(c.doc_idx.tolist(), c.token_count.tolist()):
            size_of.setdefault(c.doc_ids[doc], int(size))
    out = []
    for q in c.query_ids:
        rel = [d for d, g in qrels.get(q, {}).items() if g > 0]
        out.append(np.array([size_of[d] for d in rel if d in size_of], dtype=np.int64))
    return out
