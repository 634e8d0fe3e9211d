"""Escaping of user strings for the two markup languages the pages render.

Dataset names, document text and titles, query text and profile names come from files a
user imported: rendered raw (in a page, or in ``report.md``, which the Reports page also
renders), Markdown turns ``![x](http://…)`` into an image beacon and
``[x](…)`` into a link, and HTML runs as markup. Every user string that reaches
``st.markdown``/``st.caption``/a label goes through ``md``; every one that reaches
``st.html`` goes through ``html`` (``markupsafe``-style escaping, nothing else); every one a
plotly chart shows (trace names, category labels, titles) through ``plain``: plotly reads
``<b>``, ``<br>``, ``<a href>``… there as markup and decodes ``&lt;`` back to ``<`` on screen.
Control characters (a terminal's escape sequences, characters XML refuses, bidirectional
overrides) are shown as ``\\xNN`` / ``\\uNNNN`` by every one of them (``printable``), and by
the command line's outputs (its one-line results and errors, JUnit XML).
"""

from __future__ import annotations

import html as _html
import re

# C0/C1 controls, DEL, lone surrogates, XML's non-characters, bidirectional embeddings/overrides/isolates
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_LINES = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
                                "\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match) -> str:
    code_point = ord(match.group(0))
    return f"\\x{code_point:02x}" if code_point < 0x100 else f"\\u{code_point:04x}"


def printable(text: object, lines: bool = False) -> str:
    """``text`` with every control character written out as ``\\xNN`` / ``\\uNNNN`` (``ESC``
    → ``\\x1b``, so a name cannot clear a terminal or break an XML file); ``lines`` keeps tab,
    newline and carriage return."""
    return (_CONTROL_BUT_LINES if lines else _CONTROL).sub(_escaped, str(text))


# every character Markdown (CommonMark + GFM + Streamlit's :colour[...] / :material/...: directives
# and $math$) may read as syntax
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$&])")


def md(text: object) -> str:
    """``text`` shown literally inside Markdown: every syntax character backslash-escaped,
    newlines folded to spaces (a caption is one line)."""
    return _MD_SPECIAL.sub(r"\\\1", printable(" ".join(str(text).split())))


_MD_INLINE = re.compile(r"([\\`*_{}\[\]<>!|~$&])")
_AUTOLINK = re.compile(r"(?i)(://|\bwww\.)")


def md_inline(text: object) -> str:
    """``text`` inside a line of a Markdown document (``report.md``), readable as plain text:
    only what opens markup mid-line is escaped — images and links (``[``, ``]``, ``!``), HTML and
    autolinks (``<``, ``&``, ``://``, ``www.``), code, emphasis, tables, math — not ``.``, ``-``
    or ``(``, which matter only at the start of a line; newlines are folded to spaces."""
    escaped = _MD_INLINE.sub(r"\\\1", printable(" ".join(str(text).split())))
    return _AUTOLINK.sub(lambda m: m.group(1).replace("/", "\\/").replace(".", "\\."), escaped)


def html(text: object) -> str:
    """``text`` shown literally inside HTML (quotes included, for attributes)."""
    return _html.escape(printable(text, lines=True), quote=True)


def plain(text: object) -> str:
    """``text`` as a plotly label shows it literally: ``&``, ``<`` and ``>`` escaped."""
    return printable(text, lines=True).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plain_figure(fig):
    """``fig`` with every text a chart shows from data made ``plain``: trace names, string
    category values on either axis, titles of the chart and its axes, menu labels (hover
    templates, written by the code, keep their markup). Returns ``fig``, changed in place."""
    for trace in fig.data:
        if isinstance(getattr(trace, "name", None), str):
            trace.name = plain(trace.name)
        for axis in ("x", "y"):
            values = getattr(trace, axis, None)
            if values is not None and len(values) and all(isinstance(v, str) for v in values):
                setattr(trace, axis, [plain(v) for v in values])
    layout = fig.layout
    for title in (layout.title, *(getattr(layout, a).title for a in ("xaxis", "yaxis"))):
        if isinstance(title.text, str):
            title.text = plain(title.text)
    for menu in layout.updatemenus or ():
        for button in menu.buttons or ():
            if isinstance(button.label, str):
                button.label = plain(button.label)
    return fig


def code(text: object) -> str:
    """``text`` as inline code in Markdown; backticks inside cannot close it."""
    body = printable(" ".join(str(text).split())).replace("`", "ˋ")
    return f"`{body}`" if body else ""


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{text}\n{bar}"
