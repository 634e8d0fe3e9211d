"""What ``rwb check`` writes about a ``eval.experiments.gate.GateResult``: one line for stdout
(a cron mail, a CI log), a Markdown summary (a CI job summary, e.g. ``$GITHUB_STEP_SUMMARY``) and
a JUnit XML report (one test case per gated metric, named after the metric alone so that its
history survives a changed tolerance, which is a property of the suite; the most regressed
queries in a failure's message; the Jenkins xunit-plugin ``junit-10.xsd`` layout that GitHub,
GitLab and Jenkins read). A check that could not be run (exit 2) still writes both files
(``error_junit_xml``, ``error_summary``): one ``error`` test case carrying the error line.

Names (dataset, pipeline, snapshot, query ids) are data: control characters are written out
(``eval.reports.markup.printable``) and a name is cut at ``SHOWN`` characters in every output.
"""

from __future__ import annotations

import socket
import time
from xml.etree import ElementTree as ET

from eval.experiments.gate import GateResult, MetricCheck
from eval.reports.markup import code, md_inline, printable
from eval.stores.inputs import NAMES, WORDS

CLASSNAME = "rwb.check"
SHOWN = 120  # characters of a name shown in an output


def shown(name: object) -> str:
    """``name`` as every output of a check shows it: control characters written out, at most
    ``SHOWN`` characters."""
    text = printable(name)
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


def _p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _verdict(check: MetricCheck) -> str:
    return "FAIL" if check.failed else "ok"


def one_line(result: GateResult, dataset: str) -> str:
    """``rwb check devmem rrf vs before: FAIL ndcg@5 -0.0412 (p 0.001); … · changed inputs: …``"""
    parts = [f"{c.metric} {c.delta:+.4f} (p {_p(c.p_adjusted)}{' FAIL' if c.failed else ''})" for c in result.checks]
    state = "FAIL" if result.failed else "PASS"
    changed = f" · changed inputs: {', '.join(result.changed)}" if result.changed else ""
    holes = "; ".join(f"{b.metric} " + ("holds either way" if b.holds else f"depends on {len(b.unjudged)} documents")
                      for b in result.unjudged if b.unjudged)
    return (f"{state} {shown(dataset)} {shown(result.pipeline)} vs snapshot '{shown(result.snapshot)}': "
            + "; ".join(parts) + f" · {result.compared_queries} queries"
            + (f" · unjudged: {holes}" if holes else "") + changed)


def failure_message(check: MetricCheck, result: GateResult) -> str:
    worst = ", ".join(f"{shown(w.query)} {w.frozen:.3f}→{w.current:.3f}" for w in check.worst)
    return (f"{check.metric} fell from {check.frozen:.4f} to {check.current:.4f} ({check.delta:+.4f}, tolerated "
            f"{check.threshold.delta:+g}; {result.test} p {_p(check.p_value)}, {result.correction}-corrected "
            f"{_p(check.p_adjusted)} ≤ α {result.alpha:g}, {check.n} queries); most regressed: {worst}")


def markdown_summary(result: GateResult, dataset: str) -> str:
    """The check as a Markdown section: verdict, one row per metric, the regressed queries and
    the inputs that changed."""
    state = "❌ regression" if result.failed else "✅ no significant regression"
    lines = [f"## rwb check · {md_inline(shown(dataset))} · {code(shown(result.pipeline))} vs snapshot "
             f"{code(shown(result.snapshot))}", "",
             f"**{state}** · {result.compared_queries} queries compared · {md_inline(result.test)} test, "
             f"{md_inline(result.correction)} correction across {len(result.checks)} metric(s), α {result.alpha:g}", "",
             "| metric | snapshot | now | Δ | tolerated Δ | p (corrected) | result |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for c in result.checks:
        lines.append(f"| {md_inline(c.metric)} | {c.frozen:.4f} | {c.current:.4f} | {c.delta:+.4f} | "
                     f"{c.threshold.delta:+g} | {_p(c.p_value)} ({_p(c.p_adjusted)}) | {_verdict(c)} |")
    for c in result.failed:
        lines += ["", f"**{md_inline(c.metric)}**: most regressed queries", "",
                  "| query | snapshot | now | Δ |", "|---|---:|---:|---:|"]
        lines += [f"| {md_inline(shown(w.query))} | {w.frozen:.4f} | {w.current:.4f} | {w.delta:+.4f} |"
                  for w in c.worst]
    lines.append("")
    if result.changed:
        lines.append("Changed since the snapshot: " + ", ".join(WORDS[n] for n in result.changed) + ".")
    else:
        lines.append(f"Inputs unchanged since the snapshot ({', '.join(NAMES)}).")
    if result.dropped_queries:
        lines.append(f"{len(result.dropped_queries)} queries are in only one of the two query sets and were left out.")
    if result.unjudged:
        lines += ["", "Unjudged documents (the snapshot's top against today's, re-scored with today's judgments and "
                  "the unjudged documents of the two tops graded for one side, then the other; paired t):", ""]
        lines += [f"- {md_inline(b.text())}" for b in result.unjudged]
    return "\n".join(lines) + "\n"


def _suite(suites: ET.Element, name: str, tests: int, failures: int, errors: int, seconds: float) -> ET.Element:
    return ET.SubElement(suites, "testsuite", name=name, tests=str(tests), failures=str(failures),
                         errors=str(errors), skipped="0", time=f"{seconds:.3f}",
                         timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"),
                         hostname=printable(socket.gethostname() or "localhost"))


def _xml(suites: ET.Element) -> str:
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def junit_xml(result: GateResult, dataset: str, seconds: float = 0.0) -> str:
    """One ``<testsuite>`` (in ``<testsuites>``) with a ``<testcase>`` per gated metric, named
    after the metric (``ndcg@5``); each metric's tolerated drop is the suite property
    ``tolerated.<metric>``. A failed metric carries a ``<failure>`` naming the drop and the most
    regressed queries."""
    failures = len(result.failed)
    suites = ET.Element("testsuites", name="rwb check", tests=str(len(result.checks)), failures=str(failures),
                        errors="0", time=f"{seconds:.3f}")
    suite = _suite(suites, f"rwb check {shown(dataset)} {shown(result.pipeline)}", len(result.checks),
                   failures, 0, seconds)
    props = ET.SubElement(suite, "properties")
    for name, value in (("snapshot", shown(result.snapshot)), ("test", result.test),
                        ("correction", result.correction), ("alpha", f"{result.alpha:g}"),
                        ("changed_inputs", ",".join(result.changed)),
                        *((f"tolerated.{c.metric}", f"{c.threshold.delta:+g}") for c in result.checks),
                        *((f"input.{k}", v) for k, v in result.inputs.to_json().items())):
        ET.SubElement(props, "property", name=name, value=printable(value))
    for c in result.checks:
        case = ET.SubElement(suite, "testcase", name=c.metric,
                             classname=f"{CLASSNAME}.{shown(dataset)}.{shown(result.pipeline)}", time="0")
        if c.failed:
            message = failure_message(c, result)
            failure = ET.SubElement(case, "failure", type="regression", message=message)
            failure.text = "\n".join([message, *(f"{shown(w.query)}: {w.frozen:.4f} -> {w.current:.4f} "
                                                 f"({w.delta:+.4f})" for w in c.worst)])
        else:
            out = ET.SubElement(case, "system-out")
            out.text = (f"{c.metric}: {c.frozen:.4f} -> {c.current:.4f} ({c.delta:+.4f}), p {_p(c.p_adjusted)}, "
                        f"{c.n} queries")
    return _xml(suites)


def error_junit_xml(message: str, dataset: str, pipeline: str, seconds: float = 0.0) -> str:
    """The JUnit report of a check that could not be run (exit 2): one test case ``rwb check``
    with an ``<error>`` carrying the error line, so a CI shows a broken gate, never a missing one."""
    suites = ET.Element("testsuites", name="rwb check", tests="1", failures="0", errors="1", time=f"{seconds:.3f}")
    suite = _suite(suites, f"rwb check {shown(dataset)} {shown(pipeline)}", 1, 0, 1, seconds)
    case = ET.SubElement(suite, "testcase", name="rwb check",
                         classname=f"{CLASSNAME}.{shown(dataset)}.{shown(pipeline)}", time="0")
    error = ET.SubElement(case, "error", type="error", message=printable(message))
    error.text = printable(message)
    return _xml(suites)


def error_summary(message: str, dataset: str, pipeline: str) -> str:
    """The Markdown summary of a check that could not be run (exit 2)."""
    return (f"## rwb check · {md_inline(shown(dataset))} · {code(shown(pipeline))}\n\n"
            f"**⚠️ the check could not be run** (exit 2): {code(message)}\n")
