"""The official MCP conformance runner grades the gateway in front of the reference server, with
namespacing off (a pure proxy), as tests/checker/test_official_server.py grades the reference
server itself: the same suites, the same extension scenarios, the same vacuity guard, and the same
verdict: every scenario passes.

What the gateway relays for that, beyond the base protocol: a 2026-07-28 client's input rounds,
as they are, to a 2026-07-28 backend (the backend's keys, all its requests in one round, the
client's own capabilities and inputResponses, the backend's requestState wrapped); the Tasks
extension (a task the backend creates for a call, its wrapped id routing tasks/get, tasks/update
and tasks/cancel back with their Mcp-Name headers, its states and input requests as the backend
reports them); the Skills extension (skills/list page by page, skills/get, directory reads). A
2025-11-25 client that lists ``text/event-stream`` first in ``Accept`` (server-sse-polling does)
gets its answer as a primed SSE stream, so that scenario is graded, not found "not applicable".

The backend is pinned to 2026-07-28 (as the gateway's own ``server/discover`` would find it on an
idle machine; a loaded one may fall back to initialize). Its policies are those of a gateway set up
to pass calls through: every call allowed (the runner's fixtures include ``confirm_delete``,
which the host would otherwise hold for an operator's approval), no cache (the runner calls the
same tools with the same arguments and expects each call to run). The breaker is left as shipped:
the runner's failing requests on purpose are the client's doing and must not open it.
"""

from __future__ import annotations

import json
import sys
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from _gateway import reference

from mcpwire.host import Host
from mcpwire.host.config import HostConfig, parse_server
from mcpwire.server import LOOPBACK_HOSTS
from mcpwire.server.http import serve_http
from mcpwire.service.gateway import Gateway

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "checker"))
import test_official_server as official

pytestmark = [pytest.mark.real, pytest.mark.slow]

POLICY = {"tools": {"*": {"approval": "allow"}}, "cache_ttl_seconds": 0}


def _argv(version: str, url: str, *args: str) -> list[str]:
    runner = str(official._runner(version))
    return [str(official.NODE), "--require", str(official.LOOPBACK), runner, "server", "--url", url, *args]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """Every suite and every extension scenario run once against the gateway (suite key ->
    scenario -> checks, with the runner's logs and exit statuses; official.EXTENSION_SUITE holds
    the extension scenarios, a log and a status each)."""
    jobs: list[tuple[str, list[str], Path]] = []
    directories: dict[tuple[str, str], Path] = {}
    done: dict[str, tuple[int, str]] = {}
    breakers: list[Host] = []
    extensions = tmp_path_factory.mktemp("gateway-extensions")
    logs = tmp_path_factory.mktemp("gateway-extension-logs")

    async def front(stack: AsyncExitStack, nursery: trio.Nursery) -> str:
        entry = {**reference(), "era": "modern", "policy": POLICY}
        host = Host(HostConfig(servers=[parse_server("reference", entry)]), start_timeout=60.0)
        gateway = Gateway(host, namespacing=False)  # before the host connects: its clients are the gateway's
        await stack.enter_async_context(host)
        breakers.append(host)
        app = gateway.asgi_app(allowed_hosts=LOOPBACK_HOSTS)
        [base] = await nursery.start(partial(serve_http, app, port=0))
        return f"{base}/mcp"

    async def main() -> None:
        # one gateway and backend per suite: the suites run at once, and a backend's log message
        # is relayed only while one call to it is in flight (it does not say whose it is); the
        # extension scenarios share one
        async with AsyncExitStack() as stack:
            nursery = await stack.enter_async_context(trio.open_nursery())
            for version, spec in official.SUITES:
                url = await front(stack, nursery)
                directory = directories[(version, spec)] = tmp_path_factory.mktemp(f"gateway-{version}-{spec}")
                argv = _argv(version, url, "--suite", "all", "--spec-version", spec, "-o", str(directory))
                jobs.append((f"{version} {spec}", argv, directory / "runner.log"))
            url = await front(stack, nursery)
            for name in official.EXTENSIONS:
                argv = _argv(official.EXTENSION_RUNNER, url, "--scenario", name, "--force")
                argv += ["--spec-version", official.EXTENSION_SPEC, "-o", str(extensions)]
                jobs.append((name, argv, logs / f"{name}.log"))
            done.update(await trio.to_thread.run_sync(official._run_all, jobs))
            nursery.cancel_scope.cancel()

    trio.run(main)
    out: dict[tuple[str, str], dict[str, Any]] = {
        key: {"scenarios": official._scenarios(directory), "log": done[f"{key[0]} {key[1]}"][1]}
        for key, directory in directories.items()
    }
    out[official.EXTENSION_SUITE] = {
        "scenarios": official._scenarios(extensions),
        "log": {name: done[name][1] for name in official.EXTENSIONS},
        "status": {name: done[name][0] for name in official.EXTENSIONS},
    }
    out[("breakers", "")] = {"opened": [host.breaker_for("reference").opened for host in breakers]}
    return out


def test_every_suite_ran_exactly_its_scenarios(graded: dict[tuple[str, str], dict[str, Any]]) -> None:
    for key, names in official.SUITES.items():
        assert sorted(graded[key]["scenarios"]) == sorted(names), graded[key]["log"][-2000:]


@pytest.mark.parametrize(
    ("version", "spec", "scenario"), official.CASES, ids=[f"{v}-{s}-{n}" for v, s, n in official.CASES]
)
def test_scenario_passes_through_the_gateway(
    version: str, spec: str, scenario: str, graded: dict[tuple[str, str], dict[str, Any]]
) -> None:
    checks = graded[(version, spec)]["scenarios"].get(scenario)
    assert checks is not None, f"{scenario} did not run"
    bad = [
        f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks if c["status"] in ("FAILURE", "WARNING")
    ]
    assert bad == [], json.dumps(checks)[:3000]
    assert any(c["status"] == "SUCCESS" for c in checks), f"no graded check succeeded: {json.dumps(checks)[:3000]}"
    vacuous = [v for c in checks if (v := official._vacuous(scenario, c))]
    assert vacuous == []


def test_server_sse_polling_is_graded_on_a_primed_stream(graded: dict[tuple[str, str], dict[str, Any]]) -> None:
    for key in [k for k, names in official.SUITES.items() if "server-sse-polling" in names]:
        checks = {c["id"]: c for c in graded[key]["scenarios"]["server-sse-polling"]}
        assert checks["server-sse-priming-event"]["status"] == "SUCCESS", checks
        assert checks["server-sse-priming-event"]["details"]["primingEventIsFirst"] is True
        assert checks["server-sse-retry-field"]["status"] == "SUCCESS", checks
        assert "server-sse-content-type" not in checks  # the runner's "JSON instead of SSE" note


@pytest.mark.parametrize("scenario", official.EXTENSIONS)
def test_extension_scenario_passes_through_the_gateway(
    scenario: str, graded: dict[tuple[str, str], dict[str, Any]]
) -> None:
    run = graded[official.EXTENSION_SUITE]
    checks = run["scenarios"].get(scenario)
    assert checks is not None, f"{scenario} did not run: {run['log'][scenario][-2000:]}"
    assert run["status"][scenario] == 0, run["log"][scenario][-3000:]
    if scenario in official.RUNNER_PLACEHOLDERS:
        assert [(c["id"], c["status"]) for c in checks] == [(scenario, "SKIPPED")]
        pytest.skip(f"runner {official.EXTENSION_RUNNER} does not grade {scenario}: {checks[0]['errorMessage']}")
    bad = [f"{c['id']}: {c['status']} {c.get('errorMessage', '')}" for c in checks if c["status"] != "SUCCESS"]
    assert bad == [], json.dumps(checks)[:3000]
    assert "wire-schema-valid" in {c["id"] for c in checks}
    assert len(checks) >= 2, checks
    vacuous = [v for c in checks if (v := official._vacuous(scenario, c))]
    assert vacuous == []


def test_the_runners_failing_requests_never_opened_the_backends_breaker(
    graded: dict[tuple[str, str], dict[str, Any]],
) -> None:
    # the runner sends unknown tools, invalid params and tampered states on purpose: the client's
    # doing, not the backend's, so the breaker (on, as shipped: 5 failures) never opened
    assert graded[("breakers", "")]["opened"] == [0] * (len(official.SUITES) + 1)
