"""AppTest: the page tests' harness (the workbench started on the tiny dataset, ``start``, and the
helpers every page's tests read it with), every page runs, and what spans the pages: user strings
never reach Markdown unescaped, the judgment source in the sidebar drives every figure. Each
page's own tests: ``tests/pages/test_<page>_page.py``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "tiny"
PAGES = ["pages/tune.py", "pages/evaluate.py", "pages/sweep.py", "pages/profiles.py", "pages/data.py",
         "pages/reports.py"]
TITLES = {"pages/tune.py": "Tune", "pages/evaluate.py": "Evaluate", "pages/sweep.py": "Sweep",
          "pages/profiles.py": "Profiles", "pages/data.py": "Data", "pages/reports.py": "Reports"}


def start(home, monkeypatch, dataset: Path = TINY) -> AppTest:
    monkeypatch.setenv("RWB_DATASET", str(dataset))
    monkeypatch.setenv("RWB_HOME", str(home))
    monkeypatch.setenv("LANCEDB_LOG", "error")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    st.cache_data.clear()
    st.cache_resource.clear()
    for store in ("judgments", "profiles", "tries", "snapshots"):
        for path in (home / store).glob("*") if (home / store).is_dir() else ():
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (home / "experiments.json").unlink(missing_ok=True)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.switch_page(page).run()
    assert not at.exception
    return at


def run(element) -> AppTest:
    at = element.run()
    assert not at.exception
    return at


def frame_with(at: AppTest, *columns: str, without: str | None = None):
    """The first dataframe shown with these columns (plain dataframes carry no key in AppTest)."""
    for element in at.dataframe:
        value = element.value
        if all(c in value.columns for c in columns) and (without is None or without not in value.columns):
            return value
    return None


def html_bodies(at: AppTest) -> list[str]:
    return [element.proto.body for element in at.get("html")]


def shown_docs(at: AppTest, baseline: bool = False) -> list[str]:
    """Document ids of Tune's current ranking (it has the Δ column) or of the baseline's."""
    for body in html_bodies(at):
        if 'class="rwb-t"' in body and "<thead>" in body and (("Δ</th>" in body) != baseline):
            return re.findall(r"<td><code>([^<]*)</code></td>", body)
    return []


def metric_values(at: AppTest) -> dict[str, str]:
    """Metric cards: label → value (first card row on the page)."""
    for body in html_bodies(at):
        if "rwb-card" in body:
            return dict(re.findall(r'<div class="l">([^<]*)</div><div class="v">([^<]*)</div>', body))
    return {}


def markdown_texts(at: AppTest) -> list[str]:
    return [e.value for e in (*at.markdown, *at.caption, *at.warning, *at.error, *at.info, *at.success)]


def texts(at: AppTest) -> list[str]:
    """Markdown texts, plus the HTML elements' text with the tags removed."""
    return markdown_texts(at) + [re.sub(r"<[^>]+>", "", body) for body in html_bodies(at)]


@pytest.mark.parametrize("page", PAGES)
def test_each_page_runs(app, page):
    at = goto(app, page)
    assert at.title[0].value == TITLES[page]


def test_user_strings_are_escaped_in_markdown(home, monkeypatch, tmp_path):
    evil = tmp_path / "evil"
    shutil.copytree(TINY, evil)
    card = (evil / "dataset.toml").read_text().replace('name = "tiny"',
                                                         'name = "x ![b](http://127.0.0.1:9/b.png) [l](http://e.x)"')
    (evil / "dataset.toml").write_text(card)
    at = start(home, monkeypatch, evil)
    for page in ("pages/tune.py", "pages/data.py", "pages/reports.py", "pages/sweep.py", "pages/evaluate.py"):
        at = goto(at, page)
        shown = markdown_texts(at) + [e.value for e in at.sidebar.caption]
        literal = [re.sub(r"\\(.)", r"\1", t) for t in shown]          # as the reader sees it
        assert any("![b](http://127.0.0.1:9/b.png)" in t for t in literal), page   # the name is shown…
        for t in shown:                                                # …but never as an image or a link
            assert "![b](" not in t and "[l](" not in t, (page, t)
    st.cache_resource.clear()


# ---- the app run through app.py (sidebar and navigation), as in a browser ---------------------

def route_through_main(monkeypatch) -> None:
    """Every run goes through app.py (sidebar and navigation), as in a browser once the first page
    has loaded: AppTest otherwise re-enters the legacy pages/ mode and runs the page alone."""
    from streamlit.runtime.pages_manager import PagesManager

    original = PagesManager.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


def _stamp():
    from pages._state import dataset_stamp

    return dataset_stamp(str(TINY))


# ---- issue 24 on the pages: the judgments every figure uses --------------------------------------

def with_implicit(tmp_path) -> Path:
    """tiny with click-derived judgments that grade only q1: d05 (so one query counts)."""
    folder = tmp_path / "tiny-clicks"
    shutil.copytree(TINY, folder)
    (folder / "qrels" / "implicit.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td05\t3\n")
    return folder


def test_judgment_source_in_the_sidebar_drives_every_figure_and_is_named(home, monkeypatch,
                                                                         tmp_path):
    route_through_main(monkeypatch)
    at = start(home, monkeypatch, with_implicit(tmp_path))
    choice = at.sidebar.selectbox(key="rwb_judgments")
    assert choice.options == ["explicit (qrels + edits)", "implicit (clicks)",
                              "both (explicit first)"]
    assert any("over 4 judged queries" in t and "judgments: dataset qrels" in t for t in texts(at))

    def sidebar_count():  # the sidebar names how many judgments the chosen source holds
        return next(c.value for c in at.sidebar.caption if "judgments" in c.value).split(" · ")[-1]

    assert sidebar_count() == "4 judgments (explicit)"    # tiny's qrels: 4 lines
    at = run(choice.set_value("implicit"))
    implicit = "implicit judgments (qrels/implicit.tsv)"
    assert any("over 1 judged queries" in t and f"judgments: {implicit}" in t for t in texts(at))
    assert sidebar_count() == "1 judgments (implicit)"    # implicit.tsv: q1 d05
    at = goto(at, "pages/evaluate.py")
    caption = " ".join(texts(at)).replace("\\", "")
    assert "1 judged queries" in caption and f"Judgments: {implicit}" in caption
    at = run(at.sidebar.selectbox(key="rwb_judgments").set_value("both"))
    caption = " ".join(texts(at)).replace("\\", "")
    assert "4 judged queries" in caption and "+ implicit judgments" in caption
    assert sidebar_count() == "5 judgments (both)"        # the 4, and q1 d05 nobody judged
    st.cache_resource.clear()


def test_judgment_source_offers_implicit_only_where_the_dataset_has_it(app_through_main):
    choice = app_through_main.sidebar.selectbox(key="rwb_judgments")
    assert choice.options == ["explicit (qrels + edits)"] and choice.disabled


