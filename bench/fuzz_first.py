"""Time to the first finding of each planted bug: ``mcpwire fuzz`` against the planted-bug fixture.

    python bench/fuzz_first.py                  # stdio, three seeds, budget 60 s each
    python bench/fuzz_first.py --seeds 1,2 --budget 45

The fixture (``tests/fuzz/fixtures/buggy_server.py``) hides five bugs: ``greet`` ends the process on
the empty string, ``store`` past 300 characters, ``lookup`` on a NUL, ``total`` on an integer
overflow, and ``countdown`` never answers a negative ``n``. Each run is the whole fuzzer (every
phase; ``launch``, which ends the server on any call, denied), timed from the command's start as
the report's ``found_at_s`` counts it; a bug's time is that of the first finding that names its
tool. The goal is each bug within :data:`GOAL_S` at every seed. Results go to
``bench/results/fuzz_first.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).parent))
from fuzz_common import run_fuzz

REPO: Final = Path(__file__).resolve().parents[1]
SERVER: Final = REPO / "tests" / "fuzz" / "fixtures" / "buggy_server.py"
BUGS: Final = ("greet", "store", "lookup", "total", "countdown")
GOAL_S: Final = 15.0


def first_by_bug(report: dict[str, Any]) -> dict[str, float | None]:
    """Seconds to the first finding naming each planted bug's tool (None: not found)."""
    out: dict[str, float | None] = dict.fromkeys(BUGS)
    for finding in report.get("findings") or []:
        tool, at = finding.get("tool"), finding.get("found_at_s")
        for bug in BUGS:
            named = tool == bug or f"'{bug}'" in str(finding.get("message", ""))
            if named and isinstance(at, int | float) and (out[bug] is None or at < (out[bug] or 0)):
                out[bug] = float(at)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "fuzz_first.json")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
        options = ["--seed", str(seed), "--time-budget", f"{args.budget:g}", "--deadline", "2", "--tools", "all"]
        with tempfile.TemporaryDirectory(prefix="fuzz-first-") as out:
            options += ["--out", out, "--deny", "launch", "--", sys.executable, str(SERVER)]
            result = run_fuzz(f"seed {seed}", options, budget=args.budget)
        times = first_by_bug(result.report or {})
        rows.append({"seed": seed, "wall_s": round(result.wall, 1), "first_s": times})
        shown = ", ".join(f"{bug} {'-' if t is None else f'{t:.1f} s'}" for bug, t in times.items())
        print(f"seed {seed}: {shown} (run {result.wall:.0f} s)", flush=True)
    found: dict[str, list[float]] = {bug: [] for bug in BUGS}
    for row in rows:
        for bug, at in row["first_s"].items():
            if at is not None:
                found[bug].append(float(at))
    worst = {bug: max(found[bug], default=None) for bug in BUGS}
    missed = {bug: len(rows) - len(found[bug]) for bug in BUGS}
    for bug in BUGS:
        median = statistics.median(found[bug]) if found[bug] else None
        shown = "-" if median is None else f"{median:.1f} s"
        print(f"{bug:<10} median {shown}  worst {worst[bug]}  missed {missed[bug]}")
    ok = all((w := worst[b]) is not None and w <= GOAL_S and not missed[b] for b in BUGS)
    print(f"goal (each bug within {GOAL_S:g} s at every seed): {'PASS' if ok else 'MISS'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"rows": rows, "worst": worst, "goal_s": GOAL_S, "ok": ok}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
