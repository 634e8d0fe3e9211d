"""A markdown memory workspace → one memory per top-level bullet item, paragraph, table or
fenced code block of every ``.md`` file (headings become titles; scope, memory type and dates
follow the file's place and name)."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Iterator

from eval.importers._base import ImportResult, Importer, Option, dump, inside
from eval.importers._files import write_atomically
from eval.progress import iterate as _progress
from retrieval.dataset import MAX_TEXT_CHARS

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_BULLET = re.compile(r"( *)([-*+]|\d{1,9}[.)])([ \t]+|$)(.*)")
_RULE = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_FENCE = re.compile(r" *(`{3,}|~{3,})")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*")
_DATED = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
MEMORY_TYPES = {"preferences": "preference", "instructions": "instruction", "entities": "entity",
                "decisions": "decision", "patterns": "pattern", "tasks": "task"}


@dataclass
class Chunk:
    """One memory found in a markdown file: 1-based inclusive line range, heading as title."""

    title: str
    text: str
    line_start: int
    line_end: int


def chunk_markdown(text: str) -> list[Chunk]:
    """Split markdown into memories: one per top-level bullet item (nested items and
    continuation lines included), paragraph, table or fenced code block; headings (any
    level) end a memory and become the title of the ones that follow. YAML front matter,
    HTML comments and thematic breaks are not memories."""
    lines = text.splitlines()
    chunks: list[Chunk] = []
    title = ""
    block: list[tuple[int, str]] = []
    kind = ""          # "para" | "bullet" | "code"
    content_col = 0    # bullet: column where its text starts
    fence = ""         # open code fence marker, inside a block
    blank_seen = False

    def flush() -> None:
        nonlocal block, kind, blank_seen
        while block and not block[-1][1].strip():
            block.pop()
        if block:
            if kind == "bullet":
                first = _BULLET.fullmatch(block[0][1]).group(4)
                rest = [line[min(len(line) - len(line.lstrip(" ")), content_col):] for _, line in block[1:]]
                body = "\n".join([first, *rest])
            elif kind == "code":
                body = "\n".join(line for _, line in block)
            else:
                body = "\n".join(line.strip() for _, line in block)
            if body.strip():
                chunks.append(Chunk(title, body.strip("\n").rstrip(), block[0][0], block[-1][0]))
        block, kind, blank_seen = [], "", False

    start = 0
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
        if end is not None:
            start = end + 1
    in_comment = False
    for index in range(start, len(lines)):
        raw = lines[index]
        number, line = index + 1, raw[:len(raw) - len(raw.lstrip())].expandtabs(4) + raw.lstrip()
        if fence:
            block.append((number, line))
            marker = _FENCE.match(line)
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence) \
                    and not line.strip()[len(marker.group(1)):].strip():
                fence = ""
                if kind == "code":
                    flush()
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        if line.lstrip().startswith("<!--"):  # an HTML comment is not a memory
            in_comment = "-->" not in line[line.index("<!--") + 4:]
            continue
        stripped = line.strip()
        if not stripped:
            if kind == "para":
                flush()
            elif kind == "bullet":
                blank_seen = True
                block.append((number, line))
            continue
        marker = _FENCE.match(line)
        if marker:
            if kind == "bullet" and len(line) - len(line.lstrip(" ")) >= content_col:
                block.append((number, line))
            else:
                flush()
                kind, block = "code", [(number, line)]
            fence = marker.group(1)
            continue
        if kind == "para" and len(block) >= 1 and _SETEXT.fullmatch(line):
            title = " ".join(l.strip() for _, l in block)
            block, kind = [], ""
            continue
        heading = _HEADING.fullmatch(line)
        if heading:
            flush()
            title = (heading.group(2) or "").strip()
            continue
        if _RULE.fullmatch(line):
            flush()
            continue
        bullet = _BULLET.fullmatch(line)
        indent = len(line) - len(line.lstrip(" "))
        if bullet and (bullet.group(4).strip() or kind != "para"):
            if kind == "bullet" and indent >= content_col:
                block.append((number, line))  # nested item
                blank_seen = False
                continue
            flush()
            kind, block = "bullet", [(number, line)]
            content_col = len(bullet.group(1)) + len(bullet.group(2)) + max(1, len(bullet.group(3)))
            continue
        if kind == "bullet" and (indent >= content_col or not blank_seen):
            block.append((number, line))  # continuation (or lazy continuation) of the item
            blank_seen = False
            continue
        if kind != "para":
            flush()
            kind = "para"
        block.append((number, line))
    flush()
    return chunks


def _workspace_files(root: Path, result: ImportResult) -> Iterator[tuple[str, Path]]:
    """(relative posix path, file) for every markdown file inside ``root``; hidden entries and
    symbolic links leading outside it are skipped, linked folders are not descended into."""
    real_root = root.resolve()
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        for name in sorted(dirs):
            if name.startswith("."):
                dirs.remove(name)
            elif (base / name).is_symlink():
                result.skipped["linked folders (not followed)"] += 1
                dirs.remove(name)
        dirs.sort()
        for name in sorted(files):
            path = base / name
            if name.startswith(".") or path.suffix.lower() not in (".md", ".markdown"):
                continue
            if path.is_symlink():
                target = path.resolve()
                if not inside(target, real_root) or not target.is_file():
                    result.skipped["links pointing outside the workspace"] += 1
                    continue
            elif not path.is_file():
                continue
            yield path.relative_to(root).as_posix(), path


def _memory_type(rel: str) -> str:
    parts = rel.split("/")
    stem = Path(rel).stem.lower()
    if parts[0] == "journal" or (parts[0] == "memory" and _DATED.fullmatch(Path(rel).stem)):
        return "episode"
    return MEMORY_TYPES.get(stem, "fact")


def _file_time(rel: str, path: Path) -> datetime:
    match = _DATED.fullmatch(Path(rel).stem)
    if match:
        try:
            day = date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
            return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)
        except ValueError:
            pass
    return datetime.fromtimestamp(int(path.stat().st_mtime), tz=timezone.utc)


def import_markdown(src: str | Path, dest: str | Path, *, force: bool = False, name: str | None = None,
                    project: str | None = None, copy_files: bool = True) -> ImportResult:
    """A markdown memory workspace → one memory per bullet item / paragraph of every ``.md`` file.

    ``scope`` is global for ``user/*`` and ``MEMORY.md``, project otherwise (``project`` =
    the workspace folder's name unless given); ``memory_type`` follows the file name; dates
    come from a ``YYYY-MM-DD`` file name, else the file's mtime. The markdown files are
    copied into DEST too (so ``rwb show`` can read a memory's lines), unless ``copy_files``
    is false.
    """
    src = Path(src)
    if not src.is_dir():
        raise ValueError(f"{src}: not a folder (expected a markdown memory workspace)")
    if inside(Path(dest).resolve(), src.resolve()):
        raise ValueError(f"{dest}: DEST must be outside the workspace {src} (it would be imported next time)")
    project = project if project is not None else src.resolve().name
    card = {"description": f"Memories imported from the markdown workspace {src.resolve().name!r}."}

    def build(tmp: Path, result: ImportResult) -> None:
        docs = []
        copied: list[tuple[str, Path]] = []
        for rel, path in _progress(list(_workspace_files(src, result)), "files", unit="file"):
            try:
                text = path.read_bytes().decode("utf-8-sig")
            except UnicodeDecodeError as error:
                raise ValueError(f"{rel}: not valid UTF-8 (byte {error.start})") from None
            when = _file_time(rel, path).isoformat()
            scope = "global" if rel.startswith("user/") or rel == "MEMORY.md" else "project"
            memory_type = _memory_type(rel)
            for chunk in chunk_markdown(text):
                if len(chunk.text) > MAX_TEXT_CHARS:
                    raise ValueError(f"{rel}:{chunk.line_start}: text: a {len(chunk.text)}-character block "
                                     f"exceeds the {MAX_TEXT_CHARS} limit; split it")
                doc = {"_id": f"{rel}:{chunk.line_start}", "title": chunk.title, "text": chunk.text,
                       "path": rel, "line_start": chunk.line_start, "line_end": chunk.line_end,
                       "scope": scope, "memory_type": memory_type, "created_at": when, "updated_at": when}
                if scope == "project" and project:
                    doc["project"] = project
                docs.append(doc)
            copied.append((rel, path))
        if not docs:
            raise ValueError(f"{src}: no markdown memories found (no .md file with text)")
        with open(tmp / "corpus.jsonl", "w", encoding="utf-8") as out:
            out.writelines(dump(d) for d in docs)
        if copy_files:
            for rel, path in copied:
                target = tmp / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)

    return write_atomically("markdown", dest, build, force=force, sources=[src], name=name, card=card)


def _run(src, dest, *, no_copy: bool = False, project: str | None = None, **common) -> ImportResult:
    return import_markdown(src, dest, project=project, copy_files=not no_copy, **common)


IMPORTER = Importer(
    "markdown", "a markdown memory workspace (a folder of .md files)", _run,
    source="the workspace folder",
    options=(Option("--project", "project name of project-scope memories (default: SRC's folder name)"),
             Option("--no-copy", "do not copy the markdown files into DEST", switch=True)))
