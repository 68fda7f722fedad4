"""What the fuzz benchmarks share: running ``mcpwire fuzz`` (this tree's, or another copy of the
package) as a subprocess, bounded, and reading what it reports.

Theory of operation: a run is ``python -m mcpwire.fuzz --json ...`` in a subprocess, timed from
the outside with :func:`time.monotonic` (so the figure includes start-up, learning the server,
confirming replays and shutting every server down: what a CI job waits for). ``--fuzz-src DIR``
runs another copy of the ``fuzz/`` package instead (for instance the one of an earlier commit,
extracted with ``git archive <commit> fuzz | tar -x -C DIR``): it is imported under another
name, on the same mcpwire, so "before" and "after" differ only in the fuzzer. The figures read
from a report work with both the old report (one entry per finding) and the new one (findings
grouped by root cause in ``clusters``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunResult", "fuzz_command", "run_fuzz", "summarise"]

#: a run is killed past budget x this + 60 s (the old fuzzer could overrun a lot)
KILL_FACTOR = 5.0


def fuzz_command(fuzz_src: Path | None) -> list[str]:
    """How to start ``mcpwire fuzz``: this tree's, or the package copied to ``fuzz_src/fuzz``."""
    if fuzz_src is None:
        return [sys.executable, "-m", "mcpwire.fuzz"]
    package = fuzz_src / "fuzzcopy"
    if not package.exists():
        shutil.copytree(fuzz_src / "fuzz", package)
    code = (
        "import sys; sys.path.insert(0, sys.argv.pop(1)); from fuzzcopy.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    return [sys.executable, "-c", code, str(fuzz_src)]


@dataclass(slots=True)
class RunResult:
    name: str
    budget: float
    wall: float
    status: int | None
    report: dict[str, Any] | None
    stderr: str
    #: seconds from the start to the first finding (from the progress lines' clock, or the report)
    first_finding: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_CLOCK = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] (.*)$")


def _first_found_from_progress(stderr: str) -> float | None:
    """The old fuzzer's progress lines: ``[HH:MM:SS] unit: FOUND ...``; seconds since the first line."""
    start: int | None = None
    for line in stderr.splitlines():
        match = _CLOCK.match(line)
        if match is None:
            continue
        h, m, s, rest = match.groups()
        t = int(h) * 3600 + int(m) * 60 + int(s)
        if start is None:
            start = t
        if ": FOUND " in rest:
            return float((t - start) % 86400)
    return None


def run_fuzz(
    name: str,
    args: list[str],
    *,
    budget: float,
    fuzz_src: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> RunResult:
    """One bounded run; never raises for what the fuzzer does (a kill is recorded as status None)."""
    command = [*fuzz_command(fuzz_src), "--json", *args]
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=budget * KILL_FACTOR + 60)
        status: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        stdout, stderr = proc.communicate()
        status = None
    wall = time.monotonic() - started
    try:
        report = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        report = None
    result = RunResult(name, budget, wall, status, report, stderr)
    if report is not None and isinstance(report.get("first_finding_s"), int | float):
        result.first_finding = float(report["first_finding_s"])
    else:
        result.first_finding = _first_found_from_progress(stderr)
    return result


def summarise(result: RunResult) -> dict[str, Any]:
    """The figures of one run: overrun, findings, root causes, units that never ran."""
    report = result.report or {}
    findings = report.get("findings") or []
    clusters = report.get("clusters")
    if clusters is None:  # the old report: every finding stands alone
        causes = len(findings)
        members = len(findings)
    else:
        causes = len(clusters)
        members = sum(len(c.get("members") or []) or 1 for c in clusters)
    units = report.get("units") or []
    zero = [u["unit"] for u in units if not u.get("examples")]
    by_oracle: dict[str, int] = {}
    for finding in findings:
        by_oracle[finding["oracle"]] = by_oracle.get(finding["oracle"], 0) + 1
    server = report.get("server") or {}
    return {
        "name": result.name,
        "budget_s": result.budget,
        "wall_s": round(result.wall, 1),
        "overrun_pct": round(100 * (result.wall - result.budget) / result.budget, 1),
        "status": result.status,
        "error": report.get("error") or (None if result.report else result.stderr.strip()[-300:] or "no report"),
        "era": f"{server.get('era')} {server.get('revision')}" if server else None,
        "examples": report.get("examples"),
        "findings": len(findings),
        "root_causes": causes,
        "cluster_members": members,
        "by_oracle": by_oracle,
        "units": len(units),
        "units_zero_examples": zero,
        "first_finding_s": None if result.first_finding is None else round(result.first_finding, 1),
        "skipped_tools": report.get("skipped_tools") or [],
        "finding_messages": [
            f"[{f['oracle']}] {f.get('tool') or f.get('phase')}: {f['message'][:160]}" for f in findings
        ],
        "findings_full": [
            {k: f.get(k) for k in ("oracle", "severity", "tool", "phase", "message", "reproduced", "flaky")}
            for f in findings
        ],
        "coverage_gaps": report.get("coverage_gaps") or [],
    }
