"""Tune's judging queue: the unjudged (query, document) pairs in the current configuration's or
the baseline's top k, largest swing first (``eval.experiments.views.queue``, ``rwb holes``), each
with one-click grading through Tune's own handler (the one judgment store)."""

from __future__ import annotations

from typing import Callable

import streamlit as st

from eval.experiments import views
from pages import _state as s
from pages._markup import code, md

K = 5
SHOWN = 10


def panel(ws: s.Workspace, pool, qrels: dict, ev, base_ev, run_name: str,
          on_grade: Callable[[str, str, str], None]) -> None:
    rows, total = views.queue(pool, qrels, ev, base_ev, ws.dataset.documents, K, SHOWN)
    with st.container(border=True, key="tune_queue_pane"):
        st.markdown(f"**Judging queue** · {total} unjudged pair(s) in the top {K} of "
                    f"{code(run_name)} or {code(ws.baseline.name)}, by how far one grade could "
                    f"swing their nDCG@{K} comparison"
                    + (f" (the first {SHOWN})" if total > SHOWN else ""))
        if not rows:
            st.caption("Nothing to judge: every result in both top lists carries a judgment.")
            return
        st.caption("Grades: " + " · ".join(s.GRADE_LABELS.values()))
        for row in rows:
            hole = row.hole
            key = f"tune_queue_{hole.query_id}_{hole.doc_id}"
            st.session_state[key] = None              # a graded pair (a 0 included) leaves the queue
            cols = st.columns([1.9, 2.9, 0.8, 2.4], vertical_alignment="center")   # four grades whole at 1400 px
            query = row.query_text[:90] + ("…" if len(row.query_text) > 90 else "")
            cols[0].markdown(f"{code(hole.query_id)} {md(query)}", help=md(row.query_text[:500]))
            text = row.doc_text[:110] + ("…" if len(row.doc_text) > 110 else "")
            cols[1].markdown(f"{code(hole.doc_id)} {md(text)}",
                             help=md(f"Query: {row.query_text[:500]}\n\n{row.doc_text[:1500]}"))
            cols[2].markdown(
                f"swing {hole.swing:.3f}",
                help=f"rank {hole.rank_a or '—'} here · {hole.rank_b or '—'} in the baseline. "
                     f"nDCG@{K} difference on this query if graded 0: {hole.delta_if_0:+.3f}; "
                     f"if graded top: {hole.delta_if_top:+.3f}; on the mean: up to "
                     f"{hole.swing_on_mean:.4f}.")
            cols[3].pills("grade", s.GRADES, key=key, on_change=on_grade,
                          args=(hole.query_id, hole.doc_id, key), label_visibility="collapsed")
