"""JUnit XML: a testsuite per revision and area (per server, for several), a testcase per check.

Theory of operation: ``fail`` is a ``<failure>``, ``error`` an ``<error>``; ``skipped``,
``not_observed`` and ``expected_fail`` are ``<skipped>`` (with the reason); a warning passes with its
evidence in ``<system-out>`` and ``outcome=warning`` in the testcase properties. A stale baseline
entry is a failed testcase of its own, so CI shows why the run failed. Server text may hold any
character: those XML 1.0 forbids (and bidi overrides) are written as visible ``\\xNN`` escapes
(:func:`mcpwire.redaction.clean_markup`), so the file always parses.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from mcpwire.redaction import clean_markup

from ..model import Result, Run
from .views import LABELS, area_of, area_order

__all__ = ["multi_to_junit", "to_junit"]


def _x(text: object) -> str:
    return clean_markup(str(text))


def _evidence_text(r: Result) -> str:
    parts = [r.message, f"spec: {r.spec}" + (f': "{r.quote}"' if r.quote else "")]
    if r.exchanges:
        parts += ["", "exchange:"]
        process = None
        for entry in r.exchanges:
            if entry.process != process and entry.process is not None:
                parts.append(f"--- process {entry.process}")
                process = entry.process
            parts.append(entry.line())
    return "\n".join(parts)


def _properties(parent: ET.Element, values: Mapping[str, str]) -> None:
    props = ET.SubElement(parent, "properties")
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=_x(value))


def _case(suite: ET.Element, r: Result, classname: str) -> None:
    case = ET.SubElement(suite, "testcase", classname=_x(classname), name=_x(f"{r.id} {r.title}"))
    case.set("time", f"{r.duration_s:.3f}")
    _properties(case, {"id": r.id, "level": r.level, "outcome": r.status, "spec": r.spec})
    message = _x(r.message)
    if r.status == "fail":
        ET.SubElement(case, "failure", message=message, type=_x(r.level)).text = _x(_evidence_text(r))
    elif r.status == "error":
        ET.SubElement(case, "error", message=message, type="check error").text = _x(_evidence_text(r))
    elif r.status in ("skipped", "not_observed", "expected_fail"):
        label = LABELS[r.status]
        ET.SubElement(case, "skipped", message=_x(f"{label}: {r.message}"), type=r.status)
        if r.status != "skipped":
            ET.SubElement(case, "system-out").text = _x(_evidence_text(r))
    elif r.status == "warning":
        what = f"{r.level} rule broken" if r.level != "MUST" else "a deviation that proves no violation"
        ET.SubElement(case, "system-out").text = _x(f"warning ({what}): {_evidence_text(r)}")


def _suite(root: ET.Element, name: str, results: Sequence[Result], totals: Counter[str]) -> ET.Element:
    counts = Counter(r.status for r in results)
    n_skipped = counts["skipped"] + counts["not_observed"] + counts["expected_fail"]
    suite = ET.SubElement(
        root,
        "testsuite",
        name=_x(name),
        tests=str(len(results)),
        failures=str(counts["fail"]),
        errors=str(counts["error"]),
        skipped=str(n_skipped),
        time=f"{sum(r.duration_s for r in results):.3f}",
    )
    totals.update(tests=len(results), failures=counts["fail"], errors=counts["error"], skipped=n_skipped)
    return suite


def _stale(root: ET.Element, run: Run, totals: Counter[str], prefix: str = "") -> None:
    if not run.stale_baseline:
        return
    suite = ET.SubElement(
        root,
        "testsuite",
        name=_x(f"{prefix}baseline"),
        tests=str(len(run.stale_baseline)),
        failures=str(len(run.stale_baseline)),
        errors="0",
        skipped="0",
        time="0.000",
    )
    totals.update(tests=len(run.stale_baseline), failures=len(run.stale_baseline))
    for entry in run.stale_baseline:
        case = ET.SubElement(suite, "testcase", classname="mcp.baseline", name=_x(f"stale entry {entry}"))
        ET.SubElement(case, "failure", message=_x(f"{entry}: the check no longer fails; remove it from the baseline"))


def _finish(root: ET.Element, totals: Counter[str], seconds: float) -> str:
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(totals[key]))
    root.set("time", f"{seconds:.3f}")
    ET.indent(root)
    return "<?xml version='1.0' encoding='utf-8'?>\n" + ET.tostring(root, encoding="unicode")


def to_junit(run: Run) -> str:
    """JUnit XML of one run: a testsuite per revision and area (see the module docstring)."""
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in run.results:
        groups[(r.revision, area_of(r))].append(r)
    rev_order = {rev: i for i, rev in enumerate(run.revisions)}
    totals: Counter[str] = Counter()
    root = ET.Element("testsuites", name=_x(f"mcpwire check: {run.target}"))
    for (revision, area), results in sorted(
        groups.items(), key=lambda kv: (rev_order.get(kv[0][0], len(rev_order)), area_order(kv[0][1]))
    ):
        suite = _suite(root, f"{revision} {area}", results, totals)
        _properties(suite, {"revision": revision, "area": area, "target": run.target})
        for r in results:
            _case(suite, r, f"mcp.{revision}.{area}")
    _stale(root, run, totals)
    return _finish(root, totals, sum(r.duration_s for r in run.results))


def multi_to_junit(servers: Sequence[tuple[str, Run | str]]) -> str:
    """JUnit XML of several servers: a testsuite per server (a server that could not be checked
    is a suite with one errored testcase)."""
    totals: Counter[str] = Counter()
    root = ET.Element("testsuites", name="mcpwire check")
    seconds = 0.0
    for name, outcome in servers:
        if not isinstance(outcome, Run):
            suite = ET.SubElement(root, "testsuite", name=_x(name), tests="1", failures="0", errors="1", skipped="0")
            suite.set("time", "0.000")
            totals.update(tests=1, errors=1)
            case = ET.SubElement(suite, "testcase", classname=_x(f"mcp.{name}"), name="start the server")
            ET.SubElement(case, "error", message=_x(outcome), type="not checked")
            continue
        suite = _suite(root, name, outcome.results, totals)
        _properties(suite, {"target": outcome.target, "revisions": " ".join(outcome.revisions)})
        for r in outcome.results:
            _case(suite, r, f"mcp.{name}.{r.revision}.{area_of(r)}")
        _stale(root, outcome, totals, prefix=f"{name} ")
        seconds += sum(r.duration_s for r in outcome.results)
    return _finish(root, totals, seconds)
