"""The HTTP floor: the least a Streamable HTTP MCP client on trio can do, on httpx and msgspec.

One shared :class:`httpx.AsyncClient` (keep-alive connection pool), each request a POST of
compact JSON encoded with msgspec, each answer one ``application/json`` body decoded with msgspec.
The legacy handshake: ``initialize`` (its ``Mcp-Session-Id`` is sent on every later request),
then ``notifications/initialized``. No SSE, no timeouts, no error recovery, no MCP logic: the
lower bound that mcpwire's HTTP transport is measured against.

    python bench/http_floor_client.py [--quick] [--cold]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import trio
from _common import http_server, workload_main

PROTOCOL_VERSION = "2025-11-25"

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class HttpFloorSession:
    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self._http = http
        self._url = url
        self._headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self._next_id = 0
        self.protocol_version = ""

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        body = _encode({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        response = await self._http.post(self._url, content=body, headers=self._headers)
        message = _decode(response.content)
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        if method == "initialize":
            self._headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        return message["result"]

    async def handshake(self) -> None:
        result = await self.request(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}},
        )
        self.protocol_version = result["protocolVersion"]
        self._headers["MCP-Protocol-Version"] = self.protocol_version
        body = _encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await self._http.post(self._url, content=body, headers=self._headers)

    async def list_tools(self) -> list[str]:
        result = await self.request("tools/list", {})
        return [tool["name"] for tool in result["tools"]]

    async def echo(self, text: str) -> str:
        result = await self.request("tools/call", {"name": "echo", "arguments": {"text": text}})
        text_out: str = result["content"][0]["text"]
        return text_out


@asynccontextmanager
async def connect(argv: Sequence[str], variant: str) -> AsyncIterator[HttpFloorSession]:
    with http_server(argv) as url:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
        async with httpx.AsyncClient(limits=limits, timeout=None) as http:
            session = HttpFloorSession(http, url)
            await session.handshake()
            yield session
            await http.delete(url, headers=session._headers)


async def run_concurrently(count: int, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(fn)


if __name__ == "__main__":
    workload_main(
        client="http-floor",
        variants=("legacy",),
        connect=connect,
        run_concurrently=run_concurrently,
        run=trio.run,
        versions={"httpx": httpx.__version__, "trio": trio.__version__, "msgspec": msgspec.__version__},
    )
