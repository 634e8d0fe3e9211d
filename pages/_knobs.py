"""Tune's knob widgets and the Sweep page's axes, generated from the parameters' declarations
(``retrieval.params``, walked by ``retrieval.pipeline.knobs``).

No parameter is listed here: every widget, label, range, step and help text comes from the
fusion's own params class, and so do the group a knob is shown in (``Knob.group``) and the
warnings beside a pane's knobs (their owner's ``warnings()``). What this page module decides is
the layout: Tune's panes (``PANES``) and which groups share one (the weights with the fusion,
the limits under Limits), the fusion switch above them (``FUSION_KNOB``: its options and help
from the fusion registry), which routed profile's knobs are shown, and which knobs a sweep may
vary (sweepable numbers with a slider range).
"""

from __future__ import annotations


import streamlit as st

from pages import _tune_state as tn
from pages._markup import md
from pages._state import TUNE_KNOB_PREFIX, TUNE_KNOBS_DRAWN
from retrieval.fusion import FUSIONS
from retrieval.params import Knob, KnobRef, walk_owners
from retrieval.pipeline import FUSION_PATH, PipelineConfig, knobs, sweepable_params, warnings_of

_MISSING = object()
FUSION_KNOB = Knob("choice", "fusion method",
                   "  \n".join(f"**{name}**: {fusion.summary} ({fusion.source})" for name, fusion in FUSIONS.items()),
                   options=tuple(FUSIONS), sweepable=False)
"""The fusion switch: its options and help come from the registry (one line per method)."""


PANES = {"fusion": "Fusion", "confidence": "F_conf", "vitality": "F_vit", "ranking": "Limits"}
"""Tune's knob panes and their tab labels (seed 001 names the factors F_conf and F_vit; Limits: candidates,
max results, min score, token budget)."""


def pane_of(ref: KnobRef) -> str | None:
    """Which of Tune's knob panes shows ``ref`` (the fusion switch sits above them all): the
    group its owner declared (``retrieval.params.GROUPS``); weights sit with the fusion.

    One pane at a time: a knob move redraws that pane's knobs, not every knob (each slider
    costs time on every rerun, in Python and in the browser)."""
    if ref.path == FUSION_PATH:
        return None
    return _pane_of_group(ref.knob.group)


def _pane_of_group(group: str) -> str:
    return {"weights": "fusion", "limits": "ranking"}.get(group, group)


def pane_warnings(config: PipelineConfig, refs: list[KnobRef], pane: str) -> list[str]:
    """What the owners of the pane's knobs declare worth a word (``retrieval.pipeline.warnings_of``):
    a warning shows where its owner's knobs of its group are shown."""
    owners = {ref.path.rpartition(".")[0] for ref in refs if pane_of(ref) == pane}
    return [w.text for w in warnings_of(config) if w.path in owners and _pane_of_group(w.group) == pane]


def routed_profiles(config: PipelineConfig) -> list[str]:
    """Names of the profiles an intent router chooses from ([] when there is no router)."""
    params = config.params
    if getattr(params, "intent_router", False):
        return [p.name for p in params.profiles]
    return []


def tune_knobs(config: PipelineConfig, edit_profile: str | None = None) -> list[KnobRef]:
    """The fusion switch, then every knob of ``config`` (with a router: only the knobs of
    the profile being edited)."""
    refs = [KnobRef(FUSION_PATH, FUSION_KNOB, config.fusion)]
    routed = routed_profiles(config)
    prefix = f"{config.fusion}.profiles."
    for ref in knobs(config):
        if routed and ref.path.startswith(prefix) and not ref.path.startswith(f"{prefix}{edit_profile}."):
            continue
        refs.append(ref)
    return refs


def key_of(path: str) -> str:
    return TUNE_KNOB_PREFIX + path


def _on_change(path: str, pool_depth: int) -> None:
    tn.update(("knob", path, st.session_state[key_of(path)]), pool_depth)


def drawn() -> tuple[set, set]:
    """The knob paths the previous run drew (none after a full run's start: app.py), and the set
    this run fills."""
    before = st.session_state.get(TUNE_KNOBS_DRAWN) or set()
    now = st.session_state[TUNE_KNOBS_DRAWN] = set()
    return before, now


def render(ref: KnobRef, pool_depth: int, before: set, now: set, help_icon: bool = False) -> None:
    """One widget bound to ``ref.path``, showing ``ref.value`` (the state's).

    Its help goes in ``help_list`` under the pane, not in a "?" beside the widget (``help_icon``
    keeps that, for the one switch above the panes): a help icon is a Tab stop of its own, so the
    keyboard would cross two stops per knob.

    Its value is written from the state whenever the browser may show anything else: on a full
    run, when the widget was not drawn by the previous run (the browser builds it anew), and when
    it differs from the state; a knob move's fragment rerun writes none of the unchanged ones."""
    knob, value, key = ref.knob, ref.value, key_of(ref.path)
    try:
        shown = st.session_state[key]   # ``key in st.session_state`` copies the whole state: avoid it
    except KeyError:
        shown = _MISSING
    if ref.path not in before or shown != value or type(shown) is not type(value):
        st.session_state[key] = value
    now.add(ref.path)
    label = knob.label
    common = dict(key=key, on_change=_on_change, args=(ref.path, pool_depth),
                  help=(knob.help or None) if help_icon else None)
    if knob.kind == "bool":
        st.toggle(label, **common)
    elif knob.kind == "choice":
        st.selectbox(label, knob.options, **common)
    elif knob.optional or knob.lo is None or knob.hi is None:
        if knob.kind == "int":
            st.number_input(label, min_value=None if knob.min is None else int(knob.min), step=int(knob.step or 1),
                            placeholder="none", **common)
        else:
            st.number_input(label, step=float(knob.step or 0.01), format="%.4f", placeholder="none", **common)
    elif knob.kind == "int":
        lo, hi = int(min(knob.lo, value)), int(max(knob.hi, value))
        st.slider(label, lo, hi, step=int(knob.step or 1), **common)
    else:
        lo, hi = float(min(knob.lo, value)), float(max(knob.hi, value))
        step = float(knob.step or (hi - lo) / 100)
        whole = step.is_integer() and lo.is_integer() and float(value).is_integer()
        st.slider(label, lo, hi, step=step, format="%d" if whole else None, **common)  # rrf_k 60, not 60.00


# ---- Sweep axes -------------------------------------------------------------------------------

def sweep_axes(config: PipelineConfig, edit_profile: str | None = None) -> dict[str, KnobRef]:
    """The numeric knobs a sweep may vary, by path (with a router: the edited profile's)."""
    allowed = set(sweepable_params(config))
    return {ref.path: ref for ref in tune_knobs(config, edit_profile)
            if ref.path in allowed and ref.knob.kind in ("float", "int") and ref.knob.lo is not None
            and ref.knob.hi is not None}


def axis_label(ref: KnobRef) -> str:
    return f"{ref.knob.label} · {ref.path}"


def help_list(refs: list[KnobRef]) -> None:
    """What each of ``refs`` does, in one closed expander under the pane's knobs."""
    lines = [f"- **{md(ref.knob.label)}** (`{ref.path}`): {md(ref.knob.help)}" for ref in refs if ref.knob.help]
    if lines:
        with st.expander("What these knobs do"):
            st.markdown("\n".join(lines))


def owner_of(config: PipelineConfig, ref: KnobRef):
    """The parameter object ``ref`` is a field of (a profile's ``QualityFactors``, say)."""
    path = ref.path.rpartition(".")[0]
    return next(owner for where, owner in walk_owners(config.params, f"{config.fusion}.") if where == path)
