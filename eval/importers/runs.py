"""TREC run files (``qid Q0 docid rank score tag``): read with ``file:line`` problems, and
written atomically."""

from __future__ import annotations

import math
from pathlib import Path

from eval.importers._base import Problems, lines
from retrieval.files import atomic_write_text


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    """A TREC run file (``qid Q0 docid rank score tag``) → ``{qid: {docid: score}}``.

    Problems raise ValueError naming ``file:line`` (the first one, with a count of the rest).
    """
    path = Path(path)
    label = str(path)
    problems = Problems()
    run: dict[str, dict[str, float]] = {}
    seen: dict[tuple[str, str], int] = {}
    for line, text in lines(path, problems, label):
        parts = text.split()
        if len(parts) != 6:
            problems.add(label, line, "row", f"expected 6 columns (qid Q0 docid rank score tag), got {len(parts)}")
            continue
        query_id, _, doc_id, rank, score, _ = parts
        try:
            int(rank)
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
            problems.add(label, line, "docid", f"{doc_id!r} listed twice for query {query_id!r} "
                                                f"(first on line {seen[query_id, doc_id]})")
            continue
        seen[query_id, doc_id] = line
        run.setdefault(query_id, {})[doc_id] = value
    if problems:
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)
    if not run:
        raise ValueError(f"{label}: no run lines (the file is empty)")
    return run


def write_trec_run(run: dict[str, dict[str, float]], path: str | Path, tag: str = "rwb") -> None:
    """Write ``{qid: {docid: score}}`` as a TREC run (ranked by score, ties by docid), atomically."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r} must be a non-empty word without whitespace")
    lines = []
    for query_id, scores in run.items():
        query_id = str(query_id)
        if not query_id or any(c.isspace() for c in query_id):
            raise ValueError(f"query id {query_id!r} is empty or contains whitespace")
        ranked = sorted(((float(s), str(d)) for d, s in scores.items()), key=lambda p: (-p[0], p[1]))
        for rank, (score, doc_id) in enumerate(ranked, start=1):
            if not doc_id or any(c.isspace() for c in doc_id):
                raise ValueError(f"document id {doc_id!r} (query {query_id!r}) is empty or contains whitespace")
            if not math.isfinite(score):
                raise ValueError(f"score {score!r} of {doc_id!r} (query {query_id!r}) is not finite")
            lines.append(f"{query_id} Q0 {doc_id} {rank} {score!r} {tag}\n")
    atomic_write_text(Path(path), "".join(lines))

