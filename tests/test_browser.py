"""End to end in headless Chromium: the real server, the real browser, Tune's knobs.

Skips cleanly without Debian's /usr/bin/chromium (``make chromium`` installs it) or the
``playwright`` package. Screenshots go to ``artifacts/`` (gitignored).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "fixtures" / "tiny"
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FIRST_PAINT_MS = 180_000    # first load builds the tiny index and candidate pool (model load included)
STEP_MS = 90_000            # any later wait: generous, the test machines are shared and often loaded

TOP_DOC_JS = """() => {
  const table = document.querySelector('[data-testid="stMain"] [data-testid="stDataFrame"] table');
  if (!table) return null;
  const heads = [...table.querySelectorAll('thead th')].map(h => h.textContent.trim());
  const col = heads.indexOf('doc');
  const row = table.querySelector('tbody tr');
  if (col < 0 || !row) return null;
  const cells = row.querySelectorAll('td');
  return cells.length > col ? cells[col].textContent.trim() : null;
}"""
METRICS_JS = """() => [...document.querySelectorAll('[data-testid="stMetricValue"]')]
  .map(e => e.textContent.trim()).join('|')"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed (/usr/bin/chromium); run `make chromium`")
    pytest.importorskip("playwright.sync_api")
    home = tmp_path_factory.mktemp("rwb-home-browser")
    port = free_port()
    env = dict(os.environ, RWB_DATASET=str(TINY), RWB_HOME=str(home), LANCEDB_LOG="error", HF_HUB_OFFLINE="1")
    log = open(home / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode}: {(home / 'streamlit.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("streamlit did not become healthy within 60 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def page(server):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 2400})
            pg = context.new_page()
            # a page URL as the server's very first request: it must still go through app.py
            pg.goto(f"{server}/evaluate")
            pg.wait_for_selector('[data-testid="stMain"] [data-testid="stDataFrame"]', timeout=FIRST_PAINT_MS)
            settle(pg)
            yield pg
        finally:
            browser.close()


def settle(pg, quiet_ms: int = 400) -> None:
    """Wait until the script run indicator has been gone for a moment (the page is final)."""
    pg.wait_for_function("""(quiet) => {
      const running = document.querySelector('[data-testid="stStatusWidget"], [data-testid="stSpinner"]');
      const now = performance.now();
      if (running) { window.__rwbQuietSince = null; return false; }
      window.__rwbQuietSince = window.__rwbQuietSince || now;
      return now - window.__rwbQuietSince > quiet;
    }""", arg=quiet_ms, timeout=STEP_MS, polling=50)


def press_until(pg, slider, key: str, value: str, attempts: int = 3) -> float:
    """Focus a slider and press ``key`` until its value reads ``value``; return when the
    successful press started (a late rerun can re-mount the input and swallow a key press)."""
    for _ in range(attempts):
        slider.focus()
        start = time.perf_counter()
        pg.keyboard.press(key)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if slider.input_value() == value:
                return start
            time.sleep(0.02)
    pytest.fail(f"the slider did not move to {value} after {attempts} presses of {key}")


def wait_for_charts(pg, count: int) -> None:
    """Plotly charts mount after the script run ends: wait until ``count`` are drawn."""
    pg.wait_for_function("""(n) => [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
      .filter(chart => chart.querySelector('.main-svg')).length >= n""", arg=count, timeout=STEP_MS)


def open_page(pg, title: str) -> None:
    pg.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
    pg.get_by_role("heading", name=title, exact=True).wait_for(timeout=STEP_MS)
    settle(pg)


def test_direct_page_url_runs_through_app_navigation(page):
    assert page.get_by_role("heading", name="Evaluate", exact=True).is_visible()
    nav = page.get_by_test_id("stSidebarNav").inner_text()
    assert "Workbench" in nav and "Tune" in nav and "shared" not in nav    # not Streamlit's legacy page list
    sidebar = page.get_by_test_id("stSidebar").inner_text()
    assert "Embedder" in sidebar and "Baseline" in sidebar                 # app.py's sidebar ran
    wait_for_charts(page, 2)                                              # per intent + per query
    page.screenshot(path=str(ARTIFACTS / "evaluate.png"))


def test_tune_knob_changes_top_result_and_metrics(page):
    pg = page
    open_page(pg, "Tune")
    pg.wait_for_selector('[data-testid="stMain"] [data-testid="stDataFrame"]', timeout=STEP_MS)
    # pick q4 ("user_id 列改名了吗"): its keyword hit d06 leads only while BM25 has weight
    pg.get_by_test_id("stSelectbox").filter(has_text="Query from the set").click()
    option = pg.get_by_role("option", name=re.compile(r"^q4 ·"))
    option.wait_for(timeout=STEP_MS)
    option.click()
    pg.wait_for_function(f"() => ({TOP_DOC_JS})() === 'd06'", timeout=STEP_MS)
    settle(pg)
    top_before, metrics_before = pg.evaluate(TOP_DOC_JS), pg.evaluate(METRICS_JS)
    slider = pg.get_by_test_id("stSlider").filter(has_text="Sparse weight").locator('input[type="range"]')
    start = press_until(pg, slider, "Home", "0")                 # sparse weight → 0
    pg.wait_for_function(
        f"([top, metrics]) => {{ const t = ({TOP_DOC_JS})(); const m = ({METRICS_JS})();"
        f" return t !== null && t !== top && m !== metrics && m.length > 0; }}",
        arg=[top_before, metrics_before], timeout=STEP_MS, polling="raf")
    round_trip_ms = (time.perf_counter() - start) * 1000
    settle(pg)
    top_after, metrics_after = pg.evaluate(TOP_DOC_JS), pg.evaluate(METRICS_JS)
    assert top_before == "d06" and top_after == "d01"
    assert metrics_after != metrics_before
    assert "0.00" in pg.get_by_test_id("stSlider").filter(has_text="Sparse weight").inner_text()
    pg.screenshot(path=str(ARTIFACTS / "tune.png"))
    compute = pg.get_by_text("Last knob change").inner_text()
    print(f"\nknob change → updated page (browser round trip): {round_trip_ms:.0f} ms; server: {compute}")


def test_sweep_runs_in_the_browser(page):
    open_page(page, "Sweep")
    page.get_by_role("button", name="Run sweep").click()
    page.get_by_text("Objective surface").wait_for(timeout=STEP_MS)
    settle(page)
    wait_for_charts(page, 3)                                 # surface, rrf_k curve, train vs held-out
    page.screenshot(path=str(ARTIFACTS / "sweep.png"))
