"""The floor: the least an MCP client on trio can do, written directly on trio and msgspec.

It spawns the server with :func:`trio.lowlevel.open_process`, writes compact JSON lines under a
lock (trio forbids concurrent ``send_all`` on one stream), reads stdout into a ``bytearray`` and
splits it on ``b"\\n"``, and matches answers to requests by id through a dict of
:class:`trio.Event`. The handshake is the legacy one: ``initialize`` then
``notifications/initialized``. No timeouts, no error recovery, no validation beyond what the
measurement needs: it is the lower bound that mcpwire is measured against, not a client.

It encodes with msgspec, the codec mcpwire itself uses, so that the floor isolates the cost of
the protocol layer rather than a choice of JSON library.

    python bench/floor_client.py [--quick] [--cold]
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio
from _common import workload_main

READ_CHUNK_BYTES = 256 * 1024
PROTOCOL_VERSION = "2025-11-25"

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class _Slot:
    __slots__ = ("event", "message")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.message: dict[str, Any] = {}


class FloorSession:
    """A JSON-RPC peer over a subprocess's stdio: requests, notifications, one reader task."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._send_lock = trio.Lock()
        self._pending: dict[int, _Slot] = {}
        self._next_id = 0
        self.protocol_version = ""

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        request_id = self._next_id
        slot = self._pending[request_id] = _Slot()
        line = _encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + b"\n"
        async with self._send_lock:
            await self._stdin.send_all(line)
        await slot.event.wait()
        message = slot.message
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]

    async def notify(self, method: str) -> None:
        async with self._send_lock:
            await self._stdin.send_all(_encode({"jsonrpc": "2.0", "method": method}) + b"\n")

    async def read_loop(self) -> None:
        buffer = bytearray()
        scanned = 0  # bytes of the buffer known to hold no newline
        pending = self._pending
        while data := await self._stdout.receive_some(READ_CHUNK_BYTES):
            buffer += data
            start = 0
            end = buffer.find(b"\n", scanned)
            while end != -1:
                message = _decode(buffer[start:end])
                slot = pending.pop(message["id"], None)
                if slot is not None:
                    slot.message = message
                    slot.event.set()
                start = end + 1
                end = buffer.find(b"\n", start)
            del buffer[:start]
            scanned = len(buffer)

    async def handshake(self) -> None:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "floor", "version": "0"},
            },
        )
        self.protocol_version = result["protocolVersion"]
        await self.notify("notifications/initialized")

    async def list_tools(self) -> list[str]:
        result = await self.request("tools/list", {})
        return [tool["name"] for tool in result["tools"]]

    async def echo(self, text: str) -> str:
        result = await self.request("tools/call", {"name": "echo", "arguments": {"text": text}})
        text_out: str = result["content"][0]["text"]
        return text_out


@asynccontextmanager
async def connect(argv: Sequence[str], variant: str) -> AsyncIterator[FloorSession]:
    process = await trio.lowlevel.open_process(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    try:
        async with trio.open_nursery() as nursery:
            session = FloorSession(process)
            nursery.start_soon(session.read_loop)
            await session.handshake()
            yield session
            await process.stdin.aclose()  # the server exits at EOF, and the reader at its EOF
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def run_concurrently(count: int, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(fn)


if __name__ == "__main__":
    workload_main(
        client="floor",
        variants=("legacy",),
        connect=connect,
        run_concurrently=run_concurrently,
        run=trio.run,
        versions={"trio": trio.__version__, "msgspec": msgspec.__version__},
    )
