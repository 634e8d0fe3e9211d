"""A report as data: a list of sections built once, rendered twice — as Markdown (``report.md``,
every text from data escaped by ``eval.reports.markup``) and as HTML (``report.html``, escaped
by ``html.escape``). A section holds paragraphs, bullet lists, tables, code blocks and charts; a
chart is drawn in HTML and shown as its table (or not at all) in Markdown, so a section's
content is stated once whichever way it is read."""

from __future__ import annotations

import html
from dataclasses import dataclass

from eval.reports.markup import code, fence, md_inline
from eval.statistics.significance import DOWN, UP


@dataclass(frozen=True)
class Code:
    """Inline code (a name, a hash, an option) inside a line or a table cell."""

    text: str


def _parts(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


@dataclass(frozen=True)
class Para:
    """One paragraph: text and ``Code`` parts; ``muted`` shown smaller in HTML."""

    parts: tuple
    muted: bool = False


@dataclass(frozen=True)
class Bullets:
    """A bullet list; each line a text or a tuple of parts."""

    lines: tuple


@dataclass(frozen=True)
class Table:
    """Header and rows (cells: text, numbers or ``Code``); ``numeric_from``: the first column
    right-aligned in HTML; ``marked``: a trailing ▲/▼ coloured in HTML."""

    header: tuple
    rows: tuple
    numeric_from: int = 1
    marked: bool = False


@dataclass(frozen=True)
class Block:
    """A code block under its caption (Markdown: the caption, then a fence; HTML: a
    collapsed ``details``)."""

    caption: tuple
    text: str
    info: str = "toml"


@dataclass(frozen=True)
class Chart:
    """A chart's HTML (plotly, made by the report); Markdown shows ``table`` in its place."""

    html: str
    table: Table | None = None


@dataclass(frozen=True)
class Section:
    title: str
    items: tuple
    level: int = 2


# ---- Markdown -------------------------------------------------------------------------------

def _md_parts(value) -> str:
    return "".join(code(p.text) if isinstance(p, Code) else md_inline(p) for p in _parts(value))


def _md_table(table: Table) -> list[str]:
    cell = lambda v: code(v.text) if isinstance(v, Code) else md_inline(v)
    out = ["| " + " | ".join(cell(h) for h in table.header) + " |", "|" + "|".join("---" for _ in table.header) + "|"]
    return out + ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.rows] + [""]


def _md_item(item) -> list[str]:
    if isinstance(item, Para):
        return [_md_parts(item.parts), ""]
    if isinstance(item, Bullets):
        return [*(f"- {_md_parts(line)}" for line in item.lines), ""]
    if isinstance(item, Table):
        return _md_table(item)
    if isinstance(item, Block):
        return [_md_parts(item.caption), "", fence(item.text.rstrip(), item.info), ""]
    if isinstance(item, Chart):
        return _md_table(item.table) if item.table is not None else []
    raise TypeError(f"not a report item: {item!r}")


def to_markdown(sections: list[Section]) -> str:
    lines: list[str] = []
    for section in sections:
        lines += [f"{'#' * section.level} {md_inline(section.title)}", ""]
        for item in section.items:
            lines += _md_item(item)
    return "\n".join(lines)


# ---- HTML -------------------------------------------------------------------------------------

def _esc(value) -> str:
    return html.escape(str(value))


def _html_parts(value) -> str:
    return "".join(f"<code>{_esc(p.text)}</code>" if isinstance(p, Code) else _esc(p) for p in _parts(value))


def _html_cell(value, marked: bool) -> str:
    if isinstance(value, Code):
        return f"<code>{_esc(value.text)}</code>"
    text = _esc(value)
    if marked:
        for mark, css in ((UP, "up"), (DOWN, "down")):
            if text.endswith(mark):
                return f"{text[:-1]}<span class=\"{css}\">{mark}</span>"
    return text


def html_table(table: Table) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in table.header)
    body = "".join(
        "<tr>" + "".join(
            f"<td class=\"num\">{_html_cell(v, table.marked)}</td>" if i >= table.numeric_from
            else f"<td>{_html_cell(v, table.marked)}</td>" for i, v in enumerate(row)
        ) + "</tr>" for row in table.rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _html_item(item) -> str:
    if isinstance(item, Para):
        return f"<p class=\"muted\">{_html_parts(item.parts)}</p>" if item.muted else f"<p>{_html_parts(item.parts)}</p>"
    if isinstance(item, Bullets):
        return "<ul>" + "".join(f"<li>{_html_parts(line)}</li>" for line in item.lines) + "</ul>"
    if isinstance(item, Table):
        return html_table(item)
    if isinstance(item, Block):
        return f"<details><summary>{_html_parts(item.caption)}</summary><pre>{_esc(item.text)}</pre></details>"
    if isinstance(item, Chart):
        return item.html
    raise TypeError(f"not a report item: {item!r}")


def to_html(sections: list[Section]) -> str:
    return "".join(f"<h{s.level}>{_esc(s.title)}</h{s.level}>" + "".join(_html_item(i) for i in s.items)
                   for s in sections)
