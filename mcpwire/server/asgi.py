"""Streamable HTTP (both eras) and HTTP+SSE (2024-11-05) as an ASGI application on trio.

Theory of operation: :class:`StreamableHTTPApp` turns HTTP into messages for a
:class:`~mcpwire.server.core.Server`. Every POSTed request gets an
:class:`~mcpwire.server.streams.EventStream`, the outlet its handler writes to; the response is
written from that stream (:meth:`StreamableHTTPApp._respond`): when the first message is also
the last (the answer alone), it is a JSON body (in 2026-07-28 with the HTTP status of its error
code), otherwise an SSE stream.

Eras. A POST is modern (2026-07-28) when its ``MCP-Protocol-Version`` header, or its body's
``_meta`` without a session header, names that revision, or its method exists only there. Modern
requests are stateless: the header rules of ``basic/transports/streamable-http`` are checked
first, then the request is served inside the POST's own task, and a client that closes the
response stream cancels it ("Closing the SSE response stream MUST be treated by the server as
cancellation of that request"). Legacy requests live in sessions: ``initialize`` opens one
(``Mcp-Session-Id``, one :class:`~mcpwire.server.connection.Connection` each), whose handlers run
in the app's own nursery, so that a request outlives a dropped connection and its stream can be
resumed with ``Last-Event-ID`` (event ids are ``<stream>.<n>``; 2025-11-25 streams start with a
priming event and a ``retry`` field). GET opens the session's standalone stream, DELETE ends the
session (later requests get 404). ``/sse`` and ``/messages`` serve the 2024-11-05 HTTP+SSE
transport, where every message of a session travels on its one GET stream.

The app needs a nursery for sessions: it takes one from the ASGI lifespan protocol, from
:meth:`StreamableHTTPApp.run` (for an embedder's nursery), or, when neither was started before
the first session, from a system task of its own. Requests must come with an allowed ``Host``
and, when present, an allowed ``Origin`` (403 otherwise: DNS-rebinding protection, 2025-11-25
basic/transports §Security Warning), unless the embedder checks them (``allowed_hosts=None``).
"""

from __future__ import annotations

import logging
import math
import secrets
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import trio

from ..protocol.serving import (
    INVALID_REQUEST,
    MODERN_ONLY_METHODS,
    MODERN_STATUS,
    PARSE_ERROR,
    InNotification,
    InRequest,
    InResponse,
    Refusal,
    check_modern_headers,
    classify_incoming,
    decode,
    encode,
    error_message,
    is_request_id,
)
from ..protocol.types import META_PROTOCOL_VERSION
from ..protocol.versions import LEGACY_REVISIONS, MODERN_REVISIONS, V2025_03_26, V2025_11_25
from .connection import Connection
from .core import JSONObject, Server
from .streams import EventStream

__all__ = ["LOOPBACK_HOSTS", "MAX_BODY_BYTES", "StreamableHTTPApp"]

log = logging.getLogger("mcpwire.server.http")

Scope: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send: TypeAlias = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MAX_BODY_BYTES: Final = 4 * 1024 * 1024
KEEPALIVE_S: Final = 10.0
RETRY_MS: Final = 500
#: Legacy sessions kept at once, and finished resumable streams: the oldest go first (clients
#: that never send DELETE must not grow the server without bound).
MAX_SESSIONS: Final = 2000
MAX_FINISHED_STREAMS: Final = 2000
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_MODERN: Final = MODERN_REVISIONS[0]


class _Reject(Exception):
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


class _Gone(Exception):
    """The client closed the connection while its response was being written."""


@dataclass(slots=True, eq=False)
class _Session:
    """A legacy session (Streamable HTTP or HTTP+SSE): its connection and its streams."""

    id: str
    connection: Connection
    sse_transport: bool = False
    live: dict[int, EventStream] = field(default_factory=dict)
    standalone: EventStream | None = None
    streams: int = 0

    def new_stream(self, *, sse_events: bool) -> EventStream:
        self.streams += 1
        revision = self.connection.revision or ""
        # 2025-11-25 basic/transports: "The server SHOULD immediately send an SSE event consisting
        # of an event ID and an empty data field in order to prime the client to reconnect";
        # resumability (event ids, Last-Event-ID) exists from 2025-03-26 on.
        stream = EventStream(
            self.streams,
            primed=sse_events and revision >= V2025_11_25,
            resumable=sse_events and revision >= V2025_03_26,
        )
        self.live[stream.number] = stream
        return stream


class _Graces:
    """The ends of the answer graces (``answer_grace_s``): one task sleeps until the earliest and
    wakes the stream of a request still waiting then, which costs a request less than a deadline
    (a cancel scope) of its own. Every grace is as long, so they end in the order they began."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        #: (when the grace ends, the stream waited on), oldest first
        self._queue: deque[tuple[float, EventStream]] = deque()
        self._idle: trio.Event | None = None
        self._running = False

    def wake_later(self, stream: EventStream, nursery: trio.Nursery) -> bool:
        """Nudge ``stream`` when its grace from now ends, unless it has a message by then. False
        when the nursery takes no task now (the app is closing): the caller times its own wait."""
        if not self._running:
            try:
                nursery.start_soon(self._run)
            except RuntimeError:  # closed to new arrivals
                return False
            self._running = True
        self._queue.append((trio.current_time() + self.grace, stream))
        if self._idle is not None:
            self._idle.set()
        return True

    async def _run(self) -> None:
        queue = self._queue
        try:
            while True:
                while queue and _spoke(queue[0][1]):  # answered: its wait is over already
                    queue.popleft()
                if not queue:
                    self._idle = trio.Event()
                    await self._idle.wait()
                    self._idle = None
                    continue
                await trio.sleep_until(queue[0][0])
                now = trio.current_time()
                while queue and queue[0][0] <= now:
                    _, stream = queue.popleft()
                    if not _spoke(stream):
                        stream.nudge()
        finally:
            self._running = False
            self._idle = None
            while queue:  # no one is left to time these waits: they end now
                queue.popleft()[1].nudge()


def _spoke(stream: EventStream) -> bool:
    return bool(stream.events) or stream.done


class _Request:
    """One HTTP request: its headers (lower-case names), body, and the ASGI callables."""

    __slots__ = ("body", "gone", "headers", "method", "origin", "path", "query", "receive", "root", "send", "state")

    def __init__(self, scope: Scope, receive: Receive, send: Send, path: str, root: str) -> None:
        self.method: str = scope["method"]
        self.path = path
        self.root = root
        #: set when the client closed the connection
        self.gone = False
        self.query: str = scope.get("query_string", b"").decode("latin-1")
        self.headers: dict[str, str] = {}
        for name, value in scope.get("headers", ()):
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text
        self.receive = receive
        self.send = send
        self.body = b""
        # what an embedding service's middleware learnt about the request (trace id, caller)
        state = scope.get("state") or {}
        self.state: Mapping[str, Any] = state
        self.origin = {k: str(state[k]) for k in ("trace_id", "caller") if k in state}


class StreamableHTTPApp:
    """An ASGI application serving one :class:`~mcpwire.server.core.Server` over HTTP.

    Args:
        server: what is served.
        mcp_path: the Streamable HTTP endpoint, relative to the mount point (None: every path
            that is not an HTTP+SSE path).
        sse_path, messages_path: the 2024-11-05 HTTP+SSE endpoints (None: not served).
        allowed_hosts: host names a ``Host`` (and ``Origin``) header may name; None leaves the
            check to the embedder.
        max_body_bytes: larger request bodies get 413.
        legacy_sse: answer legacy requests with SSE when the client accepts it.
        input_timeout: seconds a legacy server-to-client request waits for the client.
        answer_grace_s: a legacy request whose client accepts both JSON and SSE waits this long
            for its first message before its SSE stream (and its priming event) starts; when that
            message is the answer, it is sent as one JSON body instead (no stream to write, and
            the connection stays reusable). None: resumable streams start at once.
    """

    def __init__(
        self,
        server: Server,
        *,
        mcp_path: str | None = "/mcp",
        sse_path: str | None = "/sse",
        messages_path: str | None = "/messages",
        allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS,
        max_body_bytes: int = MAX_BODY_BYTES,
        legacy_sse: bool = True,
        keepalive_s: float = KEEPALIVE_S,
        input_timeout: float = 30.0,
        answer_grace_s: float | None = None,
        admit_batch: Callable[[Mapping[str, Any], int], float | None] | None = None,
    ) -> None:
        self.server = server
        #: asked before a JSON-RPC batch runs, with the request's state (what an embedding
        #: service's middleware put there) and how many requests it carries: None lets it run,
        #: a number of seconds refuses it (429 with Retry-After)
        self.admit_batch = admit_batch
        self.answer_grace_s = answer_grace_s
        self.mcp_path = mcp_path
        self.sse_path = sse_path
        self.messages_path = messages_path
        self.allowed_hosts = None if allowed_hosts is None else frozenset(h.lower() for h in allowed_hosts)
        self.max_body_bytes = max_body_bytes
        self.legacy_sse = legacy_sse
        self.keepalive_s = keepalive_s
        self.input_timeout = input_timeout
        self.sessions: dict[str, _Session] = {}
        self._terminated: set[str] = set()
        self._finished: dict[tuple[str, int], EventStream] = {}
        self._nursery: trio.Nursery | None = None
        self._starting: trio.Event | None = None
        self._modern: Connection | None = None
        self._graces = None if answer_grace_s is None else _Graces(answer_grace_s)

    # -- lifetime --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[StreamableHTTPApp] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the app's sessions until cancelled; ``nursery.start(app.run)`` returns the app.

        Cancellation: cancelling it closes every session (in-flight requests are cancelled,
        listen streams end with their completion result). A second ``run`` while one is hosting
        the sessions (a request came first and started one) only waits.
        """
        if self._nursery is not None:
            task_status.started(self)
            await trio.sleep_forever()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._modern = Connection(self.server, nursery, era="modern", label="http")
                nursery.start_soon(self.server.background)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.aclose()

    async def aclose(self) -> None:
        """Close every session and stream. Idempotent."""
        for session_id in list(self.sessions):
            await self._end_session(session_id, "the server is closing")
        if self._modern is not None:
            await self._modern.close("the server is closing")
        self._nursery = None

    async def _ensure_running(self) -> trio.Nursery:
        if self._nursery is not None:
            return self._nursery
        if self._starting is None:
            self._starting = trio.Event()
            started = self._starting

            async def system() -> None:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.run)
                    started.set()

            log.debug("no lifespan and no run(): the app hosts its sessions in a system task")
            trio.lowlevel.spawn_system_task(system)
        await self._starting.wait()
        assert self._nursery is not None
        return self._nursery

    async def _modern_connection(self) -> Connection:
        await self._ensure_running()
        assert self._modern is not None
        return self._modern

    # -- ASGI ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        request = _Request(scope, receive, send, path or "/", root)
        try:
            await self._route(request)
        except _Reject as reject:
            await self._reject(request, reject)
        except _Gone:
            log.debug("%s %s: the client went away", request.method, request.path)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with trio.open_nursery() as nursery:
            await nursery.start(self.run)
            await send({"type": "lifespan.startup.complete"})
            message = await receive()  # lifespan.shutdown
            nursery.cancel_scope.cancel()
        await send({"type": "lifespan.shutdown.complete"})

    async def _route(self, request: _Request) -> None:
        sse_route = request.path in (self.sse_path, self.messages_path)
        if not sse_route and self.mcp_path is not None and request.path.rstrip("/") != self.mcp_path.rstrip("/"):
            await self._plain(request, 404, "not found")
            return
        if request.method == "POST":
            # read before any answer: the connection may carry another request
            request.body = await self._read_body(request)
        self._check_origin(request)
        if request.path == self.sse_path and request.method == "GET":
            await self._get_sse_transport(request)
        elif request.path == self.messages_path and request.method == "POST":
            await self._post_sse_transport(request)
        elif sse_route:
            await self._plain(
                request, 405, "method not allowed", {"Allow": "GET" if request.path == self.sse_path else "POST"}
            )
        elif request.method == "POST":
            await self._post(request)
        elif request.method == "GET":
            await self._get(request)
        elif request.method == "DELETE":
            await self._delete(request)
        else:
            await self._plain(request, 405, "method not allowed", {"Allow": "GET, POST, DELETE"})

    def _check_origin(self, request: _Request) -> None:
        if self.allowed_hosts is None:
            return
        host = request.headers.get("host", "")
        hostname = (urllib.parse.urlsplit(f"//{host}").hostname or "").lower()
        if hostname not in self.allowed_hosts:
            raise _Reject(403, INVALID_REQUEST, f"Forbidden: Host {host!r} is not allowed")
        origin = request.headers.get("origin")
        if origin is not None:
            # 2025-11-25 basic/transports: "If the Origin header is present and invalid, servers
            # MUST respond with HTTP 403 Forbidden."
            origin_host = (urllib.parse.urlsplit(origin).hostname or "").lower()
            if origin_host not in self.allowed_hosts:
                raise _Reject(403, INVALID_REQUEST, f"Forbidden: Origin {origin!r} is not allowed")

    async def _read_body(self, request: _Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _Reject(413, None, "request body too large")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _Reject(413, None, "request body too large")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    # -- writing responses -------------------------------------------------------------------

    async def _start(self, request: _Request, status: int, headers: dict[str, str], content_type: str | None) -> None:
        raw = [(b"content-type", content_type.encode())] if content_type else []
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        await request.send({"type": "http.response.start", "status": status, "headers": raw})

    async def _body(self, request: _Request, data: bytes, *, more: bool = False) -> None:
        await request.send({"type": "http.response.body", "body": data, "more_body": more})

    async def _json(
        self, request: _Request, status: int, body: bytes | None, headers: dict[str, str] | None = None
    ) -> None:
        all_headers = {"Content-Length": str(len(body or b"")), **(headers or {})}
        await self._start(request, status, all_headers, "application/json" if body is not None else None)
        await self._body(request, body or b"")

    async def _plain(self, request: _Request, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        data = text.encode()
        await self._start(
            request, status, {"Content-Length": str(len(data)), **(headers or {})}, "text/plain; charset=utf-8"
        )
        await self._body(request, data)

    async def _reject(self, request: _Request, reject: _Reject) -> None:
        body = None if reject.code is None else encode(error_message(reject.request_id, reject.code, reject.message))
        headers = dict(reject.headers)
        if reject.status >= 413:
            headers["Connection"] = "close"
        await self._json(request, reject.status, body, headers)

    async def _start_sse(self, request: _Request, headers: dict[str, str] | None = None) -> None:
        # 2026-07-28 basic/transports/streamable-http: "servers SHOULD include the
        # X-Accel-Buffering: no header"
        sse_headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})}
        await self._start(request, 200, sse_headers, "text/event-stream")

    async def _watched(self, request: _Request, writing: Awaitable[None]) -> None:
        """Run ``writing`` (a :meth:`_respond`) while watching for the client closing the
        connection (then ``request.gone`` is set and the writing stops)."""
        async with trio.open_nursery() as nursery:
            stop = trio.CancelScope()
            nursery.start_soon(self._watch_disconnect, request, nursery.cancel_scope, stop)
            await writing
            stop.cancel()

    async def _respond(
        self,
        request: _Request,
        stream: EventStream,
        *,
        modern: bool,
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
                await self._start_sse(request, headers)
                if stream.primed and cursor == 0:
                    await self._body(request, self._priming(stream), more=True)
            sse = sse or started
            while True:
                changed = stream.signal()
                pending = stream.after(written)
                if not sse and pending:
                    _, data, code = pending[0]
                    if stream.done and len(pending) == 1:
                        status = MODERN_STATUS.get(code, 200) if modern and code is not None else 200
                        await self._json(request, status, data, headers)
                        return
                    sse = True
                    await self._start_sse(request, headers)
                    if stream.primed:
                        await self._body(request, self._priming(stream), more=True)
                if sse and pending:
                    await self._body(request, self._events(stream, pending), more=True)
                    written = pending[-1][0]
                if sse and stream.done and not stream.after(written):
                    break
                if sse and stream.kicks != kicks:
                    # 2025-11-25: close the connection, not the stream; the client resumes it
                    log.debug("closing stream %d early (the client resumes it with Last-Event-ID)", stream.number)
                    break
                if not sse and stream.done:  # ended without an answer (a session ended)
                    await self._json(request, 202, None)
                    return
                with trio.move_on_after(self.keepalive_s) as waited:
                    await changed.wait()
                if waited.cancelled_caught and sse:
                    await self._body(request, b": keep-alive\n\n", more=True)
            await self._body(request, b"")
        finally:
            stream.readers -= 1

    @staticmethod
    def _priming(stream: EventStream) -> bytes:
        return f"id: {stream.event_id(0)}\nretry: {RETRY_MS}\ndata: \n\n".encode()

    @staticmethod
    def _events(stream: EventStream, pending: list[tuple[int, bytes, int | None]]) -> bytes:
        parts: list[bytes] = []
        for seq, data, _ in pending:
            parts.append(b"event: message\n")
            if stream.resumable:
                parts.append(f"id: {stream.event_id(seq)}\n".encode())
            parts += (b"data: ", data, b"\n\n")
        return b"".join(parts)

    @staticmethod
    async def _watch_disconnect(request: _Request, scope: trio.CancelScope, stop: trio.CancelScope) -> None:
        """Cancel ``scope`` when the client closes the connection; cancel ``stop`` to stop watching
        (it ends this task quietly: nothing reaches the nursery to be sorted out)."""
        with stop:
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    request.gone = True
                    scope.cancel()
                    return

    # -- POST ------------------------------------------------------------------------------------

    async def _post(self, request: _Request) -> None:
        try:
            message = decode(request.body)
        except ValueError as exc:
            raise _Reject(400, PARSE_ERROR, f"Parse error: {exc}") from None
        if self._is_modern(request, message):
            await self._post_modern(request, message)
        else:
            await self._post_legacy(request, message)

    def _is_modern(self, request: _Request, message: object) -> bool:
        if self.server.era != "both":
            return self.server.era == "modern"
        if request.headers.get("mcp-protocol-version", "").strip() == _MODERN:
            return True
        if not isinstance(message, dict):
            return False
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and META_PROTOCOL_VERSION in meta and "mcp-session-id" not in request.headers:
            return True
        return message.get("method") in MODERN_ONLY_METHODS

    async def _post_modern(self, request: _Request, message: object) -> None:
        if not isinstance(message, dict):
            raise _Reject(
                400, INVALID_REQUEST, "Invalid Request: a 2026-07-28 POST carries exactly one JSON-RPC message"
            )
        request_id = message.get("id")
        if "method" not in message:
            raise _Reject(400, INVALID_REQUEST, "Invalid Request: clients do not send JSON-RPC responses", request_id)
        if "id" not in message:
            # 2026-07-28 §Sending Messages: an accepted notification gets 202 and no body.
            await self._json(request, 202, None)
            return
        try:
            check_modern_headers(request.headers, message, self.server.tool_input_schema)
        except Refusal as refusal:
            raise _Reject(400, refusal.code, refusal.message, request_id) from None
        item = classify_incoming(message)
        if not isinstance(item, InRequest):
            answer = getattr(item, "answer", None)
            if answer is None:
                await self._json(request, 202, None)
                return
            code = answer["error"]["code"]
            await self._json(request, MODERN_STATUS.get(code, 200), encode(answer))
            return
        connection = await self._modern_connection()
        stream = EventStream()
        async with trio.open_nursery() as nursery:
            # "Closing the SSE response stream MUST be treated by the server as cancellation of
            # that request": the watcher cancels this scope, and with it the request served here.
            stop = trio.CancelScope()
            nursery.start_soon(self._watch_disconnect, request, nursery.cancel_scope, stop)

            async def write() -> None:
                await self._respond(request, stream, modern=True)
                stop.cancel()

            def on_message() -> None:
                # the request's answer alone is written once it is served (below); anything
                # before it (progress, log messages) needs a writer while the request runs
                if stream.on_message is not None and not (stream.done and len(stream.events) == 1):
                    stream.on_message = None
                    nursery.start_soon(write)

            stream.on_message = on_message
            await connection.serve(item, stream, transport=request.origin)
            if stream.on_message is None:  # the writer writes the rest, then ends the watcher
                stream.finish()
                return
            stream.on_message = None
            if stream.events:
                _, data, code = stream.events[0]
                await self._json(request, MODERN_STATUS.get(code, 200) if code is not None else 200, data)
            else:  # cancelled (the server closes): no answer
                await self._json(request, 202, None)
            stop.cancel()

    async def _post_legacy(self, request: _Request, message: object) -> None:
        if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
            await self._initialize(request, message)
            return
        session = self._session(request)
        self._check_version_header(request)
        connection = session.connection
        if isinstance(message, list):
            if connection.revision != V2025_03_26:
                raise _Reject(
                    400, INVALID_REQUEST, "Invalid Request: JSON-RPC batches exist only in protocol revision 2025-03-26"
                )
            if self.admit_batch is not None:
                # each request a batch carries is a call: a limit on calls counts them all
                calls = sum(1 for m in message if isinstance(m, dict) and "method" in m and "id" in m)
                wait = self.admit_batch(request.state, calls)
                if wait is not None:
                    seconds = str(max(1, math.ceil(wait)))
                    raise _Reject(429, None, f"too many calls in this batch; retry in {seconds} s",
                                  headers={"Retry-After": seconds})  # fmt: skip
            stream = session.new_stream(sse_events=False)
            if await connection.receive(message, stream, transport=request.origin):
                await self._watched(request, self._respond(request, stream, modern=False))
            else:
                await self._json(request, 202, None)
            self._retire(session, stream)
            return
        if not isinstance(message, dict):
            raise _Reject(400, INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC message")
        item = classify_incoming(message)
        if isinstance(item, InNotification | InResponse):
            # a notification or a response: "202 Accepted with no body"
            await connection.receive(message, session.standalone or _DISCARD, transport=request.origin)
            await self._json(request, 202, None)
            return
        if not isinstance(item, InRequest):
            if "id" in message and "method" in message and not is_request_id(message.get("id")):
                raise _Reject(400, INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
            await self._json(request, 400, encode(item.answer) if item.answer is not None else None)
            return
        accept = request.headers.get("accept", "")
        sse_ok = self.legacy_sse and ("text/event-stream" in accept or "*/*" in accept)
        stream = session.new_stream(sse_events=sse_ok)
        kicks = stream.kicks
        await connection.receive(message, stream, transport=request.origin)
        try:
            if (
                sse_ok
                and stream.resumable
                and self._answered_at_once(accept)
                and await self._answer_alone(request, stream)
            ):
                return
            # resumable streams are SSE from the start (2025-11-25: with a priming event)
            await self._watched(
                request, self._respond(request, stream, modern=False, sse=sse_ok and stream.resumable, kicks=kicks)
            )
        finally:
            self._retire(session, stream)

    def _answered_at_once(self, accept: str) -> bool:
        return self.answer_grace_s is not None and ("application/json" in accept or "*/*" in accept)

    async def _answer_alone(self, request: _Request, stream: EventStream) -> bool:
        """Wait (at most :attr:`answer_grace_s`) for the stream's first message; when it is the
        answer alone, write it as a JSON body and return True. Otherwise the stream goes on as SSE,
        starting with its priming event, which is still the first event the client sees (2025-11-25
        basic/transports: the server "SHOULD immediately send an SSE event consisting of an event ID
        and an empty data field"; immediately, here, is once the answer is known not to be alone)."""
        assert self.answer_grace_s is not None and self._graces is not None
        if not stream.events and not stream.done:
            changed = stream.signal()
            if self._nursery is not None and self._graces.wake_later(stream, self._nursery):
                await changed.wait()  # a message, or the end of the grace
            else:
                with trio.move_on_after(self.answer_grace_s):
                    await changed.wait()
        if not (stream.done and len(stream.events) == 1 and stream.events[0][0] == 1):
            return False
        await self._json(request, 200, stream.events[0][1])
        return True

    async def _initialize(self, request: _Request, message: JSONObject) -> None:
        if "mcp-session-id" in request.headers:
            raise _Reject(
                400,
                INVALID_REQUEST,
                "Bad Request: initialize opens a session; do not send Mcp-Session-Id",
                message["id"],
            )
        session = await self._new_session()
        stream = EventStream()
        await session.connection.receive(message, stream, transport=request.origin)
        answer = stream.events[0][1] if stream.events else None
        if session.connection.revision is not None and answer is not None:
            await self._json(request, 200, answer, {"Mcp-Session-Id": session.id})
            return
        await self._end_session(session.id, "its initialize was refused")
        await self._json(request, 200, answer or encode(error_message(None, -32603, "no answer")))

    def _retire(self, session: _Session, stream: EventStream) -> None:
        session.live.pop(stream.number, None)
        if stream.resumable:
            # kept for a client resuming with Last-Event-ID, the oldest dropped first
            self._finished[(session.id, stream.number)] = stream
            while len(self._finished) > MAX_FINISHED_STREAMS:
                del self._finished[next(iter(self._finished))]

    def _find_stream(self, session: _Session, number: int) -> EventStream | None:
        return session.live.get(number) or self._finished.get((session.id, number))

    # -- sessions ----------------------------------------------------------------------------------

    async def _new_session(self, *, sse_transport: bool = False) -> _Session:
        nursery = await self._ensure_running()
        session_id = secrets.token_hex(16)
        connection = Connection(
            self.server, nursery, input_timeout=self.input_timeout, label=f"session {session_id[:8]}"
        )
        session = self.sessions[session_id] = _Session(session_id, connection, sse_transport=sse_transport)
        if len(self.sessions) > MAX_SESSIONS:
            await self._end_session(
                next(iter(self.sessions)), f"the session expired (the server keeps the {MAX_SESSIONS} newest)"
            )
        return session

    async def _end_session(self, session_id: str, reason: str) -> bool:
        """End a session (``reason``: why, as its in-flight requests are told)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        self._terminated.add(session_id)
        for key in [k for k in self._finished if k[0] == session_id]:
            del self._finished[key]
        await session.connection.close(reason)
        for stream in [*session.live.values(), *([session.standalone] if session.standalone else [])]:
            stream.finish()
        return True

    def _session(self, request: _Request) -> _Session:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None:
            # 2025-11-25 transports: "Servers that require a session ID SHOULD respond to requests
            # without an MCP-Session-Id header (other than initialization) with HTTP 400 Bad Request."
            raise _Reject(400, INVALID_REQUEST, "Bad Request: no Mcp-Session-Id header; send initialize first")
        session = self.sessions.get(session_id.strip())
        if session is None or session.sse_transport:
            # "...it MUST respond to requests containing that session ID with HTTP 404 Not Found."
            raise _Reject(404, INVALID_REQUEST, "Session not found")
        return session

    @staticmethod
    def _check_version_header(request: _Request) -> None:
        version = request.headers.get("mcp-protocol-version")
        if version is None:
            return  # "the server SHOULD assume protocol version 2025-03-26"
        if version.strip() not in LEGACY_REVISIONS:
            # 2025-11-25 transports: "If the server receives a request with an invalid or
            # unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request."
            raise _Reject(400, INVALID_REQUEST, f"Bad Request: unsupported MCP-Protocol-Version {version.strip()!r}")

    # -- GET and DELETE ----------------------------------------------------------------------------

    async def _get(self, request: _Request) -> None:
        if "mcp-session-id" not in request.headers and request.headers.get("mcp-protocol-version") == _MODERN:
            await self._plain(request, 405, "no GET stream in 2026-07-28", {"Allow": "POST"})
            return
        session = self._session(request)
        self._check_version_header(request)
        if "text/event-stream" not in request.headers.get("accept", ""):
            raise _Reject(406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
        last = request.headers.get("last-event-id")
        if last is not None:
            number, _, seq = last.strip().partition(".")
            stream = self._find_stream(session, int(number)) if number.isdigit() else None
            if stream is None or not seq.isdigit():
                raise _Reject(404, INVALID_REQUEST, f"Not Found: no stream for Last-Event-ID {last!r}")
            # 2025-11-25 transports: replay only the messages of the disconnected stream
            await self._watched(request, self._respond(request, stream, modern=False, sse=True, cursor=int(seq)))
            return
        if session.standalone is not None and not session.standalone.done:
            raise _Reject(409, INVALID_REQUEST, "Conflict: the session already has a GET stream")
        standalone = session.standalone = EventStream(persistent=True)
        session.connection.standalone = standalone
        try:
            await self._watched(request, self._respond(request, standalone, modern=False, sse=True))
        finally:
            standalone.finish()
            if session.standalone is standalone:
                session.standalone = session.connection.standalone = None

    async def _delete(self, request: _Request) -> None:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None:
            if request.headers.get("mcp-protocol-version") == _MODERN:
                # 2026-07-28 streamable-http §Earlier Streamable HTTP Revisions: 405 for DELETE.
                await self._plain(request, 405, "no sessions in 2026-07-28", {"Allow": "POST"})
                return
            raise _Reject(400, INVALID_REQUEST, "Bad Request: DELETE needs an Mcp-Session-Id header")
        session = self.sessions.get(session_id.strip())
        if session is None or session.sse_transport or not await self._end_session(
            session.id, "the client ended its session (DELETE)"
        ):
            raise _Reject(404, INVALID_REQUEST, "Session not found")
        await self._json(request, 200, None)

    # -- 2024-11-05 HTTP+SSE ---------------------------------------------------------------------

    async def _get_sse_transport(self, request: _Request) -> None:
        session = await self._new_session(sse_transport=True)
        stream = session.standalone = EventStream(persistent=True)
        session.connection.standalone = stream
        await self._start_sse(request)
        # 2024-11-05 basic/transports: "the server MUST send an endpoint event containing a URI
        # for the client to use for sending messages."
        endpoint = f"{request.root}{self.messages_path}?session_id={session.id}"
        await self._body(request, f"event: endpoint\ndata: {endpoint}\n\n".encode(), more=True)
        try:
            await self._watched(request, self._respond(request, stream, modern=False, started=True))
        finally:
            with trio.CancelScope(shield=True):
                await self._end_session(session.id, "the client's HTTP+SSE stream closed")

    async def _post_sse_transport(self, request: _Request) -> None:
        session_id = urllib.parse.parse_qs(request.query).get("session_id", [""])[0]
        session = self.sessions.get(session_id)
        if session is None or not session.sse_transport or session.standalone is None:
            raise _Reject(404, INVALID_REQUEST, "Session not found")
        try:
            message = decode(request.body)
        except ValueError as exc:
            raise _Reject(400, PARSE_ERROR, f"Parse error: {exc}") from None
        await session.connection.receive(message, session.standalone, transport=request.origin)
        await self._plain(request, 202, "Accepted")


class _Discard:
    """An outlet nobody reads (errors about notifications when no GET stream is open)."""

    closed = True

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        log.debug("no stream for an unsolicited message; dropped")

    def drop_connection(self) -> None:
        """Nothing to drop."""


_DISCARD: Final = _Discard()
