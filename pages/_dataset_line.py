"""The sidebar's dataset line (name, sizes, how many judgments the figures use).

The app draws it on every full run into a slot of one element (``draw``). A page whose fragment
changes judgments (Tune: its grade buttons, its judging queue) draws it again from inside that
fragment on each of its runs (``draw_from_fragment``): Streamlit lets a fragment write into a
container the full run created and redraws that write in place when the fragment reruns, so a
grade reruns the fragment alone and the count still follows it.
"""

from __future__ import annotations

import streamlit as st

from pages import _state as sh
from pages._markup import md

SLOT = "rwb_dataset_line"


def text(dataset, path: str, stamp: tuple, source: str) -> str:
    """``devmem · 348 docs · 120 queries · 408 judgments (explicit)``, the name in bold."""
    judged = sh.judgment_count(path, stamp, sh.judgments_version(dataset, source))
    return (f"**{md(dataset.name)}** · {len(dataset.documents)} docs · {len(dataset.queries)} queries · "
            f"{judged} judgments ({source})")


def draw(dataset, path: str, source: str) -> None:
    """The line, in a slot a fragment can draw into again (the app's sidebar, every full run)."""
    slot = st.empty()
    st.session_state[SLOT] = (slot, dataset, path, sh.dataset_stamp(path), source)   # the folder stat once
    slot.caption(text(*st.session_state[SLOT][1:]))


def draw_from_fragment() -> None:
    """The line again, by the calling fragment, on each of its runs (full and fragment)."""
    kept = st.session_state.get(SLOT)
    if kept is not None:
        kept[0].caption(text(*kept[1:]))
