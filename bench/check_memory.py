"""What a flooding server costs ``mcpwire check``: peak memory and time.

A stdio server answers ``ping`` only after sending COUNT log notifications (300,000 by default):
the check SV-12 (run through the runner's API with deadlines long enough) then reads them all. The
run's peak RSS (the checker, the largest process of its tree) and wall time are measured for one
interpreter and, with ``--baseline-python``, for another holding an older mcpwire.

    python bench/check_memory.py --baseline-python /tmp/old/.venv/bin/python
    python bench/check_memory.py --count 50000

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SERVER = r"""
import json, sys
count = int(sys.argv[1])
note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "info", "logger": "flood", "data": "x" * 200}}) + "\n"
out = sys.stdout
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if not isinstance(message, dict) or "id" not in message:
        continue
    method, rid = message.get("method"), message["id"]
    if method == "initialize":
        version = message["params"]["protocolVersion"]
        result = {"protocolVersion": version, "capabilities": {"logging": {}},
                  "serverInfo": {"name": "flood", "version": "1"}}
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    elif method == "ping":
        for start in range(0, count, 1000):
            out.write(note * min(1000, count - start))
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": {}}) + "\n")
    else:
        error = {"code": -32601, "message": "Method not found"}
        out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}) + "\n")
    out.flush()
"""

#: one check run through the runner's API (the same in older mcpwire), with a deadline long enough
#: to read the whole flood; prints the outcome of SV-12
CHECK = r"""
import sys, trio
from mcpwire.conformance.context import Target
from mcpwire.conformance.runner import run
argv = tuple(sys.argv[1:])
outcome = trio.run(lambda: run(Target(argv), revisions=["2025-11-25"], only=["SV-12"], timeout=600.0,
                               check_timeout=3600.0))
print(" ".join(r.status for r in outcome.results))
"""

MEASURE = r"""
import resource, subprocess, sys, time
began = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
elapsed = time.perf_counter() - began
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"{elapsed} {peak} {done.stdout.strip() or 'none'}")
"""


def measure(python: str, count: int) -> dict[str, Any]:
    """One run: wall seconds, peak RSS in MiB and the outcome of SV-12 (``pass`` once every
    notification was read and the answer came)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Path(tmp) / "flood.py"
        server.write_text(SERVER)
        check = [python, "-c", CHECK, sys.executable, "-u", str(server), str(count)]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        done = subprocess.run([sys.executable, "-c", MEASURE, *check], capture_output=True, text=True, cwd=tmp, env=env)
    seconds, peak_kib, outcome = done.stdout.split()
    return {"seconds": float(seconds), "peak_mib": int(peak_kib) / 1024, "outcome": outcome}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter with the mcpwire to measure")
    parser.add_argument("--baseline-python", help="interpreter with the mcpwire to compare with")
    parser.add_argument("--count", type=int, default=300_000, help="notifications sent before the answer")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args(argv)
    pythons = {"after": args.python}
    if args.baseline_python:
        pythons = {"before": args.baseline_python, **pythons}
    out = {label: measure(python, args.count) for label, python in pythons.items()}
    for label, row in out.items():
        print(f"{label:6}  {row['seconds']:7.1f} s  peak {row['peak_mib']:7.1f} MiB  SV-12 {row['outcome']}")
    if "before" in out:
        before, after = out["before"], out["after"]
        print(
            f"after/before: time {after['seconds'] / before['seconds']:.2f}, memory "
            f"{after['peak_mib'] / before['peak_mib']:.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
