"""What the first page after a server start is preparing, said while it prepares it.

The first run of a page in a server process imports the workbench's libraries, loads the
dataset's candidate pool and scores its queries — seconds in which the main area would stay
blank. ``reserve`` keeps a line at the top of the main area on every run (the page's own elements
keep their places) and, on the process's first run only, names the step in it; ``step`` names the
next one; ``clear`` empties it once the page is drawn. Imports nothing but Streamlit: the app
calls it before its own imports.
"""

from __future__ import annotations

import streamlit as st

_prepared = False          # per server process: after the first page run, nothing is said
SLOT = "rwb_first_run_slot"


def reserve(what: str) -> None:
    """The line (every run), with ``what`` is being prepared on the process's first run."""
    slot = st.empty()
    st.session_state[SLOT] = slot
    if not _prepared:
        slot.caption(f":material/hourglass_top: Preparing the workbench (the first page since the server "
                     f"started): {what}…")


def step(what: str) -> None:
    """Name the next step, on the process's first run."""
    slot = st.session_state.get(SLOT)
    if slot is not None and not _prepared:
        slot.caption(f":material/hourglass_top: Preparing the workbench (the first page since the server "
                     f"started): {what}…")


def clear() -> None:
    """The page is drawn: the line goes, and later runs say nothing."""
    global _prepared
    slot = st.session_state.get(SLOT)
    if slot is not None and not _prepared:
        slot.empty()
    _prepared = True
