"""Era parity over HTTP: a dual-era endpoint that answers ``server/discover`` but lists nothing
in 2026-07-28 (FastMCP 4.1's proxy) is used in the legacy era, with a legacy session opened on
the same URL, so auto mode lists the tools a legacy pin lists.

The endpoint is two fakes of ``http_fakes`` behind one URL: POSTs carrying the 2026-07-28
``_meta`` go to a ``modern`` fake with no tools, everything else (``initialize``, the session's
requests, GET, DELETE) to a ``legacy`` one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from http_fakes import LEGACY_VERSION, FakeMCPServer, fresh_era_cache  # noqa: F401 (fixture)
from trio.testing import MockClock

import mcpwire
from mcpwire.protocol.versions import Era

BOUND = 10.0


class DualEra:
    def __init__(self, *, modern_prompts: bool = False) -> None:
        self.modern = FakeMCPServer(mode="modern")
        self.modern.tools = []
        self.modern.handlers["resources/list"] = lambda params: {"resources": []}
        if not modern_prompts:
            self.modern.handlers["prompts/list"] = lambda params: {"prompts": []}
        self.legacy = FakeMCPServer(mode="legacy")
        self.trace: list[tuple[str, str | None]] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body: Any = json.loads(request.content) if request.content else None
        params = body.get("params") if isinstance(body, dict) else None
        modern = isinstance(params, dict) and "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {})
        self.trace.append(("modern" if modern else "legacy", body.get("method") if isinstance(body, dict) else None))
        return await (self.modern if modern else self.legacy).handle(request)


@asynccontextmanager
async def _connect(server: DualEra, **options: Any) -> AsyncIterator[mcpwire.Client]:
    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(server.handle), trust_env=False) as http,
        mcpwire.open_client("http://mcp.test/mcp", http_client=http, **options) as client,
    ):
        yield client


async def test_a_hollow_modern_endpoint_is_used_in_the_legacy_era(autojump_clock: MockClock) -> None:
    """The empty 2026-07-28 listing leads to the other declared lists (empty too), then to an
    ``initialize`` on the same URL; the legacy session lists the tool, carries the calls, and is
    deleted on close. The next connection goes straight to the legacy era."""
    server = DualEra()
    with trio.fail_after(BOUND):
        async with _connect(server) as client:
            assert client.era is Era.MODERN
            assert [t.name for t in await client.list_tools()] == ["echo"]
            assert (client.era, client.protocol_version) == (Era.LEGACY, LEGACY_VERSION)
            assert (await client.call_tool("echo", {"text": "hi"})).text() == 'echo {"text": "hi"}'
        first = list(server.trace)
        async with _connect(server) as again:
            assert again.era is Era.LEGACY
    assert first == [
        ("modern", "server/discover"),
        ("modern", "tools/list"),
        ("modern", "prompts/list"),
        ("modern", "resources/list"),
        ("legacy", "initialize"),
        ("legacy", "notifications/initialized"),
        ("legacy", None),  # the GET stream
        ("legacy", "tools/list"),
        ("legacy", "tools/call"),
        ("legacy", None),  # DELETE
    ]
    assert server.trace[len(first)] == ("legacy", "initialize")
    assert server.legacy.sessions == {}


async def test_an_endpoint_listing_prompts_in_2026_is_not_cross_checked(autojump_clock: MockClock) -> None:
    """No tools but prompts in 2026-07-28: the server serves that era; its empty tool list is
    the answer, and no legacy session is opened."""
    server = DualEra(modern_prompts=True)
    with trio.fail_after(BOUND):
        async with _connect(server) as client:
            assert await client.list_tools() == []
            assert client.era is Era.MODERN
    assert [method for _, method in server.trace] == ["server/discover", "tools/list", "prompts/list"]
