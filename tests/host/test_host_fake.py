"""Host supervision with a fake client: health checks, live registry, events (autojump clock)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
import trio
import trio.testing

from mcpwire.errors import ApprovalDenied, CircuitOpen, ServerGone, ToolExecutionError
from mcpwire.host import Host, HostConfig, ServerConfig, ServerStatus, parse_config
from mcpwire.protocol.types import JSONObject, TextContent, Tool, ToolAnnotations, ToolResult

SCHEMA: JSONObject = {"type": "object", "properties": {}}


@dataclass
class FakeClient:
    name: str
    healthy: bool = True
    fail_calls: bool = False
    calls: int = 0
    closed: trio.Event = field(default_factory=trio.Event)
    era: str = "legacy"
    protocol_version: str = "2025-11-25"

    async def list_tools(self) -> list[Tool]:
        return [
            Tool(name="get_thing", input_schema=SCHEMA, annotations=ToolAnnotations(read_only_hint=True)),
            Tool(name="delete_thing", input_schema=SCHEMA),
            Tool(name="hidden", input_schema=SCHEMA),
        ]

    async def call_tool(self, name: str, arguments: object) -> ToolResult:
        self.calls += 1
        if self.fail_calls:
            raise ServerGone("connection reset", server=self.name)
        return ToolResult(content=[TextContent(text=f"{name}#{self.calls}")], tool=name, server=self.name)

    async def ping(self, *, timeout: float | None = None) -> None:
        if not self.healthy:
            raise ServerGone("no answer", server=self.name)

    async def notifications(self) -> AsyncIterator[object]:
        await trio.sleep_forever()
        yield None  # pragma: no cover

    async def wait_closed(self) -> None:
        await self.closed.wait()

    async def aclose(self) -> None:
        self.closed.set()


class Factory:
    def __init__(self) -> None:
        self.clients: list[FakeClient] = []

    @asynccontextmanager
    async def __call__(self, config: ServerConfig) -> AsyncIterator[FakeClient]:
        client = FakeClient(config.name)
        self.clients.append(client)
        try:
            yield client
        finally:
            await client.aclose()


def _config(**policy: object) -> HostConfig:
    return parse_config(
        {
            "mcpServers": {
                "a": {"command": "fake", "disabled_tools": ["hidden"], "policy": {"retries": 0, **policy}},
                "off": {"command": "fake", "enabled": False},
            }
        }
    )


async def test_health_failure_reconnects(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory()
    host = Host(_config(), client_factory=factory, health_interval=10, backoff_base=1, backoff_cap=2)
    async with host:
        assert host.get("off").status is ServerStatus.DISCONNECTED
        assert sorted(t.name for t in host.tools()) == ["a__delete_thing", "a__get_thing"]
        await trio.sleep(11)
        assert host.get("a").last_health_check is not None
        factory.clients[0].healthy = False
        events = []
        async for event in host.events():
            events.append(event.status)
            if event.status == "connected":
                break
        assert events == ["error", "connecting", "connected"]
        info = host.get("a")
        assert info.restart_count == 1 and len(factory.clients) == 2


async def test_live_registry_cache_breaker_and_approval(autojump_clock: trio.testing.MockClock) -> None:
    factory = Factory()
    async with Host(_config(breaker_failures=2, breaker_cooldown_seconds=5), client_factory=factory) as host:
        one = await host.call_tool("a__get_thing")
        two = await host.call_tool("a__get_thing")
        assert one.text() == two.text() == "get_thing#1"
        with pytest.raises(ApprovalDenied, match="needs approval"):
            await host.call_tool("a__delete_thing")
        factory.clients[0].fail_calls = True
        for _ in range(2):
            with pytest.raises(ToolExecutionError, match=r"^tool 'get_thing' on server 'a' failed: ServerGone"):
                await _call_unapproved(host)
        with pytest.raises(CircuitOpen):
            await _call_unapproved(host)
        assert host.statistics()["servers"]["a"]["breaker"] == "open"  # type: ignore[index]
        await host.remove("a")
        assert host.tools() == []
        host.register("b", ServerConfig(name="x", type="stdio", command="fake"))
        info = await host.wait_status("b", ServerStatus.CONNECTED)
        assert info.tool_count == 3
        await host.reset()
        assert host.list() == []


async def _call_unapproved(host: Host) -> ToolResult:
    # new arguments each time, so the cache does not answer
    return await host.call_tool("a__get_thing", {"fresh": trio.current_time()})


def test_backoff_is_exponential_jittered_and_capped() -> None:
    from mcpwire.host.host import _Backoff

    backoff = _Backoff(base=1, cap=8)
    for attempt, ceiling in [(0, 1), (1, 2), (2, 4), (3, 8), (10, 8)]:
        delays = {backoff.delay(attempt) for _ in range(20)}
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(delays) > 1
