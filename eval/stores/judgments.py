"""The judgments every figure uses: the dataset's qrels with the grades added in the workbench
or by ``rwb judge`` (``JudgmentStore``: history and undo), combined in ONE place,
``effective_qrels``, which every command and page reads. Its ``Judgments.label`` says which
judgments a figure used: "dataset qrels", or "dataset qrels + N edits (history head H; raters:
alice, bob)" where N counts the judgments that differ from the dataset's, H names the edit
history's state and the raters are those whose grades are in effect.

Every grade carries its rater (``rwb judge --rater``, the grading pages' rater picker; default
the OS user). A figure uses every rater's grades merged — a pair's last grade, whoever gave it —
unless raters are chosen (``effective_qrels(raters=…)``, every command's ``--raters``): then
the dataset's qrels with only those raters' grades."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from eval.stores.files import locked, read_json
from retrieval.dataset import IMPLICIT_QRELS, MAX_GRADE, Dataset, read_qrels_file
from eval.stores.identity import claim, store_path
from retrieval.files import atomic_write_text
from retrieval.limits import clip


class JudgmentStore:
    """Graded judgments added in the workbench, layered over a dataset's own qrels.

    The dataset's files are never modified. State is one JSON document holding the
    overlay and its full history; every change is a read-modify-write under the lock.
    """

    def __init__(self, dataset: Dataset, home: Path | None = None):
        self.dataset, self.home = dataset, home
        self.path = store_path(dataset, home, "judgments", ".json", merge_states)

    def _load(self) -> dict:
        state = read_json(self.path, {"dataset": self.dataset.name, "overlay": {}, "history": []})
        if not (isinstance(state, dict) and isinstance(state.get("overlay"), dict)
                and isinstance(state.get("history"), list)
                and all(isinstance(v, dict) for v in state["overlay"].values())
                and all(type(g) is int and 0 <= g <= MAX_GRADE
                        for v in state["overlay"].values() for g in v.values())):
            raise ValueError(f"{self.path}: damaged (not a judgments file); restore it from a backup or move it aside")
        return state

    def grade(self, query_id: str, doc_id: str, grade: int, author: str = "", rater: str | None = None) -> None:
        """Set one judgment; 0 is a judgment too ("judged not relevant"), kept as such.
        ``rater``: who gave it (``check_rater``; default the OS user), kept with it."""
        rater = check_rater(default_rater() if rater is None else rater)
        if query_id not in {q.id for q in self.dataset.queries}:
            raise ValueError(f"unknown query {clip(query_id)}")
        if doc_id not in {d.id for d in self.dataset.documents}:
            raise ValueError(f"unknown document {clip(doc_id)}")
        if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= 3:
            raise ValueError(f"grade must be an integer 0–3, got {clip(grade)}")
        claim(self.dataset, self.home, register=True)
        with locked(self.path):
            state = self._load()
            before = self._current(state, query_id, doc_id)
            state["overlay"].setdefault(query_id, {})[doc_id] = grade
            state["history"].append({"query": query_id, "doc": doc_id, "before": before, "after": grade,
                                     "author": author, "rater": rater, "time": time.time()})
            atomic_write_text(self.path, json.dumps(state, ensure_ascii=False, indent=1))

    def undo(self, query_id: str | None = None, doc_id: str | None = None) -> dict | None:
        """Revert the latest change — or, given a query and a document, the latest change of that
        pair, wherever it is in the history; returns it, or None when there is nothing to undo."""
        with locked(self.path):
            state = self._load()
            found = [i for i, change in enumerate(state["history"])
                     if query_id is None or (change["query"], change["doc"]) == (query_id, doc_id)]
            if not found:
                return None
            last = state["history"].pop(found[-1])
            overlay = state["overlay"].setdefault(last["query"], {})
            if last["before"] is None:
                overlay.pop(last["doc"], None)
            else:
                overlay[last["doc"]] = last["before"]
            atomic_write_text(self.path, json.dumps(state, ensure_ascii=False, indent=1))
            return last

    def _current(self, state: dict, query_id: str, doc_id: str) -> int | None:
        overlay = state["overlay"].get(query_id, {})
        if doc_id in overlay:
            return overlay[doc_id]
        return self.dataset.qrels.get(query_id, {}).get(doc_id)

    def history(self) -> list[dict]:
        return list(self._load()["history"])

    def raters(self) -> dict[str, dict[str, dict[str, int]]]:
        """Each rater's grades (rater → query → doc → grade): the last grade each gave a pair,
        from the history (undone grades are gone from it). Grades kept before raters were
        recorded belong to ``UNATTRIBUTED``."""
        return rater_grades(self._load()["history"], {d.id for d in self.dataset.documents})

    def qrels(self) -> dict[str, dict[str, int]]:
        """The dataset's qrels with the overlay applied; a grade 0 stays (judged, not relevant)."""
        return self._merged(self._load())

    def _merged(self, state: dict) -> dict[str, dict[str, int]]:
        merged = {q: dict(d) for q, d in self.dataset.qrels.items()}
        doc_ids = {d.id for d in self.dataset.documents}
        for query_id, docs in state["overlay"].items():
            for doc_id, grade in docs.items():
                if doc_id not in doc_ids:  # since removed from the corpus: it cannot be retrieved
                    continue
                merged.setdefault(query_id, {})[doc_id] = grade
        return {q: d for q, d in merged.items() if d}


def merge_states(new: dict, old: dict) -> dict:
    """One judgment store of two (the earlier layout's ``old`` into ``new``): both histories in
    time order, and per judged pair the grade of the store that changed it last."""
    if not new:
        return dict(old)
    def last_change(state: dict) -> dict:
        return {(e.get("query"), e.get("doc")): e.get("time", 0) for e in state.get("history", [])}
    when_new, when_old = last_change(new), last_change(old)
    overlay = {q: dict(d) for q, d in old.get("overlay", {}).items()}
    for query_id, docs in new.get("overlay", {}).items():
        for doc_id, grade in docs.items():
            if (query_id in overlay and doc_id in overlay[query_id]
                    and when_old.get((query_id, doc_id), 0) > when_new.get((query_id, doc_id), 0)):
                continue
            overlay.setdefault(query_id, {})[doc_id] = grade
    history = list(new.get("history", []))
    history += [e for e in old.get("history", []) if e not in history]
    history.sort(key=lambda e: e.get("time", 0))
    return {**new, "overlay": overlay, "history": history}


SOURCES = ("explicit", "implicit", "both")
UNATTRIBUTED = "unattributed"
RESERVED = ("dataset", "explicit", "implicit")
"""Not names of raters: the agreement report's names of the dataset's qrels, the judgments in
effect and the click-derived ones (``eval.cli.judging``)."""


def default_rater() -> str:
    """The OS user's name (what a grade's rater is when none is given)."""
    import getpass

    try:
        return check_rater(getpass.getuser())
    except (OSError, KeyError, ValueError):
        return "unknown"


def check_rater(name: str) -> str:
    """``name`` when it can name a rater (the stores' name rule, not a reserved word)."""
    from eval.stores.files import check_name

    check_name(name)
    if name in RESERVED:
        raise ValueError(f"{name!r} is not a rater's name (reserved: {', '.join(RESERVED)})")
    return name


def rater_of(entry: dict) -> str:
    return entry.get("rater") or UNATTRIBUTED


def rater_grades(history: list[dict], doc_ids: set[str] | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """rater → query → doc → the rater's last grade of the pair in ``history``."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for entry in history:
        if doc_ids is not None and entry.get("doc") not in doc_ids:
            continue
        out.setdefault(rater_of(entry), {}).setdefault(entry["query"], {})[entry["doc"]] = entry["after"]
    return out


def parse_raters(text: str | None) -> tuple[str, ...] | None:
    """``--raters alice,bob`` → ``("alice", "bob")``; None (all raters merged) when not given."""
    if not text:
        return None
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        return None
    for name in names:
        if name != UNATTRIBUTED:
            check_rater(name)
    return names


@dataclass(frozen=True)
class Judgments:
    """The judgments a figure is computed with, and the words that say which they are."""

    qrels: dict[str, dict[str, int]]
    label: str          # "dataset qrels" or "dataset qrels + N edits (history head H; raters: …)"
    edits: int          # judgments that differ from the dataset's own
    head: str           # the edit history's state ("" when there is none)
    source: str = "explicit"
    raters: tuple[str, ...] = ()    # whose grades are in effect
    chosen: bool = False            # the raters were chosen (not every rater merged)

    def to_json(self) -> dict:
        return {"label": self.label, "edits": self.edits, "history_head": self.head,
                "source": self.source, "raters": list(self.raters),
                "raters_view": "chosen" if self.chosen else "merged"}

    @property
    def count(self) -> int:
        """How many (query, document) judgments there are."""
        return sum(len(docs) for docs in self.qrels.values())


def _differences(dataset_qrels: dict, qrels: dict) -> int:
    """Pairs whose judgment differs from the dataset's: a 0 where the dataset has none counts
    (judged not relevant is not unjudged)."""
    pairs = {(q, d) for q, docs in (*dataset_qrels.items(), *qrels.items()) for d in docs}
    return sum(dataset_qrels.get(q, {}).get(d) != qrels.get(q, {}).get(d) for q, d in pairs)


def history_head(history: list[dict]) -> str:
    """A short name for the state of an edit history (the sha1 of the whole history)."""
    if not history:
        return ""
    return hashlib.sha1(json.dumps(history, sort_keys=True).encode()).hexdigest()[:8]


def _stamp(path: Path) -> tuple:
    try:
        stat = path.stat()
        return (stat.st_mtime_ns, stat.st_size)
    except FileNotFoundError:
        return (0, 0)


def judgment_sources(dataset: Dataset) -> tuple[str, ...]:
    """The judgment sources a dataset offers: implicit ones only with ``qrels/implicit.tsv``."""
    return SOURCES if (dataset.root / IMPLICIT_QRELS).is_file() else ("explicit",)


def judgments_version(dataset: Dataset, source: str, home: Path | None = None) -> tuple:
    """What ``effective_qrels(dataset, home, source)`` depends on besides the dataset, as a cache
    key: the source and the stamps of the workbench's judgment store and ``implicit.tsv``."""
    return (source, _stamp(JudgmentStore(dataset, home).path), _stamp(dataset.root / IMPLICIT_QRELS))


def effective_qrels(dataset: Dataset, home: Path | None = None,
                    source: str = "explicit", raters: tuple[str, ...] | None = None) -> Judgments:
    """The judgments of ``dataset`` every command and page uses.

    ``source``: ``explicit`` (default) — the dataset's qrels with the workbench's and
    ``rwb judge``'s edits applied; ``implicit`` — the click-derived judgments of
    ``qrels/implicit.tsv`` in the dataset folder alone; ``both`` — explicit ones, and implicit
    ones for the pairs nobody judged explicitly.

    ``raters``: whose grades apply (each pair: the last grade one of them gave); None (default):
    every rater's, merged — the last grade given to a pair by anyone. The label names them."""
    if source not in SOURCES:
        raise ValueError(f"judgment source must be one of {list(SOURCES)}, got {source!r}")
    store = JudgmentStore(dataset, home)
    state = store._load()
    by_rater = rater_grades(state["history"], {d.id for d in dataset.documents})
    if raters is None:
        qrels, used = store._merged(state), tuple(sorted(by_rater))
    else:
        unknown = [r for r in raters if r not in by_rater]
        if unknown:
            raise ValueError(f"no grades by rater {unknown[0]!r} for {dataset.name!r} "
                             f"(raters: {', '.join(sorted(by_rater)) or 'none yet'})")
        qrels = {q: dict(d) for q, d in dataset.qrels.items()}
        for entry in state["history"]:
            if rater_of(entry) in raters and entry["doc"] in by_rater[rater_of(entry)].get(entry["query"], {}):
                qrels.setdefault(entry["query"], {})[entry["doc"]] = entry["after"]
        qrels, used = {q: d for q, d in qrels.items() if d}, tuple(raters)
    edits, head = _differences(dataset.qrels, qrels), history_head(state["history"])
    plural = "s" if edits != 1 else ""
    who = (f"; raters: {', '.join(used)}" if raters is None
           else f"; raters: {', '.join(used)} only, of {', '.join(sorted(by_rater))}")
    label = (f"dataset qrels + {edits} edit{plural} (history head {head}{who})" if edits
             else "dataset qrels" + (f" (raters: {', '.join(used)} only)" if raters is not None else ""))
    if source == "explicit":
        return Judgments(qrels, label, edits, head, source, used if edits else (), raters is not None)
    path = dataset.root / IMPLICIT_QRELS
    if not path.is_file():
        raise ValueError(f"no implicit judgments for {dataset.name!r}: {path} does not exist; derive "
                         "them from usage logs with `rwb import ubi DATASET --queries … --events …`")
    # a 0 is a judgment too (shown, not clicked): judged non-relevant, not unjudged
    implicit = read_qrels_file(path, dataset)
    if source == "implicit":
        return Judgments({q: d for q, d in implicit.items() if d},
                         f"implicit judgments ({IMPLICIT_QRELS})", 0, "", source, ("implicit",))
    both = {q: dict(d) for q, d in implicit.items()}  # an explicit grade, a 0 included, wins
    for query_id, docs in qrels.items():
        both.setdefault(query_id, {}).update(docs)
    return Judgments({q: d for q, d in both.items() if d},
                     f"{label} + implicit judgments ({IMPLICIT_QRELS})", edits, head, source,
                     (*(used if edits else ()), "implicit"), raters is not None)


def rater_tables(dataset: Dataset, home: Path | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """Every set of grades an agreement can compare (``eval.statistics.agreement``): each named
    rater's, the dataset's own qrels (``dataset``), the judgments in effect (``explicit``: all
    raters merged over the dataset's) and, when the dataset has them, the click-derived ones
    (``implicit``, zeros included: shown and not clicked is a grade)."""
    tables = {"dataset": dataset.qrels, "explicit": effective_qrels(dataset, home).qrels}
    path = dataset.root / IMPLICIT_QRELS
    if path.is_file():
        tables["implicit"] = read_qrels_file(path, dataset)
    tables.update(JudgmentStore(dataset, home).raters())
    return tables


def trec_qrels(qrels: dict[str, dict[str, int]]) -> str:
    """Judgments as TREC qrels text (``qid 0 docid grade``), queries and documents sorted."""
    return "".join(f"{q}\t0\t{d}\t{g}\n"
                   for q in sorted(qrels) for d, g in sorted(qrels[q].items()))
