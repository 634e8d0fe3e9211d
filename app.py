"""Retrieval Workbench: page config, navigation and the shared sidebar.

Run with ``streamlit run app.py`` (binds 127.0.0.1 via .streamlit/config.toml).
The dataset comes from ``$RWB_DATASET`` (default ``datasets/devmem``) or the sidebar.
"""

from __future__ import annotations

import os

import streamlit as st

os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pages import _first_run as first_run  # noqa: E402 (Streamlit alone: it speaks before the imports below)

# an emoji favicon is drawn locally (a data: URL); a ":material/…" one is fetched from fonts.gstatic.com
st.set_page_config(page_title="Retrieval Workbench", page_icon="🔎", layout="wide")
first_run.reserve("importing its libraries (LanceDB, Tantivy, the fusion methods)")

from eval.stores import configs as cfg  # noqa: E402
from pages import _dataset_line as dataset_line  # noqa: E402
from pages import _harness as hx  # noqa: E402
from pages import _state as sh  # noqa: E402
from pages._markup import md  # noqa: E402
from retrieval.bm25 import ANALYZERS, DEFAULT_ANALYZER  # noqa: E402
from retrieval.embedders import MODELS, default_embedder, default_reason, language_note, language_warning  # noqa: E402

sh.mark_run_start()

try:  # a non-loopback address needs RWB_ALLOW_REMOTE=1; paths are then confined to RWB_DATA_ROOT
    from retrieval.access import check_server_address

    check_server_address(st.get_option("server.address"))
except ValueError as refusal:
    st.error(str(refusal))
    st.stop()

PAGES = {
    "Workbench": [
        st.Page("pages/tune.py", title="Tune", icon=":material/tune:", default=True),
        st.Page("pages/evaluate.py", title="Evaluate", icon=":material/analytics:"),
        st.Page("pages/sweep.py", title="Sweep", icon=":material/grid_on:"),
    ],
    "Manage": [
        st.Page("pages/profiles.py", title="Profiles", icon=":material/bookmarks:"),
        st.Page("pages/data.py", title="Data", icon=":material/database:"),
        st.Page("pages/reports.py", title="Reports", icon=":material/description:"),
    ],
}


JUDGMENT_SOURCES = {"explicit": "explicit (qrels + edits)", "implicit": "implicit (clicks)",
                    "both": "both (explicit first)"}


def sidebar() -> None:
    sh.init_shared_state()
    with st.sidebar:
        st.html("<style>.block-container{padding-top:2.2rem}</style>")    # every page's title at one height
        st.markdown("#### :material/folder_open: Workspace")
        choices = sh.dataset_choices()
        if st.session_state[sh.K_DATASET] not in (*choices, sh.OTHER_PATH):
            choices.append(st.session_state[sh.K_DATASET])
        st.selectbox("Dataset", [*choices, sh.OTHER_PATH], key=sh.K_DATASET,
                     format_func=lambda p: p if len(p) <= 30 else f"…{p[-29:]}",   # its end fits the box
                     help="A folder under datasets/ (BEIR layout), or type any path.")
        if st.session_state[sh.K_DATASET] == sh.OTHER_PATH:
            st.text_input("Dataset folder", key=sh.K_DATASET_TYPED, placeholder="path/to/dataset")
        sh.sync_embedder(sh.dataset_path())      # each dataset keeps its own embedder
        st.selectbox("Embedder", sh.EMBEDDERS, key=sh.K_EMBEDDER,
                     help=" · ".join(f"{name}: {MODELS[name]}" for name in sh.EMBEDDERS)
                          + ". Each dataset starts with the one its language needs and keeps the one "
                            "you choose for it; every figure on every page uses it.")
        sh.sync_analyzer(sh.dataset_path())      # and its own BM25 analyzer
        st.selectbox("BM25 analyzer", sh.ANALYZER_NAMES, key=sh.K_ANALYZER,
                     help=" · ".join(f"{a.name}: {a.summary}" for a in ANALYZERS.values())
                          + f". Each has its own index and candidate pool (built when first chosen). Each "
                            f"dataset starts with {DEFAULT_ANALYZER}, as `rwb eval` without --analyzer, and "
                            "keeps the one you choose for it; every figure on every page uses it.")
        labels = cfg.config_labels()
        if st.session_state[sh.K_BASELINE] not in labels:
            st.session_state[sh.K_BASELINE] = "vector"
        st.selectbox("Baseline", labels, key=sh.K_BASELINE, format_func=sh.format_label,
                     help="What every page compares against (vector-only by default).")
        path = sh.dataset_path()
        try:
            dataset = sh.get_dataset(path, sh.dataset_stamp(path))
            sources = sh.judgment_sources(dataset)
            if st.session_state[sh.K_JUDGMENTS] not in sources:
                st.session_state[sh.K_JUDGMENTS] = "explicit"
            st.selectbox("Judgments", sources, key=sh.K_JUDGMENTS, disabled=len(sources) == 1,
                         format_func=JUDGMENT_SOURCES.get,
                         help="What every figure is computed with. implicit: click-derived "
                              "judgments (qrels/implicit.tsv, `rwb import ubi`); both: explicit "
                              "ones, implicit ones where nobody judged.")
            dataset_line.draw(dataset, path, st.session_state[sh.K_JUDGMENTS])   # Tune's fragment draws it again
            embedder = st.session_state[sh.K_EMBEDDER]
            default = default_embedder(dataset)
            st.caption(f"Figures use embedder **{md(embedder)}**" + (
                f" (this dataset's default: {md(default_reason(dataset))})" if embedder == default
                else f" (chosen; the default here is {md(default)})"))
            analyzer = st.session_state[sh.K_ANALYZER]
            st.caption(f"Figures use BM25 analyzer **{md(analyzer)}**" + (
                " (the default)" if analyzer == DEFAULT_ANALYZER else f" (chosen; the default is {DEFAULT_ANALYZER})"))
            warning = language_warning(embedder, dataset)
            if warning:
                st.warning(md(warning.replace("try --embedder", "choose")), icon=":material/translate:")
            elif note := language_note(embedder, dataset):     # the default, and why it was kept
                st.caption(f":material/translate: {md(note)}")
        except Exception as error:  # the page itself shows the full problem list
            st.caption(f":red[dataset not loadable: {md(str(error).splitlines()[0][:120])}]")


try:  # the last guard: what a page's inputs or stores hold (a damaged profile, a read-only or
    # full RWB_HOME, a wrong-typed stored value) ends in one message, never a traceback
    sidebar()
    page = st.navigation(PAGES)
    first_run.prepare()          # the first run: the pool and the baseline's scores, named while they load
    hx.warm_in_server()          # a thread, started after that (beside it, it slowed the first ranking)
    page.run()
except (ValueError, OSError, KeyError, TypeError, RecursionError) as error:
    reason = str(error).splitlines()[0][:300] if str(error).strip() else type(error).__name__
    st.error(f"This page cannot be shown: {md(reason)}", icon=":material/error:")
