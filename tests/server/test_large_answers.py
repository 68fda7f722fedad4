"""Answers of every size arrive whole over keep-alive connections, through both HTTP servers.

The Streamable HTTP app watches each request for its client's end while it writes the answer.
An answer larger than the socket's buffer is written in more than one step, and the watcher may
first run in between: it must be told that the client is still there, not that the exchange is
over. (The built-in server once said "disconnect" there: the watcher cancelled the write, and the
connection was reused with half an answer on it, so the client waited forever.)

Each client (mcpwire's, httpx by hand, the official Python SDK) asks for 1,000 answers from 1 KB
to 4 MiB, as JSON and as SSE, on one connection, against each server; every answer must arrive
whole, in time.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _server_support import ACCEPT_BOTH, MODERN, meta

import mcpwire
from mcpwire.server import JSONObject, RequestContext, Server, StreamableHTTPApp
from mcpwire.server.http import HTTP_SERVERS, HttpServerName, serve_http

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real"))
from _paths import PY_BIN, require

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
KIB = 1024
#: most answers are around the socket buffer's size, where a write takes more than one step
COMMON = [KIB, 8 * KIB, 64 * KIB, 100 * KIB, 147 * KIB, 200 * KIB, 300 * KIB]
EXCHANGES = 1000


def schedule(count: int = EXCHANGES) -> list[tuple[int, bool]]:
    """``(size, sse)`` for each exchange: 1 KB to 300 KB in turn, 1 MiB every 100th, 4 MiB every
    250th; every other answer streamed as SSE (a message before it makes the answer a stream)."""
    out = []
    for n in range(count):
        size = COMMON[n % len(COMMON)]
        if n % 250 == 249:
            size = 4 * KIB * KIB
        elif n % 100 == 99:
            size = KIB * KIB
        out.append((size, n % 2 == 1))
    return out


async def _blob(ctx: RequestContext) -> JSONObject:
    arguments = ctx.params.get("arguments") or {}
    assert isinstance(arguments, dict)
    if arguments.get("sse"):
        await ctx.notify("notifications/message", {"level": "info", "data": "streaming"})
    size = int(arguments["size"])
    return {"content": [{"type": "text", "text": "x" * size}]}


class Ports:
    """The app, noting each request's client port (one port: one connection throughout)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: set[int] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.seen.add(scope["client"][1])
        await self.app(scope, receive, send)


def _server() -> Server:
    server = Server("blobs")

    async def tools_list(ctx: RequestContext) -> JSONObject:
        schema = {"type": "object", "properties": {"size": {"type": "integer"}, "sse": {"type": "boolean"}}}
        result: JSONObject = {"tools": [{"name": "blob", "inputSchema": schema}]}
        if ctx.modern:  # 2026-07-28 list results say how long they may be cached
            result.update({"cacheScope": "private", "ttlMs": 0})
        return result

    server.route("tools/list", tools_list)
    server.route("tools/call", _blob)
    return server


@asynccontextmanager
async def blob_server(server: HttpServerName, ports: Ports | None = None) -> AsyncIterator[str]:
    app: Any = StreamableHTTPApp(_server(), max_body_bytes=1 << 20)
    if ports is not None:
        ports.app, app = app, ports
    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(partial(serve_http, app, port=0, server=server))
        try:
            yield f"{url}/mcp"
        finally:
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("server", HTTP_SERVERS)
async def test_mcpwires_client_gets_every_answer_whole(server: HttpServerName) -> None:
    async with blob_server(server) as url, mcpwire.open_client(url, era_cache=False) as client:
        with trio.fail_after(240):
            for size, sse in schedule():
                result = await client.call_tool("blob", {"size": size, "sse": sse}, timeout=30)
                assert len(result.text()) == size


def _call(n: int, size: int, sse: bool) -> dict[str, Any]:
    params = {"name": "blob", "arguments": {"size": size, "sse": sse}}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


async def _answer(response: httpx.Response) -> Any:
    """The JSON-RPC answer of a response: its JSON body, or the SSE message with an id (the
    stream read to its end, which the server puts right after the answer)."""
    if response.headers["content-type"].startswith("application/json"):
        return json.loads(await response.aread())
    data: list[str] = []
    answer = None
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            text, data = "\n".join(data), []
            message = json.loads(text) if text else {}  # (an empty event primes resumption)
            if "id" in message:
                answer = message
    assert answer is not None, "the stream ended without an answer"
    return answer


@pytest.mark.parametrize("server", HTTP_SERVERS)
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_httpx_gets_every_answer_whole(server: HttpServerName, era: str) -> None:
    ports = Ports(None)
    async with blob_server(server, ports) as url, httpx.AsyncClient(timeout=30) as http:
        headers = {"Content-Type": "application/json", **ACCEPT_BOTH}
        if era == MODERN:
            headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "blob"})
        else:
            init = {"protocolVersion": era, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            first = await http.post(
                url, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
            )
            headers.update({"Mcp-Session-Id": first.headers["mcp-session-id"], "MCP-Protocol-Version": era})
            await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        with trio.fail_after(240):
            for n, (size, sse) in enumerate(schedule(), start=1):
                body = _call(n, size, sse)
                if era == MODERN:
                    body["params"]["_meta"] = meta()
                async with http.stream("POST", url, headers=headers, json=body) as response:
                    assert response.status_code == 200
                    answer = await _answer(response)
                assert answer["id"] == n
                assert len(answer["result"]["content"][0]["text"]) == size
    # one keep-alive connection throughout (hypercorn closes one after 1,000 requests)
    assert len(ports.seen) == (1 if server == "builtin" or era == MODERN else 2)


@pytest.mark.real
@pytest.mark.parametrize("server", HTTP_SERVERS)
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_the_official_python_sdk_gets_every_answer_whole(server: HttpServerName, mode: str) -> None:
    python = require(PY_BIN / "python")
    # The SDK refuses an SSE event over 1 MiB by design: in 2026-07-28 larger answers come to it
    # as JSON; a legacy session answers on an SSE stream when the client takes one (for
    # resumption), so there they stay under the SDK's limit.
    if mode == "legacy":
        plan = [(min(size, 1_000_000), sse) for size, sse in schedule()]
    else:
        plan = [(size, sse and size < KIB * KIB) for size, sse in schedule()]
    async with blob_server(server) as url:
        argv = [python, str(FIXTURES / "sdk_blobs.py"), url, mode, json.dumps(plan)]
        with trio.fail_after(300):
            done = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert out == {"whole": len(plan), "wrong": None}
