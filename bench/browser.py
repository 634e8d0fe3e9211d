"""The live tuning loop in a real browser: knob move → page settled, Tune against a plain page.

Headless Chromium (Debian's ``/usr/bin/chromium``, driven by Python playwright) at 1400×900
focuses a slider and presses Home or End (or picks another "Start from" preset); the time runs
from that input event to the moment the page last stops showing work in progress — Streamlit's
status widget (until its exit transition starts), a spinner, or an element marked stale — with
800 ms of quiet after it. The same probe measures ``../shared/bench/streamlit_reference_page.py``
(a sidebar knob, two 10-row ``st.dataframe``, five ``st.metric``, a small plotly chart), served
from the project root so both read the same ``.streamlit/config.toml``, in the same run: the
headline is the ratio, which holds across machines of different speed.

First use, as ``make run`` goes: on a fresh ``RWB_HOME``, ``rwb index`` builds devmem's index
and default candidate pool (timed apart), then the server starts; **first ranking** runs from
starting the server to Tune's ranking on screen, **first Evaluate** from the click on
"Evaluate" (its first visit) to its table on screen.

Two sessions of the workbench (``--full``; quick mode runs the first one with fewer moves): a
**first session** (the server of the first-use figures, right after them) and one **after a
restart** (same home, a new process). Each moves every kind of knob — ``rrf_k``, a path weight,
a preset switch, a confidence factor — and reports p50/p95 per kind next to the engine's own
time (read from Tune's footer). ``--full`` adds a session on LoCoMo (1,982 queries, the
benchmark home's copy), for the 2,000-query figure. Nothing here asserts a time.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from bench.common import Section, loadavg, log, median, percentile, ratio
from bench.data import bench_home, locomo_grouped

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
REFERENCE = ROOT.parent / "shared" / "bench" / "streamlit_reference_page.py"
DEVMEM = ROOT / "datasets" / "devmem"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
QUIET_MS = 800
FIRST_LOAD_MS = 900_000
SLIDER_KINDS = ("rrf_k", "path weight", "confidence factor")

# Installed before any page script: tracks "work in progress" on every DOM mutation and frame.
PROBE_JS = """
(() => {
  const s = window.__rwb = {armed: false, t0: null, sawBusy: false, busy: false, lastEnd: null,
                            firstChange: null, lastChange: null};
  const busyNow = () => {
    const w = document.querySelector('[data-testid="stStatusWidget"]');
    if (w && !String(w.className).includes('exit')) return true;
    if (document.querySelector('[data-testid="stSpinner"]')) return true;
    return !!document.querySelector('[data-stale="true"]');
  };
  const check = (mutations) => {
    const t = performance.now();
    if (mutations && s.t0 !== null) {
      for (const m of mutations) {
        if (m.type === 'attributes') continue;
        const el = m.target.nodeType === 1 ? m.target : m.target.parentElement;
        // a visible result of the run: not the moved widget's own label, not the status widget
        if (el && el.closest && el.closest('[data-testid="stMain"]') && !el.closest('[data-testid="stStatusWidget"]')
            && !el.closest('[data-testid="stSlider"]') && !el.closest('[data-baseweb="popover"]')
            && !el.closest('[data-testid="stSelectbox"]')) {
          if (s.firstChange === null) s.firstChange = t;
          s.lastChange = t;
          break;
        }
      }
    }
    if (busyNow()) { if (s.t0 !== null) s.sawBusy = true; s.busy = true; }
    else if (s.busy) { s.busy = false; s.lastEnd = t; }
  };
  new MutationObserver(check).observe(document, {subtree: true, childList: true, characterData: true,
    attributes: true, attributeFilter: ['data-stale', 'class']});
  const loop = () => { check(null); requestAnimationFrame(loop); };
  requestAnimationFrame(loop);
  for (const type of ['keydown', 'click']) {
    document.addEventListener(type, (e) => {
      if (!s.armed) return;
      s.armed = false; s.t0 = e.timeStamp; s.sawBusy = false; s.lastEnd = null;
      s.firstChange = null; s.lastChange = null;
    }, true);
  }
})();
"""
SETTLED_JS = """(quiet) => {
  const s = window.__rwb, now = performance.now();
  if (s.t0 === null || s.busy) return false;
  if (s.sawBusy) return s.lastEnd !== null && now - s.lastEnd >= quiet;
  return now - s.t0 >= 3000 && (s.lastChange === null || now - s.lastChange >= quiet);   // never saw a run
}"""
QUIET_JS = """(quiet) => { const s = window.__rwb; const now = performance.now();
  if (s.busy) { s.quietSince = null; return false; }
  s.quietSince = s.quietSince || now; return now - s.quietSince >= quiet; }"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serve(script: Path, env: dict[str, str], log_path: Path):
    """``streamlit run script`` with the project root as working folder (its config.toml applies)."""
    port = free_port()
    with open(log_path, "a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(script), "--server.address", "127.0.0.1",
             "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none",
             "--browser.gatherUsageStats", "false"],
            cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}: {log_path.read_text()[-1500:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("streamlit did not become healthy within 120 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _quiet(pg, ms: int = QUIET_MS) -> None:
    pg.evaluate("() => { window.__rwb.quietSince = null; }")
    pg.wait_for_function(QUIET_JS, arg=ms, timeout=120_000, polling=50)


def _timed(pg, act, timeout_ms: int = 60_000) -> dict:
    """Arm the probe, run ``act`` (one key press or click), wait until settled; times in ms."""
    _quiet(pg, 300)
    pg.evaluate("() => { const s = window.__rwb; s.armed = true; s.t0 = null; }")
    act()
    pg.wait_for_function(SETTLED_JS, arg=QUIET_MS, timeout=timeout_ms, polling=50)
    s = pg.evaluate("() => window.__rwb")
    end = s["lastEnd"] if s["sawBusy"] else (s["lastChange"] or s["t0"])
    change = s["firstChange"] if s["firstChange"] is not None else end
    return {"settled_ms": end - s["t0"], "change_ms": change - s["t0"], "saw_run": bool(s["sawBusy"])}


def _slider(pg, label: str):
    return pg.get_by_test_id("stSlider").filter(has_text=label).first.get_by_role("slider")


def _press(pg, label: str, key: str) -> dict:
    slider = _slider(pg, label)
    before = slider.get_attribute("aria-valuenow") or slider.input_value()
    slider.focus()
    out = _timed(pg, lambda: pg.keyboard.press(key))
    after = slider.get_attribute("aria-valuenow") or slider.input_value()
    out["moved"] = before != after
    return out


ENGINE = re.compile(r"over \d+ queries ([0-9.]+) ms")
RERUN = re.compile(r"rerun took ([0-9.]+) ms")


def _footer(pg) -> tuple[float | None, float | None]:
    text = pg.evaluate("""() => { const c = [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
      .map(e => e.innerText).find(t => t.startsWith('Server:')); return c || ''; }""")
    engine, rerun = ENGINE.search(text), RERUN.search(text)
    return (float(engine.group(1)) if engine else None, float(rerun.group(1)) if rerun else None)


class Slider:
    """One slider moved end to end: End, Home, End, … (each press changes its value)."""

    def __init__(self, pg, label: str, footer: bool = False):
        self.pg, self.label, self.footer, self.count = pg, label, footer, 0

    def move(self) -> dict:
        out = _press(self.pg, self.label, "End" if self.count % 2 == 0 else "Home")
        self.count += 1
        if self.footer:
            out["engine_ms"], out["server_ms"] = _footer(self.pg)
        return out


def _preset_move(pg, i: int) -> dict:
    target = "profile · concept" if i % 2 == 0 else "profile · debug"
    pg.get_by_test_id("stSelectbox").filter(has_text="Start from").first.click()
    option = pg.get_by_role("option", name=re.compile(re.escape(target)))
    option.wait_for(timeout=30_000)
    move = _timed(pg, option.click)
    move["engine_ms"], move["server_ms"] = _footer(pg)
    return move


def _summary(moves: list[dict]) -> dict:
    settled = [m["settled_ms"] for m in moves]
    change = [m["change_ms"] for m in moves]
    engine = [m["engine_ms"] for m in moves if m.get("engine_ms") is not None]
    server = [m["server_ms"] for m in moves if m.get("server_ms") is not None]
    return {"n": len(moves), "settled_p50_ms": round(median(settled), 1),
            "settled_p95_ms": round(percentile(settled, 95), 1),
            "change_p50_ms": round(median(change), 1),
            "engine_p50_ms": round(median(engine), 2) if engine else None,
            "server_rerun_p50_ms": round(median(server), 1) if server else None,
            "not_moved": sum(1 for m in moves if not m.get("moved", True)),
            "without_run": sum(1 for m in moves if not m["saw_run"]),
            "settled_ms": [round(v, 1) for v in settled]}


RANKING = '[data-testid="stMain"] table.rwb-t tr.rwb-r td code'      # a ranked document on Tune
EVALUATE_TABLE = '[data-testid="stMain"] [data-testid="stDataFrame"]'


def index_first(env: dict[str, str], log_path: Path) -> float:
    """``rwb index DEVMEM`` (index and default candidate pool) as ``make run`` does; its seconds."""
    started = time.perf_counter()
    with open(log_path, "a") as out:
        subprocess.run([sys.executable, "-m", "eval.cli", "--quiet", "index", str(DEVMEM)],
                       cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT,
                       check=True)
    return time.perf_counter() - started


def measure_first_use(browser, url: str, started: float) -> dict:
    """Seconds from ``started`` (the server's start) to Tune's first ranking on screen, and from
    the first click on "Evaluate" to its table on screen (the page's first visit)."""
    pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    pg.add_init_script(PROBE_JS)
    pg.goto(url)
    pg.wait_for_selector(RANKING, timeout=FIRST_LOAD_MS)
    first_ranking = time.perf_counter() - started
    load = loadavg()
    _quiet(pg, 1500)
    clicked = time.perf_counter()
    pg.get_by_test_id("stSidebarNav").get_by_text("Evaluate", exact=True).click()
    pg.wait_for_selector(EVALUATE_TABLE, timeout=FIRST_LOAD_MS)
    first_evaluate = time.perf_counter() - clicked
    pg.context.close()
    return {"first_ranking_s": round(first_ranking, 2),
            "first_evaluate_s": round(first_evaluate, 2), "loadavg": [load, loadavg()]}


def _open(browser, url: str, ready: str, timeout_ms: int):
    pg = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    pg.add_init_script(PROBE_JS)
    started = time.perf_counter()
    pg.goto(url)
    pg.wait_for_selector(ready, timeout=timeout_ms)
    _quiet(pg, 1500)
    return pg, time.perf_counter() - started


def measure_session(browser, ref_url: str, url: str, n: int, presets: int, shot: Path | None = None) -> dict:
    """One Tune session, every move followed by a reference-page move (interleaved, so a change of
    load on this shared machine hits both alike): ``n`` rrf_k moves, ``max(6, n // 2)`` BM25-weight
    and confidence-factor moves, ``presets`` timed preset switches (0: one untimed switch to an
    adaptive profile, which the confidence pane needs)."""
    ref, _ = _open(browser, ref_url, '[data-testid="stMetric"]', 120_000)
    pg, first_load_s = _open(browser, url, ".rwb-card", FIRST_LOAD_MS)
    ref_sliders = [Slider(ref, "rrf_k"), Slider(ref, "weight")]
    ref_moves: list[dict] = []
    load = loadavg()

    def ref_move() -> None:
        ref_moves.append(ref_sliders[len(ref_moves) % 2].move())

    kinds: dict[str, list[dict]] = {}
    for kind, label, count in (("rrf_k", "rrf_k", n), ("path weight", "BM25 weight", max(6, n // 2))):
        slider, kinds[kind] = Slider(pg, label, footer=True), []
        for _ in range(count):
            kinds[kind].append(slider.move())
            ref_move()
    kinds["preset switch"] = []
    for i in range(presets):
        kinds["preset switch"].append(_preset_move(pg, i))
        ref_move()
    if not presets:
        _preset_move(pg, 0)                  # untimed: the confidence pane needs an adaptive profile
    # the last switch left an adaptive profile: open its confidence pane (not timed)
    pg.get_by_test_id("stMain").get_by_role("radio", name="F_conf", exact=True).click()
    pg.get_by_test_id("stSlider").filter(has_text="F_conf low").first.wait_for(timeout=60_000)
    _quiet(pg, 1000)
    slider, kinds["confidence factor"] = Slider(pg, "F_conf low", footer=True), []
    for _ in range(max(6, n // 2)):
        kinds["confidence factor"].append(slider.move())
        ref_move()
    if shot is not None:
        pg.screenshot(path=str(shot))
    grading = measure_grades(pg, slider, max(6, n // 2))
    pg.context.close()
    ref.context.close()
    sliders = [m for kind in SLIDER_KINDS for m in kinds[kind]]
    tune = _summary(sliders)
    reference = _summary(ref_moves)
    return {"first_load_s": round(first_load_s, 1), "loadavg": [load, loadavg()],
            "kinds": {k: _summary(v) for k, v in kinds.items()}, "slider": tune, "reference": reference,
            "ratio": ratio(tune["settled_p50_ms"], reference["settled_p50_ms"]), "grading": grading}


def measure_grades(pg, slider: Slider, n: int) -> dict:
    """Tune in Grade mode: ``n`` grade clicks on the top result (1, 2, 1, …), each followed by a
    move of ``slider`` (interleaved, the same rows on screen); the grade's p50 over the knob's."""
    main = pg.get_by_test_id("stMain")
    main.get_by_role("radio", name="Grade", exact=True).click()
    main.locator('[class*="st-key-tune_g_c_"]').first.wait_for(timeout=60_000)
    _quiet(pg, 1000)
    grades, knobs = [], []
    for i in range(n):
        row = main.locator('[class*="st-key-tune_g_c_"]').first          # the top result's grade buttons
        grades.append(_timed(pg, row.get_by_role("radio", name=str(1 + i % 2), exact=True).click))
        knobs.append(slider.move())
    grade, knob = _summary(grades), _summary(knobs)
    return {"grade": grade, "knob": knob, "ratio": ratio(grade["settled_p50_ms"], knob["settled_p50_ms"])}


def run(ctx) -> Section:
    section = Section("browser")
    if not CHROMIUM.exists():
        section.notes.append("skipped: /usr/bin/chromium is not installed (make chromium)")
        return section
    if not REFERENCE.is_file():
        section.notes.append(f"skipped: the reference page {REFERENCE} is missing")
        return section
    from playwright.sync_api import sync_playwright

    # quick: the first session only (the slower one), 6 moves per slider, no timed preset switch —
    # about a minute, so make bench-quick stays near its 2-minute budget; full: both sessions
    n = ctx.pick(6, 24, smoke=4)
    presets = ctx.pick(0, 12, smoke=0)
    sessions = ("first", "restart") if ctx.full else ("first",)
    work = Path(tempfile.mkdtemp(prefix="rwb-browser-"))
    home = work / "home"                       # fresh: the first session builds index and pool
    reference = work / "reference" / "streamlit_reference_page.py"
    reference.parent.mkdir()
    shutil.copy(REFERENCE, reference)          # outside the repo: no pages/ folder next to it
    env = {"RWB_HOME": str(home), "RWB_DATASET": str(DEVMEM), "LANCEDB_LOG": "error", "HF_HUB_OFFLINE": "1"}
    shots = ROOT / "artifacts"
    shots.mkdir(exist_ok=True)
    measured: dict[str, dict] = {}
    try:
        log("browser: rwb index devmem on a fresh RWB_HOME (index and default pool, as make run)")
        index_s = index_first(env, work / "index.log")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            with serve(reference, env, work / "reference.log") as ref_url:
                for session in sessions:
                    started = time.perf_counter()
                    with serve(ROOT / "app.py", env, work / "app.log") as url:
                        if session == "first":
                            log("browser: first ranking on Tune, then the first visit of Evaluate")
                            first_use = {"index_s": round(index_s, 1),
                                         **measure_first_use(browser, url, started)}
                        log("browser: Tune, " + ("first session" if session == "first"
                                                 else "after a restart") + " (interleaved with the reference page)")
                        measured[session] = measure_session(browser, ref_url, url, n, presets,
                                                            shots / f"bench-tune-{session}.png")
                locomo = locomo_grouped() if ctx.full else None
                if locomo is not None:      # a 2,000-query set: the benchmark home keeps its index and pool
                    big = {**env, "RWB_HOME": str(bench_home()), "RWB_DATASET": str(locomo)}
                    with serve(ROOT / "app.py", big, work / "app-locomo.log") as url:
                        log("browser: Tune on LoCoMo (1,982 queries; interleaved with the reference page)")
                        measured["locomo"] = measure_session(browser, ref_url, url, 12, 0,
                                                             shots / "bench-tune-locomo.png")
            browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first, restart = measured["first"], measured.get("restart")
    section.figures = {"first_use": first_use, "moves_per_kind": n, "tune_first_session": first,
                       "tune_after_restart": restart, "tune_locomo": measured.get("locomo")}
    done = [m for m in (first, restart) if m is not None]
    section.ratios = {"knob_to_page_p50_ms": round(median([v for m in done for v in m["slider"]["settled_ms"]]), 1),
                      "knob_ratio_vs_reference": max(m["ratio"] for m in done),
                      "knob_ratio_first_session": first["ratio"]}
    if restart is not None:
        section.ratios["knob_ratio_after_restart"] = restart["ratio"]
    if "locomo" in measured:
        section.ratios["knob_to_page_p50_ms_locomo"] = measured["locomo"]["slider"]["settled_p50_ms"]
        section.ratios["knob_ratio_locomo"] = measured["locomo"]["ratio"]
    section.ratios["grade_ratio_vs_knob"] = max(m["grading"]["ratio"] for m in done)
    section.ratios["grade_p50_ms"] = median([v for m in done for v in m["grading"]["grade"]["settled_ms"]])
    section.ratios["first_ranking_s"] = first_use["first_ranking_s"]
    section.ratios["first_evaluate_s"] = first_use["first_evaluate_s"]
    section.ratios["reference_page_p50_ms"] = round(median([v for m in done for v in m["reference"]["settled_ms"]]), 1)
    section.notes.append("ratio: Tune's slider moves (rrf_k, path weight, confidence factor) p50 over the p50 of the "
                         "reference page's moves interleaved with them; headline = the worse session "
                         "(quick mode: the first session only; --full adds the session after a restart)")
    section.notes.append("grade_ratio_vs_knob: in Tune's Grade mode, a grade click on the top result p50 "
                         "over the p50 of a knob move interleaved with it (the worse session)")
    section.notes.append("first_ranking_s: server start → Tune's first ranking on screen, after "
                         f"rwb index ({first_use['index_s']} s) built devmem's index and pool on "
                         "a fresh home; first_evaluate_s: click on Evaluate (first visit) → its "
                         "table on screen")
    return section
