"""In-process peers for the server tests: a recording outlet and a client driving a Connection."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from mcpwire.server import Connection, JSONObject, RequestContext, Server

MODERN = "2026-07-28"
READ_TIMEOUT_S = 5.0
#: a 2025-11-25 ``initialize`` request, and the Accept header of a client taking JSON and SSE
INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT_BOTH = {"Accept": "application/json, text/event-stream"}


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    out = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps or {},
    }
    out.update({f"io.modelcontextprotocol/{k}": v for k, v in extra.items()})
    return out


class Recorder:
    """An outlet that keeps everything sent to it, in order, with its ``final`` flag."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, bool]] = []
        self.closed = False
        self.drops = 0
        self._changed = trio.Event()

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        self.sent.append((message, final))
        self._changed.set()
        self._changed = trio.Event()

    def drop_connection(self) -> None:
        self.drops += 1

    @property
    def messages(self) -> list[Any]:
        return [m for m, _ in self.sent]

    async def wait_for(self, wanted: Callable[[Any], bool]) -> Any:
        """The first message ``wanted`` accepts (already sent or to come), bounded."""
        with trio.fail_after(READ_TIMEOUT_S):
            while True:
                for message in self.messages:
                    if wanted(message):
                        return message
                await self._changed.wait()

    async def answer(self, request_id: object) -> Any:
        return await self.wait_for(lambda m: isinstance(m, dict) and m.get("id") == request_id and "method" not in m)


class Peer:
    """A client talking to one :class:`Connection` in-process."""

    def __init__(self, connection: Connection, outlet: Recorder) -> None:
        self.connection = connection
        self.outlet = outlet
        self._next = 0

    async def send(self, message: Any, outlet: Recorder | None = None) -> bool:
        return await self.connection.receive(message, outlet or self.outlet)

    async def request(self, method: str, params: dict[str, Any] | None = None, *, rid: Any = None) -> Any:
        """Send a request; its answer (the whole JSON-RPC response)."""
        if rid is None:
            self._next += 1
            rid = self._next
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.outlet.answer(rid)

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = await self.request(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def initialize(self, version: str = "2025-11-25", caps: dict[str, Any] | None = None) -> Any:
        params = {"protocolVersion": version, "capabilities": caps or {}, "clientInfo": {"name": "t", "version": "1"}}
        return await self.result("initialize", params)


@asynccontextmanager
async def connected(server: Server, *, era: str | None = None, input_timeout: float = 30.0) -> AsyncIterator[Peer]:
    """A connection to ``server`` whose standalone outlet is the peer's recorder; closed on exit."""
    recorder = Recorder()
    async with trio.open_nursery() as nursery:
        connection = Connection(server, nursery, standalone=recorder, era=era, input_timeout=input_timeout)
        try:
            yield Peer(connection, recorder)
        finally:
            await connection.close()
            nursery.cancel_scope.cancel()


def tools_server(**handlers: Callable[[RequestContext], Any]) -> Server:
    """A server with ``tools/list`` and ``tools/call`` (dispatched by tool name to ``handlers``)."""
    server = Server("test-server", instructions="be nice")

    async def tools_list(ctx: RequestContext) -> JSONObject:
        return {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in handlers]}

    async def tools_call(ctx: RequestContext) -> JSONObject:
        result: JSONObject = await handlers[str(ctx.params["name"])](ctx)
        return result

    server.route("tools/list", tools_list)
    server.route("tools/call", tools_call)
    return server


def text(value: str) -> JSONObject:
    return {"content": [{"type": "text", "text": value}]}


async def sse_events(response: Any) -> AsyncIterator[dict[str, str]]:
    """The SSE events of a streamed ``httpx.Response``, each as its fields (comments skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if not line:
            if fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            key, _, value = line.partition(":")
            fields[key] = value.removeprefix(" ")
