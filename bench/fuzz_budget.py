"""Is ``--time-budget`` a bound? ``mcpwire fuzz`` against a server that hangs (and crashes) on some
inputs, over stdio and Streamable HTTP: wall time against the budget, units that got no example,
time to the first finding.

    python bench/fuzz_budget.py                        # this tree's fuzzer
    python bench/fuzz_budget.py --before /tmp/fuzz-before  # also the fuzz/ package kept in DIR/fuzz

The server is the planted-bug fixture of the fuzzer's tests (``tests/fuzz/fixtures/buggy_server.py``
and its HTTP twin): ``countdown`` never answers a negative ``n`` and three other tools end the
process on one input, so shrinking, confirming replays and restarts all cost time. Every phase
runs; the tool that ends the server on any call (``launch``) is denied. Each configuration runs
``--rounds`` times (median reported). Results go to ``bench/results/fuzz_budget.json``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from fuzz_common import run_fuzz, summarise

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fuzz" / "fixtures"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def configurations(budgets: dict[str, float]) -> list[tuple[str, float, list[str]]]:
    stdio = [sys.executable, str(FIXTURES / "buggy_server.py")]
    port = _port()
    http = [f"http://127.0.0.1:{port}/mcp", "--", sys.executable, str(FIXTURES / "buggy_http_server.py"), str(port)]
    return [
        ("stdio", budgets["stdio"], ["--", *stdio]),
        ("streamable-http", budgets["http"], http),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stdio-budget", type=float, default=30.0)
    parser.add_argument("--http-budget", type=float, default=20.0)
    parser.add_argument("--deadline", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--before", type=Path, help="a directory holding an earlier fuzz/ package")
    parser.add_argument("--before-only", action="store_true")
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "fuzz_budget.json")
    args = parser.parse_args()
    fuzzers: list[tuple[str, Path | None]] = [] if args.before_only else [("after", None)]
    if args.before is not None:
        fuzzers.insert(0, ("before", args.before))
    results: list[dict[str, Any]] = []
    for label, source in fuzzers:
        for name, budget, target in configurations({"stdio": args.stdio_budget, "http": args.http_budget}):
            runs = []
            for n in range(args.rounds):
                with tempfile.TemporaryDirectory(prefix="fuzz-budget-") as tmp:
                    common = ["--seed", str(args.seed + n), "--time-budget", str(budget), "--deadline",
                              str(args.deadline), "--deny", "launch", "--out", tmp]  # fmt: skip
                    if source is None:
                        common += ["--tools", "all"]
                    print(f"{label} {name} round {n + 1}...", file=sys.stderr, flush=True)
                    runs.append(summarise(run_fuzz(f"{label} {name}", [*common, *target], budget=budget,
                                                   fuzz_src=source)))  # fmt: skip
            walls = [r["wall_s"] for r in runs]
            firsts = [r["first_finding_s"] for r in runs if r["first_finding_s"] is not None]
            results.append(
                {
                    "fuzzer": label,
                    "transport": name,
                    "budget_s": budget,
                    "wall_s_median": statistics.median(walls),
                    "wall_s_max": max(walls),
                    "overrun_pct_median": round(100 * (statistics.median(walls) - budget) / budget, 1),
                    "units_zero_examples": [len(r["units_zero_examples"]) for r in runs],
                    "units": [r["units"] for r in runs],
                    "findings": [r["findings"] for r in runs],
                    "root_causes": [r["root_causes"] for r in runs],
                    "first_finding_s_median": statistics.median(firsts) if firsts else None,
                    "runs": runs,
                }
            )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print("| fuzzer | transport | budget | wall (median, max) | overrun | units with 0 examples | findings "
          "| root causes | first finding |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        first = r["first_finding_s_median"]
        print(
            f"| {r['fuzzer']} | {r['transport']} | {r['budget_s']:g} s | {r['wall_s_median']:.1f} s, "
            f"{r['wall_s_max']:.1f} s | {r['overrun_pct_median']:+.0f} % | "
            f"{'/'.join(map(str, r['units_zero_examples']))} of {r['units'][0]} | "
            f"{'/'.join(map(str, r['findings']))} | {'/'.join(map(str, r['root_causes']))} | "
            f"{'-' if first is None else f'{first:.0f} s'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
