"""How a page shows a problem: one place, so every page words and places errors alike.

``refused`` reports an action that was not applied (the state stays as it was); ``stop``
shows a problem that keeps the page from going on and ends the run; ``guard`` turns the
errors user input can cause (``ValueError``, ``OSError``) into ``stop``.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import streamlit as st

from pages._markup import md


def refused(label: str, message: str) -> None:
    st.warning(f"**{md(label)}** not applied: {md(message)}")


def stop(title: str, detail: object = "", lines: list[str] | None = None) -> None:
    st.error(f"**{md(title)}**" + (f" — {md(detail)}" if str(detail) else ""))
    if lines:
        st.code("\n".join(lines[:30]), language=None)
    st.stop()


@contextmanager
def guard(title: str) -> Iterator[None]:
    try:
        yield
    except (ValueError, OSError, RuntimeError) as error:
        stop(title, error)


def experiments_or_stop() -> list[dict]:
    """The experiment log, or one error line and ``st.stop()`` when the file is damaged."""
    from eval.stores.experiments import ExperimentStore

    try:
        return ExperimentStore().list()
    except (OSError, ValueError) as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        stop("Cannot read the experiment log", lines[0][:300] if lines else type(error).__name__)
        raise  # not reached: stop() ends the run
