"""What every importer shares: the registry entry (``Importer`` and its ``Option``s), the
``ImportResult``, and the readers of JSONL/TSV text that report problems as ``file:line``.

Policies shared by the importers (each skip is counted and reported, never silent): qrels
rows naming an unknown query or document, or with a negative grade, are skipped; when a
qrels file exists, queries without any judgment are dropped (as BEIR's loader does), so
every evaluated query has judgments.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from retrieval.dataset import Dataset, DatasetError, loads_strict

MAX_PROBLEMS = 200


@dataclass(frozen=True)
class Option:
    """One option of an importer: a ``rwb import KIND`` flag and a field of the Data page's form.

    ``many``: may be given more than once (the importer receives a list); ``switch``: a flag
    without a value; ``path``: names a file or folder (``NAME=PATH`` when ``many``), so the
    Data page confines it to the data root."""

    flag: str
    help: str
    default: object = None
    required: bool = False
    many: bool = False
    switch: bool = False
    path: bool = False
    metavar: str | None = None

    @property
    def key(self) -> str:
        """The keyword the importer's run function receives."""
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.switch:
            parser.add_argument(self.flag, action="store_true", help=self.help)
            return
        parser.add_argument(
            self.flag,
            action="append" if self.many else "store",
            required=self.required,
            default=self.default,
            metavar=self.metavar,
            help=self.help,
        )


@dataclass(frozen=True)
class Importer:
    """A registry entry: ``IMPORTER = Importer(...)`` in a module of ``eval/importers/``.

    ``run(SRC, DEST, *, force, name, **options)`` (no SRC when ``source`` is None) builds the
    dataset and returns its ``ImportResult``; ``source`` is the help text of SRC."""

    name: str
    summary: str
    run: Callable[..., "ImportResult"]
    source: str | None = "a file or folder to import"
    dest: str = "the dataset folder to write"
    options: tuple[Option, ...] = ()
    existing: bool = False  # DEST is a dataset already, added to (not a new folder written)

    def __call__(
        self,
        source: str | Path | None,
        dest: str | Path,
        *,
        force: bool = False,
        name: str | None = None,
        **options,
    ) -> "ImportResult":
        known = {option.key: option for option in self.options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ValueError(f"import {self.name}: unknown option(s) {', '.join(unknown)}")
        for option in self.options:
            if option.required and not options.get(option.key):
                raise ValueError(f"import {self.name}: {option.flag} is required")
        args = (dest,) if self.source is None else (source, dest)
        return self.run(*args, force=force, name=name, **options)


@dataclass
class ImportResult:
    """What an import wrote, and what it skipped (reason → count)."""

    kind: str
    dest: Path
    dataset: Dataset
    skipped: Counter = field(default_factory=Counter)
    repaired: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def documents(self) -> int:
        return len(self.dataset.documents)

    @property
    def queries(self) -> int:
        return len(self.dataset.queries)

    @property
    def qrels(self) -> int:
        return sum(len(v) for v in self.dataset.qrels.values())

    def summary(self) -> str:
        groups = {d.group for d in self.dataset.documents if d.group}
        parts = [f"{self.documents} documents", f"{self.queries} queries", f"{self.qrels} qrels"]
        if groups:
            parts.append(f"{len(groups)} group{'s' if len(groups) != 1 else ''}")
        text = f"{self.kind}: {self.dest}: " + ", ".join(parts)
        skipped = [f"{n} {reason}" for reason, n in self.skipped.items() if n]
        if skipped:
            text += "; skipped " + ", ".join(skipped)
        repaired = [f"{n} {what}" for what, n in self.repaired.items() if n]
        if repaired:
            text += "; repaired " + ", ".join(repaired)
        return text


def inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


class Problems(list):
    def add(self, file: str, line: int, field_name: str, message: str) -> None:
        self.append(f"{file}:{line}: {field_name}: {message}")

    def raise_if_any(self) -> None:
        if self:
            raise DatasetError(self)


def lines(path: Path, problems: Problems, label: str) -> Iterator[tuple[int, str]]:
    """Numbered non-blank lines of a UTF-8 text file (problems for bad bytes, BOM tolerated)."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as error:
                problems.add(label, number, "encoding", f"not valid UTF-8 (byte {error.start})")
                continue
            if text.strip():
                yield number, text


def json_lines(path: Path, problems: Problems, label: str) -> Iterator[tuple[int, dict]]:
    for number, text in lines(path, problems, label):
        if len(problems) >= MAX_PROBLEMS:
            return
        try:
            obj = loads_strict(text)
        except ValueError as error:  # malformed, duplicate key, huge number, nested too deeply
            problems.add(
                label,
                number,
                getattr(error, "field", "json"),
                getattr(error, "message", str(error)),
            )
            continue
        if not isinstance(obj, dict):
            problems.add(label, number, "json", "expected a JSON object")
            continue
        yield number, obj


def record_id(obj: dict, problems: Problems, label: str, line: int) -> str | None:
    raw = obj.get("_id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not raw.strip():
        problems.add(label, line, "_id", "missing or empty")
        return None
    if raw != raw.strip() or any(c in raw for c in "\t\r\n"):
        problems.add(
            label,
            line,
            "_id",
            f"{raw!r} has a tab, line break or surrounding spaces (a qrels row could not name it)",
        )
        return None
    return raw


def record_lines(path: Path, label: str) -> tuple[set[str], list[tuple[str, str]]]:
    """The ids of a JSONL file's records and each ``(id, line)``; DatasetError naming
    ``file:line`` for a malformed line or a missing id."""
    problems = Problems()
    found: set[str] = set()
    kept = []
    for line, text in lines(path, problems, label):
        try:
            obj = loads_strict(text)
        except ValueError as error:
            problems.add(
                label, line, getattr(error, "field", "json"), getattr(error, "message", str(error))
            )
            continue
        found_id = record_id(obj, problems, label, line) if isinstance(obj, dict) else None
        if found_id is not None:
            found.add(found_id)
            kept.append((found_id, text))
    problems.raise_if_any()
    return found, kept


def dump(obj: dict) -> str:
    return json.dumps(obj, ensure_ascii=False) + "\n"


def copy_licences(folder: Path, tmp: Path) -> None:
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name.upper().startswith(("LICENSE", "LICENCE", "COPYING")):
            shutil.copyfile(path, tmp / path.name)


def source_card(folder: Path) -> dict:
    path = folder / "dataset.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid TOML ({error})") from None


def dataset_file(value: str | Path, filename: str, option: str) -> Path:
    path = Path(value)
    if path.is_dir():
        path = path / filename
    if not path.is_file():
        raise ValueError(f"{option} {value}: no {filename} there")
    return path
