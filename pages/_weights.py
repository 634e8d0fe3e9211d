"""Tune's table of a linear learned model's weights: feature → weight, the top contributors
first, each weight editable as one knob move (``eval.experiments.views.learned_weights``)."""

from __future__ import annotations

import streamlit as st

from pages import _tune_state as tn


def on_weights(key: str, paths: list[str], pool_depth: int) -> None:
    """An edited weight in the learned model's table: each changed row is one knob move."""
    edited = (st.session_state.get(key) or {}).get("edited_rows", {})
    for row, change in sorted(edited.items()):
        if "weight" in change and change["weight"] is not None:
            tn.update(("knob", paths[int(row)], float(change["weight"])), pool_depth)
    st.session_state["tune_weights_n"] = st.session_state.get("tune_weights_n", 0) + 1   # a fresh table


def weights_table(rows: list[dict], pool_depth: int) -> None:
    """Feature → weight of the linear learned model, the top contributors first; a weight is
    editable (over the standardised feature, as the TOML holds it)."""
    key = f"tune_weights_{st.session_state.get('tune_weights_n', 0)}"
    st.caption(f"Learned linear model · {len(rows)} features, largest |weight| first · score = "
               "Σ weight × (feature − mean) / scale · features: `retrieval/fusion/learned/features.py`")
    st.data_editor(
        [{"feature": r["feature"], "weight": r["weight"]} for r in rows], key=key, hide_index=True,
        height=min(36 + 35 * len(rows), 320), width="stretch", disabled=["feature"],
        on_change=on_weights, args=(key, [r["path"] for r in rows], pool_depth),
        column_config={
            "feature": st.column_config.TextColumn(
                "feature", help="the candidate table's feature the weight multiplies "
                                "(retrieval.fusion.learned.features: dense_*, bm25_*, time, metadata, type:*, q_*)"),
            "weight": st.column_config.NumberColumn(
                "weight", format="%+.3f", step=0.01,
                help="weight of the standardised feature (x − mean) / scale; edit to move it")})
