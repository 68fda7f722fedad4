"""How long a full ``mcpwire check`` takes, and whether it finds the same things.

Times ``python -m mcpwire check`` (every check, every revision, the default tool policy) on three
stdio servers: the bundled reference server, server-everything (npm) and mcp-server-time (PyPI),
each run in turn under one interpreter and, with ``--baseline-python``, under another one holding
an older mcpwire (a venv with ``pip install <old tree>[check]``), interleaved round by round so that
both see the same machine. Prints wall seconds per run (median over ``--rounds``), the ratio, and
whether the findings are the same: the set of (check, revision, outcome) of every result that is
not skipped, plus the checks skipped, so that a faster run that checks less shows up.

    python bench/check_speed.py --baseline-python /tmp/old/.venv/bin/python --rounds 3
    python bench/check_speed.py --targets reference --json out.json

Standard library only; the third-party servers come from ``.cache/servers`` (see
``tests/real/install_servers.sh``) and a missing one is reported and left out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
TARGETS: dict[str, list[str]] = {
    "reference": [],
    "everything": ["--", str(SERVERS / "npm" / "node_modules" / ".bin" / "mcp-server-everything")],
    "time": ["--", str(SERVERS / "py" / "bin" / "mcp-server-time")],
}


#: the environment of every run: bytecode written and used, as on a user's machine
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def warm(python: str) -> None:
    """Import the checker once, so that no timed run pays for compiling it."""
    # from a neutral directory: in a checkout, the checkout's mcpwire would shadow the installed one
    command = [python, "-c", "import mcpwire.conformance.cli"]
    subprocess.run(command, env=ENV, check=True, capture_output=True, cwd=tempfile.gettempdir())


def run_check(python: str, target: list[str], timeout: float) -> tuple[float, dict[str, Any] | None, str]:
    """One ``mcpwire check`` run: wall seconds, its JSON report (None if it wrote none), stderr."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [python, "-m", "mcpwire", "check", "-q", "--json", str(report), *target]
        began = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=tmp, env=ENV)
        elapsed = time.perf_counter() - began
        document = json.loads(report.read_text()) if report.exists() else None
    return elapsed, document, done.stderr[-2000:]


def findings(document: dict[str, Any] | None) -> dict[str, list[str]]:
    """What a report found: every result not skipped, and the ids of the skipped ones."""
    if document is None:
        return {"results": [], "skipped": []}
    results = document.get("results", [])
    judged = sorted(f"{r['id']}@{r['revision']}={r['outcome']}" for r in results if r["outcome"] != "skipped")
    skipped = sorted(f"{r['id']}@{r['revision']}" for r in results if r["outcome"] == "skipped")
    return {"results": judged, "skipped": skipped}


def compare(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """The differences, as lines (empty: the same findings). A check that exists only in one of
    the two catalogues (added since) is named but is not a difference in what was found."""
    out: list[str] = []
    old, new = set(before["results"]), set(after["results"])
    for line in sorted(old - new):
        out.append(f"only before: {line}")
    for line in sorted(new - old):
        out.append(f"only after: {line}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter with the mcpwire to time")
    parser.add_argument("--baseline-python", help="interpreter with the mcpwire to compare with")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"comma separated, of {', '.join(TARGETS)}")
    parser.add_argument("--rounds", type=int, default=1, help="runs per target and interpreter (median shown)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds one run may take")
    parser.add_argument("--json", type=Path, help="write every number and finding here")
    args = parser.parse_args(argv)
    pythons = {"after": args.python}
    if args.baseline_python:
        pythons = {"before": args.baseline_python, **pythons}
    table: dict[str, Any] = {}
    for python in pythons.values():
        warm(python)
    for name in args.targets.split(","):
        target = TARGETS[name]
        if target and not Path(target[1]).exists():
            print(f"{name}: {target[1]} is missing (tests/real/install_servers.sh); left out", file=sys.stderr)
            continue
        runs: dict[str, list[float]] = {label: [] for label in pythons}
        found: dict[str, dict[str, list[str]]] = {}
        for _ in range(args.rounds):
            for label, python in pythons.items():
                seconds, document, stderr = run_check(python, target, args.timeout)
                if document is None:
                    print(f"{name} ({label}): no report; stderr: {stderr}", file=sys.stderr)
                runs[label].append(seconds)
                found[label] = findings(document)
        row: dict[str, Any] = {
            label: {"seconds": values, "median": statistics.median(values)} for label, values in runs.items()
        }
        for label in pythons:
            row[label]["findings"] = found[label]
        if "before" in pythons:
            row["ratio"] = row["after"]["median"] / row["before"]["median"]
            row["differences"] = compare(found["before"], found["after"])
        table[name] = row
        medians = "  ".join(f"{label} {row[label]['median']:6.1f} s" for label in pythons)
        extra = ""
        if "ratio" in row:
            same = "same findings" if not row["differences"] else f"{len(row['differences'])} differences"
            extra = f"  after/before {row['ratio']:.2f}  {same}"
        judged = len(found["after"]["results"])
        print(f"{name:10}  {medians}{extra}  ({judged} results judged)", flush=True)
        for line in row.get("differences", []):
            print(f"    {line}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
