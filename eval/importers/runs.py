"""Your runs: TREC run files (``qid Q0 docid rank score tag``) of your own retrievers, one per
path, imported with a corpus, queries and qrels into a dataset that carries them in ``runs/``.

A dataset with runs is retrieved from them, never from our index: its candidate pool
(``eval.stores.pool.load_pool``) takes the dense path from the run ``runs/paths.toml`` names
``dense`` and the sparse path from the one it names ``sparse`` (``retrieval.candidates.
candidates_from_runs``), stored under the label ``runs:<hash of the run files>``, so every
command (eval, sweep, tune, report, the pages) works on it with no index or model.

Layout written by ``rwb import runs OUT --corpus … --queries … --qrels … --run NAME=FILE``::

    OUT/corpus.jsonl, queries.jsonl, qrels/test.tsv   the dataset
    OUT/runs/NAME.run                                 each run, lines of unknown queries or
                                                      documents dropped (counted)
    OUT/runs/paths.toml                               dense = "NAME", sparse = "NAME"

The dense path is the run named ``dense`` (else the first given), the sparse path the run
named ``sparse`` (else the second); further runs are kept in ``runs/`` but the candidate
table has two paths, so only those two are fused.

A run's order is the file's: score descending and, where scores tie, the rank column (then
the line order), so a rank-based fusion (RRF, rank norms) sees each tied document at the rank
the file gives it; ``ranx`` ignores the rank column and keeps the line order for ties (its
``Run.from_file`` reads ``q_id, _, doc_id, _, score, _``; ``sort_dict_by_value`` argsorts,
stable for the ≤ 15 documents numba's quicksort insertion-sorts), the same order for a file
written by rank. Run scores enter the candidate table as float64
(``retrieval.candidates.candidates_from_runs``), so scores as close as 1e-50 and 2e-50 keep
their order.
"""

from __future__ import annotations

import hashlib
import math
import re
import tomllib
from pathlib import Path

import tomli_w

from eval.importers._base import (
    ImportResult,
    Importer,
    Option,
    Problems,
    dataset_file,
    lines,
    source_card,
)
from eval.importers._files import write_atomically
from eval.importers._qrels import copy_judged, parse_qrels
from retrieval.files import atomic_write_text, resolve_inside

RUNS_FOLDER = "runs"
PATHS_FILE = "paths.toml"
RUNS_LABEL = "runs"
RUNS_POOL_VERSION = b"2"  # in the label's hash: pools of runs read before ties and float64
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A TREC run file (``qid Q0 docid rank score tag``) → ``{qid: {docid: score}}``, each
    query's documents in the file's ranking: score descending; where scores tie, the rank
    column ascending, then the line order.

    Problems raise ValueError naming ``file:line`` (the first one, with a count of the rest).
    """
    path = Path(path)
    label = str(path)
    problems = Problems()
    rows: dict[str, list[tuple[float, int, int, str, float]]] = {}
    seen: dict[tuple[str, str], int] = {}
    for line, text in lines(path, problems, label):
        parts = text.split()
        if len(parts) != 6:
            problems.add(
                label,
                line,
                "row",
                f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}",
            )
            continue
        query_id, _, doc_id, rank, score, _ = parts
        try:
            position = int(rank)
        except ValueError:
            problems.add(label, line, "rank", f"expected an integer, got {rank!r}")
            continue
        try:
            value = float(score)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            problems.add(label, line, "score", f"expected a finite number, got {score!r}")
            continue
        if (query_id, doc_id) in seen:
            problems.add(
                label,
                line,
                "docid",
                f"{doc_id!r} listed twice for query {query_id!r} "
                f"(first on line {seen[query_id, doc_id]})",
            )
            continue
        seen[query_id, doc_id] = line
        rows.setdefault(query_id, []).append((-value, position, line, doc_id, value))
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)
    if not rows:
        raise ValueError(f"{label}: no run lines (the file is empty)")
    return {
        query_id: {doc_id: value for *_, doc_id, value in sorted(ranked)}
        for query_id, ranked in rows.items()
    }


def write_trec_run(run: dict[str, dict[str, float]], path: str | Path, tag: str = "rwb") -> None:
    """Write ``{qid: {docid: score}}`` as a TREC run, atomically: by score, ties in the order
    given (a run read by ``read_trec_run`` keeps its file's order), ranks renumbered 1…n."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r} must be a non-empty word without whitespace")
    lines = []
    for query_id, scores in run.items():
        query_id = str(query_id)
        if not query_id or any(c.isspace() for c in query_id):
            raise ValueError(f"query id {query_id!r} is empty or contains whitespace")
        ranked = sorted(((float(s), str(d)) for d, s in scores.items()), key=lambda p: -p[0])
        for rank, (score, doc_id) in enumerate(ranked, start=1):
            if not doc_id or any(c.isspace() for c in doc_id):
                raise ValueError(
                    f"document id {doc_id!r} (query {query_id!r}) is empty or contains whitespace"
                )
            if not math.isfinite(score):
                raise ValueError(
                    f"score {score!r} of {doc_id!r} (query {query_id!r}) is not finite"
                )
            lines.append(f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}\n")
    atomic_write_text(Path(path), "".join(lines))


# ---- a dataset's runs ---------------------------------------------------------------------


def has_runs(root: str | Path) -> bool:
    """Whether the dataset folder carries its own runs (``runs/paths.toml``)."""
    return (Path(root) / RUNS_FOLDER / PATHS_FILE).is_file()


def _inside(root: str | Path, name: str) -> Path:
    """``runs/<name>`` of the dataset, read only inside its folder: a symlink leaving it is
    refused (``retrieval.files.resolve_inside``), the same line whether or not its target
    exists."""
    try:
        return resolve_inside(Path(root), f"{RUNS_FOLDER}/{name}")
    except ValueError:
        raise ValueError(f"{Path(root) / RUNS_FOLDER / name}: resolves outside the dataset "
                         "folder (a symlink leaving it); a dataset's runs must be files inside "
                         "it") from None


def run_files(root: str | Path) -> dict[str, Path]:
    """``{"dense": file, "sparse": file}`` of a dataset with runs (a path may be absent)."""
    folder = Path(root) / RUNS_FOLDER
    try:
        paths = tomllib.loads(_inside(root, PATHS_FILE).read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{folder / PATHS_FILE}: not valid TOML ({error})") from None
    out = {}
    for path in ("dense", "sparse"):
        name = paths.get(path)
        if name is None:
            continue
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"{folder / PATHS_FILE}: {path} = {name!r} is not a run name")
        if not _inside(root, f"{name}.run").is_file():
            raise ValueError(f"{folder / PATHS_FILE}: {path} = {name!r} but {name}.run is missing")
        out[path] = _inside(root, f"{name}.run")
    if not out:
        raise ValueError(f"{folder / PATHS_FILE}: names neither a dense nor a sparse run")
    return out


def runs_label(root: str | Path) -> str:
    """``runs:<hash>``: the pool label of a dataset's runs (changes when a run changes)."""
    digest = hashlib.sha256(RUNS_POOL_VERSION)
    for path, file in sorted(run_files(root).items()):
        digest.update(path.encode() + b"\0" + file.read_bytes() + b"\0")
    return f"{RUNS_LABEL}:{digest.hexdigest()[:16]}"


def ranked_lists(run: dict[str, dict[str, float]]) -> dict[str, list[tuple[str, float]]]:
    """Per query, the run's ``(doc_id, score)`` best first (ties in the run's own order, as
    ``read_trec_run`` ranks them)."""
    return {
        query_id: sorted(scores.items(), key=lambda item: -item[1])
        for query_id, scores in run.items()
    }


def dataset_run_lists(root: str | Path) -> tuple[dict, dict]:
    """The dense and sparse ranked lists of a dataset with runs (empty for an absent path)."""
    files = run_files(root)
    return tuple(
        ranked_lists(read_trec_run(files[path])) if path in files else {}
        for path in ("dense", "sparse")
    )


# ---- the importer ---------------------------------------------------------------------------


def parse_run_specs(specs: list[str] | None) -> dict[str, Path]:
    """``["dense=a.run", "sparse=b.run"]`` → ``{"dense": Path("a.run"), …}`` (names unique)."""
    out: dict[str, Path] = {}
    for spec in specs or ():
        name, sep, file = spec.partition("=")
        if not sep or not file:
            raise ValueError(f"--run {spec!r}: expected NAME=FILE, e.g. dense=dense.run")
        if not _NAME.fullmatch(name) or name == PATHS_FILE:
            raise ValueError(f"--run {spec!r}: the name must be letters, digits, '_', '-' or '.'")
        if name in out:
            raise ValueError(f"--run {name}: given twice")
        if not Path(file).is_file():
            raise ValueError(f"--run {spec!r}: {file} is not a file")
        out[name] = Path(file)
    if not out:
        raise ValueError(
            "give at least one --run NAME=FILE (a TREC run: qid Q0 docid rank score tag)"
        )
    return out


def path_roles(names: list[str]) -> dict[str, str]:
    """Which run plays which path: ``dense`` / ``sparse`` by name, else the first / second."""
    roles: dict[str, str] = {}
    rest = [n for n in names if n not in ("dense", "sparse")]
    for path in ("dense", "sparse"):
        if path in names:
            roles[path] = path
        elif rest:
            roles[path] = rest.pop(0)
    return roles


def import_runs(
    dest: str | Path,
    *,
    corpus: str | Path,
    queries: str | Path,
    qrels: str | Path,
    run: list[str],
    force: bool = False,
    name: str | None = None,
) -> ImportResult:
    """Corpus + queries + qrels + one TREC run per retrieval path → a dataset with ``runs/``."""
    runs = parse_run_specs(run)
    corpus_path = dataset_file(corpus, "corpus.jsonl", "--corpus")
    queries_path = dataset_file(queries, "queries.jsonl", "--queries")
    qrels_path = Path(qrels)
    if not qrels_path.is_file():
        raise ValueError(
            f"--qrels {qrels}: not a file (TSV query-id corpus-id score, or TREC qid 0 docid grade)"
        )
    rows = parse_qrels(qrels_path, trec=False, label=str(qrels_path))
    card = source_card(corpus_path.parent) if corpus_path.name == "corpus.jsonl" else {}
    roles = path_roles(list(runs))
    card["description"] = (
        card.get("description", "")
        + " Retrieved by the runs "
        + ", ".join(f"{run_name} ({path})" for path, run_name in roles.items())
        + "."
    ).strip()

    def build(tmp: Path, result: ImportResult) -> None:
        doc_ids, judged = copy_judged(tmp, corpus_path, queries_path, rows, result)
        (tmp / RUNS_FOLDER).mkdir()
        for run_name, file in runs.items():
            kept: dict[str, dict[str, float]] = {}
            for query_id, scores in read_trec_run(file).items():
                if query_id not in judged:
                    result.skipped[f"{run_name} run lines of queries not imported"] += len(scores)
                    continue
                unknown = [d for d in scores if d not in doc_ids]
                result.skipped[f"{run_name} run lines naming an unknown document"] += len(unknown)
                kept[query_id] = {d: s for d, s in scores.items() if d in doc_ids}
            if not any(kept.values()):
                raise ValueError(
                    f"--run {run_name}={file}: no line names an imported query and document"
                )
            write_trec_run(
                {q: s for q, s in kept.items() if s},
                tmp / RUNS_FOLDER / f"{run_name}.run",
                tag=run_name,
            )
        (tmp / RUNS_FOLDER / PATHS_FILE).write_text(tomli_w.dumps(roles), "utf-8")
        result.notes.append(
            "paths: "
            + ", ".join(f"{path} = run {n!r}" for path, n in roles.items())
            + (
                f"; kept but not fused: {', '.join(n for n in runs if n not in roles.values())}"
                if len(runs) > len(roles)
                else ""
            )
        )

    sources = [
        corpus_path.parent,
        queries_path.parent,
        qrels_path.parent,
        *(f.parent for f in runs.values()),
    ]
    return write_atomically("runs", dest, build, force=force, sources=sources, name=name, card=card)


IMPORTER = Importer(
    "runs",
    "your runs: TREC run files (one per retrieval path) with a corpus, queries and qrels",
    lambda dest, **options: import_runs(dest, **options),
    source=None,
    options=(
        Option(
            "--corpus", "corpus.jsonl (or a dataset folder holding one)", required=True, path=True
        ),
        Option(
            "--queries", "queries.jsonl (or a dataset folder holding one)", required=True, path=True
        ),
        Option(
            "--qrels",
            "qrels: TSV query-id corpus-id score, or TREC qid 0 docid grade",
            required=True,
            path=True,
        ),
        Option(
            "--run",
            "NAME=FILE: a TREC run of one retrieval path (repeat; dense = the run named "
            "dense or the first, sparse = the run named sparse or the second)",
            required=True,
            many=True,
            path=True,
            metavar="NAME=FILE",
        ),
    ),
)
