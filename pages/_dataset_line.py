"""The sidebar's dataset line (name, sizes, how many judgments the figures use).

The app reserves its place in the sidebar on every full run (``reserve``). A page whose fragment
changes judgments (Tune: its grade buttons, its judging queue) draws the line from inside that
fragment on each of its runs (``draw_from_fragment``: Streamlit lets a fragment write into a
container the full run created, and redraws that write in place when the fragment reruns), so
a grade reruns the fragment alone and the count still follows it; on every other page the app
draws it after the page (``draw_if_unclaimed``).
"""

from __future__ import annotations

import streamlit as st

from pages import _state as sh
from pages._markup import md

SLOT = "rwb_dataset_line"
CLAIMED = "rwb_dataset_line_claimed"


def text(dataset, path: str, source: str) -> str:
    """``devmem · 348 docs · 120 queries · 408 judgments (explicit)``, the name in bold."""
    judged = sh.judgment_count(path, sh.dataset_stamp(path), sh.judgments_version(dataset, source))
    return (f"**{md(dataset.name)}** · {len(dataset.documents)} docs · {len(dataset.queries)} queries · "
            f"{judged} judgments ({source})")


def reserve(dataset, path: str, source: str) -> None:
    """The line's place in the sidebar (the app, every full run), filled later in the run."""
    st.session_state[SLOT] = (st.container(), dataset, path, source)
    st.session_state[CLAIMED] = False


def draw_from_fragment() -> None:
    """The line, drawn by the calling fragment on each of its runs (full and fragment)."""
    kept = st.session_state.get(SLOT)
    if kept is not None:
        slot, dataset, path, source = kept
        st.session_state[CLAIMED] = True
        slot.caption(text(dataset, path, source))


def draw_if_unclaimed() -> None:
    """The line, by the app after the page, where no fragment drew it this run."""
    kept = st.session_state.get(SLOT)
    if kept is not None and not st.session_state.get(CLAIMED):
        slot, dataset, path, source = kept
        slot.caption(text(dataset, path, source))
