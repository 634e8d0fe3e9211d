"""The Data page's agreement panel: two raters' grades compared (``eval.statistics.agreement``) —
named raters, the dataset's qrels, the judgments in effect and the click-derived ones."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from eval.experiments.live import evaluate_config
from eval.metrics.measure import judge
from eval.statistics.agreement import GRADES, agreement, with_impact
from eval.stores.judgments import rater_tables
from eval.stores.pool import pool_path
from pages._markup import md
from pages._state import PRIMARY
from retrieval.candidates import DEFAULT_POOL_DEPTH


def _fmt(value: float) -> str:
    return "undefined" if math.isnan(value) else f"{value:.3f}"


def agreement_panel(ws) -> None:
    if not st.toggle("Compare two raters", key="data_agree_on",
                     help="agreement on the pairs both graded; the per-query impact re-scores the baseline"):
        return
    try:
        tables = rater_tables(ws.dataset)
    except (OSError, ValueError) as error:
        st.error(f"Cannot read the judgments: {md(error)}")
        return
    names = list(tables)
    c = st.columns(2)
    first = c[0].selectbox("Rater A", names, index=names.index("explicit"), key="data_agree_a")
    second = c[1].selectbox("Rater B", names, key="data_agree_b",
                            index=names.index("implicit") if "implicit" in names else names.index("dataset"))
    found = agreement(first, tables[first], second, tables[second])
    try:
        if not pool_path(ws.dataset, ws.embedder, DEFAULT_POOL_DEPTH, ws.analyzer).is_file():
            raise ValueError("the candidate pool is not built yet (open Tune or Evaluate once)")
        pool, config = ws.pool(), ws.baseline
        def values_of(qrels: dict) -> dict[str, float]:
            ev = evaluate_config(pool, judge(pool, qrels), config, (PRIMARY,))
            return dict(zip(pool.query_ids, (float(v) for v in ev.values[PRIMARY])))
        found = with_impact(found, values_of, tables["explicit"], tables[first], tables[second], PRIMARY)
    except (OSError, ValueError, RuntimeError) as error:
        st.caption(f"No per-query impact: {md(error)}")
    st.markdown(f"{found.pairs} pairs graded by both · Krippendorff's α (ordinal) **{_fmt(found.alpha)}** · "
                f"Cohen's κ (quadratic) **{_fmt(found.kappa)}**")
    st.dataframe(pd.DataFrame(found.confusion, index=[f"{md(first)} {g}" for g in GRADES],
                              columns=[f"{md(second)} {g}" for g in GRADES]), key="data_agree_confusion")
    if found.impact:
        st.caption(f"{PRIMARY} of the baseline per query when {md(second)}'s grades replace {md(first)}'s "
                   "(the queries they disagree on):")
        st.dataframe(pd.DataFrame(sorted(found.impact.items(), key=lambda kv: -abs(kv[1])),
                                  columns=["query", "Δ"]), hide_index=True, key="data_agree_impact")
