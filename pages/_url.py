"""A page's choices in its URL (``st.query_params``), so a reload or a shared link opens the
same view: the workspace (dataset, embedder, BM25 analyzer, baseline) in every page's link,
and each page's own fields.

A page names its fields (URL parameter → ``Field``: the session-state key of the widget that
holds the value). ``restore`` puts a link's values into the session once, on the page's first
run in a session and before its widgets are drawn (the page still checks each against its
choices, as it checks its defaults); ``keep`` writes the current values back, only what changed
(``write``), so a rerun sends nothing new. A value equal to its field's default is left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

RESTORED = "rwb_url_restored"          # the pages whose link was read in this session


@dataclass(frozen=True)
class Field:
    key: str                     # the session-state key (a widget's key)
    kind: type = str             # str, int, float or bool
    many: bool = False           # a list (a multiselect): the parameter repeated
    default: Any = None          # not written when the value equals it


def _parse(text: str, kind: type):
    if kind is bool:
        return text in ("1", "true", "True")
    return kind(text)


def _text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}" if abs(value) < 1e15 else repr(value)
    return str(value)


def restore(page: str, fields: dict[str, Field]) -> None:
    """The values a link names, into the session, once per page and session; a value that is
    not of its field's kind is left out (the page's default stands)."""
    done = st.session_state.setdefault(RESTORED, set())
    if page in done:
        return
    done.add(page)
    params = st.query_params
    for name, field in fields.items():
        if name not in params:
            continue
        try:
            values = [_parse(v, field.kind) for v in params.get_all(name)]
        except (TypeError, ValueError):
            continue
        if values:
            st.session_state[field.key] = values if field.many else values[0]


def values(fields: dict[str, Field]) -> dict[str, str | list[str]]:
    """The fields' current values as a link carries them (a default or unset value left out)."""
    out: dict[str, str | list[str]] = {}
    for name, field in fields.items():
        value = st.session_state.get(field.key)
        if value is None or value == field.default or (field.many and not value):
            continue
        out[name] = [_text(v) for v in value] if field.many else _text(value)
    return out


def workspace() -> dict[str, str]:
    """The sidebar's workspace as every page's link carries it."""
    from pages import _state as s

    out = {"dataset": s.dataset_path()}
    for name, key in (("embedder", s.K_EMBEDDER), ("analyzer", s.K_ANALYZER), ("baseline", s.K_BASELINE)):
        if st.session_state.get(key):
            out[name] = str(st.session_state[key])
    return out


def restore_workspace() -> None:
    """The workspace a link names, on a session's first run (``pages._state.init_shared_state``):
    its dataset, and for that dataset its embedder and analyzer (the sidebar checks each)."""
    from pages import _state as s

    if s.K_DATASET in st.session_state:
        return
    params = st.query_params
    path = params.get("dataset") or s.env_dataset()
    st.session_state[s.K_DATASET] = path
    for name, of_key in (("embedder", s.K_EMBEDDER_OF), ("analyzer", s.K_ANALYZER_OF)):
        if params.get(name):
            st.session_state.setdefault(of_key, {}).setdefault(path, params.get(name))
    if params.get("baseline"):
        st.session_state.setdefault(s.K_BASELINE, params.get("baseline"))


def write(wanted: dict[str, str | list[str]]) -> None:
    """Make the URL the workspace and ``wanted``: the parameters that changed are written, the
    others removed."""
    wanted = {**workspace(), **wanted}
    params = st.query_params
    for key in [k for k in params if k not in wanted]:
        del params[key]
    for key, value in wanted.items():
        now = params.get_all(key)
        if now != (value if isinstance(value, list) else [value]):
            params[key] = value


def keep(fields: dict[str, Field], extra: dict[str, str | list[str]] | None = None) -> None:
    """Write the fields' current values, and ``extra``, into the URL (``write``)."""
    write({**values(fields), **(extra or {})})
