"""Routing every visit through app.py, even a first visit to a page URL."""

from __future__ import annotations

import streamlit as st


def ensure_navigation() -> None:
    """Route through app.py even when the server's first visitor opens a page URL directly.

    Streamlit starts in its legacy "pages/ folder" mode (our pages live in ``pages/``) and
    leaves it only once ``st.navigation`` has run; until then a URL such as ``/sweep`` runs
    the page script alone, without app.py's navigation and sidebar. Leave that mode and
    rerun: the rerun executes app.py, whose ``st.navigation`` opens the requested page.

    Why a private attribute: Streamlit 1.67 decides the mode once per process in
    ``PagesManager.__init__`` from ``(main script folder / "pages").exists()``; no config option
    turns it off, and only ``st.navigation`` (which runs in app.py, too late for a first visit to
    a page URL) resets the class attribute. The folder keeps its name (product layout), so this
    is the one place the flag is flipped.
    """
    try:
        from streamlit import config
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the legacy mode
        return
    # AppTest resets the flag before every run and runs a switched-to page alone, on purpose
    if PagesManager.uses_pages_directory and not config.get_option("global.appTest"):
        PagesManager.uses_pages_directory = False
        st.rerun()
