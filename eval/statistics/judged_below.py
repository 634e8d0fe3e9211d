"""Judgment bias per pipeline against a baseline: each pipeline's judged@k, nDCG'@k and bpref
(``eval.metrics.judgment_bias``) beside the baseline's, and whether its judged@k is **clearly
below** the baseline's — a lower mean and Fisher's paired randomization test, Holm-corrected
across the pipelines compared (``eval.statistics.significance``), at p < ``alpha`` — so a
surface can say that part of a pipeline's top k was never judged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval.metrics.judgment_bias import BIAS_METRICS, label, per_query_bias
from eval.metrics.measure import judge
from eval.statistics.significance import holm, randomization_test
from retrieval.candidate_table import Candidates
from retrieval.ranking import Ranking


@dataclass(frozen=True)
class BiasRow:
    """One pipeline's judgment-bias figures at ``k`` and its judged@k against the baseline's."""

    pipeline: str
    k: int
    judged: float
    ndcg_cond: float
    bpref: float
    delta_judged: float  # judged@k − the baseline's
    p_judged: (
        float  # Fisher's randomization test on judged@k, Holm over the pipelines (NaN: baseline)
    )
    clearly_below: bool  # lower mean judged@k than the baseline and p_judged < alpha

    def to_json(self) -> dict:
        return {
            "pipeline": self.pipeline,
            label("judged", self.k): self.judged,
            label("ndcg_cond", self.k): self.ndcg_cond,
            "bpref": self.bpref,
            "delta_judged": self.delta_judged,
            "p_judged": None if np.isnan(self.p_judged) else self.p_judged,
            "clearly_below_baseline": self.clearly_below,
        }


def bias_table(
    c: Candidates,
    qrels: dict[str, dict[str, int]],
    rankings: dict[str, Ranking],
    baseline: str,
    k: int = 5,
    alpha: float = 0.05,
    permutations: int = 10_000,
    seed: int = 42,
) -> list[BiasRow]:
    """``judged@k``, ``nDCG'@k`` and ``bpref`` of each ranking (the baseline first). A pipeline's
    judged@k is **clearly below** the baseline's when its mean is lower and Fisher's paired
    randomization test over the counted queries (``eval.statistics.significance``), Holm-corrected
    across the pipelines compared with the baseline, gives p < ``alpha``."""
    judged = judge(c, qrels)
    n_missing = judged.n_missing
    per = {name: per_query_bias(c, qrels, ranking, k) for name, ranking in rankings.items()}

    def counted(values: np.ndarray) -> np.ndarray:
        return np.concatenate([values[judged.judged], np.zeros(n_missing)])

    base = counted(per[baseline]["judged"])
    others = [name for name in rankings if name != baseline]
    raw = [
        randomization_test(base, counted(per[name]["judged"]), permutations, seed)
        for name in others
    ]
    corrected = dict(zip(others, holm(raw))) if others else {}
    rows = []
    for name in [baseline, *others]:
        means = {
            m: float(counted(per[name][m]).mean()) if judged.n_judged else 0.0 for m in BIAS_METRICS
        }
        delta = means["judged"] - float(base.mean()) if judged.n_judged else 0.0
        p = corrected.get(name, float("nan"))
        rows.append(
            BiasRow(
                name,
                int(k),
                means["judged"],
                means["ndcg_cond"],
                means["bpref"],
                delta,
                p,
                bool(name != baseline and delta < 0 and p < alpha),
            )
        )
    return rows


def bias_lines(
    rows: list[BiasRow], alpha: float = 0.05
) -> tuple[list[str], list[list[str]], list[str]]:
    """The table (header, rows) and the notes a surface prints for ``bias_table``'s rows."""
    if not rows:
        return [], [], []
    k = rows[0].k
    header = [
        "pipeline",
        label("judged", k),
        f"Δ{label('judged', k)}",
        "p (Holm)",
        label("ndcg_cond", k),
        "bpref",
    ]
    body = [
        [
            r.pipeline,
            f"{r.judged:.3f}",
            "—" if i == 0 else f"{r.delta_judged:+.3f}",
            "—" if np.isnan(r.p_judged) else f"{r.p_judged:.4f}",
            f"{r.ndcg_cond:.4f}",
            f"{r.bpref:.4f}",
        ]
        for i, r in enumerate(rows)
    ]
    base = rows[0].pipeline
    notes = [
        f"{r.pipeline}: judged@{k} {r.judged:.3f} is clearly below {base}'s {rows[0].judged:.3f} "
        f"(Fisher p {r.p_judged:.4f} < {alpha:g}, Holm-corrected): part of its top {k} was "
        f"never judged, so its metrics count those documents as non-relevant; compare "
        f"nDCG'@{k} and bpref, or judge them "
        f"(rwb holes)"
        for r in rows
        if r.clearly_below
    ]
    return header, body, notes
