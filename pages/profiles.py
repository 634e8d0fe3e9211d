"""Profiles: the presets and seed pipelines as data; edit, diff against the origin, save, rename, delete."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from eval.stores import configs as cfg
from pages import _state as sh
from pages import _tune_state as tn
from pages import _tables as tb
from pages._markup import code, md
from retrieval.pipeline import PIPELINES, to_toml
from retrieval.profiles import PRESETS

sh.init_shared_state()
st.title("Profiles")
st.caption("Seed 001's intent profiles and the seed pipelines are frozen presets; edit one here and save it "
           "under a new name — saved profiles appear in every pipeline picker.")

st.session_state.setdefault("profiles_pick", "profile:debug")
st.session_state.setdefault("profiles_flash", "")
st.session_state.setdefault("profiles_overwrite", "")

overview, editor = st.tabs([":material/table: Presets", ":material/edit: Edit & diff"])

with overview:
    rows = []
    for p in PRESETS:
        q = p.quality
        rows.append({"profile": p.name, "dense": p.w_dense, "sparse": p.w_sparse, "time": p.w_time,
                     "graph": p.w_graph, "conf ≥": q.conf_high, "conf <": q.conf_low,
                     "× conf hi/mid/lo": f"{q.conf_high_factor:g} / {q.conf_mid_factor:g} / {q.conf_low_factor:g}",
                     "vit >": q.vit_high, "vit <": q.vit_low,
                     "× vit hi/mid/lo": f"{q.vit_high_factor:g} / {q.vit_mid_factor:g} / {q.vit_low_factor:g}"})
    st.markdown("**Intent profiles** · `S = (w_dense·S_dense + w_sparse·S_sparse + w_time·S_time + "
                "w_graph·S_graph) × F_conf × F_vit`")
    weight = st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.2f", width="small")
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="profiles_presets",
                 column_config={"dense": weight, "sparse": weight, "time": weight, "graph": weight})
    st.markdown("**Seed pipelines**")
    # a static table: the descriptions wrap instead of being cut or scrolled at 1400 px
    st.table(pd.DataFrame([{k: "" if v is None else f"{v:g}" if isinstance(v, float) else str(v)
                            for k, v in {
        "pipeline": p.name, "fusion": p.fusion, "max results": p.max_results,
        "multiplier": p.candidate_multiplier, "depth": p.depth, "min score": p.min_score,
        "token budget": p.token_budget, "fast/timeline": ("fast " if p.fast_path else "") +
        ("timeline" if p.timeline_path else "") or "—", "description": p.description,
    }.items()} for p in PIPELINES.values()]).set_index("pipeline"))
    saved = [label[6:] for label in cfg.config_labels() if label.startswith("saved:")]
    st.caption(f"{len(saved)} saved profile(s) under {code(sh.home_dir() / 'profiles')}"
               + (": " + ", ".join(md(n) for n in saved) if saved else "."))


def on_save(label: str, overwrite: bool = False) -> None:
    name = st.session_state.get("profiles_name", "").strip()
    if cfg.profile_exists(name) and not overwrite:
        st.session_state["profiles_overwrite"] = name      # ask first
        return
    try:
        config = sh.parse_toml(st.session_state[f"profiles_toml_{label}"])
        cfg.save_profile(name, config, label)
    except ValueError as error:
        st.session_state["profiles_flash"] = f":red[{md(error)}]"
        return
    st.session_state["profiles_overwrite"] = ""
    st.session_state.pop(f"profiles_toml_saved:{name}", None)
    st.session_state["profiles_flash"] = f"Saved profile **{md(name)}**."
    st.session_state["profiles_pick"] = f"saved:{name}"


def on_open_in_tune(label: str) -> None:
    try:
        config = sh.parse_toml(st.session_state[f"profiles_toml_{label}"])
    except ValueError as error:
        st.session_state["profiles_flash"] = f":red[{md(error)}]"
        return
    tn.set_config(config, label)
    st.session_state["profiles_flash"] = "Opened in Tune."


def on_revert(label: str) -> None:
    st.session_state[f"profiles_toml_{label}"] = to_toml(cfg.resolve_config(label))


def on_delete(label: str) -> None:
    name = label.split(":", 1)[1]
    try:
        cfg.delete_profile(name)
    except ValueError as error:
        st.session_state["profiles_flash"] = f":red[{md(error)}]"
        return
    st.session_state.pop(f"profiles_toml_{label}", None)
    st.session_state["profiles_pick"] = "profile:debug"
    st.session_state["profiles_flash"] = f"Deleted profile **{md(name)}**."


def on_rename(label: str) -> None:
    old, new = label.split(":", 1)[1], st.session_state.get("profiles_rename_to", "").strip()
    try:
        cfg.rename_profile(old, new)
    except ValueError as error:
        st.session_state["profiles_flash"] = f":red[{md(error)}]"
        return
    st.session_state.pop(f"profiles_toml_{label}", None)
    st.session_state["profiles_pick"] = f"saved:{new}"
    st.session_state["profiles_flash"] = f"Renamed **{md(old)}** to **{md(new)}**."


with editor:
    labels = cfg.config_labels()
    if st.session_state["profiles_pick"] not in labels:
        st.session_state["profiles_pick"] = labels[0]
    top = st.columns([2, 1.2], vertical_alignment="bottom")
    label = top[0].selectbox("Profile or pipeline", labels, key="profiles_pick", format_func=sh.format_label)
    upload = top[1].file_uploader("Load a TOML file", type=["toml"], key="profiles_upload")
    original = sh.config_or_stop(label)
    key = f"profiles_toml_{label}"
    if upload is not None and st.session_state.get("profiles_upload_seen") != upload.file_id:
        st.session_state["profiles_upload_seen"] = upload.file_id
        st.session_state[key] = upload.getvalue().decode("utf-8", errors="replace")
    st.session_state.setdefault(key, to_toml(original))

    left, right = st.columns([1.1, 1], gap="large")
    with left:
        st.text_area("TOML", key=key, height=420, help="Any field of the pipeline config; unknown keys are refused.")
        try:
            edited = sh.parse_toml(st.session_state[key])
            error = None
        except ValueError as exc:
            edited, error = None, str(exc)
        if error:
            st.error(md(error), icon=":material/error:")
        if edited is not None:
            with st.expander(f"Parameters this profile uses ({edited.fusion})", expanded=False):
                st.dataframe(tb.params_frame(edited), hide_index=True, key="profiles_params")
    with right:
        default = cfg.default_for(edited or original)
        origin = cfg.origin_of(edited or original)
        st.markdown(f"**Diff against {'its origin' if origin else 'defaults'}** · {code(default.name)}")
        if edited is not None:
            diff = tb.diff_configs(default, edited)
            if diff.empty:
                st.success("Identical to the defaults.", icon=":material/check:")
            else:
                st.dataframe(diff, hide_index=True, key="profiles_diff",
                             column_config={"parameter": st.column_config.TextColumn(width="medium")})
            with st.expander("Unified TOML diff"):
                st.code(tb.toml_diff(default, edited) or "(no differences)", language="diff")
        st.text_input("Save as", key="profiles_name", placeholder="profile name, e.g. debug-strict")
        pending = st.session_state["profiles_overwrite"]
        if pending and pending == st.session_state.get("profiles_name", "").strip():
            st.warning(f"A profile named **{md(pending)}** exists already.")
            st.button(f"Overwrite {pending}", type="primary", on_click=on_save, args=(label, True),
                      key="profiles_overwrite_yes")
        b = st.columns(2)
        b[0].button("Save", type="primary", icon=":material/save:", on_click=on_save, args=(label,),
                    disabled=edited is None, width="stretch", key="profiles_save")
        b[1].button("Open in Tune", icon=":material/tune:", on_click=on_open_in_tune, args=(label,),
                    disabled=edited is None, width="stretch")
        b[0].download_button("Download TOML", st.session_state[key], file_name=f"{(edited or original).name}.toml",
                             mime="application/toml", icon=":material/download:", width="stretch")
        b[1].button("Revert edits", icon=":material/undo:", on_click=on_revert, args=(label,),
                    width="stretch")
        if label.startswith("saved:"):
            with st.container(border=True):
                st.markdown(f"**Saved profile** {code(label[6:])}")
                r = st.columns([2, 1, 1], vertical_alignment="bottom")
                r[0].text_input("Rename to", key="profiles_rename_to")
                r[1].button("Rename", on_click=on_rename, args=(label,), key="profiles_rename",
                            width="stretch")
                confirm = r[2].checkbox("Confirm delete", key="profiles_delete_confirm")
                st.button("Delete", on_click=on_delete, args=(label,), disabled=not confirm, key="profiles_delete",
                          icon=":material/delete:")

if st.session_state["profiles_flash"]:
    st.toast(st.session_state["profiles_flash"])
    st.session_state["profiles_flash"] = ""
