"""Where a knob move's browser time goes: a Chromium performance trace of Tune and of the plain
reference page (``bench/browser.py``'s), the same slider (rrf_k) moved the same way.

Each page is opened in its own window without the settle probe (its per-frame checks would
count as the page's scripting); the slider gets ``--moves`` key presses (End, Home, …) 1.5 s
apart while the trace records. From the renderer's main thread (``CrRendererMain``) the
complete events' self time is summed per kind — scripting (the frontend handling the rerun's
messages), style and layout, paint and composite, garbage collection, other — and divided by
the moves. Standalone: ``python -m bench.knob_trace [--moves N] [--rounds R]``; RWB_HOME must
hold devmem's index and pool (``rwb index datasets/devmem``).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import tempfile
from pathlib import Path

from bench import browser as bb

KINDS = {"scripting": ("FunctionCall", "EvaluateScript", "v8.run", "V8.Execute", "RunMicrotasks", "TimerFire",
                       "EventDispatch", "FireAnimationFrame", "v8.callFunction", "v8.compile", "V8.CompileCode",
                       "v8.produceCache", "HandlePostMessage", "WebSocketReceive", "FireIdleCallback",
                       "ScheduledAction"),
         "style+layout": ("UpdateLayoutTree", "Layout", "RecalculateStyles", "ScheduleStyleRecalculation",
                          "InvalidateLayout", "HitTest"),
         "paint+composite": ("Paint", "PrePaint", "Layerize", "Commit", "CompositeLayers", "UpdateLayer",
                             "PaintImage", "RasterTask", "UpdateLayerTree", "Decode Image"),
         "gc": ("MajorGC", "MinorGC", "V8.GCScavenger", "V8.GCFinalizeMC", "BlinkGC.AtomicPhase",
                "V8.GCIncrementalMarking", "V8.GCCompactor", "BlinkGC.CompleteSweep")}
KIND_OF = {name: kind for kind, names in KINDS.items() for name in names}
CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "blink.user_timing"]


def main_thread_time(trace: Path) -> tuple[float, dict[str, float]]:
    """Busy ms of the renderer's main thread (top-level events) and self ms per kind."""
    data = json.loads(trace.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    main = {(e["pid"], e["tid"]) for e in events
            if e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain"}
    complete = sorted((e for e in events if e.get("ph") == "X" and "dur" in e and (e["pid"], e["tid"]) in main),
                      key=lambda e: (e["ts"], -e["dur"]))
    busy, own, stack = 0.0, [], []
    for event in complete:
        while stack and stack[-1][0]["ts"] + stack[-1][0]["dur"] <= event["ts"]:
            stack.pop()
        if stack:
            stack[-1][1][0] -= event["dur"]
        else:
            busy += event["dur"]
        left = [float(event["dur"])]
        stack.append((event, left))
        own.append((event["name"], left))
    kinds = collections.Counter()
    for name, left in own:
        kinds[KIND_OF.get(name, "other")] += max(0.0, left[0])
    return busy / 1000, {k: v / 1000 for k, v in kinds.items()}


def traced_moves(browser, url: str, ready: str, work: Path, name: str, moves: int) -> dict[str, float]:
    page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
    page.goto(url)
    page.wait_for_selector(ready, timeout=120_000)
    page.wait_for_timeout(3000)
    slider = bb._slider(page, "rrf_k")
    slider.focus()
    for key in ("End", "Home"):                       # two untimed moves first
        page.keyboard.press(key)
        page.wait_for_timeout(1500)
    trace = work / f"{name}.json"
    browser.start_tracing(page=page, path=str(trace), categories=CATEGORIES)
    for i in range(moves):
        page.keyboard.press("End" if i % 2 == 0 else "Home")
        page.wait_for_timeout(1500)
    browser.stop_tracing()
    page.context.close()
    busy, kinds = main_thread_time(trace)
    return {"busy_ms_per_move": round(busy / moves, 1), **{k: round(v / moves, 1) for k, v in sorted(kinds.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--moves", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="rwb-trace-"))
    reference = work / "streamlit_reference_page.py"
    shutil.copy(bb.REFERENCE, reference)          # outside the repo, as bench/browser.py runs it
    env = {"RWB_DATASET": str(bb.DEVMEM), "LANCEDB_LOG": "error", "HF_HUB_OFFLINE": "1"}
    try:
        with bb.serve(reference, env, work / "reference.log") as ref_url, \
                bb.serve(bb.ROOT / "app.py", env, work / "app.log") as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(bb.CHROMIUM), args=bb.CHROMIUM_ARGS)
            for round_ in range(args.rounds):             # alternating, so a change of load hits both
                for name, at, ready in (("reference", ref_url, '[data-testid="stMetric"]'), ("tune", url, ".rwb-card")):
                    print(name, round_ + 1, traced_moves(browser, at, ready, work, f"{name}-{round_}", args.moves),
                          flush=True)
            browser.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("load", [round(x, 2) for x in os.getloadavg()])


if __name__ == "__main__":
    main()
