"""Tune's session state: one ``TuneState`` (``eval.experiments.tune_state``), its one update
function, and its mirror in the URL (``st.query_params``) so a reload or a shared link opens
the same dataset, query, starting point and changed parameters.

Widgets never own a value: each run writes every Tune widget's value from the state before
drawing it, and each widget's callback hands its new value to ``update``.
"""

from __future__ import annotations

import streamlit as st

from eval.experiments.tune_state import (TuneState, Refusal, changed_params, decode_changes,
                                         encode_changes, update as _update, within_pool)
from eval.stores.configs import resolve_config, resolve_linked
from eval.stores.inputs import pipeline_hash
from pages import _state as s
from pages import _url as url
from pages._markup import fit
from retrieval.candidates import DEFAULT_POOL_DEPTH
from retrieval.pipeline import PipelineConfig, with_params

KEY = "tune_state"
ERROR = "tune_error"
ARRIVED = "tune_arrived"              # set by a page that opens Tune: it starts at its top
PENDING_QUERY = "tune_url_query"      # a query id from the URL, matched once the pool is known
DEFAULT_SOURCE = "rrf"
FIELDS = {"rows": url.Field("tune_rows", default="Read"),            # Grade mode and the toggles
          "fisher": url.Field("tune_fisher", bool, default=False),
          "list": url.Field("tune_query_list", bool, default=False),
          "queue": url.Field("tune_queue", bool, default=False),
          "snapshots": url.Field("tune_snapshots", bool, default=False)}


def _from_url() -> TuneState:
    """The state a link describes (its unknown or refused parts reported, the rest kept)."""
    params = st.query_params
    source = params.get("from") or DEFAULT_SOURCE
    problems = []
    try:
        start = resolve_linked(source)     # a link never names another file on the server
    except (ValueError, OSError) as error:
        problems.append(f"starting point {source}: {error}")
        source, start = DEFAULT_SOURCE, resolve_config(DEFAULT_SOURCE)
    config = start
    try:
        config = within_pool(with_params(start, decode_changes(params.get_all("p"))))
    except (ValueError, TypeError) as error:
        problems.append(str(error))
    mode = "Free text" if params.get("text") else "Query set"
    if params.get("q"):
        st.session_state[PENDING_QUERY] = params.get("q")
    if problems:
        st.session_state[ERROR] = Refusal("link", "; ".join(problems))
    return TuneState(config, source, mode, 0, params.get("text") or "")


def state() -> TuneState:
    current = st.session_state.get(KEY)
    if current is None:
        current = st.session_state[KEY] = _from_url()
    return current


def restore_view() -> None:
    """Grade mode and the toggles a link names (once per session, before they are drawn)."""
    url.restore("tune", FIELDS)
    if st.session_state.get("tune_rows") not in ("Read", "Grade"):
        st.session_state["tune_rows"] = "Read"


SEEN = "tune_sources_seen"       # starting points used in this session that no picker lists


def start_labels(labels: list[str]) -> list[str]:
    """``labels`` and every starting point used in this session that they lack (a pipeline
    learned on the Sweep page, a learned file a link named), while its file is there: picking
    another pipeline does not lose it from "Start from"."""
    from pathlib import Path

    seen = st.session_state.setdefault(SEEN, [])
    source = state().source
    if source not in labels and source not in seen:
        seen.append(source)
    return [*labels, *(x for x in seen if x not in labels and (not x.endswith(".toml") or Path(x).is_file()))]


def start_label(label: str) -> str:
    """How "Start from" shows a starting point within its box: a pipeline file by what it is
    (``▸ learned linear C=0.1``; its dataset and held-out figure in ``start_detail``), any
    other label cut to the box."""
    text = s.format_label(label)
    return fit(text.split(" · ")[0] if label.endswith(".toml") else text, 26)


def start_detail(label: str) -> str:
    """The whole name of a starting point ``start_label`` shortened ("" when it shows whole)."""
    text = s.format_label(label)
    return text if start_label(label) != text else ""


def has_state() -> bool:
    return st.session_state.get(KEY) is not None


def config() -> PipelineConfig:
    return state().config


def update(action: tuple, pool_depth: int = DEFAULT_POOL_DEPTH) -> Refusal | None:
    """Apply one action to Tune's state; a refusal is kept for the page to show once."""
    new, refusal = _update(state(), action, resolve_config, pool_depth)
    st.session_state[KEY] = new
    st.session_state[ERROR] = refusal
    return refusal


def set_config(config: PipelineConfig, source: str | None = None, provenance=None) -> None:
    """Hand a configuration to Tune (from Sweep, Profiles, Reports…); ``provenance``
    (``eval.statistics.provenance.Provenance``) when it was chosen on the dataset's queries."""
    update(("config", config, source, provenance))


START = "tune_start"             # (source, its configuration): resolved once per source


def start_config(source: str) -> PipelineConfig:
    """The configuration ``source`` names, resolved once per source rather than on every knob
    move (a saved profile is a file read); ``forget_start`` after the profile is rewritten."""
    cached = st.session_state.get(START)
    if cached is None or cached[0] != source:
        cached = st.session_state[START] = (source, resolve_config(source))
    return cached[1]


def forget_start() -> None:
    st.session_state.pop(START, None)


def is_tuned(current: TuneState) -> bool:
    try:
        return current.config != start_config(current.source)
    except (ValueError, OSError):
        return True


def take_refusal() -> Refusal | None:
    refusal = st.session_state.get(ERROR)
    st.session_state[ERROR] = None
    return refusal


def match_url_query(query_ids: tuple[str, ...]) -> None:
    """Select the query a link named, once the query set is known."""
    qid = st.session_state.pop(PENDING_QUERY, None)
    if qid is None:
        return
    if qid in query_ids:
        update(("query", query_ids.index(qid)))
    else:
        st.session_state[ERROR] = Refusal("link", f"this dataset has no query {qid}")


def knob_params(current: TuneState) -> dict[str, str | list[str]]:
    """The knobs as a link carries them: the starting point and the parameters changed from it
    (``_from_url`` reads them back; Evaluate's link carries them for its "Tune · current knobs")."""
    wanted: dict[str, str | list[str]] = {"from": current.source}
    try:
        changes = changed_params(current.config, start_config(current.source))
    except (ValueError, OSError):
        changes = {}
    if changes:
        wanted["p"] = encode_changes(changes)
    return wanted


def sync_url(current: TuneState, query_ids: tuple[str, ...]) -> None:
    """Write the state into the URL (only the parts that changed, so a rerun sends nothing new)."""
    wanted = knob_params(current)
    qi = current.query_index(len(query_ids))
    if qi is not None:
        wanted["q"] = query_ids[qi]
    elif current.text:
        wanted["text"] = current.text
    url.write({**wanted, **url.values(FIELDS)})


# ---- tries: each settled configuration, kept per dataset (eval.stores.tries) -----------------

SCORED = "tune_scored"         # (config, means, baseline name, baseline means) of the last live run
INPUTS = "tune_inputs"         # the workspace's input hashes, the pipeline's left out (Workspace.inputs)


def record_inputs(ws) -> None:
    """Called once per page run: what a kept try records as its inputs (cached, no work)."""
    st.session_state[INPUTS] = ws.inputs()


def record_scores(config: PipelineConfig, means: dict, baseline: str, baseline_means: dict) -> None:
    """Called by the live run (references only: no work per knob move)."""
    st.session_state[SCORED] = (config, means, baseline, baseline_means)


def keep_try(store, reason: str = "", force: bool = False) -> dict | None:
    """Keep the current configuration as a try when it was scored and moved away from its start
    (or always, with ``force``); the try, or ``None`` when there was nothing to keep."""
    current = state()
    scored = st.session_state.get(SCORED)
    if scored is None or scored[0] != current.config or not (force or is_tuned(current)):
        return None
    try:
        changes = changed_params(current.config, start_config(current.source))
    except (ValueError, OSError):
        changes = {}
    _, means, baseline, baseline_means = scored
    inputs = st.session_state.get(INPUTS)
    if inputs is not None:
        inputs = {**inputs, "pipeline": pipeline_hash(current.config)}
    return store.add(current.config, current.source, changes, means, baseline, baseline_means, reason, inputs)


def restore_try(store, try_id: int) -> None:
    record = store.get(try_id)
    update(("config", store.config(try_id), record["source"]))
