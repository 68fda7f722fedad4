"""The host's newer features with in-process fakes, under trio's autojump clock: tool-definition
pins and quarantine, prompts and resources across servers (only what a server advertises),
restart/update/enable at run time, statistics, per-server connect timeouts, the host-level
options (``[server]`` descriptions, raising ``isError`` results), its log lines, and how it says
that a server is not connected."""

from __future__ import annotations

import logging

import msgspec
import pytest
import trio
import trio.testing
from _host_fakes import Factory, FakeServer, default_tools, tool

from mcpwire.errors import ApprovalDenied, HostError, RPCError, ToolExecutionError, UnknownTool
from mcpwire.host import (
    AuditRecord,
    Host,
    HostEvent,
    MemoryPins,
    PinState,
    Risk,
    ServerStatus,
    ToolQuarantined,
    ToolResultError,
    UnknownPrompt,
    parse_config,
)
from mcpwire.protocol.types import ServerCapabilities


class ListSink:
    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)


def _entry(**extra: object) -> dict[str, object]:
    return {"command": "fake", "policy": {"retries": 0}, **extra}


def _host(factory: Factory, servers: dict[str, object] | None = None, **options: object) -> Host:
    config = parse_config({"mcpServers": servers or {"a": _entry()}})
    options.setdefault("health_interval", 0)
    options.setdefault("ask_at", Risk.CRITICAL)
    return Host(config, client_factory=factory, **options)  # type: ignore[arg-type]


async def _next(events: object, kind: str, server: str = "a") -> HostEvent:
    with trio.fail_after(10):
        async for event in events:  # type: ignore[attr-defined]
            if event.kind == kind and event.server == server:
                return event  # type: ignore[no-any-return]
    raise AssertionError(f"no {kind} event")  # pragma: no cover


def _described(server: FakeServer, index: int, description: str) -> None:
    server.tools[index] = msgspec.structs.replace(server.tools[index], description=description)


# -- pins --------------------------------------------------------------------------------------------


async def test_a_changed_definition_is_quarantined_until_approved(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    pins = MemoryPins()
    sink = ListSink()
    async with _host(Factory(server), pins=pins, audit=sink) as host:
        first = await pins.all()
        assert [(p.tool, p.state) for p in first] == [
            ("delete_thing", PinState.PINNED),
            ("get_thing", PinState.PINNED),
            ("hidden", PinState.PINNED),
            ("set_thing", PinState.PINNED),
            ("slow_thing", PinState.PINNED),
        ]
        assert all(p.hash.startswith("sha256:") and len(p.hash) == 71 for p in first)
        assert [(r.kind, r.decision) for r in sink.records][:2] == [("pin", "pinned"), ("pin", "pinned")]
        events = host.events()
        before = host.get("a").tool_count
        _described(server, 0, "now it deletes things")
        server.client.push("notifications/tools/list_changed")
        pin_event = await _next(events, "pin")
        assert (pin_event.change, pin_event.pin and pin_event.pin.state) == ("changed", PinState.QUARANTINED)
        assert pin_event.diff is not None and '+  "description": "now it deletes things",' in pin_event.diff
        assert pin_event.diff.startswith("--- a/get_thing (pinned)\n+++ a/get_thing (new)\n")
        await _next(events, "tools")
        assert "a__get_thing" not in {t.name for t in host.tools()}
        hidden = {t.name: t for t in host.tools(include_quarantined=True)}["a__get_thing"]
        assert hidden.quarantined and host.get("a").tool_count == before - 1
        assert "a__get_thing" not in {t["function"]["name"] for t in host.registry.to_openai()}
        with pytest.raises(
            ToolQuarantined,
            match=r"^tool 'get_thing' on server 'a' is quarantined: its definition changed since it was pinned; "
            r"review the change and approve it \(host\.approve_pin\('a', 'get_thing'\)\)$",
        ):
            await host.call_tool("a__get_thing")
        changed = [r for r in sink.records if r.kind == "pin" and r.decision == "changed"]
        assert len(changed) == 1 and changed[0].diff == pin_event.diff and changed[0].outcome == "quarantined"
        # the same new definition again: nothing new; yet another: the pending one is replaced
        server.client.push("notifications/tools/list_changed")
        _described(server, 0, "and now something else")
        server.client.push("notifications/tools/list_changed")
        again = await _next(events, "pin")
        assert again.change == "changed" and again.diff and "and now something else" in again.diff
        pin = await pins.get("a", "get_thing")
        assert pin is not None and pin.definition["description"] is None
        assert pin.pending_definition is not None and pin.pending_definition["description"] == "and now something else"
        approved = await host.approve_pin("a", "get_thing", by="alice")
        assert (approved.state, approved.pending_hash, approved.definition["description"]) == (
            PinState.PINNED,
            None,
            "and now something else",
        )
        assert (await host.call_tool("a__get_thing")).text.startswith("get_thing(")
        assert host.get("a").tool_count == before
        assert [(r.decision, r.by) for r in sink.records if r.kind == "pin"][-1] == ("approved", "alice")
        assert (await host.approve_pin("a", "get_thing")) == approved  # nothing to approve: unchanged
        with pytest.raises(HostError, match=r"^no pinned tool 'nope' on server 'a'$"):
            await host.approve_pin("a", "nope")


async def test_a_server_going_back_to_the_pinned_definition_lifts_the_quarantine(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = FakeServer("a")
    pins = MemoryPins()
    async with _host(Factory(server), pins=pins) as host:
        original = server.tools[0]
        events = host.events()
        _described(server, 0, "changed")
        server.client.push("notifications/tools/list_changed")
        await _next(events, "pin")
        server.tools[0] = original
        server.client.push("notifications/tools/list_changed")
        assert (await _next(events, "pin")).change == "reverted"
        assert "a__get_thing" in {t.name for t in host.tools()}
    # pins outlive a host: a definition changed while nobody watched is quarantined at connect
    _described(server, 1, "changed offline")
    async with _host(Factory(server), pins=pins) as host:
        assert "a__set_thing" not in {t.name for t in host.tools()}
        assert (await pins.get("a", "set_thing")).state is PinState.QUARANTINED  # type: ignore[union-attr]
    async with _host(Factory(FakeServer("a"))) as host:
        with pytest.raises(HostError, match=r"^this host does not pin tool definitions; pass pins=MemoryPins\(\)"):
            await host.approve_pin("a", "get_thing")
        assert await host.pinned() == []


# -- prompts and resources -------------------------------------------------------------------------


async def test_prompts_and_resources_of_every_server_namespaced(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "mcpwire.host")
    full = FakeServer("a", capabilities=ServerCapabilities(tools={}, prompts={}, resources={}))
    prompts_only = FakeServer("p", capabilities=ServerCapabilities(prompts={"listChanged": True}), no_templates=True)
    no_templates = FakeServer("r", capabilities=ServerCapabilities(resources={}), no_templates=True)
    factory = Factory(full, prompts_only, no_templates)
    async with _host(factory, {"a": _entry(), "p": _entry(), "r": _entry(namespace="docs")}) as host:
        assert [i.status for i in host.list()] == [ServerStatus.CONNECTED] * 3
        # a server without the tools capability is connected with no tools, never asked for them
        assert (host.get("p").tool_count, prompts_only.list_calls) == (0, 0)
        assert ("resources/list", {}) not in prompts_only.requests
        assert [p.name for p in host.prompts()] == ["a__greet", "p__greet"]
        assert [p.original for p in host.prompts("p")] == [("p", "greet")]
        got = await host.get_prompt("p__greet", {"who": "ann"}, context={"trace_id": "t"})
        assert got.messages[0].content["text"] == "hi ann"
        with pytest.raises(
            UnknownPrompt, match=r"^no prompt named 'p__gret'; did you mean 'p__greet' or 'a__greet'\?$"
        ):
            await host.get_prompt("p__gret")
        with pytest.raises(UnknownPrompt, match=r"^no prompt named 'zzz'; known prompts: a__greet, p__greet$"):
            await host.get_prompt("zzz")
        assert [(r.name, r.uri) for r in host.resources()] == [
            ("a__a.txt", "file:///docs/a.txt"),
            ("a__b.txt", "file:///docs/b.txt"),
            ("docs__a.txt", "file:///docs/a.txt"),
            ("docs__b.txt", "file:///docs/b.txt"),
        ]
        assert [(t.name, t.uri_template) for t in host.resource_templates()] == [("a__doc", "file:///docs/{name}")]
        assert host.resource_templates("r") == []  # -32601 for templates: none, quietly
        assert "cannot list resource templates" not in caplog.text
        stats = host.statistics()
        assert (stats.prompts, stats.resources) == (2, 4)
        assert (stats.servers["a"].prompts, stats.servers["a"].resources, stats.servers["a"].resource_templates) == (
            1,
            2,
            1,
        )
        assert "prompts/get" not in stats.servers["a"].calls and stats.servers["p"].calls["prompts/get"].calls == 1
        events = host.events()
        prompts_only.prompts = []
        prompts_only.client.push("notifications/prompts/list_changed")
        changed = await _next(events, "prompts", "p")
        assert changed.prompt_count == 0 and [p.name for p in host.prompts()] == ["a__greet"]
        full.resources = full.resources[:1]
        full.client.push("notifications/resources/list_changed")
        assert (await _next(events, "resources")).resource_count == 1
        assert "a: connected over stdio (legacy, 2025-11-25): 5 tools, 1 prompts, 2 resources" in caplog.text


async def test_failing_prompt_lists_and_gets_keep_the_server(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer("a", capabilities=ServerCapabilities(tools={}, prompts={}, resources={}))
    server.list_failures = {"prompts/list": RPCError(-32603, "prompts are broken", method="prompts/list")}
    async with _host(Factory(server)) as host:
        info = host.get("a")
        assert (info.status, info.prompt_count, info.resource_count) == (ServerStatus.CONNECTED, 0, 2)
        assert "a: cannot list prompts: RPCError: error -32603 to 'prompts/list': prompts are broken" in caplog.text
        server.list_failures = {}
        events = host.events()
        server.client.push("notifications/prompts/list_changed")
        assert (await _next(events, "prompts")).prompt_count == 1
        server.call_error = RPCError(-32602, "unknown prompt", method="prompts/get")
        with pytest.raises(
            ToolExecutionError,
            match=r"^prompt 'greet' on server 'a' failed: RPCError: error -32602 to 'prompts/get': unknown prompt$",
        ):
            await host.get_prompt("a__greet", {"who": "x"})
        assert info.status is ServerStatus.CONNECTED


# -- runtime management ------------------------------------------------------------------------------


async def test_restart_update_and_enable_at_run_time(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a")
    async with _host(Factory(server)) as host:
        events = host.events()
        info = await host.restart("a")
        assert (info.status, info.restart_count, len(server.clients)) == (ServerStatus.CONNECTED, 1, 2)
        statuses = []
        while len(statuses) < 3:
            event = await _next(events, "status")
            statuses.append(event.status)
        assert statuses == ["disconnected", "connecting", "connected"]
        # a new configuration: another namespace and a rule, restarted with it
        updated = await host.update("a", {**_entry(namespace="fresh"), "policy": {"approval": {"get_*": "deny"}}})
        assert updated.status is ServerStatus.CONNECTED and len(server.clients) == 3
        assert {t.name for t in host.tools()} >= {"fresh__get_thing", "fresh__set_thing"}
        with pytest.raises(ApprovalDenied, match=r"is denied by the server's approval setting"):
            await host.call_tool("fresh__get_thing")
        assert host.server_statistics("a").calls["get_thing"].calls == 1  # kept across the update
        disabled = await host.set_enabled("a", False)
        assert (disabled.status, disabled.enabled, host.tools()) == (ServerStatus.DISCONNECTED, False, [])
        assert server.closes[-1] == "in order"
        with pytest.raises(HostError, match=r"^cannot restart server 'a': it is disabled; enable it first$"):
            await host.restart("a")
        assert (await host.set_enabled("a", False)).status is ServerStatus.DISCONNECTED  # no change
        enabled = await host.set_enabled("a", True)
        assert enabled.status is ServerStatus.CONNECTED and len(server.clients) == 4
        with pytest.raises(HostError, match=r"^no server named 'zz'; known: a$"):
            await host.restart("zz")
    with pytest.raises(HostError, match=r"^cannot restart server 'a': the host is closed"):
        await host.restart("a")
    idle = _host(Factory(FakeServer("a")))
    assert (await idle.set_enabled("a", False)).enabled is False  # before start: only the config changes
    with pytest.raises(HostError, match=r"^cannot restart server 'a': the host is not started"):
        await idle.restart("a")


async def test_statistics_an_api_shows(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", refuse=1)
    tools = [*default_tools(), tool("fail", read_only_hint=True)]
    server.tools = tools
    async with _host(Factory(server), backoff_base=1) as host:
        await host.wait_status("a", ServerStatus.CONNECTED)
        await host.call_tool("a__get_thing", {"q": "1"})
        await host.call_tool("a__fail")
        stats = host.server_statistics("a")
        assert (stats.status, stats.enabled, stats.transport, stats.breaker) == ("connected", True, "stdio", "closed")
        assert stats.error is None and stats.last_error == "ConnectError: cannot connect to 'a': connection refused"
        assert stats.connected_since is not None and stats.uptime is not None and stats.uptime >= 0
        assert (stats.calls_total, stats.errors_total, stats.restarts) == (2, 1, 1)
        assert 0 <= stats.p50 <= stats.p95
        assert host.get("a").uptime is not None
    assert host.get("a").uptime is None and host.get("a").connected_since is None


async def test_a_status_given_as_its_value_is_stored_as_the_status(autojump_clock: trio.testing.MockClock) -> None:
    async with _host(Factory(FakeServer("a")), health_interval=0) as host:
        events = host.events(kinds=["status"])
        host.update_status("a", "error", "set by a caller in another language")
        info = host.get("a")
        assert (info.status, info.error) == (ServerStatus.ERROR, "set by a caller in another language")
        event = await _next(events, "status")
        assert (event.status, event.previous) == ("error", "connected")
        with pytest.raises(ValueError, match=r"^server 'a': unknown status 'sleepy'; expected one of 'disconnected', "):
            host.update_status("a", "sleepy")
        assert host.get("a").status is ServerStatus.ERROR  # nothing of the bad value was stored
        host.update_status("a", ServerStatus.CONNECTED)
        assert host.get("a").status is ServerStatus.CONNECTED


async def test_connect_timeout_per_server(autojump_clock: trio.testing.MockClock) -> None:
    slow = FakeServer("slow", start_delay=100)
    fine = FakeServer("fine", start_delay=1)
    servers = {"slow": _entry(connect_timeout_seconds=5), "fine": _entry()}
    async with _host(Factory(slow, fine), servers, backoff_base=1000, start_timeout=20) as host:
        assert host.get("slow").status is ServerStatus.ERROR
        assert host.get("slow").error == "did not connect within 5s (connect_timeout_seconds)"
        assert host.get("fine").status is ServerStatus.CONNECTED
    async with _host(Factory(FakeServer("a", start_delay=100)), connect_timeout=2, start_timeout=20) as host:
        assert host.get("a").error == "did not connect within 2s (connect_timeout_seconds)"


# -- host-level options and messages -------------------------------------------------------------------


async def test_server_prefix_on_descriptions_and_raised_tool_errors(autojump_clock: trio.testing.MockClock) -> None:
    server = FakeServer("a", tools=[tool("fail", read_only_hint=True), tool("get_thing", read_only_hint=True)])
    server.tools[1] = msgspec.structs.replace(server.tools[1], description="Gets a thing.")
    async with _host(Factory(server), describe_server=True, raise_tool_errors=True) as host:
        exported = {t["function"]["name"]: t["function"]["description"] for t in host.registry.to_openai()}
        assert exported == {"a__fail": "[a]", "a__get_thing": "[a] Gets a thing."}
        assert host.registry.to_anthropic()[1]["description"] == "[a] Gets a thing."
        with pytest.raises(ToolResultError, match=r"^tool 'fail' on server 'a' reported an error: it broke$") as err:
            await host.call_tool("a__fail")
        assert isinstance(err.value, ToolExecutionError) and err.value.result.is_error
        assert (err.value.server, err.value.tool) == ("a", "fail")
    async with _host(Factory(FakeServer("a", tools=[tool("fail")]))) as host:
        assert (await host.call_tool("a__fail")).is_error  # returned, by default


async def test_log_lines_of_calls_never_show_secrets(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, "mcpwire.host")
    async with _host(Factory(FakeServer("a"))) as host:
        arguments = {
            "q": "plain\x1b[31m",
            "api_token": "hunter2",
            "note": "sk-proj-0123456789abcdef",
            "n": 3,
            "flag": True,
            "blob": "some long text " * 7,
            "key_like": "x" * 40,
            "items": [1, 2],
            "opts": {"k": 1},
        }
        await host.call_tool("a__get_thing", arguments)
    line = next(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "calling" in r.getMessage())
    assert line == (
        "a: calling get_thing with q='plain\\\\x1b[31m', api_token=***, note=***, n=3, flag=true, blob=str(105), "
        "key_like=***, items=list(2), opts=object(1)"
    )
    assert "hunter2" not in caplog.text and "sk-proj" not in caplog.text
    info = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "a: get_thing -> ok" in info


async def test_how_a_server_that_is_not_connected_is_described(autojump_clock: trio.testing.MockClock) -> None:
    slow = FakeServer("a", start_delay=50)
    factory = Factory(slow, FakeServer("b"))
    servers = {"a": _entry(), "b": _entry(), "off": {**_entry(), "enabled": False}}
    async with _host(factory, servers, start_timeout=1) as host:
        with pytest.raises(
            UnknownTool,
            match=r"^no tool named 'a__get_thing': server 'a' is still connecting, so its tools are not registered$",
        ):
            await host.call_tool("a__get_thing")
        with pytest.raises(
            UnknownTool, match=r"^no tool named 'off__get_thing': server 'off' is disabled, so its tools are not"
        ):
            await host.call_tool("off__get_thing")
        with pytest.raises(ToolExecutionError, match=r"failed: ServerGone: server 'off' is disabled$"):
            await host.read_resource("off", "file:///x")
        with pytest.raises(
            UnknownTool,
            match=r"^no tool named 'b__get_thng'; did you mean 'b__get_thing', 'b__set_thing' or 'b__delete_thing'\?$",
        ):
            await host.call_tool("b__get_thng")


async def test_a_call_that_failed_is_logged_at_error(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "mcpwire.host")
    server = FakeServer("a", tools=[*default_tools(), tool("fail")])
    async with _host(Factory(server)) as host:
        await host.call_tool("a__get_thing")
        assert (await host.call_tool("a__fail")).is_error
        with pytest.raises(ToolExecutionError):
            await host.call_tool("a__slow_thing", timeout=0.2)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if " -> " in r.getMessage()]
    assert lines == [
        (logging.INFO, "a: get_thing -> ok"),
        (logging.ERROR, "a: fail -> tool_error"),
        (logging.ERROR, "a: slow_thing -> error (timeout)"),
    ]
