"""Data: browse corpus, queries and qrels; grade results (history + undo); import a dataset."""

from __future__ import annotations

import streamlit as st

from pages import _harness as hx
from pages import _state as sh
from pages._preparing import imported_root, named_progress, prepare_dataset
from retrieval.embedders import model_label
from pages import _tables as tb
from pages._agreement import agreement_panel
from pages._markup import code, fit, md


@st.cache_resource(max_entries=8, show_spinner=False)
def corpus_frame(path: str, stamp: tuple):
    """One row per document (cached: filter into new frames, never edit in place)."""
    return tb.corpus_frame(sh.get_dataset(path, stamp))


@st.cache_resource(max_entries=8, show_spinner=False)
def queries_frame(path: str, stamp: tuple):
    return tb.queries_frame(sh.get_dataset(path, stamp))


CORPUS_COLUMNS = ["id", "text", "path", "type", "scope", "confidence", "vitality"]
ws = sh.workspace()
ds = ws.dataset
st.title("Data")
st.caption(f"**{md(ds.name)}** · {code(ws.path)} · fingerprint {code(ds.fingerprint[:12])}"
           + (f" · {md(ds.description)}" if ds.description else ""))

st.session_state.setdefault("data_flash", "")
st.session_state.setdefault("data_search", "")
corpus_tab, queries_tab, qrels_tab, import_tab = st.tabs([
    f":material/article: Corpus ({len(ds.documents)})", f":material/help: Queries ({len(ds.queries)})",
    ":material/grading: Judgments", ":material/upload: Import"])

# ---- corpus ---------------------------------------------------------------------------------------
with corpus_tab:
    corpus = corpus_frame(ws.path, ws.stamp)
    f = st.columns([2, 1.4, 1.2, 1])
    text = f[0].text_input("Search", key="data_search", placeholder="words in id, text, path, project…")
    paths = f[1].multiselect("Path", sorted(corpus["path"].unique()), key="data_paths")
    types = f[2].multiselect("Memory type", sorted(corpus["type"].unique()), key="data_types")
    scopes = f[3].multiselect("Scope", sorted(corpus["scope"].unique()), key="data_scopes")
    shown = tb.filter_frame(corpus, text, path=paths, type=types, scope=scopes)
    r = st.columns([3, 1], vertical_alignment="bottom")
    r[0].caption(f"{len(shown)} of {len(corpus)} documents")
    with r[1].popover("Columns", icon=":material/view_column:", width="stretch"):
        columns = st.multiselect("Columns shown", list(corpus.columns), default=CORPUS_COLUMNS,
                                 key="data_columns", help="The rest stay searchable; the default "
                                 "set fits a 1400 px window.")
    st.dataframe(shown, hide_index=True, height=560, key="data_corpus", column_order=columns,
                 column_config={
        "text": st.column_config.TextColumn(width="large"),
        "confidence": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.2f", width="small"),
        "vitality": st.column_config.ProgressColumn(min_value=0, max_value=100, format="%d", width="small"),
    })

# ---- queries --------------------------------------------------------------------------------------
with queries_tab:
    if not ds.queries:
        st.info("This dataset has no queries.")
    else:
        queries = queries_frame(ws.path, ws.stamp)
        f = st.columns([2, 1, 1])
        qtext = f[0].text_input("Search", key="data_qsearch", placeholder="words in the query…")
        intents = f[1].multiselect("Intent", sorted(queries["intent"].unique()), key="data_intents")
        langs = f[2].multiselect("Language", sorted(queries["lang"].unique()), key="data_langs")
        shown = tb.filter_frame(queries, qtext, intent=intents, lang=langs)
        st.caption(f"{len(shown)} of {len(queries)} queries · `routed profile` is what the intent router picks")
        st.dataframe(shown, hide_index=True, height=560, key="data_queries", column_config={   # fits 1400 px
            "id": st.column_config.TextColumn(width=60),                       # with one column of the
            "text": st.column_config.TextColumn(width=300),                    # dataset's own (devmem: case)
            "intent": st.column_config.TextColumn(width=75),
            "lang": st.column_config.TextColumn(width=45),
            "judged": st.column_config.NumberColumn(format="%d", width=60),
            "routed profile": st.column_config.TextColumn(width=105),
            "fast path": st.column_config.TextColumn(width=80),
            "timeline": st.column_config.CheckboxColumn(width=70),
        })


# ---- judgments ------------------------------------------------------------------------------------
def on_grade() -> None:
    qid, doc = st.session_state["data_query"], st.session_state["data_doc"]
    grade = st.session_state.get("data_grade")
    if grade is None:
        st.session_state["data_flash"] = ":red[Pick a grade first.]"
        return
    try:
        ws.judgments.grade(qid, doc, int(grade), author="data", rater=sh.rater())
        st.session_state["data_flash"] = f"Judged **{md(doc)}** = {grade} for **{md(qid)}**."
    except ValueError as error:
        st.session_state["data_flash"] = f":red[{md(error)}]"


def on_undo() -> None:
    try:
        last = ws.judgments.undo()
    except ValueError as error:  # a damaged judgments file, a full or read-only RWB_HOME
        st.session_state["data_flash"] = f":red[{md(error)}]"
        return
    st.session_state["data_flash"] = ("Nothing to undo." if last is None else
                                      f"Undid {md(last['query'])} / {md(last['doc'])}: {last['after']} → "
                                      f"{'—' if last['before'] is None else last['before']}.")


with qrels_tab:
    if not ds.queries:
        st.info("Judgments need queries.")
    else:
        ids = [q.id for q in ds.queries]
        text_of_q = {q.id: q.text for q in ds.queries}
        text_of_d = {d.id: d.text for d in ds.documents}
        st.session_state.setdefault("data_query", ids[0])
        left, right = st.columns([1.5, 1], gap="large")
        with left:
            qid = st.selectbox("Query", ids, key="data_query", format_func=lambda q: fit(f"{q} · {text_of_q[q]}", 80))
            frame = tb.judgments_frame(ws, qid)
            st.dataframe(frame, hide_index=True, key="data_judgments", column_config={
                "dataset": st.column_config.TextColumn("dataset", width=70,
                                                       help="grade in the dataset's own qrels (— none)"),
                "in effect": st.column_config.NumberColumn("in effect", format="%d", width=70,
                                                           help="grade used by every page (workbench judgments applied)"),
                "changed": st.column_config.TextColumn("", width=30, help="changed in the workbench"),
                "doc": st.column_config.TextColumn("doc", width=65),
                "text": st.column_config.TextColumn(width=260),      # the grid fits its column at 1400 px
            })
        with right:
            with st.container(border=True):
                st.markdown("**Add or change a judgment**")
                # a judgment of a document since removed from the corpus is listed, not offered
                listed = [d for d in frame["doc"] if d in text_of_d]
                judged_first = listed + [d for d in text_of_d if d not in set(listed)]
                if st.session_state.get("data_doc") not in judged_first:
                    st.session_state["data_doc"] = judged_first[0]
                doc = st.selectbox("Document", judged_first, key="data_doc",
                                   format_func=lambda d: fit(f"{d} — {text_of_d[d]}", 38))
                current = ws.qrels().get(qid, {}).get(doc)
                st.text_input("Rater", key=sh.K_RATER, help="who gives the grade, kept with it "
                              "(default: the OS user); Tune's grading uses the same")
                st.segmented_control("Grade", sh.GRADES, key="data_grade", default=current,
                                     help=" · ".join(sh.GRADE_LABELS.values()))
                b = st.columns(2)
                b[0].button("Save judgment", type="primary", icon=":material/check:", on_click=on_grade,
                            width="stretch")
                b[1].button("Undo", icon=":material/undo:", on_click=on_undo, width="stretch",
                            disabled=not ws.judgments.history(), help="Undo the latest judgment change")
                st.caption("Grades: " + " · ".join(sh.GRADE_LABELS.values()))
        history = tb.history_frame(ws)
        st.markdown(f"**History** · {len(history)} change(s), newest first · stored in {code(ws.judgments.path)}; "
                    "the dataset's own qrels file is never modified")
        if not history.empty:
            st.dataframe(history, hide_index=True, height=min(320, 38 + 35 * len(history)), key="data_history")
        with st.expander("Agreement between raters", icon=":material/groups:"):
            agreement_panel(ws)
        st.download_button("Download merged qrels (TSV)", tb.merged_qrels_tsv(ws.qrels()),
                           file_name=f"{ds.name}-qrels-merged.tsv", mime="text/tab-separated-values",
                           icon=":material/download:")

# ---- import ----------------------------------------------------------------------------------------
def on_kind(kinds) -> None:
    """Another format: the default folder follows it (``$RWB_HOME/imported/<format>``) unless one was typed."""
    defaults = {str(imported_root() / k) for k in kinds}
    if st.session_state.get("data_import_dest", next(iter(defaults))) in defaults:
        st.session_state["data_import_dest"] = str(imported_root() / st.session_state["data_import_kind"])


def on_use_dataset(path: str) -> None:
    if path in sh.dataset_choices():                # listed (an import under $RWB_HOME/imported): pick it
        st.session_state[sh.K_DATASET] = path
        return
    st.session_state[sh.K_DATASET] = sh.OTHER_PATH
    st.session_state[sh.K_DATASET_TYPED] = path


with import_tab:
    with st.container(border=True):
        st.markdown("**Import a dataset** · converted by the harness (`eval.importers`) into a new "
                    "folder, then indexed and its candidate pool retrieved")
        kinds = hx.import_kinds()
        kind = st.selectbox("Format", list(kinds), format_func=lambda k: fit(kinds[k].summary, 100),
                            key="data_import_kind", on_change=on_kind,
                            args=(kinds,))          # the page's width: a format's summary shows whole
        c2 = st.container()
        importer = kinds[kind]
        source = c2.text_input("Source (file or folder)", key="data_import_source",
                               help=importer.source, disabled=importer.source is None)
        existing = importer.existing         # ubi: adds to a dataset (its folder, not a new one)
        dest_key = "data_import_dest_existing" if existing else "data_import_dest"
        st.session_state.setdefault(dest_key, ws.path if existing else str(imported_root() / kind))
        dest = c2.text_input("Dataset folder" if existing else "New dataset folder", help=importer.dest,
                             key=dest_key)   # the page's width: a folder under RWB_HOME is a long path
        c4, c5 = st.columns([3, 1], vertical_alignment="bottom")
        name = c4.text_input("Name (optional)", key="data_import_name")
        force = c5.checkbox("Replace", key="data_import_force", disabled=importer.existing,
                            help="Replace the folder if it is a dataset already.")
        options = {}
        for option in importer.options:  # the importer's own options (several: space-separated)
            key = f"data_import_{option.key}"
            label = option.flag.lstrip("-").replace("-", " ").capitalize()   # a word, not a CLI flag
            helps = f"{option.help} (command line: `{option.flag}`)"
            if option.switch:
                options[option.key] = st.checkbox(label, help=helps, key=key)
                continue
            value = st.text_input(label + (" (required)" if option.required else "")
                                  + (" · several: space-separated" if option.many else ""),
                                  help=helps, key=key, placeholder=option.metavar or "",
                                  value=ws.path if option.key == "corpus" else "")
            options[option.key] = value.split() if option.many else value.strip()
        if st.button("Import", type="primary", icon=":material/upload:",
                     disabled=importer.source is not None and not source.strip(),
                     key="data_import"):
            failure = None
            with st.status(f"Importing {kind} from {code(source)}…", expanded=True) as status:
                try:
                    result = hx.import_dataset(kind, source.strip(), dest.strip(), force=force, name=name.strip(),
                                               **options)
                    st.write(f":material/check: {result.summary()}")
                    embedder = sh.embedder_of(str(result.dest))    # the one it opens with: no re-embedding
                    bar = st.progress(0.0, text=f"Indexing with {md(model_label(embedder))}…")
                    pool = prepare_dataset(str(result.dest), embedder,
                                              named_progress(bar, model_label(embedder)))
                    bar.progress(1.0, text=f"Indexed with {md(model_label(embedder))}"
                                 + (f"; {pool.n_queries} queries retrieved" if pool else ""))
                    status.update(label=f"Imported {code(result.dest)}", state="complete")
                    st.session_state["data_imported"] = str(result.dest)
                    st.session_state["data_flash"] = f"Imported {code(result.dest)}: {md(result.summary())}"
                except Exception as error:  # importer and dataset errors are shown, never a traceback
                    status.update(label="Import failed", state="error", expanded=True)
                    failure = error
            if failure is None:                 # again at once: the sidebar's Dataset list shows the import
                st.rerun()
            if failure is not None:             # the reason in the open, not inside a collapsed box
                st.error(f"**Import failed** — {md(type(failure).__name__)}: {md(str(failure).splitlines()[0][:300])}")
                st.code(str(failure), language=None)
        if st.session_state.get("data_imported"):
            st.button(f"Work on {st.session_state['data_imported']}", icon=":material/swap_horiz:",
                      on_click=on_use_dataset, args=(st.session_state["data_imported"],), key="data_use_imported")
    with st.container(border=True):
        st.markdown("**Prepare a dataset folder** · validate, build the indexes and the candidate pool")
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        folder = c1.text_input("Dataset folder", value=ws.path, key="data_prepare_path")
        if c2.button("Prepare", icon=":material/build:", width="stretch", key="data_prepare"):
            embedder = sh.embedder_of(folder.strip())
            bar = st.progress(0.0, text=f"Starting with {md(model_label(embedder))}…")
            try:
                pool = prepare_dataset(folder, embedder, named_progress(bar, model_label(embedder)))
                bar.progress(1.0, text=f"Done with {md(model_label(embedder))}")
                st.success(f"{code(folder)} is ready" + (f": {pool.n_queries} queries, {pool.n_rows} candidate rows."
                                                     if pool is not None else " (no queries: corpus only)."))
            except Exception as error:  # a dataset error lists every problem
                bar.empty()
                st.error(f"Cannot prepare {code(folder)}: {md(str(error).splitlines()[0][:300])}")
                st.code(str(error), language=None)

if st.session_state["data_flash"]:
    st.toast(st.session_state["data_flash"])
    st.session_state["data_flash"] = ""
