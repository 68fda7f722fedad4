"""Host supervision and policies with in-process fake servers, under trio's autojump clock:
refused connections and backoff, crashes and retries, health checks, the live registry,
events, the breaker, approval timeouts, and cache invalidation by notifications."""

from __future__ import annotations

import itertools
import json
import logging
import random
from pathlib import Path

import msgspec
import pytest
import trio
import trio.testing
from _host_fakes import SCHEMA, Factory, FakeServer, tool

from mcpwire.errors import (
    ApprovalDenied,
    CircuitOpen,
    ConfigError,
    HostError,
    RequestTimeout,
    RPCError,
    ServerGone,
    ToolExecutionError,
    UnknownTool,
)
from mcpwire.host import ApprovalRequest, Host, HostConfig, HostEvent, Risk, ServerStatus, parse_config
from mcpwire.host.host import _Backoff
from mcpwire.protocol.types import Tool


def _config(servers: dict[str, object]) -> HostConfig:
    return parse_config({"mcpServers": servers}, base_path="/cfg")


def _entry(**policy: object) -> dict[str, object]:
    return {"command": "fake", "disabled_tools": ["hidden"], "policy": {"retries": 0, **policy}}


def _host(factory: Factory, servers: dict[str, object], **options: object) -> Host:
    options.setdefault("health_interval", 0)
    # these tests are about other policies: only CRITICAL calls ask (the approval tests say otherwise)
    options.setdefault("ask_at", Risk.CRITICAL)
    return Host(_config(servers), client_factory=factory, **options)  # type: ignore[arg-type]


async def test_startup_server_info_and_events(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory(FakeServer("a"), FakeServer("m", era="modern"))
    host = _host(factory, {"a": _entry(), "m": _entry(), "off": {"command": "fake", "enabled": False}})
    events = host.events()  # registered now: nothing of the start-up is lost
    async with host:
        a, m, off = host.list()
        assert (a.status, m.status, off.status) == (ServerStatus.CONNECTED,) * 2 + (ServerStatus.DISCONNECTED,)
        assert (a.era, a.revision, a.tool_count, a.restart_count) == ("legacy", "2025-11-25", 4, 0)
        assert (m.era, m.protocol_version) == ("modern", "2026-07-28")
        assert off.error is None and "off" not in factory.servers
        assert [t.name for t in host.tools()] == [
            "a__delete_thing",
            "a__get_thing",
            "a__set_thing",
            "a__slow_thing",
            "m__delete_thing",
            "m__get_thing",
            "m__set_thing",
            "m__slow_thing",
        ]
        # 2026-07-28: list changes need a subscriptions/listen stream
        assert factory["m"].subscriptions[0]["tools"] is True
        assert factory["a"].subscriptions == []
    seen: list[HostEvent] = [e async for e in events]  # ends when the host closes
    a_status = [(e.previous, e.status) for e in seen if e.server == "a" and e.kind == "status"]
    assert a_status == [("disconnected", "connecting"), ("connecting", "connected"), ("connected", "disconnected")]
    tools = [e.tool_count for e in seen if e.server == "a" and e.kind == "tools"]
    assert tools == [4, 0]
    # shutdown ends each connection in order: the client closes its own streams, uncancelled
    assert factory["a"].closes == factory["m"].closes == ["in order"]


async def test_refused_connections_back_off_exponentially(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory(FakeServer("a", refuse=3))
    async with _host(factory, {"a": _entry()}, backoff_base=1.0, backoff_cap=3.0, start_timeout=0.5) as host:
        info = host.get("a")
        assert info.status is ServerStatus.ERROR
        assert info.error == "ConnectError: cannot connect to 'a': connection refused"
        with pytest.raises(
            UnknownTool,
            match=r"^no tool named 'a__get_thing': server 'a' is not connected \(ConnectError: cannot connect to 'a': "
            r"connection refused\); the host keeps retrying in the background, so its tools are not registered$",
        ):
            await host.call_tool("a__get_thing")
        await host.wait_status("a", ServerStatus.CONNECTED, timeout=60)
        assert info.restart_count == 3
    t = factory["a"].connect_times
    gaps = [b - a for a, b in itertools.pairwise(t)]
    # attempt n waits uniformly in [c/2, c] with c = min(cap, base * 2**n): 1, 2, then capped at 3
    for gap, ceiling in zip(gaps, [1.0, 2.0, 3.0], strict=True):
        assert ceiling / 2 <= gap <= ceiling


def test_backoff_delays_are_jittered_within_their_bounds() -> None:
    backoff = _Backoff(base=1.0, cap=8.0, rng=random.Random(5))
    for attempt, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (10, 8.0)]:
        delays = [backoff.delay(attempt) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) == 50  # spread out, not one fixed delay per attempt
        assert max(delays) - min(delays) > ceiling / 4
    # each host draws from its own generator: servers that fail together do not retry in step
    one, two = _Backoff(), _Backoff()
    assert [one.delay(3) for _ in range(5)] != [two.delay(3) for _ in range(5)]


async def test_servers_start_concurrently(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory(FakeServer("a", start_delay=1.0), FakeServer("b", start_delay=1.0))
    start = trio.current_time()
    async with _host(factory, {"a": _entry(), "b": _entry()}) as host:
        # virtual time: one after the other would take 2 s
        assert trio.current_time() - start == pytest.approx(1.0)
        assert [i.status for i in host.list()] == [ServerStatus.CONNECTED] * 2
    assert factory["a"].connect_times == factory["b"].connect_times == [start]


async def test_crash_restart_and_retry_on_the_new_connection(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", crash_on_call=True)
    factory = Factory(server)
    async with _host(
        factory, {"a": _entry(retries=3, approval={"delete_*": "allow"})}, backoff_base=0.01, backoff_cap=0.02
    ) as host:
        # not idempotent: tried once, never blindly repeated
        with pytest.raises(ToolExecutionError, match=r"^tool 'delete_thing' on server 'a' failed: ServerGone: "):
            await host.call_tool("a__delete_thing", {}, timeout=5)
        assert [c[1] for c in server.calls] == ["delete_thing"]
        await host.wait_status("a", ServerStatus.ERROR)
        await host.wait_status("a", ServerStatus.CONNECTED)
        assert host.get("a").restart_count == 1
        # read-only: retried with backoff, on the connection that replaced the crashed one
        server.calls.clear()
        server.crash_on_call = False
        server.client.crash()
        result = await host.call_tool("a__get_thing", {"q": "x"})
        assert result.text.endswith("@3")
        assert [c[0] for c in server.calls][-1] == 3
        assert host.get("a").restart_count == 2


@pytest.mark.parametrize(("era", "method"), [("legacy", "ping"), ("modern", "server/discover")])
async def test_failed_health_check_reconnects(autojump_clock: trio.testing.MockClock, era: str, method: str) -> None:
    server = FakeServer("a", era=era)
    factory = Factory(server)
    async with _host(factory, {"a": _entry()}, health_interval=10, backoff_base=1) as host:
        await trio.sleep(25)
        assert server.health_checks == [method, method]
        info = host.get("a")
        assert info.last_health_check is not None
        server.healthy = False
        async with host.events() as events:
            statuses = []
            async for event in events:
                if event.kind == "status":
                    statuses.append(event.status)
                    if event.status == "error":
                        assert event.error == f"health check ({method}) failed: ServerGone: no answer"
                    if event.status == "connected":
                        break
        assert statuses == ["error", "connecting", "connected"]
        assert (info.health_failures, info.restart_count, len(server.clients)) == (1, 1, 2)


class _Interrupt(BaseException):
    """Stands for a KeyboardInterrupt (which would end the test run itself)."""


async def test_an_interrupt_while_stopping_servers_still_closes_every_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    factory = Factory(FakeServer("a"), FakeServer("b"))
    host = _host(factory, {"a": _entry(), "b": _entry()})
    stops: list[str] = []

    async def interrupted_stop(info: object) -> None:
        stops.append(getattr(info, "name", "?"))
        raise _Interrupt

    with pytest.raises(BaseException) as raised:
        async with host:
            monkeypatch.setattr(host._supervisor, "stop", interrupted_stop)
    # the interrupt comes out (alone or grouped), after the host's nursery exited: no connection
    # outlives the block, though the stop of the first one was cut short
    grouped = isinstance(raised.value, BaseExceptionGroup)
    assert raised.group_contains(_Interrupt) if grouped else raised.type is _Interrupt
    assert stops == ["b"]
    assert sorted(factory.close_order) == ["a", "b"]
    assert all(server.clients[-1].closed.is_set() for server in factory.servers.values())


async def test_per_server_health_interval_overrides_the_host(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory(FakeServer("a"), FakeServer("b"))
    entries = {"a": {**_entry(), "health_interval_seconds": 0}, "b": {**_entry(), "health_interval_seconds": 4}}
    async with _host(factory, entries, health_interval=10):
        await trio.sleep(21)
    assert factory["a"].health_checks == []
    assert len(factory["b"].health_checks) == 5


async def test_live_registry(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    factory = Factory()
    host = Host(HostConfig(path=str(tmp_path / "mcp.json")), client_factory=factory, health_interval=0)
    early = host.register("early", {"command": "{BASE_PATH}/srv"})
    assert early.config.command == f"{tmp_path}/srv" and early.status is ServerStatus.DISCONNECTED
    async with host:
        assert early.status is ServerStatus.CONNECTED
        info = host.register("late", {"command": "fake", "namespace": "l8"})
        assert info.status is ServerStatus.DISCONNECTED  # starts in the background
        await host.wait_status("late", ServerStatus.CONNECTED)
        assert "l8__get_thing" in {t.name for t in host.tools()}
        with pytest.raises(HostError, match=r"^a server named 'late' is already registered; remove it first$"):
            host.register("late", {"command": "x"})
        with pytest.raises(ConfigError, match=r"^server 'bad': \$\.bad\.url: expected an http") as err:
            host.register("bad", {"url": "ftp://x", "timeout": "soon"})
        assert len(err.value.problems) == 2
        assert [i.name for i in host.list()] == ["early", "late"]
        with pytest.raises(HostError, match=r"^no server named 'nope'; known: early, late$"):
            host.get("nope")
        await host.remove("late")
        assert info.status is ServerStatus.DISCONNECTED
        assert [i.name for i in host.list()] == ["early"]
        assert not any(t.server == "late" for t in host.tools())
        await host.reset()
        assert host.list() == [] and host.tools() == []
    with pytest.raises(HostError, match=r"the host is closed"):
        host.register("after", {"command": "x"})


async def test_breaker_opens_fails_fast_and_recovers(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", call_error=ServerGone("connection reset", server="a"))
    factory = Factory(server)
    policy = {"breaker_failures": 2, "breaker_cooldown_seconds": 5}
    async with _host(factory, {"a": _entry(**policy)}) as host:
        for _ in range(2):
            with pytest.raises(ToolExecutionError, match=r"^tool 'set_thing' on server 'a' failed: ServerGone"):
                await host.call_tool("a__set_thing", {"q": "x"})
        with pytest.raises(CircuitOpen, match=r"^server 'a': circuit open after 2 consecutive failures"):
            await host.call_tool("a__set_thing", {"q": "x"})
        assert len(server.calls) == 2  # the open circuit did not call the server
        assert host.statistics().servers["a"].breaker == "open"
        assert 'mcpwire_host_breaker_state{server="a"} 2' in host.prometheus()
        await trio.sleep(5)
        assert host.statistics().servers["a"].breaker == "half_open"
        server.call_error = None
        assert (await host.call_tool("a__set_thing", {"q": "x"})).text.startswith("set_thing(")
        assert host.statistics().servers["a"].breaker == "closed"
        # an answer from the server, even an error, proves it alive
        server.call_error = RPCError(-32602, "bad arguments", method="tools/call", server="a")
        for _ in range(3):
            with pytest.raises(ToolExecutionError, match=r"RPCError: error -32602"):
                await host.call_tool("a__set_thing")
        assert host.statistics().servers["a"].breaker == "closed"


async def test_approval_rules_approver_and_timeout(autojump_clock: trio.testing.MockClock, tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approver(request: ApprovalRequest) -> bool | dict[str, object]:
        asked.append(request)
        if request.arguments.get("q") == "silent":
            await trio.sleep_forever()
        if request.arguments.get("q") == "edit":
            return {"q": "edited"}
        return request.arguments.get("q") in ("yes", "edited")

    server = FakeServer("a")
    factory = Factory(server)
    entry = _entry(approval={"set_*": "deny"}, tools={"get_thing": {"approval": "ask"}})
    audit = tmp_path / "audit.jsonl"
    async with _host(factory, {"a": entry}, approver=approver, audit=audit) as host:
        ok = await host.call_tool("a__delete_thing", {"q": "yes"})
        assert ok.approval == "approved" and ok.risk is Risk.CRITICAL
        edited = await host.call_tool("a__delete_thing", {"q": "edit"})
        assert edited.approval == "approved_modified" and server.calls[-1][2] == {"q": "edited"}
        with pytest.raises(ApprovalDenied, match=r"^tool 'delete_thing' on server 'a' was denied by the approver"):
            await host.call_tool("a__delete_thing", {"q": "no"})
        start = trio.current_time()
        with pytest.raises(
            ApprovalDenied, match=r"^tool 'delete_thing' on server 'a': no approval within 300s; denied$"
        ):
            await host.call_tool("a__delete_thing", {"q": "silent"})
        assert trio.current_time() - start == pytest.approx(300)
        with pytest.raises(ApprovalDenied, match=r"^tool 'set_thing' on server 'a' is denied by the server's approval"):
            await host.call_tool("a__set_thing")
        await host.call_tool("a__get_thing", {"q": "yes"})  # per-tool "ask" although read-only
        assert [r.name for r in asked][-1] == "a__get_thing" and asked[-1].risk is Risk.MEDIUM
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["tool"], r["decision"], r["outcome"]) for r in records] == [
        ("delete_thing", "approved", "ok"),
        ("delete_thing", "approved_modified", "ok"),
        ("delete_thing", "denied", "denied"),
        ("delete_thing", "denied", "denied"),
        ("set_thing", "denied", "denied"),
        ("get_thing", "approved", "ok"),
    ]
    assert records[1]["arguments"] == {"q": "edited"} and records[0]["risk"] == "CRITICAL"
    assert len(server.calls) == 3


async def test_no_approver_denies_with_a_hint(autojump_clock: trio.testing.MockClock) -> None:
    async with _host(Factory(), {"a": _entry()}, approval_rules=[("*", "get_*", "deny")]) as host:
        with pytest.raises(ApprovalDenied, match=r"needs approval .* but no approver is configured"):
            await host.call_tool("a__delete_thing")
        with pytest.raises(ApprovalDenied, match=r"denied by the rule \('\*', 'get_\*'\)"):
            await host.call_tool("a__get_thing")
        assert (await host.call_tool("a__set_thing")).risk is Risk.HIGH


async def test_cache_and_invalidation_by_notifications(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    factory = Factory(server)
    async with _host(factory, {"a": _entry(approval={"delete_*": "allow"})}) as host:
        events = host.events()
        first = await host.call_tool("a__get_thing", {"q": "1"})
        again = await host.call_tool("a__get_thing", {"q": "1"})
        assert (first.cached, again.cached, again.text) == (False, True, first.text)
        assert (await host.call_tool("a__set_thing", {"q": "1"})).cached is False
        assert (await host.call_tool("a__set_thing", {"q": "1"})).cached is True  # idempotent, not destructive
        assert (await host.call_tool("a__delete_thing", {"q": "1"})).cached is False
        read = await host.read_resource("a", "file:///docs/a.txt")
        assert await host.read_resource("a", "file:///docs/a.txt") == read
        assert host.cache_for("a").counters()["hits"] == 3
        # the host subscribed to the cached URI, so resources/updated can invalidate it
        await trio.sleep(1)
        assert ("resources/subscribe", {"uri": "file:///docs/a.txt"}) in server.requests
        server.client.push("notifications/resources/updated", {"uri": "file:///docs/a.txt"})
        await trio.sleep(1)
        assert await host.read_resource("a", "file:///docs/a.txt") != read
        # list_changed drops every tool result and re-lists the tools
        server.tools = [*server.tools, tool("new_thing")]
        server.client.push("notifications/tools/list_changed")
        with trio.fail_after(5):
            async for event in events:
                if event.kind == "tools":
                    break
        assert event.tool_count == 5 and "a__new_thing" in {t.name for t in host.tools()}
        assert (await host.call_tool("a__get_thing", {"q": "1"})).cached is False
        stats = host.statistics()
        assert (stats.cache_hits, stats.servers["a"].calls["get_thing"].cache_hits) == (3, 1)
        assert stats.servers["a"].calls["resources/read"].calls == 3


async def test_modern_ttl_hints_and_listen_subscriptions(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("m", era="modern", ttl_ms=2000)
    async with _host(Factory(server), {"m": _entry(cache_ttl_seconds=60)}) as host:
        one = await host.read_resource("m", "demo://x")
        assert await host.read_resource("m", "demo://x") == one
        await trio.sleep(2)  # the server's ttlMs, shorter than the configured TTL, expired
        assert await host.read_resource("m", "demo://x") != one
        # one subscriptions/listen stream carries the cached URIs
        assert {"resources": ["demo://x"], "tools": False, "prompts": False, "open": True} in server.subscriptions
        server.ttl_ms = None  # UT-X04: absent on a 2026-07-28 result means 0: not cached
        await host.read_resource("m", "demo://y")
        await host.read_resource("m", "demo://y")
        assert server.reads.count("demo://y") == 2


async def test_per_tool_timeout_and_statistics(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    entry = _entry(timeout_seconds=30, tools={"slow_*": {"timeout_seconds": 2, "retries": 1}})
    async with _host(Factory(server), {"a": entry}) as host:
        start = trio.current_time()
        with pytest.raises(ToolExecutionError, match=r"^tool 'slow_thing' on server 'a' failed: RequestTimeout: .*2s$"):
            await host.call_tool("a__slow_thing")
        # read-only, so retried once: two attempts of 2 s plus a backoff under 0.2 s
        assert 4 <= trio.current_time() - start <= 4.2
        assert [c[1] for c in server.calls] == ["slow_thing", "slow_thing"]
        stats = host.statistics()
        slow = stats.servers["a"].calls["slow_thing"]
        assert (slow.calls, slow.errors, stats.tools) == (1, 1, 4)
        prom = host.prometheus()
        assert 'mcpwire_host_errors_total{server="a",tool="slow_thing"} 1' in prom
        assert 'mcpwire_host_server_up{server="a"} 1' in prom


async def test_is_error_results_are_values_and_not_cached(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", tools=[tool("fail", read_only_hint=True)])
    async with _host(Factory(server), {"a": _entry()}) as host:
        result = await host.call_tool("a__fail")
        assert result.is_error and result.text == "Error: it broke"
        assert (await host.call_tool("a__fail")).cached is False
        assert host.statistics().servers["a"].calls["fail"].errors == 2


async def test_a_reconnect_closes_the_circuit(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", call_error=ServerGone("connection reset", server="a"))
    entry = _entry(breaker_failures=1, breaker_cooldown_seconds=300)
    async with _host(Factory(server), {"a": entry}, backoff_base=1) as host:
        with pytest.raises(ToolExecutionError):
            await host.call_tool("a__get_thing")
        assert host.breaker_for("a").current().value == "open"
        server.call_error = None
        server.client.crash()
        await host.wait_status("a", ServerStatus.ERROR)
        await host.wait_status("a", ServerStatus.CONNECTED)
        assert host.breaker_for("a").current().value == "closed"
        assert (await host.call_tool("a__get_thing")).text.startswith("get_thing(")
        assert trio.current_time() < 300


async def test_changed_tool_definitions_are_flagged_and_slow_listeners_lose_events(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer("a")
    async with _host(Factory(server), {"a": _entry()}) as host:
        slow = host.events(buffer=1)
        watcher = host.events()
        server.tools[0] = msgspec.structs.replace(server.tools[0], description="now it deletes things")
        server.client.push("notifications/tools/list_changed")
        server.client.push("notifications/tools/list_changed")
        kinds = [(await watcher.__anext__()).kind for _ in range(2)]
        assert kinds == ["tools", "tools"]
        assert slow.dropped == 1
        assert "a: tool 'get_thing' changed its description or inputSchema" in caplog.text
        assert host.registry.resolve("a__get_thing").tool.description == "now it deletes things"


async def test_a_listener_of_some_kinds_gets_only_those_and_unwanted_records_are_not_built(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer("a")
    async with _host(Factory(server), {"a": _entry()}) as host:
        lists = host.events(kinds=("tools",))
        assert not host._state.audit_wanted()  # nobody reads audit records: none is built
        await host.call_tool("a__get_thing")
        server.client.push("notifications/tools/list_changed")
        assert (await lists.__anext__()).kind == "tools"
        everything = host.events()
        assert host._state.audit_wanted()
        await host.call_tool("a__get_thing")
        assert (await everything.__anext__()).kind == "audit"
        server.client.push("notifications/tools/list_changed")
        assert (await lists.__anext__()).kind == "tools"
        assert lists.dropped == 0


async def test_events_of_a_closed_host_end_at_once(autojump_clock: trio.testing.MockClock) -> None:
    host = _host(Factory(), {"a": _entry()})
    async with host:
        assert host.running
    assert [e async for e in host.events()] == []
    with pytest.raises(HostError, match=r"^a host can be entered once; this one is closed$"):
        await host.__aenter__()


BAD_SCHEMA_TOOL = Tool(name="broken", input_schema={"type": "object", "$schema": 5})


async def test_a_bad_input_schema_skips_that_tool_only(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    good = FakeServer("good")
    bad = FakeServer("bad", tools=[tool("fine", read_only_hint=True), BAD_SCHEMA_TOOL])
    async with _host(Factory(good, bad), {"good": _entry(), "bad": _entry()}) as host:
        assert [i.status for i in host.list()] == [ServerStatus.CONNECTED] * 2
        names = {t.name for t in host.tools()}
        assert {"good__get_thing", "good__set_thing", "bad__fine"} <= names
        assert "bad__broken" not in names
        assert host.get("bad").tool_count == 1
        assert (
            "server 'bad': skipping tool 'broken': inputSchema.$schema must be a metaschema URI string, got a number"
            in caplog.text
        )
        # the same on a refresh after list_changed
        events = host.events()
        unknown = Tool(name="odd", input_schema={**SCHEMA, "$schema": "https://example.com/my-dialect"})
        good.tools = [*good.tools, BAD_SCHEMA_TOOL, unknown]
        good.client.push("notifications/tools/list_changed")
        with trio.fail_after(5):
            async for event in events:
                if event.kind == "tools":
                    break
        assert host.get("good").status is ServerStatus.CONNECTED and host.get("good").restart_count == 0
        names = {t.name for t in host.tools()}
        assert {"good__get_thing", "bad__fine"} <= names and not {"good__broken", "good__odd"} & names
        assert "server 'good': skipping tool 'broken'" in caplog.text
        assert (
            "server 'good': skipping tool 'odd': "
            "inputSchema.$schema names an unknown metaschema: 'https://example.com/my-dialect'" in caplog.text
        )


async def test_an_unexpected_error_ends_one_server_not_the_host(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    bad = FakeServer("bad", list_errors=[RuntimeError("a bug")])
    factory = Factory(FakeServer("good"), bad)
    async with _host(factory, {"good": _entry(), "bad": _entry()}, backoff_base=1) as host:
        assert host.get("good").status is ServerStatus.CONNECTED
        assert (host.get("bad").status, host.get("bad").error) == (ServerStatus.ERROR, "RuntimeError: a bug")
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert [r.getMessage() for r in errors] == [
            "bad: unexpected error; restarting",
            "bad: error: RuntimeError: a bug",  # the failure itself, at ERROR too
        ]
        assert errors[0].name == "mcpwire.host" and errors[0].exc_info is not None
        await host.wait_status("bad", ServerStatus.CONNECTED)  # restarted like any failed server
        assert (await host.call_tool("good__get_thing")).text.startswith("get_thing(")


class Fatal(BaseException):
    pass


async def test_base_exceptions_are_not_swallowed(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory(FakeServer("good"), FakeServer("bad", list_errors=[Fatal()]))
    with pytest.RaisesGroup(Fatal, flatten_subgroups=True):
        async with _host(factory, {"good": _entry(), "bad": _entry()}):
            pass  # pragma: no cover


async def test_tool_lists_are_retried(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", list_errors=[RequestTimeout("no answer", method="tools/list", server="a")])
    async with _host(Factory(server), {"a": _entry(retries=2)}) as host:
        info = host.get("a")
        # the first list timed out and was retried on the same connection: no restart
        assert (info.status, info.restart_count, server.list_calls) == (ServerStatus.CONNECTED, 0, 2)
        events = host.events()
        server.list_errors = [ServerGone("connection reset", server="a")] * 2
        server.tools = [*server.tools, tool("new_thing")]
        server.client.push("notifications/tools/list_changed")
        with trio.fail_after(5):
            async for event in events:
                if event.kind == "tools":
                    break
        assert "a__new_thing" in {t.name for t in host.tools()}
        assert (server.list_calls, info.restart_count) == (5, 0)


async def test_idempotent_tools_are_cached_unless_destructive(autojump_clock: trio.testing.MockClock) -> None:
    tools = [
        tool("get_thing", read_only_hint=True),
        tool("set_thing", idempotent_hint=True, destructive_hint=False),
        tool("put_thing", idempotent_hint=True, destructive_hint=True),
        tool("touch_thing", idempotent_hint=True),  # destructiveHint absent: true by default
        tool("plain_thing"),
        tool("retry_thing"),
    ]
    server = FakeServer("a", tools=tools)
    entry = _entry(approval={"*": "allow"}, retryable_tools=["retry_thing"])
    async with _host(Factory(server), {"a": entry}) as host:
        cached = {}
        for t in tools:
            await host.call_tool(f"a__{t.name}", {"q": "1"})
            cached[t.name] = (await host.call_tool(f"a__{t.name}", {"q": "1"})).cached
    assert cached == {
        "get_thing": True,
        "set_thing": True,
        "put_thing": False,
        "touch_thing": False,
        "plain_thing": False,
        "retry_thing": False,  # retryable in the config does not make it cacheable
    }
    assert [c[1] for c in server.calls].count("set_thing") == 1


async def test_default_timeout_is_30_seconds(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    async with _host(Factory(server), {"a": {"command": "fake", "policy": {"retries": 0}}}) as host:
        start = trio.current_time()
        with pytest.raises(
            ToolExecutionError, match=r"^tool 'slow_thing' on server 'a' failed: RequestTimeout: .*30s$"
        ):
            await host.call_tool("a__slow_thing")
        assert trio.current_time() - start == pytest.approx(30)


async def test_statistics_cache_hit_rate(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory(FakeServer("a"), FakeServer("b"))
    async with _host(factory, {"a": _entry(), "b": _entry(approval={"delete_*": "allow"})}) as host:
        assert host.statistics().cache_hit_rate == 0.0  # no lookups yet
        for _ in range(3):
            await host.call_tool("a__get_thing", {"q": "1"})
        await host.call_tool("b__get_thing", {"q": "1"})
        await host.call_tool("b__delete_thing", {"q": "1"})  # not cacheable: no lookup
        stats = host.statistics()
        assert (stats.cache_hits, stats.cache_misses, stats.cache_hit_rate) == (2, 2, 0.5)
        assert (stats.servers["a"].cache_hits, stats.servers["b"].cache_misses) == (2, 1)


async def test_from_config_without_a_file_is_an_empty_host(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MCPWIRE_CONFIG", raising=False)
    host = Host.from_config(client_factory=Factory())
    assert (host.config.path, host.config.servers) == (None, ())
    async with host:
        assert host.list() == [] and host.tools() == []
        assert host.statistics().tools == 0


async def test_shutdown_stops_servers_in_reverse_registration_order(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory()
    async with _host(factory, {"a": _entry(), "b": _entry(), "c": _entry()}) as host:
        host.register("d", _entry())
        await host.wait_status("d", ServerStatus.CONNECTED)
        assert factory.close_order == []
    assert factory.close_order == ["d", "c", "b", "a"]
