"""In-process fake servers for host tests: faults real servers will not produce on demand
(refused connections, slow starts, failing lists and health checks, hanging calls), driven under
trio's autojump clock.

A :class:`FakeServer` keeps its state across connections, so a test can change its tools,
break it, or heal it between reconnects; :class:`Factory` is the host's ``client_factory``.
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio
import trio.lowlevel

from mcpwire.client import Progress, ProgressCallback, ServerNotification
from mcpwire.client.relay import Relay
from mcpwire.errors import ConnectError, RequestTimeout, RPCError, ServerGone
from mcpwire.host import ServerConfig
from mcpwire.protocol.types import (
    GetPromptResult,
    JSONObject,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceResult,
    Resource,
    ResourceContents,
    ResourceTemplate,
    ServerCapabilities,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolResult,
)

SCHEMA: JSONObject = {"type": "object", "properties": {"q": {"type": "string"}}}


def tool(name: str, **hints: bool) -> Tool:
    return Tool(name=name, input_schema=SCHEMA, annotations=ToolAnnotations(**hints) if hints else None)


def default_tools() -> list[Tool]:
    return [
        tool("get_thing", read_only_hint=True),
        tool("set_thing", read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        tool("delete_thing"),
        tool("slow_thing", read_only_hint=True),
        tool("hidden"),
    ]


def default_resources() -> list[Resource]:
    return [Resource(uri="file:///docs/a.txt", name="a.txt"), Resource(uri="file:///docs/b.txt", name="b.txt")]


#: what a server advertises by default: tools and subscribable resources
DEFAULT_CAPABILITIES = ServerCapabilities(
    tools={"listChanged": True}, resources={"subscribe": True, "listChanged": True}
)


@dataclass
class FakeServer:
    name: str
    tools: list[Tool] = field(default_factory=default_tools)
    capabilities: ServerCapabilities = DEFAULT_CAPABILITIES
    prompts: list[Prompt] = field(
        default_factory=lambda: [Prompt(name="greet", arguments=[PromptArgument(name="who", required=True)])]
    )
    resources: list[Resource] = field(default_factory=default_resources)
    templates: list[ResourceTemplate] = field(
        default_factory=lambda: [ResourceTemplate(uri_template="file:///docs/{name}", name="doc")]
    )
    #: resources/templates/list is not a method of this server
    no_templates: bool = False
    #: method -> raised by every list of that kind (prompts/list, resources/list)
    list_failures: dict[str, Exception] = field(default_factory=dict)
    era: str = "legacy"
    #: the next N connections are refused
    refuse: int = 0
    healthy: bool = True
    #: raised by every call (None: calls succeed)
    call_error: Exception | None = None
    #: close the connection when a call arrives, without answering
    crash_on_call: bool = False
    #: calls to this tool never answer
    hang: str = "slow_thing"
    ttl_ms: int | None = None
    #: raised by the next tools/list requests, one each (then lists succeed)
    list_errors: list[BaseException] = field(default_factory=list)
    #: seconds each connection takes to open
    start_delay: float = 0.0
    list_calls: int = 0
    #: every (client number, tool, arguments) called
    calls: list[tuple[int, str, JSONObject]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    health_checks: list[str] = field(default_factory=list)
    requests: list[tuple[str, JSONObject]] = field(default_factory=list)
    #: the relay each tool call, prompt and read came with (None: made for no other client)
    relays: list[Relay | None] = field(default_factory=list)
    subscriptions: list[JSONObject] = field(default_factory=list)
    clients: list[FakeClient] = field(default_factory=list)
    connect_times: list[float] = field(default_factory=list)
    #: how each connection was closed: "in order", or "cancelled" (its block was cancelled)
    closes: list[str] = field(default_factory=list)

    @property
    def client(self) -> FakeClient:
        return self.clients[-1]


class FakeClient:
    def __init__(self, server: FakeServer, number: int) -> None:
        self.server = server
        self.number = number
        self.closed = trio.Event()
        self._send, self._recv = trio.open_memory_channel[ServerNotification](100)

    @property
    def era(self) -> str:
        return self.server.era

    @property
    def protocol_version(self) -> str:
        return "2026-07-28" if self.server.era == "modern" else "2025-11-25"

    @property
    def server_capabilities(self) -> ServerCapabilities:
        return self.server.capabilities

    def push(self, method: str, params: JSONObject | None = None) -> None:
        """A notification from the server."""
        self._send.send_nowait(ServerNotification(method, params or {}))

    def crash(self) -> None:
        self.closed.set()
        self._send.close()

    async def list_prompts(self) -> list[Prompt]:
        self.server.requests.append(("prompts/list", {}))
        if "prompts/list" in self.server.list_failures:
            raise self.server.list_failures["prompts/list"]
        return list(self.server.prompts)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        relay: Relay | None = None,
    ) -> GetPromptResult:
        self.server.relays.append(relay)
        self.server.requests.append(("prompts/get", {"name": name, "arguments": dict(arguments or {})}))
        if self.server.call_error is not None:
            raise self.server.call_error
        who = (arguments or {}).get("who", "")
        return GetPromptResult(messages=[PromptMessage(role="user", content={"type": "text", "text": f"hi {who}"})])

    async def list_resources(self) -> list[Resource]:
        self.server.requests.append(("resources/list", {}))
        if "resources/list" in self.server.list_failures:
            raise self.server.list_failures["resources/list"]
        return list(self.server.resources)

    async def list_resource_templates(self) -> list[ResourceTemplate]:
        self.server.requests.append(("resources/templates/list", {}))
        if self.server.no_templates:
            raise RPCError(-32601, "Method not found", method="resources/templates/list")
        return list(self.server.templates)

    async def list_tools(self) -> list[Tool]:
        self.server.list_calls += 1
        if self.server.list_errors:
            raise self.server.list_errors.pop(0)
        return list(self.server.tools)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object],
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        relay: Relay | None = None,
        deadline: float | None = None,
    ) -> ToolResult:
        self.server.relays.append(relay)
        self.server.calls.append((self.number, name, dict(arguments)))  # type: ignore[arg-type]
        if on_progress is not None:
            await on_progress(Progress(1, 2, "halfway"))  # type: ignore[misc]
        if self.closed.is_set():
            raise ServerGone("the connection is closed", server=self.server.name)
        if self.server.crash_on_call:
            self.crash()
            raise ServerGone("the server exited with status 3", server=self.server.name, returncode=3)
        if self.server.call_error is not None:
            raise self.server.call_error
        if name == self.server.hang:
            # as the client does: the caller's deadline ends the wait
            with trio.move_on_at(math.inf if deadline is None else deadline):
                await trio.sleep_forever()
            raise RequestTimeout(f"'tools/call' {name!r} got no answer by its deadline", method="tools/call")
        if name == "fail":
            return ToolResult(content=[TextContent(text="it broke")], is_error=True, tool=name, server=self.server.name)
        text = f"{name}({json.dumps(dict(arguments), sort_keys=True)})#{len(self.server.calls)}@{self.number}"
        return ToolResult(content=[TextContent(text=text)], tool=name, server=self.server.name)

    async def read_resource(
        self, uri: str, *, timeout: float | None = None, relay: Relay | None = None
    ) -> ReadResourceResult:
        self.server.relays.append(relay)
        self.server.reads.append(uri)
        if self.server.call_error is not None:
            raise self.server.call_error
        return ReadResourceResult(
            contents=[ResourceContents(uri=uri, text=f"{uri}#{len(self.server.reads)}")], ttl_ms=self.server.ttl_ms
        )

    async def request(
        self, method: str, params: Mapping[str, object] | None = None, *, timeout: float | None = None
    ) -> JSONObject:
        self.server.requests.append((method, dict(params or {})))  # type: ignore[arg-type]
        if method == "resources/subscribe" and self.server.era == "modern":
            raise RPCError(-32601, "Method not found", method=method)
        return {}

    @asynccontextmanager
    async def subscribe(
        self,
        resources: Sequence[str] = (),
        *,
        tools_list_changed: bool = False,
        prompts_list_changed: bool = False,
        resources_list_changed: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[None]:
        record: JSONObject = {
            "resources": list(resources),
            "tools": tools_list_changed,
            "prompts": prompts_list_changed,
            "open": True,
        }
        self.server.subscriptions.append(record)
        try:
            yield None
        finally:
            record["open"] = False

    async def _check(self, method: str) -> None:
        self.server.health_checks.append(method)
        if not self.server.healthy:
            raise ServerGone("no answer", server=self.server.name)

    async def ping(self, *, timeout: float | None = None) -> None:
        await self._check("ping")

    async def discover(self, *, timeout: float | None = None) -> None:
        await self._check("server/discover")

    async def notifications(self) -> AsyncIterator[ServerNotification]:
        async for note in self._recv:
            yield note

    async def wait_closed(self) -> None:
        await self.closed.wait()

    async def aclose(self) -> None:
        self.crash()


class Factory:
    """The host's ``client_factory``: a fake connection to the named :class:`FakeServer`."""

    def __init__(self, *servers: FakeServer) -> None:
        self.servers = {s.name: s for s in servers}
        #: server names, as their connections were closed
        self.close_order: list[str] = []

    def __getitem__(self, name: str) -> FakeServer:
        return self.servers[name]

    @asynccontextmanager
    async def __call__(self, config: ServerConfig) -> AsyncIterator[FakeClient]:
        server = self.servers.setdefault(config.name, FakeServer(config.name))
        server.connect_times.append(trio.current_time())
        if server.start_delay:
            await trio.sleep(server.start_delay)
        if server.refuse > 0:
            server.refuse -= 1
            raise ConnectError(f"cannot connect to {config.name!r}: connection refused")
        client = FakeClient(server, len(server.clients) + 1)
        server.clients.append(client)
        try:
            yield client
        finally:
            try:
                await trio.lowlevel.checkpoint()
                server.closes.append("in order")
            except trio.Cancelled:
                server.closes.append("cancelled")
                raise
            finally:
                self.close_order.append(config.name)
                await client.aclose()
