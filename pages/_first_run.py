"""What the first page after a server start is preparing, said while it prepares it.

The first run in a server process imports the workbench's libraries, loads the dataset's
candidate pool and scores its queries — seconds in which the main area would stay blank.
``reserve`` keeps a line at the top of the main area on every run (the page's own elements keep
their places) and, on the process's first run only, names the step in it; ``prepare`` does the
pool and the scoring there, before the page (which then finds both cached), naming each, and
clears the line — before the page, because a page may end its run with ``st.stop()``, after
which nothing can be drawn. Imports nothing but Streamlit: the app calls ``reserve`` before its
own imports.
"""

from __future__ import annotations

import streamlit as st

_prepared = False          # per server process: after the first run, nothing is said
SLOT = "rwb_first_run_slot"
SAYS = ":material/hourglass_top: Preparing the workbench (the first page since the server started): {}…"


def reserve(what: str) -> None:
    """The line (every run), with ``what`` is being prepared on the process's first run."""
    slot = st.empty()
    st.session_state[SLOT] = slot
    if not _prepared:
        slot.caption(SAYS.format(what))


def prepare() -> None:
    """On the process's first run: the workspace's candidate pool and its baseline's scores (both
    cached: the page uses them), each named while it runs; then the line is cleared."""
    global _prepared
    if _prepared:
        return
    slot = st.session_state.get(SLOT)
    try:
        from eval.stores.pool import pool_path
        from pages import _state as sh
        from pages._markup import md
        from retrieval.candidates import DEFAULT_POOL_DEPTH

        ws = sh.workspace()
        built = ws.has_queries and pool_path(ws.dataset, ws.embedder, DEFAULT_POOL_DEPTH, ws.analyzer).is_file()
        if built:                     # a pool not built yet: the page builds it, with its own progress
            slot.caption(SAYS.format(f"loading the candidate pool of {md(ws.dataset.name)}"))
            c = ws.pool()
            slot.caption(SAYS.format(f"scoring its {c.n_queries:,} queries with the baseline, {md(ws.baseline.name)}"))
            sh.live_evaluation(ws.path, ws.stamp, ws.embedder, ws.analyzer, ws.qrels_rev, ws.baseline)
    except (ValueError, OSError, KeyError, TypeError):
        pass                          # the page names the problem
    _prepared = True
    slot.empty()
