"""serve_stdio: lines in and out over in-memory streams, parse errors, and the end of input."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from _server_support import meta, text, tools_server

from mcpwire.errors import FrameTooLarge
from mcpwire.server import RequestContext, Server, serve_stdio
from mcpwire.server.stdio import StdioOutlet


class Pipes:
    """stdin and stdout of a server under test, as the client sees them."""

    def __init__(self) -> None:
        self.to_server, self.stdin = trio.testing.memory_stream_one_way_pair()
        self.stdout, self.from_server = trio.testing.memory_stream_one_way_pair()
        self._buffer = b""

    async def serve(self, server: Server, **options: Any) -> None:
        """Serve until end of input, then close stdout (as the process would, by exiting)."""
        try:
            await serve_stdio(server, stdin=self.stdin, stdout=self.stdout, **options)
        finally:
            await self.stdout.aclose()

    async def write(self, *messages: Any) -> None:
        for message in messages:
            data = message if isinstance(message, bytes) else json.dumps(message).encode()
            await self.to_server.send_all(data + b"\n")

    async def read(self) -> Any:
        with trio.fail_after(5):
            while b"\n" not in self._buffer:
                chunk = await self.from_server.receive_some()
                assert chunk, "stdout closed"
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    async def rest(self) -> list[Any]:
        """Everything written until stdout is closed."""
        with trio.fail_after(5):
            while chunk := await self.from_server.receive_some():
                self._buffer += chunk
        return [json.loads(line) for line in self._buffer.splitlines()]


async def test_lines_in_lines_out_and_bad_lines_are_parse_errors() -> None:
    async def echo(ctx: RequestContext) -> Any:
        return text(json.dumps(ctx.params.get("arguments")))

    pipes = Pipes()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(pipes.serve, tools_server(echo=echo))
        await pipes.write(b"garbage", b"\xff\xfe", b"", b"   ")
        assert await pipes.read() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: JSON is malformed: invalid character (byte 0)"},
        }
        assert (await pipes.read())["error"]["message"] == "Parse error: invalid UTF-8 (invalid start byte)"
        # a message split across writes, then two in one write
        await pipes.to_server.send_all(b'{"jsonrpc":"2.0","id":1,')
        await pipes.to_server.send_all(
            b'"method":"tools/call","params":{"name":"echo","arguments":{"s":"\\ud800"},"_meta":'
        )
        await pipes.to_server.send_all(json.dumps(meta()).encode() + b"}}\n")
        answer = await pipes.read()
        assert answer["result"]["content"] == [{"type": "text", "text": json.dumps({"s": "\ud800"})}]
        await pipes.to_server.aclose()
    assert await pipes.rest() == []


async def test_at_end_of_input_quick_requests_are_answered_slow_ones_cancelled_listens_completed() -> None:
    async def quick(ctx: RequestContext) -> Any:
        await trio.lowlevel.checkpoint()
        return text("quick")

    async def forever(ctx: RequestContext) -> Any:
        await trio.sleep_forever()
        raise AssertionError

    pipes = Pipes()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pipes.serve, tools_server(quick=quick, forever=forever))
            listen = {"notifications": {"toolsListChanged": True}, "_meta": meta()}
            await pipes.write(
                {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen", "params": listen},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "forever", "_meta": meta()}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "quick", "_meta": meta()}},
            )
            await pipes.to_server.aclose()
    out = await pipes.rest()
    assert [m.get("id", m.get("method")) for m in out] == ["notifications/subscriptions/acknowledged", 2, "L"]
    assert out[2]["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L"


async def test_a_line_over_the_limit_ends_serving() -> None:
    pipes = Pipes()
    await pipes.to_server.send_all(b"x" * 100)
    with pytest.raises(FrameTooLarge, match=r"^message of at least 100 bytes exceeds the limit of 64 bytes"):
        await pipes.serve(tools_server(), max_message_bytes=64)


async def test_a_closed_stdout_is_broken_for_the_writer() -> None:
    send, receive = trio.testing.memory_stream_one_way_pair()
    await receive.aclose()
    outlet = StdioOutlet(send)
    with pytest.raises(trio.BrokenResourceError, match=r"^stdout is closed$"):
        await outlet.send({"jsonrpc": "2.0", "method": "x"})
    assert outlet.closed
