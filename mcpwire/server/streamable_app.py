"""Streamable HTTP (both eras) and HTTP+SSE (2024-11-05) as an ASGI application on trio.

Theory of operation: :class:`StreamableHTTPApp` turns HTTP into messages for a
:class:`~mcpwire.server.core.Server`. Every POSTed request gets an
:class:`~mcpwire.server.streams.EventStream`, the outlet its handler writes to; the response is
written from that stream (:func:`~.exchange.respond`): when the first message is also
the last (the answer alone), it is a JSON body (in 2026-07-28 with the HTTP status of its error
code), otherwise an SSE stream (:mod:`.exchange` writes them).

Eras. A POST is modern (2026-07-28) when its ``MCP-Protocol-Version`` header, or its body's
``_meta`` without a session header, names that revision, or its method exists only there. Modern
requests are stateless: the header rules of ``basic/transports/streamable-http`` are checked
first, then the request is served inside the POST's own task, and a client that closes the
response stream cancels it ("Closing the SSE response stream MUST be treated by the server as
cancellation of that request"). Legacy requests live in sessions: ``initialize`` opens one
(``Mcp-Session-Id``, one :class:`~mcpwire.server.connection.Connection` each), whose handlers run
in the app's own nursery, so that a request outlives a dropped connection and its stream can be
resumed with ``Last-Event-ID`` (event ids are ``<stream>.<n>``; 2025-11-25 streams start with a
priming event and a ``retry`` field). With ``hold_requests`` (the gateway), a request that may be
answered as one JSON body runs in its POST's task instead: it still outlives its client (a closed
connection does not cancel the task), and a writer task streams it only when it needs a stream.
GET opens the session's standalone stream, DELETE ends the session (later requests get 404).
``/sse`` and ``/messages`` serve the 2024-11-05 HTTP+SSE transport, where every message of a
session travels on its one GET stream.

The app needs a nursery for sessions: it takes one from the ASGI lifespan protocol, from
:meth:`StreamableHTTPApp.run` (for an embedder's nursery), or, when neither was started before
the first session, from a system task of its own. Requests must come with an allowed ``Host``
and, when present, an allowed ``Origin`` (403 otherwise: DNS-rebinding protection, 2025-11-25
basic/transports §Security Warning), unless the embedder checks them (``allowed_hosts=None``).
"""

from __future__ import annotations

import functools
import logging
import math
import secrets
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

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
from .exchange import ClientGone, Exchange, HttpRefusal, Receive, Scope, Send, respond
from .streams import EventStream

__all__ = ["LOOPBACK_HOSTS", "MAX_BODY_BYTES", "StreamableHTTPApp"]

log = logging.getLogger("mcpwire.server.http")

MAX_BODY_BYTES: Final = 4 * 1024 * 1024
KEEPALIVE_S: Final = 10.0
#: Legacy sessions kept at once, and finished resumable streams: the oldest go first (clients
#: that never send DELETE must not grow the server without bound).
MAX_SESSIONS: Final = 2000
MAX_FINISHED_STREAMS: Final = 2000
#: seconds a POST's task waits for the writer of its response to stop, once it cancelled it
CLOSE_WAIT_S: Final = 1.0
LOOPBACK_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
_MODERN: Final = MODERN_REVISIONS[0]


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


class _Companion:
    """A task in the app's nursery working for a request served in its POST's task (it writes
    the response as SSE, or watches for the client closing the connection); the POST's task
    waits for it, or ends it (:meth:`end`), before it returns. Started only when needed: most
    calls are answered before they need one."""

    __slots__ = ("done", "scope")

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.done = trio.Event()

    @classmethod
    def start(cls, nursery: trio.Nursery | None, work: Callable[[], Awaitable[None]]) -> _Companion | None:
        """A companion running ``work``; None when the app's nursery takes no task (it is closing)."""
        if nursery is None:
            return None
        companion = cls()
        try:
            nursery.start_soon(companion._run, work)
        except RuntimeError:  # closed to new arrivals
            return None
        return companion

    async def _run(self, work: Callable[[], Awaitable[None]]) -> None:
        try:
            with self.scope:
                await work()
        except Exception:  # (in the app's nursery: a failure here must not end the app)
            log.exception("a response's companion task failed")
        finally:
            self.done.set()

    async def end(self) -> None:
        """Cancel it and wait (shielded, bounded) until it has stopped."""
        if not self.done.is_set():
            self.scope.cancel()
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_WAIT_S):
                await self.done.wait()


def _spoke(stream: EventStream) -> bool:
    return bool(stream.events) or stream.done


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
        hold_requests: with ``answer_grace_s``, serve such a request in its POST's own task
            rather than a task of its own in the session (one task and two task switches fewer
            per call). Only for servers whose handlers never end a response early
            (:meth:`~mcpwire.server.context.RequestContext.drop_connection` is refused and
            logged): a response could not end while its request runs in the same task. A
            2026-07-28 request then gets its watcher of the client closing the connection (a
            task) only when its response streams or its grace ends.
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
        hold_requests: bool = False,
        admit_batch: Callable[[Mapping[str, Any], int], float | None] | None = None,
    ) -> None:
        self.server = server
        #: asked before a JSON-RPC batch runs, with the request's state (what an embedding
        #: service's middleware put there) and how many requests it carries: None lets it run,
        #: a number of seconds refuses it (429 with Retry-After)
        self.admit_batch = admit_batch
        self.answer_grace_s = answer_grace_s
        self.hold_requests = hold_requests
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
        request = Exchange(scope, receive, send, path or "/", root)
        try:
            await self._route(request)
        except HttpRefusal as reject:
            await request.refuse(reject)
        except ClientGone:
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

    async def _route(self, request: Exchange) -> None:
        sse_route = request.path in (self.sse_path, self.messages_path)
        if not sse_route and self.mcp_path is not None and request.path.rstrip("/") != self.mcp_path.rstrip("/"):
            await request.plain(404, "not found")
            return
        if request.method == "POST":
            # read before any answer: the connection may carry another request
            request.body = await request.read_body(self.max_body_bytes)
        self._check_origin(request)
        if request.path == self.sse_path and request.method == "GET":
            await self._get_sse_transport(request)
        elif request.path == self.messages_path and request.method == "POST":
            await self._post_sse_transport(request)
        elif sse_route:
            allow = "GET" if request.path == self.sse_path else "POST"
            await request.plain(405, "method not allowed", {"Allow": allow})
        elif request.method == "POST":
            await self._post(request)
        elif request.method == "GET":
            await self._get(request)
        elif request.method == "DELETE":
            await self._delete(request)
        else:
            await request.plain(405, "method not allowed", {"Allow": "GET, POST, DELETE"})

    def _check_origin(self, request: Exchange) -> None:
        if self.allowed_hosts is None:
            return
        host = request.headers.get("host", "")
        hostname = (urllib.parse.urlsplit(f"//{host}").hostname or "").lower()
        if hostname not in self.allowed_hosts:
            raise HttpRefusal(403, INVALID_REQUEST, f"Forbidden: Host {host!r} is not allowed")
        origin = request.headers.get("origin")
        if origin is not None:
            # 2025-11-25 basic/transports: "If the Origin header is present and invalid, servers
            # MUST respond with HTTP 403 Forbidden."
            origin_host = (urllib.parse.urlsplit(origin).hostname or "").lower()
            if origin_host not in self.allowed_hosts:
                raise HttpRefusal(403, INVALID_REQUEST, f"Forbidden: Origin {origin!r} is not allowed")

    # -- POST ------------------------------------------------------------------------------------

    async def _post(self, request: Exchange) -> None:
        try:
            message = decode(request.body)
        except ValueError as exc:
            raise HttpRefusal(400, PARSE_ERROR, f"Parse error: {exc}") from None
        if self._is_modern(request, message):
            await self._post_modern(request, message)
        else:
            await self._post_legacy(request, message)

    def _is_modern(self, request: Exchange, message: object) -> bool:
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

    async def _post_modern(self, request: Exchange, message: object) -> None:
        if not isinstance(message, dict):
            raise HttpRefusal(
                400, INVALID_REQUEST, "Invalid Request: a 2026-07-28 POST carries exactly one JSON-RPC message"
            )
        request_id = message.get("id")
        if "method" not in message:
            raise HttpRefusal(
                400, INVALID_REQUEST, "Invalid Request: clients do not send JSON-RPC responses", request_id
            )
        if "id" not in message:
            # 2026-07-28 §Sending Messages: an accepted notification gets 202 and no body.
            await request.json(202, None)
            return
        try:
            check_modern_headers(request.headers, message, self.server.tool_input_schema)
        except Refusal as refusal:
            raise HttpRefusal(400, refusal.code, refusal.message, request_id) from None
        item = classify_incoming(message)
        if not isinstance(item, InRequest):
            answer = getattr(item, "answer", None)
            if answer is None:
                await request.json(202, None)
                return
            code = answer["error"]["code"]
            await request.json(MODERN_STATUS.get(code, 200), encode(answer))
            return
        connection = await self._modern_connection()
        stream = EventStream()
        if self.hold_requests and self._graces is not None:
            await self._serve_modern_held(request, connection, item, stream)
            return
        async with trio.open_nursery() as nursery:
            # "Closing the SSE response stream MUST be treated by the server as cancellation of
            # that request": the watcher cancels this scope, and with it the request served here.
            stop = trio.CancelScope()
            nursery.start_soon(request.watch_disconnect, nursery.cancel_scope, stop)

            async def write() -> None:
                await respond(request, stream, keepalive_s=self.keepalive_s, modern=True)
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
                await request.json(MODERN_STATUS.get(code, 200) if code is not None else 200, data)
            else:  # cancelled (the server closes): no answer
                await request.json(202, None)
            stop.cancel()

    async def _post_legacy(self, request: Exchange, message: object) -> None:
        if isinstance(message, dict) and message.get("method") == "initialize" and "id" in message:
            await self._initialize(request, message)
            return
        session = self._session(request)
        self._check_version_header(request)
        connection = session.connection
        if isinstance(message, list):
            if connection.revision != V2025_03_26:
                raise HttpRefusal(
                    400, INVALID_REQUEST, "Invalid Request: JSON-RPC batches exist only in protocol revision 2025-03-26"
                )
            if self.admit_batch is not None:
                # each request a batch carries is a call: a limit on calls counts them all
                calls = sum(1 for m in message if isinstance(m, dict) and "method" in m and "id" in m)
                wait = self.admit_batch(request.state, calls)
                if wait is not None:
                    seconds = str(max(1, math.ceil(wait)))
                    raise HttpRefusal(429, None, f"too many calls in this batch; retry in {seconds} s",
                                  headers={"Retry-After": seconds})  # fmt: skip
            stream = session.new_stream(sse_events=False)
            if await connection.receive(message, stream, transport=request.origin):
                await request.watched(respond(request, stream, keepalive_s=self.keepalive_s, modern=False))
            else:
                await request.json(202, None)
            self._retire(session, stream)
            return
        if not isinstance(message, dict):
            raise HttpRefusal(400, INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC message")
        item = classify_incoming(message)
        if isinstance(item, InNotification | InResponse):
            # a notification or a response: "202 Accepted with no body"
            await connection.receive(message, session.standalone or _DISCARD, transport=request.origin)
            await request.json(202, None)
            return
        if not isinstance(item, InRequest):
            if "id" in message and "method" in message and not is_request_id(message.get("id")):
                raise HttpRefusal(400, INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
            await request.json(400, encode(item.answer) if item.answer is not None else None)
            return
        accept = request.headers.get("accept", "")
        sse_ok = self.legacy_sse and ("text/event-stream" in accept or "*/*" in accept)
        stream = session.new_stream(sse_events=sse_ok)
        kicks = stream.kicks
        if self.hold_requests and sse_ok and stream.resumable and self._answered_at_once(accept):
            try:
                await self._answer_held(request, connection, item, stream)
            finally:
                self._retire(session, stream)
            return
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
            await request.watched(
                respond(
                    request,
                    stream,
                    keepalive_s=self.keepalive_s,
                    modern=False,
                    sse=sse_ok and stream.resumable,
                    kicks=kicks,
                )
            )
        finally:
            self._retire(session, stream)

    def _answered_at_once(self, accept: str) -> bool:
        return self.answer_grace_s is not None and not prefers_sse(accept)

    async def _answer_alone(self, request: Exchange, stream: EventStream) -> bool:
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
        await request.json(200, stream.events[0][1])
        return True

    async def _answer_held(
        self, request: Exchange, connection: Connection, item: InRequest, stream: EventStream
    ) -> None:
        """Serve the request in this task (:attr:`hold_requests`): its answer alone is one JSON
        body, as :meth:`_answer_alone` writes it. A message before the answer, or the end of the
        grace, starts a writer (a :class:`_Companion`) that streams it all as SSE, priming event
        first, while the request goes on here; a request that ends unanswered (cancelled) is
        streamed the same way. No nursery of its own: leaving one is a pass of the scheduler, and
        most calls never need the writer."""
        stream.held = True
        writer: _Companion | None = None
        streamed = False

        async def write() -> None:
            await request.watched(respond(request, stream, keepalive_s=self.keepalive_s, modern=False, sse=True))

        def stream_it() -> None:
            nonlocal writer, streamed
            if not streamed:
                streamed = True
                stream.on_message = None
                writer = _Companion.start(self._nursery, write)

        def on_message() -> None:
            if not (stream.done and len(stream.events) == 1):
                stream_it()

        stream.on_message = on_message
        stream.on_nudge = stream_it  # the end of the grace (what the timer holds is the stream alone)
        if self._graces is None or self._nursery is None or not self._graces.wake_later(stream, self._nursery):
            stream_it()  # the app is closing: no grace to time
        try:
            await connection.serve_tracked(item, stream, transport=request.origin)
            stream.on_message = stream.on_nudge = None
            if not streamed:
                if stream.done and len(stream.events) == 1 and stream.events[0][0] == 1:
                    await request.json(200, stream.events[0][1])
                    return
                stream_it()
            if writer is None:  # the app is closing: this task writes what is left
                await write()
            else:
                await writer.done.wait()
        finally:
            stream.on_message = stream.on_nudge = None
            if writer is not None:
                await writer.end()  # (this task is cancelled: the response ends with it)

    async def _serve_modern_held(
        self, request: Exchange, connection: Connection, item: InRequest, stream: EventStream
    ) -> None:
        """A 2026-07-28 request with :attr:`hold_requests`: as the plain path serves it, without
        a nursery and a watcher task per request. Its answer alone is one JSON body; a message
        before it starts a writer (a :class:`_Companion`). The watcher of the client closing the
        connection, which cancels the request, starts with the writer or at the end of the
        answer grace: a request answered sooner needs none, and one whose client goes sooner
        is cancelled then."""
        cancel = trio.CancelScope()
        writer: _Companion | None = None
        watcher: _Companion | None = None
        streamed = False

        async def watch_work() -> None:
            await request.until_gone()
            cancel.cancel()

        def watch() -> None:
            nonlocal watcher
            if watcher is None:
                watcher = _Companion.start(self._nursery, watch_work)

        async def write() -> None:
            await respond(request, stream, keepalive_s=self.keepalive_s, modern=True)

        def on_message() -> None:
            # the request's answer alone is written once it is served (below); anything before
            # it (progress, log messages) needs a writer while the request runs
            nonlocal writer, streamed
            if not streamed and not (stream.done and len(stream.events) == 1):
                streamed = True
                stream.on_message = None
                writer = _Companion.start(self._nursery, write)
                watch()

        stream.on_message = on_message
        stream.on_nudge = watch
        if self._graces is None or self._nursery is None or not self._graces.wake_later(stream, self._nursery):
            watch()
        try:
            # (the watcher cancels the request's own scope: cancelled, it ends unanswered)
            await connection.serve(item, stream, transport=request.origin, scope=cancel)
            stream.on_message = stream.on_nudge = None
            if streamed:  # the writer writes the rest
                stream.finish()
                if writer is None:  # the app is closing: this task writes what is left
                    await write()
                else:
                    await writer.done.wait()
            elif request.gone:  # the client closed the connection: the request was cancelled
                pass
            elif stream.events:
                _, data, code = stream.events[0]
                await request.json(MODERN_STATUS.get(code, 200) if code is not None else 200, data)
            else:  # cancelled (the server closes): no answer
                await request.json(202, None)
        finally:
            stream.on_message = stream.on_nudge = None
            for companion in (writer, watcher):
                if companion is not None:
                    await companion.end()

    async def _initialize(self, request: Exchange, message: JSONObject) -> None:
        if "mcp-session-id" in request.headers:
            raise HttpRefusal(
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
            await request.json(200, answer, {"Mcp-Session-Id": session.id})
            return
        await self._end_session(session.id, "its initialize was refused")
        await request.json(200, answer or encode(error_message(None, -32603, "no answer")))

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

    def _session(self, request: Exchange) -> _Session:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None:
            # 2025-11-25 transports: "Servers that require a session ID SHOULD respond to requests
            # without an MCP-Session-Id header (other than initialization) with HTTP 400 Bad Request."
            raise HttpRefusal(400, INVALID_REQUEST, "Bad Request: no Mcp-Session-Id header; send initialize first")
        session = self.sessions.get(session_id.strip())
        if session is None or session.sse_transport:
            # "...it MUST respond to requests containing that session ID with HTTP 404 Not Found."
            raise HttpRefusal(404, INVALID_REQUEST, "Session not found")
        return session

    @staticmethod
    def _check_version_header(request: Exchange) -> None:
        version = request.headers.get("mcp-protocol-version")
        if version is None:
            return  # "the server SHOULD assume protocol version 2025-03-26"
        if version.strip() not in LEGACY_REVISIONS:
            # 2025-11-25 transports: "If the server receives a request with an invalid or
            # unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request."
            raise HttpRefusal(
                400, INVALID_REQUEST, f"Bad Request: unsupported MCP-Protocol-Version {version.strip()!r}"
            )

    # -- GET and DELETE ----------------------------------------------------------------------------

    async def _get(self, request: Exchange) -> None:
        if "mcp-session-id" not in request.headers and request.headers.get("mcp-protocol-version") == _MODERN:
            await request.plain(405, "no GET stream in 2026-07-28", {"Allow": "POST"})
            return
        session = self._session(request)
        self._check_version_header(request)
        if "text/event-stream" not in request.headers.get("accept", ""):
            raise HttpRefusal(406, INVALID_REQUEST, "Not Acceptable: GET needs Accept: text/event-stream")
        last = request.headers.get("last-event-id")
        if last is not None:
            number, _, seq = last.strip().partition(".")
            stream = self._find_stream(session, int(number)) if number.isdigit() else None
            if stream is None or not seq.isdigit():
                raise HttpRefusal(404, INVALID_REQUEST, f"Not Found: no stream for Last-Event-ID {last!r}")
            # 2025-11-25 transports: replay only the messages of the disconnected stream
            await request.watched(
                respond(request, stream, keepalive_s=self.keepalive_s, modern=False, sse=True, cursor=int(seq))
            )
            return
        if session.standalone is not None and not session.standalone.done:
            raise HttpRefusal(409, INVALID_REQUEST, "Conflict: the session already has a GET stream")
        standalone = session.standalone = EventStream(persistent=True)
        session.connection.standalone = standalone
        try:
            await request.watched(respond(request, standalone, keepalive_s=self.keepalive_s, modern=False, sse=True))
        finally:
            standalone.finish()
            if session.standalone is standalone:
                session.standalone = session.connection.standalone = None

    async def _delete(self, request: Exchange) -> None:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None:
            if request.headers.get("mcp-protocol-version") == _MODERN:
                # 2026-07-28 streamable-http §Earlier Streamable HTTP Revisions: 405 for DELETE.
                await request.plain(405, "no sessions in 2026-07-28", {"Allow": "POST"})
                return
            raise HttpRefusal(400, INVALID_REQUEST, "Bad Request: DELETE needs an Mcp-Session-Id header")
        session = self.sessions.get(session_id.strip())
        if (
            session is None
            or session.sse_transport
            or not await self._end_session(session.id, "the client ended its session (DELETE)")
        ):
            raise HttpRefusal(404, INVALID_REQUEST, "Session not found")
        await request.json(200, None)

    # -- 2024-11-05 HTTP+SSE ---------------------------------------------------------------------

    async def _get_sse_transport(self, request: Exchange) -> None:
        session = await self._new_session(sse_transport=True)
        stream = session.standalone = EventStream(persistent=True)
        session.connection.standalone = stream
        await request.start_sse()
        # 2024-11-05 basic/transports: "the server MUST send an endpoint event containing a URI
        # for the client to use for sending messages."
        endpoint = f"{request.root}{self.messages_path}?session_id={session.id}"
        await request.write(f"event: endpoint\ndata: {endpoint}\n\n".encode(), more=True)
        try:
            await request.watched(respond(request, stream, keepalive_s=self.keepalive_s, modern=False, started=True))
        finally:
            with trio.CancelScope(shield=True):
                await self._end_session(session.id, "the client's HTTP+SSE stream closed")

    async def _post_sse_transport(self, request: Exchange) -> None:
        session_id = urllib.parse.parse_qs(request.query).get("session_id", [""])[0]
        session = self.sessions.get(session_id)
        if session is None or not session.sse_transport or session.standalone is None:
            raise HttpRefusal(404, INVALID_REQUEST, "Session not found")
        try:
            message = decode(request.body)
        except ValueError as exc:
            raise HttpRefusal(400, PARSE_ERROR, f"Parse error: {exc}") from None
        await session.connection.receive(message, session.standalone, transport=request.origin)
        await request.plain(202, "Accepted")


class _Discard:
    """An outlet nobody reads (errors about notifications when no GET stream is open)."""

    closed = True

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        log.debug("no stream for an unsolicited message; dropped")

    def drop_connection(self) -> None:
        """Nothing to drop."""


_DISCARD: Final = _Discard()


@functools.lru_cache(maxsize=64)  # a client sends the same Accept with every request
def prefers_sse(accept: str) -> bool:
    """Whether an ``Accept`` header asks for an SSE stream rather than one JSON body: JSON is not
    acceptable at all, or ``text/event-stream`` weighs more, or (weighed alike, as the q-values
    leave it to the server) is listed first. The SDKs list ``application/json`` first and get a
    quick answer as one JSON body; a client listing ``text/event-stream`` first gets its stream,
    primed, at once (2025-11-25 basic/transports: the server "MUST either return Content-Type:
    text/event-stream ... or Content-Type: application/json")."""
    weights: dict[str, tuple[float, int]] = {}
    for position, item in enumerate(accept.lower().split(",")):
        media, *parameters = (part.strip() for part in item.split(";"))
        weight = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        if media in ("application/json", "text/event-stream", "*/*") and media not in weights:
            weights[media] = (weight, position)
    wildcard = weights.get("*/*", (0.0, len(weights)))
    json_weight, json_at = weights.get("application/json", wildcard)
    sse_weight, sse_at = weights.get("text/event-stream", wildcard)
    if json_weight <= 0:
        return True
    return sse_weight > json_weight or (sse_weight == json_weight and sse_at < json_at)
