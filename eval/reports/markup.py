"""Escaping of user strings for the two markup languages the pages render.

Dataset names, document text and titles, query text and profile names come from files a
user imported: rendered raw (in a page, or in ``report.md``, which the Reports page also
renders), Markdown turns ``![x](http://…)`` into an image beacon and
``[x](…)`` into a link, and HTML runs as markup. Every user string that reaches
``st.markdown``/``st.caption``/a label goes through ``md``; every one that reaches
``st.html`` goes through ``html`` (``markupsafe``-style escaping, nothing else); every one a
plotly chart shows (trace names, category labels, titles) through ``plain``: plotly reads
``<b>``, ``<br>``, ``<a href>``… there as markup and decodes ``&lt;`` back to ``<`` on screen.
"""

from __future__ import annotations

import html as _html
import re

# every character Markdown (CommonMark + GFM + Streamlit's :colour[...] / :material/...: directives
# and $math$) may read as syntax
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$&])")


def md(text: object) -> str:
    """``text`` shown literally inside Markdown: every syntax character backslash-escaped,
    newlines folded to spaces (a caption is one line)."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(text).split()))


_MD_INLINE = re.compile(r"([\\`*_{}\[\]<>!|~$&])")
_AUTOLINK = re.compile(r"(?i)(://|\bwww\.)")


def md_inline(text: object) -> str:
    """``text`` inside a line of a Markdown document (``report.md``), readable as plain text:
    only what opens markup mid-line is escaped — images and links (``[``, ``]``, ``!``), HTML and
    autolinks (``<``, ``&``, ``://``, ``www.``), code, emphasis, tables, math — not ``.``, ``-``
    or ``(``, which matter only at the start of a line; newlines are folded to spaces."""
    escaped = _MD_INLINE.sub(r"\\\1", " ".join(str(text).split()))
    return _AUTOLINK.sub(lambda m: m.group(1).replace("/", "\\/").replace(".", "\\."), escaped)


def html(text: object) -> str:
    """``text`` shown literally inside HTML (quotes included, for attributes)."""
    return _html.escape(str(text), quote=True)


def plain(text: object) -> str:
    """``text`` as a plotly label shows it literally: ``&``, ``<`` and ``>`` escaped."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
    body = " ".join(str(text).split()).replace("`", "ˋ")
    return f"`{body}`" if body else ""


def fence(text: str, info: str = "") -> str:
    """``text`` as a fenced code block whose fence is longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    bar = "`" * max(3, longest + 1)
    return f"{bar}{info}\n{text}\n{bar}"
