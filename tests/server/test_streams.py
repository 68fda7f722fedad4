"""Response streams written by the ASGI app, driven with a fake ASGI server: messages that arrive
while the response is being written are not missed, and a kicked stream keeps its events."""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing
from _server_support import MODERN, meta, text, tools_server

from mcpwire.server import EventStream, RequestContext, StreamableHTTPApp


def _scope(body: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "host": "127.0.0.1",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": MODERN,
        "mcp-method": str(body["method"]),
        "mcp-name": str(body["params"].get("name", "")),
        "content-type": "application/json",
    }
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }


async def test_messages_pushed_while_the_response_is_being_written_are_sent_at_once() -> None:
    proceed = trio.Event()

    async def two(ctx: RequestContext) -> Any:
        await ctx.log("info", "first")
        await proceed.wait()
        await ctx.log("info", "second")
        return text("done")

    app = StreamableHTTPApp(tools_server(two=two), keepalive_s=3600)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "two", "_meta": meta(logLevel="info")},
    }
    chunks: list[bytes] = []
    request_read = False

    async def receive() -> dict[str, Any]:
        nonlocal request_read
        if not request_read:
            request_read = True
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        await trio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message["type"] != "http.response.body":
            return
        chunks.append(message["body"])
        if b'"first"' in message["body"] and not proceed.is_set():
            # the handler sends its second message and its answer while this write is in progress
            proceed.set()
            await trio.testing.wait_all_tasks_blocked()

    async with trio.open_nursery() as nursery:
        await nursery.start(app.run)
        with trio.fail_after(5):  # without the fix: stuck until the keep-alive, an hour away
            await app(_scope(body), receive, send)
        nursery.cancel_scope.cancel()
    data = [json.loads(line[6:]) for line in b"".join(chunks).decode().splitlines() if line.startswith("data: ")]
    assert [m.get("params", {}).get("data") or m.get("result", {}).get("content") for m in data] == [
        "first",
        "second",
        [{"type": "text", "text": "done"}],
    ]


def test_a_stream_keeps_what_it_was_sent_until_it_is_done() -> None:
    stream = EventStream(3, primed=True, resumable=True)
    signal = stream.signal()
    stream.push({"jsonrpc": "2.0", "method": "a"})
    assert signal.is_set() and not stream.signal().is_set()
    stream.drop_connection()
    assert stream.kicks == 1
    stream.push({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}}, final=True)
    stream.push({"jsonrpc": "2.0", "method": "late"})  # after the end: dropped
    assert [(seq, code) for seq, _, code in stream.events] == [(1, None), (2, -32601)]
    assert [seq for seq, _, _ in stream.after(1)] == [2]
    assert stream.closed and stream.event_id(2) == "3.2"
    unprimed = EventStream()
    unprimed.drop_connection()
    assert unprimed.kicks == 0  # only a primed stream gave the client an id to resume from
    persistent = EventStream(persistent=True)
    persistent.push({"jsonrpc": "2.0", "id": 1, "result": {}}, final=True)
    assert not persistent.done
