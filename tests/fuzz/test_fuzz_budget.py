"""``--time-budget`` is a bound, and time is shared: against servers that hang (and crash) on some
inputs, over stdio and Streamable HTTP, the run ends within the budget plus its grace, and every
unit gets examples (the first bug is found early; the rest of the budget goes to the other units).

The servers are the planted-bug fixtures: ``countdown`` never answers a negative ``n`` (over HTTP
the request hangs for 30 s), three tools end the process on one input. Before the schedule in
rounds, a 30 s budget took 44 s on stdio and a 20 s one 33 s on HTTP, and units got no example
(``bench/fuzz_budget.py`` measures both).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from _support import BUGGY_HTTP, SERVER, free_port, run_json
from mcpwire.fuzz.runner import BUDGET_GRACE_S

pytestmark = pytest.mark.slow

#: starting the server and the interpreter's own jitter on a loaded machine
SLACK_S = 3.0


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
def test_the_budget_is_a_bound_and_every_unit_gets_examples(tmp_path: Path, transport: str) -> None:
    budget = 25.0 if transport == "stdio" else 30.0
    target = ["--", *SERVER]
    if transport != "stdio":
        port = free_port()
        target = [f"http://127.0.0.1:{port}/mcp", "--", sys.executable, BUGGY_HTTP, str(port)]
    started = time.monotonic()
    status, report = run_json(
        ["--seed", "11", "--time-budget", str(budget), "--deadline", "2", "--deny", "launch", "--out", str(tmp_path),
         *target]
    )  # fmt: skip
    wall = time.monotonic() - started
    assert wall <= budget + BUDGET_GRACE_S + SLACK_S, f"{wall:.1f}s for a {budget:g}s budget"
    assert report["duration_s"] <= budget + BUDGET_GRACE_S
    assert status == 1 and report["findings"]
    units = {u["unit"]: u for u in report["units"]}
    assert report["coverage_gaps"] == [], units
    assert all(u["examples"] >= 1 for u in units.values())
    assert {"tools:countdown", "protocol-mutations", "stateful"} <= set(units)
    assert report["first_finding_s"] < budget / 2
