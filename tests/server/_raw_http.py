"""A hostile HTTP/1.1 client on a raw socket, for the built-in server's tests: it writes whatever
bytes it is given (pipelined, split, malformed, slow) and parses responses itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from mcpwire.server.http1server import ServerOptions, serve_http1

READ_TIMEOUT_S = 5.0
Scope = MutableMapping[str, Any]
App = Callable[[Scope, Any, Any], Awaitable[None]]


@dataclass
class Reply:
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    chunks: list[bytes] = field(default_factory=list)


class RawClient:
    """One TCP connection; ``read_response`` parses one response off what has arrived."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        #: the longest wait for bytes (longer under a mock clock, where server timeouts jump ahead)
        self.timeout = READ_TIMEOUT_S

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def _fill(self) -> bool:
        with trio.fail_after(self.timeout):
            data = await self.stream.receive_some(65536)
        self.buffer += data
        return bool(data)

    async def read_until(self, marker: bytes) -> bytes:
        while marker not in self.buffer:
            if not await self._fill():
                raise EOFError(f"closed before {marker!r}; got {bytes(self.buffer)!r}")
        end = self.buffer.index(marker) + len(marker)
        out = bytes(self.buffer[:end])
        del self.buffer[:end]
        return out

    async def read_exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            if not await self._fill():
                raise EOFError(f"closed after {len(self.buffer)} of {n} bytes")
        out = bytes(self.buffer[:n])
        del self.buffer[:n]
        return out

    async def read_head(self) -> tuple[int, str, dict[str, str]]:
        head = (await self.read_until(b"\r\n\r\n")).decode("latin-1")
        status_line, *lines = head[:-4].split("\r\n")
        _, status, reason = [*status_line.split(" ", 2), ""][:3]
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status), reason, headers

    async def read_chunk(self) -> bytes:
        """One chunk of a chunked body (b"" for the last)."""
        size = int((await self.read_until(b"\r\n")).split(b";")[0], 16)
        data = await self.read_exactly(size)
        assert await self.read_exactly(2) == b"\r\n"
        return data

    async def read_response(self, *, head_only: bool = False) -> Reply:
        status, reason, headers = await self.read_head()
        while status == 100:
            status, reason, headers = await self.read_head()
        if head_only:
            return Reply(status, reason, headers, b"")
        if "content-length" in headers:
            return Reply(status, reason, headers, await self.read_exactly(int(headers["content-length"])))
        if headers.get("transfer-encoding") == "chunked":
            chunks = []
            while chunk := await self.read_chunk():
                chunks.append(chunk)
            return Reply(status, reason, headers, b"".join(chunks), chunks)
        while await self._fill():
            pass
        body = bytes(self.buffer)
        self.buffer.clear()
        return Reply(status, reason, headers, body)

    async def closed(self) -> bool:
        """Whether the server closes the connection (after anything still in flight)."""
        try:
            while await self._fill():
                pass
        except trio.BrokenResourceError:
            pass
        return True


def request(method: str = "GET", target: str = "/", body: bytes | None = None, **headers: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: test"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


@asynccontextmanager
async def serving(
    app: App,
    options: ServerOptions | None = None,
    *,
    host: str = "127.0.0.1",
    shutdown: trio.Event | None = None,
) -> AsyncIterator[list[str]]:
    """``app`` under the built-in server on a free port; its URLs. Cancelled at the end (or shut
    down gracefully when ``shutdown`` is set by the test)."""
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            partial(
                serve_http1,
                app,
                host=host,
                options=options or ServerOptions(),
                shutdown_trigger=shutdown.wait if shutdown is not None else None,
            )
        )
        try:
            yield urls
        finally:
            if shutdown is None:
                nursery.cancel_scope.cancel()


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[RawClient]:
    host, _, port = url.removeprefix("http://").rpartition(":")
    stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
    try:
        yield RawClient(stream)
    finally:
        await trio.aclose_forcefully(stream)
