"""Reports of a :class:`~conformance.runner.Run`: terminal, JSON, JUnit XML and HTML."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import asdict
from typing import Any

from conformance.runner import Result, Run

__all__ = ["progress_line", "to_html", "to_json", "to_junit", "to_terminal"]

_MARK = {
    "pass": "ok",
    "fail": "FAIL",
    "warning": "warn",
    "skipped": "skip",
    "not_observed": "n/o",
    "expected_fail": "xfail",
    "error": "ERROR",
}


def progress_line(result: Result) -> str:
    """One short line per finished check, for the progress stream."""
    return f"[{result.revision}] {_MARK[result.status]:5} {result.id}"


def to_terminal(run: Run) -> str:
    """The human summary: a line per failed check with its reference, then counts."""
    lines = [f"mcpwire check: {run.target}"]
    for p in run.probes:
        lines.append(f"  {p.revision}: {'accepted' if p.accepted else 'not accepted'}")
    for r in run.results:
        if r.status in ("fail", "error", "warning"):
            lines.append(f"{_MARK[r.status]:5} {r.id} [{r.revision}] {r.level}: {r.title}")
            lines.append(f"      {r.message}")
            lines.append(f'      spec: {r.spec}: "{r.quote}"')
    for entry in run.stale_baseline:
        lines.append(f"STALE baseline entry {entry!r}: the check no longer fails; remove it")
    counts = run.counts()
    lines.append(", ".join(f"{n} {s.replace('_', ' ')}" for s, n in counts.items() if n))
    lines.append("result: " + ("PASS" if run.exit_code == 0 else "FAIL"))
    return "\n".join(lines)


def to_dict(run: Run) -> dict[str, Any]:
    return {
        "target": run.target,
        "revisions": run.revisions,
        "probes": [asdict(p) for p in run.probes],
        "summary": run.counts(),
        "stale_baseline": run.stale_baseline,
        "exit_code": run.exit_code,
        "results": [asdict(r) for r in run.results],
    }


def to_json(run: Run) -> str:
    return json.dumps(to_dict(run), indent=2, ensure_ascii=False)


def to_junit(run: Run) -> str:
    """JUnit XML: one testsuite per revision, one testcase per check."""
    root = ET.Element("testsuites", name="mcpwire check", tests=str(len(run.results)))
    by_revision: dict[str, list[Result]] = defaultdict(list)
    for r in run.results:
        by_revision[r.revision].append(r)
    for revision, results in by_revision.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"mcp {revision}",
            tests=str(len(results)),
            failures=str(sum(r.status == "fail" for r in results)),
            errors=str(sum(r.status == "error" for r in results)),
            skipped=str(sum(r.status in ("skipped", "not_observed") for r in results)),
        )
        for r in results:
            case = ET.SubElement(
                suite, "testcase", classname=f"mcp.{revision}", name=f"{r.id} {r.title}", time=f"{r.duration_s:.3f}"
            )
            body = f'{r.message}\nspec: {r.spec}: "{r.quote}"\n' + "\n".join(r.exchanges)
            if r.status == "fail":
                ET.SubElement(case, "failure", message=r.message, type=r.level).text = body
            elif r.status == "error":
                ET.SubElement(case, "error", message=r.message).text = body
            elif r.status in ("skipped", "not_observed"):
                ET.SubElement(case, "skipped", message=f"{r.status}: {r.message}")
            elif r.status in ("warning", "expected_fail"):
                ET.SubElement(case, "system-out").text = f"{r.status}: {body}"
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def to_html(run: Run) -> str:
    """A single self-contained page: summary by area, each failure with its exchange."""
    esc = html.escape
    areas: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in run.results:
        areas[r.id.split("-")[0]][r.status] += 1
    rows = "".join(
        f"<tr><td>{esc(a)}</td>" + "".join(f"<td>{c.get(s, 0)}</td>" for s in _MARK) + "</tr>"
        for a, c in sorted(areas.items())
    )
    failures = "".join(
        f"<section class='{esc(r.status)}'><h3>{esc(r.status.upper())} {esc(r.id)} [{esc(r.revision)}] "
        f"{esc(r.title)}</h3><p>{esc(r.message)}</p><blockquote>{esc(r.spec)}: {esc(r.quote)}</blockquote>"
        f"<pre>{esc(chr(10).join(r.exchanges))}</pre></section>"
        for r in run.results
        if r.status in ("fail", "error", "warning")
    )
    head = "".join(f"<th>{esc(s)}</th>" for s in _MARK)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>mcpwire check</title><style>"
        "body{font-family:sans-serif;margin:2em}pre{background:#f4f4f4;padding:1em;overflow:auto}"
        ".fail h3,.error h3{color:#b00}.warning h3{color:#a60}td,th{padding:2px 8px}</style></head><body>"
        f"<h1>mcpwire check: {esc(run.target)}</h1><p>result: {'PASS' if run.exit_code == 0 else 'FAIL'}; "
        f"revisions: {esc(', '.join(run.revisions))}</p><table><tr><th>area</th>{head}</tr>{rows}</table>"
        f"{failures}</body></html>"
    )
