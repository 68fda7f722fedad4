"""One HTTP exchange of the Streamable HTTP app: the request as it came, and its response written
as a JSON body or an SSE stream from an :class:`~mcpwire.server.streams.EventStream`.

Theory of operation: an :class:`Exchange` wraps the ASGI ``scope``/``receive``/``send`` of one
request (headers with lower-case names; the state an embedding service's middleware left: its
trace id and caller). It writes what the app answers (:meth:`Exchange.json`,
:meth:`Exchange.plain`, :meth:`Exchange.refuse` for an :class:`HttpRefusal`) and watches for the
client closing the connection (:meth:`Exchange.watched`). :func:`respond` writes an event stream:
a JSON body when its first message is its final one (in 2026-07-28 with the HTTP status of its
error code), else SSE, with a keepalive comment when nothing happens for a while, until the
stream is done or kicked (the connection ends, the stream stays, to be resumed).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any, Final, TypeAlias

import trio

from ..protocol.serving import MODERN_STATUS, encode, error_message, is_request_id
from .streams import EventStream

__all__ = ["RETRY_MS", "ClientGone", "Exchange", "HttpRefusal", "Receive", "Scope", "Send", "respond"]

log = logging.getLogger("mcpwire.server.http")

Scope: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send: TypeAlias = Callable[[MutableMapping[str, Any]], Awaitable[None]]

#: the reconnection delay an SSE stream suggests (its ``retry`` field), in milliseconds
RETRY_MS: Final = 500


class HttpRefusal(Exception):
    """An HTTP refusal: the status and, when ``code`` is set, a JSON-RPC error body."""

    def __init__(
        self,
        status: int,
        code: int | None,
        message: str,
        request_id: object = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id if isinstance(request_id, int | str) and is_request_id(request_id) else None
        self.headers = headers or {}


class ClientGone(Exception):
    """The client closed the connection while its response was being written."""


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers by lower-case name; the values of a repeated one joined with ", "."""
    pairs = raw if isinstance(raw, list | tuple) else list(raw)
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in pairs}
    if len(headers) == len(pairs):  # (the usual request: no name repeated)
        return headers
    headers = {}
    for name, value in pairs:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers


class Exchange:
    """One HTTP request (headers with lower-case names, its body once read) and its response."""

    __slots__ = ("body", "gone", "headers", "method", "origin", "path", "query", "receive", "root", "send", "state")

    def __init__(self, scope: Scope, receive: Receive, send: Send, path: str, root: str) -> None:
        self.method: str = scope["method"]
        self.path = path
        self.root = root
        #: set when the client closed the connection
        self.gone = False
        self.query: str = scope.get("query_string", b"").decode("latin-1")
        self.headers = _headers(scope.get("headers", ()))
        self.receive = receive
        self.send = send
        self.body = b""
        # what an embedding service's middleware learnt about the request (trace id, caller)
        state = scope.get("state") or {}
        self.state: Mapping[str, Any] = state
        self.origin = {k: str(state[k]) for k in ("trace_id", "caller") if k in state}

    # -- the request -------------------------------------------------------------------------

    async def read_body(self, limit: int) -> bytes:
        """The whole body.

        Raises:
            HttpRefusal: 413 when it is (or says it is) larger than ``limit`` bytes.
            ClientGone: the client went away first.
        """
        declared = self.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HttpRefusal(413, None, "request body too large")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise HttpRefusal(413, None, "request body too large")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # -- the response ------------------------------------------------------------------------

    async def start(self, status: int, headers: dict[str, str], content_type: str | None) -> None:
        raw = [(b"content-type", content_type.encode())] if content_type else []
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        await self.send({"type": "http.response.start", "status": status, "headers": raw})

    async def write(self, data: bytes, *, more: bool = False) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": more})

    async def json(self, status: int, body: bytes | None, headers: dict[str, str] | None = None) -> None:
        all_headers = {"Content-Length": str(len(body or b"")), **(headers or {})}
        await self.start(status, all_headers, "application/json" if body is not None else None)
        await self.write(body or b"")

    async def plain(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode()
        await self.start(status, {"Content-Length": str(len(data)), **(headers or {})}, "text/plain; charset=utf-8")
        await self.write(data)

    async def refuse(self, refusal: HttpRefusal) -> None:
        body = None
        if refusal.code is not None:
            body = encode(error_message(refusal.request_id, refusal.code, refusal.message))
        headers = dict(refusal.headers)
        if refusal.status >= 413:
            headers["Connection"] = "close"
        await self.json(refusal.status, body, headers)

    async def start_sse(self, headers: dict[str, str] | None = None) -> None:
        # 2026-07-28 basic/transports/streamable-http: "servers SHOULD include the
        # X-Accel-Buffering: no header"
        sse_headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})}
        await self.start(200, sse_headers, "text/event-stream")

    # -- the client going away ---------------------------------------------------------------

    async def watched(self, writing: Awaitable[None]) -> None:
        """Run ``writing`` (a :func:`respond`) while watching for the client closing the
        connection (then :attr:`gone` is set and the writing stops)."""
        async with trio.open_nursery() as nursery:
            stop = trio.CancelScope()
            nursery.start_soon(self.watch_disconnect, nursery.cancel_scope, stop)
            await writing
            stop.cancel()

    async def watch_disconnect(self, scope: trio.CancelScope, stop: trio.CancelScope) -> None:
        """Cancel ``scope`` when the client closes the connection; cancel ``stop`` to stop watching
        (it ends this task quietly: nothing reaches the nursery to be sorted out)."""
        with stop:
            await self.until_gone()
            scope.cancel()

    async def until_gone(self) -> None:
        """Returns once the client has closed the connection (:attr:`gone` is then set)."""
        while (await self.receive())["type"] != "http.disconnect":
            pass
        self.gone = True


def priming(stream: EventStream) -> bytes:
    """The event that primes a client to resume (an id, a retry, no data)."""
    return f"id: {stream.event_id(0)}\nretry: {RETRY_MS}\ndata: \n\n".encode()


def events(stream: EventStream, pending: list[tuple[int, bytes, int | None]]) -> bytes:
    """Messages of ``stream`` as SSE events (with their ids when the stream can be resumed)."""
    parts: list[bytes] = []
    for seq, data, _ in pending:
        parts.append(b"event: message\n")
        if stream.resumable:
            parts.append(f"id: {stream.event_id(seq)}\n".encode())
        parts += (b"data: ", data, b"\n\n")
    return b"".join(parts)


async def respond(
    exchange: Exchange,
    stream: EventStream,
    *,
    modern: bool,
    keepalive_s: float,
    sse: bool = False,
    started: bool = False,
    cursor: int = 0,
    headers: dict[str, str] | None = None,
    kicks: int | None = None,
) -> None:
    """Write ``stream`` as a JSON body (when its first message is its final one) or as SSE,
    until the stream is done (or kicked: the connection ends, the stream stays).

    ``cursor`` is the last sequence number the client has (resumption); ``kicks`` the stream's
    kick count when the request began (a kick since then ends the response).
    """
    written = cursor
    kicks = stream.kicks if kicks is None else kicks
    stream.readers += 1
    try:
        if sse and not started:
            await exchange.start_sse(headers)
            if stream.primed and cursor == 0:
                await exchange.write(priming(stream), more=True)
        sse = sse or started
        while True:
            changed = stream.signal()
            pending = stream.after(written)
            if not sse and pending:
                _, data, code = pending[0]
                if stream.done and len(pending) == 1:
                    status = MODERN_STATUS.get(code, 200) if modern and code is not None else 200
                    await exchange.json(status, data, headers)
                    return
                sse = True
                await exchange.start_sse(headers)
                if stream.primed:
                    await exchange.write(priming(stream), more=True)
            if sse and pending:
                await exchange.write(events(stream, pending), more=True)
                written = pending[-1][0]
            if sse and stream.done and not stream.after(written):
                break
            if sse and stream.kicks != kicks:
                # 2025-11-25: close the connection, not the stream; the client resumes it
                log.debug("closing stream %d early (the client resumes it with Last-Event-ID)", stream.number)
                break
            if not sse and stream.done:  # ended without an answer (a session ended)
                await exchange.json(202, None)
                return
            with trio.move_on_after(keepalive_s) as waited:
                await changed.wait()
            if waited.cancelled_caught and sse:
                await exchange.write(b": keep-alive\n\n", more=True)
        await exchange.write(b"")
    finally:
        stream.readers -= 1
