"""HTTP failures on the command line: one line naming the server and what broke, and an exit
status, never a traceback."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio
from _cli_run import mcpwire

INITIALIZED = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "short", "version": "1"},
}


def _answer(status: str, body: bytes = b"", *extra: str) -> bytes:
    head = "".join(f"{line}\r\n" for line in ("Content-Type: application/json", *extra))
    return f"HTTP/1.1 {status}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


async def _short_lister(stream: trio.SocketStream) -> None:
    """A legacy MCP server whose ``tools/list`` answer stops 10 bytes into the 1000 it announced."""
    buffer = b""
    try:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = await stream.receive_some(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            while len(buffer) < length:
                buffer += await stream.receive_some(65536)
            body, buffer = buffer[:length], buffer[length:]
            if not head.startswith(b"POST"):
                await stream.send_all(_answer("405 Method Not Allowed" if head.startswith(b"GET") else "200 OK"))
                continue
            message = json.loads(body)
            method, rid = message.get("method"), message.get("id")
            if rid is None:
                await stream.send_all(_answer("202 Accepted"))
            elif method == "initialize":
                reply = json.dumps({"jsonrpc": "2.0", "id": rid, "result": INITIALIZED}).encode()
                await stream.send_all(_answer("200 OK", reply, "Mcp-Session-Id: s1"))
            elif method == "tools/list":
                await stream.send_all(_answer("200 OK", b"x" * 1000)[:-990])
                return
            else:
                error = {"code": -32601, "message": "Method not found"}
                await stream.send_all(
                    _answer("200 OK", json.dumps({"jsonrpc": "2.0", "id": rid, "error": error}).encode())
                )
    except trio.BrokenResourceError:
        pass
    finally:
        await stream.aclose()


@asynccontextmanager
async def _serving() -> AsyncIterator[str]:
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, _short_lister, 0, host="127.0.0.1"))
        yield f"http://127.0.0.1:{listener.socket.getsockname()[1]}/mcp"
        nursery.cancel_scope.cancel()


async def test_a_body_shorter_than_its_length_is_one_line_and_status_2(tmp_path: Path) -> None:
    async with _serving() as url:
        proc = await trio.to_thread.run_sync(partial(mcpwire, "tools", url, cwd=tmp_path, home=tmp_path))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert re.fullmatch(
        rf"mcpwire tools: server '127\.0\.0\.1' at {re.escape(url)}, answering request id \d+: the server closed "
        r"the connection after 10 of the 1000 bytes its Content-Length announced\n",
        proc.stderr,
    ), proc.stderr
