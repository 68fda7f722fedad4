"""A scripted model provider on loopback: a real HTTP/1.1 server (trio + h11) that answers each
request with the next scripted reply - a JSON body, a server-sent event stream (that may break
after some events), an error status with headers, or bytes that are not what the format promises
- and records every request for the test to check.

Run it inside a test's trio run (``nursery.start(fake.serve)``) or in a thread of its own for
tests that drive the ``mcpwire`` command in a subprocess (:meth:`FakeLLM.in_thread`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import h11
import trio


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    """One scripted answer.

    ``events`` are ``(event name or None, data)`` pairs sent as server-sent events; with
    ``drop_after`` the connection is cut after that many events, mid-body. ``pause`` seconds pass
    between events (0 yields only).
    """

    status: int = 200
    json: Any = None
    events: list[tuple[str | None, str]] | None = None
    raw: bytes | None = None
    content_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop_after: int | None = None
    pause: float = 0.0


Script = Reply | Callable[[Recorded], Reply]


class FakeLLM:
    """Answers requests with ``replies`` in order; a request past the end gets a 500 naming it."""

    def __init__(self, replies: Iterable[Script] = ()) -> None:
        self.replies: list[Script] = list(replies)
        self.requests: list[Recorded] = []
        self.port = 0
        self._served = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Script) -> None:
        self.replies.extend(replies)

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            task_status.started(self.port)
            await trio.serve_listeners(self._connection, listeners, handler_nursery=nursery)

    def _next(self, request: Recorded) -> Reply:
        if self._served >= len(self.replies):
            return Reply(status=500, json={"error": {"message": f"no scripted reply for request {self._served + 1}"}})
        script = self.replies[self._served]
        self._served += 1
        return script(request) if callable(script) else script

    async def _connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, stream)
                if request is None:
                    return
                self.requests.append(request)
                reply = self._next(request)
                if not await self._answer(conn, stream, reply):
                    return
                if conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            return
        finally:
            await stream.aclose()

    async def _read_request(self, conn: h11.Connection, stream: trio.SocketStream) -> Recorded | None:
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                conn.receive_data(data)
                if not data and head is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                headers = {k.decode().lower(): v.decode() for k, v in head.headers}
                return Recorded(head.method.decode(), head.target.decode(), headers, bytes(body))
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _answer(self, conn: h11.Connection, stream: trio.SocketStream, reply: Reply) -> bool:
        """Sends ``reply``; False when the connection was cut on purpose."""
        headers = dict(reply.headers)
        if reply.events is not None:
            headers.setdefault("content-type", reply.content_type or "text/event-stream")
            chunks = [_sse(name, data) for name, data in reply.events]
        else:
            if reply.raw is not None:
                payload = reply.raw
            else:
                payload = json.dumps(reply.json).encode()
                headers.setdefault("content-type", "application/json")
            if reply.content_type:
                headers["content-type"] = reply.content_type
            headers["content-length"] = str(len(payload))
            chunks = [payload]
        if reply.events is not None:
            headers["transfer-encoding"] = "chunked"
        await stream.send_all(
            conn.send(
                h11.Response(status_code=reply.status, headers=list(headers.items()), reason=_reason(reply.status))
            )
        )
        for sent, chunk in enumerate(chunks):
            if reply.drop_after is not None and sent >= reply.drop_after:
                return False  # cut mid-body: no last chunk
            await stream.send_all(conn.send(h11.Data(data=chunk)))
            await trio.sleep(reply.pause)
        await stream.send_all(conn.send(h11.EndOfMessage()))
        return True

    @contextmanager
    def in_thread(self) -> Iterator[FakeLLM]:
        """Serves from a thread of its own until the block ends."""
        ready = threading.Event()
        box: dict[str, Any] = {}

        async def main() -> None:
            with trio.CancelScope() as scope:
                box["scope"] = scope
                box["token"] = trio.lowlevel.current_trio_token()
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.serve)
                    ready.set()

        thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
        thread.start()
        if not ready.wait(30):
            raise RuntimeError("the fake provider did not start")
        try:
            yield self
        finally:
            trio.from_thread.run_sync(box["scope"].cancel, trio_token=box["token"])
            thread.join(30)


def _sse(name: str | None, data: str) -> bytes:
    lines = [f"event: {name}"] if name else []
    lines += [f"data: {line}" for line in data.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


def _reason(status: int) -> bytes:
    return {
        200: b"OK",
        400: b"Bad Request",
        401: b"Unauthorized",
        404: b"Not Found",
        429: b"Too Many Requests",
        500: b"Internal Server Error",
        503: b"Service Unavailable",
        529: b"Overloaded",
    }.get(status, b"Status")
