"""An ASGI 3 HTTP/1.1 server on trio: what ``mcpwire serve`` and :func:`serve_http` run.

Theory of operation: :func:`serve_http1` serves through :func:`~.listen.run_server` (lifespan,
listening, admission, TLS, the sweeper and the drain) with one :class:`_Connection` per accepted
stream: **one task**, one :class:`~mcpwire.protocol.http1_server.ServerConnection` (the server's
side of mcpwire's HTTP/1.1 codec, which reads and writes as h11 does), over any
:class:`trio.abc.Stream` (a :class:`trio.SSLStream` gives HTTPS). The codec is the only parser
and the only writer: it reads every request head and body, frames every response, and decides
whether the connection carries another request. Nothing is spawned per request: the task reads a
head (its first byte within ``keep_alive_s`` of the last answer, the whole head within
``header_timeout_s`` of its first byte, else 408), then awaits the app directly with a
``receive``/``send`` pair bound to that exchange.

- ``receive`` gives the body on demand (an ``Expect: 100-continue`` client gets its ``100
  Continue`` on the first read, so a body the app refuses is never sent); the body must arrive
  whole within ``body_timeout_s`` of the head. Once the body is consumed, ``receive`` reads the
  stream until the client goes away and then returns ``http.disconnect`` (one reader at a time;
  other callers wait for it): the app learns of a vanished client while it streams, without a
  watcher task per request. Bytes read meanwhile (a pipelined request) go to the codec, bounded,
  and are served in order afterwards. After the response is complete, ``receive`` says
  ``http.disconnect`` at once, as ASGI asks.
- ``send`` holds the response head until the first body message so head and body leave in one
  write. A response is complete only when its last write has returned: a write that does not
  finish (cancelled, failed, or past ``send_timeout_s`` on a client that stopped reading) leaves
  the framing unknown, so the connection is closed, never reused. On a plain TCP connection
  (:class:`~.tcp.TcpStream`) what the socket takes at once is written without a pass of the
  scheduler; only the rest waits, under ``send_timeout_s``.

When the app raises before its response starts, the client gets a 500; after, the connection is
closed (the response cannot be finished honestly). A request that carries both
``Content-Length`` and ``Transfer-Encoding`` is answered with ``Connection: close`` and the
connection closed after it (RFC 9112 §6.1: such a message may be an attempt at request smuggling).
A malformed request line or header gets a 400 (431 for a head over the limit, 501 for a transfer
coding other than chunked) and the connection closes; nothing a client sent reaches a log line
unescaped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote

import trio

from ..errors import LocalProtocolError
from ..protocol.http1_server import CLOSED, END, NEED_DATA, BadRequest, Request, ServerConnection
from .lifespan import ASGI_VERSION, ASGIApp, Message, StartupFailed, clean
from .listen import (
    CLOSE_LINGER_S,
    NEVER,
    Accepted,
    ConnectionHandler,
    ServerOptions,
    close_gently,
    plain_response,
    run_server,
    tls_context,
)
from .proxy import forwarded
from .tcp import TcpStream

__all__ = ["ServerOptions", "StartupFailed", "connection_handler", "serve_http1"]

log = logging.getLogger("mcpwire.server.http")

#: bytes asked of the stream per read
RECV_BYTES: Final = 65536
#: bytes of pipelined requests buffered while the app streams; beyond this, reading stops
MAX_PIPELINED_BYTES: Final = 65536
#: bytes of a request body the app left unread that are skipped to keep the connection
MAX_SKIPPED_BODY_BYTES: Final = 65536
#: request targets a connection keeps read, and the longest one kept
MAX_KEPT_TARGETS: Final = 16
MAX_KEPT_TARGET_BYTES: Final = 256
_DISCONNECT: Final = {"type": "http.disconnect"}
_REASONS: Final = {status.value: status.phrase.encode() for status in HTTPStatus}


class _DateCache:
    """The ``Date`` header value, formatted once per second."""

    second = 0
    value = b""

    @classmethod
    def get(cls) -> bytes:
        now = int(time.time())
        if cls.second != now:
            cls.second, cls.value = now, formatdate(now, usegmt=True).encode()
        return cls.value


def _head_size(request: Request) -> int:
    """The size of a request head as sent (request line, headers, blank line)."""
    size = len(request.method) + len(request.target) + 14
    for name, value in request.headers:
        size += len(name) + len(value) + 4
    return size


class _BadTarget(Exception):
    pass


def _split_target(target: bytes) -> tuple[bytes, bytes]:
    """``(raw_path, query_string)`` of a request target in origin, absolute or asterisk form."""
    path, _, query = target.partition(b"?")
    if path.startswith(b"/") or path == b"*":
        return path, query
    if path[:8].lower().startswith((b"http://", b"https://")):
        rest = path.split(b"://", 1)[1]
        slash = rest.find(b"/")
        return (rest[slash:] if slash >= 0 else b"/"), query
    raise _BadTarget


class _Connection:
    """One client connection: its stream, the codec's state and the exchange in progress."""

    def __init__(self, accepted: Accepted, app: ASGIApp, state: dict[str, Any]) -> None:
        self.app = app
        self.state = state
        self.connections = accepted.connections
        self.options: ServerOptions = accepted.connections.options
        self.stream = accepted.stream
        self.client = accepted.client
        self.local = accepted.local
        self.scheme = accepted.scheme
        self.peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
        self.http = ServerConnection(max_head_bytes=self.options.max_header_bytes)
        #: the run's clock (trio.current_time() without its two hops)
        self.clock = trio.lowlevel.current_clock()
        #: cancelled at shutdown (idle or streaming) and when a wait on the client expires
        self.cancel_scope = trio.CancelScope()
        #: when the current wait on the client (handshake, head, body, write, idle) ends it
        self.deadline = NEVER
        #: since when the connection waits for a request with nothing read (NEVER otherwise)
        self.idle_since = NEVER
        self.expired = False
        #: part of a request head has arrived (an expired wait then gets a 408)
        self.in_head = False
        #: the app is running for a request
        self.busy = False
        #: the response in progress streams a GET (SSE): ended at once at shutdown
        self.streaming_get = False
        #: a write is under way (a cancelled one leaves the framing unknown)
        self.writing = False
        self.must_close = False
        self.gone = False
        #: set while a task reads the stream for the client's end (others wait for it)
        self._reading: trio.Event | None = None
        self._reader_scope: trio.CancelScope | None = None
        #: request targets read so far: (raw path, query, path); a client sends a few again and again
        self.targets: dict[bytes, tuple[bytes, bytes, str]] = {}
        self.requests = 0

    # -- the sweeper and the drain (listen.Handle) -------------------------------------------

    def expire(self) -> None:
        self.expired = True
        self.cancel_scope.cancel()

    def on_closing(self) -> None:
        if not self.busy or self.streaming_get:
            self.cancel_scope.cancel()

    # -- the connection's one task ------------------------------------------------------------

    async def run(self) -> None:
        exchange: _Exchange | None = None
        with self.cancel_scope:
            try:
                if isinstance(self.stream, trio.SSLStream):
                    self.deadline = trio.current_time() + self.options.header_timeout_s
                    await self.stream.do_handshake()
                    self.deadline = NEVER
                while not self.connections.closing:
                    request = await self._next_request()
                    if request is None:
                        break
                    try:
                        exchange = _Exchange(self, request)
                    except _BadTarget:
                        log.debug("%s: bad request target %s", self.peer, clean(request.target))
                        await self._refuse(400, "bad request target")
                        break
                    await self._serve(exchange)
                    if not await self._next_cycle(exchange):
                        break
                    exchange = None
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.gone = True
        if self.expired:
            if self.in_head:
                log.debug("%s: request head not complete within %.3g s", self.peer, self.options.header_timeout_s)
                await self._refuse(408, "request head not complete in time")
            else:
                log.debug("%s: the client stalled or stayed idle too long; closing", self.peer)
        elif self.cancel_scope.cancelled_caught and exchange is not None:
            await self._end_stream(exchange)
        await close_gently(self.stream, drain=not self.gone)

    async def _next_request(self) -> Request | None:
        """The next request head, or None when the connection is to close (answered if need be)."""
        conn = self.http
        idle = self.options.keep_alive_s if self.requests else self.options.header_timeout_s
        now = self.clock.current_time()
        self.deadline = now + idle
        if not conn.buffered:
            self.idle_since = now
        received = 0
        while True:
            try:
                event = conn.next_event()
            except BadRequest as exc:
                log.debug("%s: malformed request: %s", self.peer, clean(str(exc)))
                await self._refuse(exc.status, "malformed request")
                return None
            if event is NEED_DATA:
                if not self.in_head and conn.buffered:  # part of a pipelined head
                    self._head_started()
                data = await self._receive()
                if data and not self.in_head:
                    self._head_started()
                received += len(data)
                conn.receive_data(data)
                continue
            self.in_head = False
            self.deadline = self.idle_since = NEVER
            if type(event) is Request:
                # the codec bounds a head that arrives in pieces; one that came whole (or
                # pipelined) is measured here, unless what was read is smaller than the bound
                limit = self.options.max_header_bytes
                if (not received or received > limit) and _head_size(event) > limit:
                    log.debug("%s: request head over %d bytes", self.peer, limit)
                    await self._refuse(431, "request head too large")
                    return None
                self.requests += 1
                return event
            assert event is CLOSED
            return None

    def _head_started(self) -> None:
        self.in_head = True
        self.idle_since = NEVER
        self.deadline = self.clock.current_time() + self.options.header_timeout_s

    async def _receive(self) -> bytes:
        """The next bytes from the client; b"" when it is gone (its end, a broken stream)."""
        try:
            return bytes(await self.stream.receive_some(RECV_BYTES))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.gone = True
            return b""

    async def _refuse(self, status: int, text: str) -> None:
        """An error response of the server's own (no app involved), then the connection closes."""
        self.must_close = True
        conn = self.http
        if self.gone or conn.response_started:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_LINGER_S):
            try:
                if conn.failed or not conn.response_ready:
                    # no request could be read: there is no exchange to answer in
                    await self.stream.send_all(plain_response(status, text))
                    return
                body = f"{text}\n".encode()
                headers = [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", b"%d" % len(body)),
                    (b"connection", b"close"),
                    (b"date", _DateCache.get()),
                ]
                data = conn.response(status, headers, _REASONS.get(status, b"")) + conn.body(body) + conn.end()
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, LocalProtocolError):
                pass

    async def _serve(self, exchange: _Exchange) -> None:
        self.busy = True
        try:
            await self.app(exchange.scope, exchange.receive, exchange.send)
        except Exception:
            log.exception(
                "%s %s: the application raised%s",
                clean(exchange.scope["method"]),
                clean(exchange.scope["raw_path"]),
                "" if not exchange.started else " after its response started; closing the connection",
            )
            if not exchange.started:
                await exchange.send_plain(500, "internal server error")
            else:
                self.must_close = True
        else:
            if not exchange.started and self.gone:  # (an app that stops when its client leaves)
                log.debug("%s: the client left before a response", clean(exchange.scope["raw_path"]))
            elif not exchange.started:
                log.error(
                    "%s %s: the application returned without a response",
                    clean(exchange.scope["method"]),
                    clean(exchange.scope["raw_path"]),
                )
                await exchange.send_plain(500, "internal server error")
            elif not exchange.complete:
                self.must_close = True
        finally:
            self.busy = False
            self.streaming_get = False

    async def _next_cycle(self, exchange: _Exchange) -> bool:
        """Whether the connection can carry another request (skipping a small unread body)."""
        conn = self.http
        if self.must_close or self.gone or not conn.response_complete or not conn.keep_alive:
            return False
        if not conn.request_complete and not conn.failed and not conn.waiting_for_100_continue:
            await exchange.skip_body()
        if conn.request_complete and not self.must_close:
            conn.start_next_cycle()
            return True
        return False

    async def _end_stream(self, exchange: _Exchange) -> None:
        """A streamed response cut short at shutdown: its last chunk, when the framing allows."""
        if not exchange.started or exchange.complete or self.writing or self.gone:
            return
        try:
            data = exchange.take_head() + self.http.end()
        except LocalProtocolError:
            return  # Content-Length framing: the response cannot end early; closing says so
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_LINGER_S):
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    # -- the stream, for the exchange --------------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Writes ``data``; a client that is gone is marked gone. Bounded by ``send_timeout_s``:
        past it the connection (and the app serving it) is cancelled. A write that does not
        finish leaves the framing unknown: the connection is then closed, never reused."""
        if self.gone:
            return
        stream = self.stream
        if type(stream) is TcpStream:
            # what the socket takes at once needs no deadline, and no pass of the scheduler: the
            # connection's next receive yields (a response nearly always goes whole)
            try:
                sent = stream.send_nowait(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.mark_gone()
                return
            if sent == len(data):
                return
            data = data[sent:]
        self.writing = True
        self.deadline = trio.current_time() + self.options.send_timeout_s
        done = False
        try:
            await stream.send_all(data)
            done = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.mark_gone()
        finally:
            self.writing = False
            self.deadline = NEVER
            if not done:
                self.must_close = True

    async def read_body_bytes(self, deadline: float) -> bool:
        """Reads more of a request body into the codec; False when the client is gone. The whole body
        is due by ``deadline``: past it the connection (and the app serving it) is cancelled."""
        self.deadline = deadline
        try:
            data = await self._receive()
        finally:
            self.deadline = NEVER
        if data:
            self.http.receive_data(data)
            return True
        self.mark_gone()
        return False

    def mark_gone(self) -> None:
        self.gone = True
        self.must_close = True
        if self._reader_scope is not None:
            self._reader_scope.cancel()

    async def wait_gone(self) -> None:
        """Reads the stream until the client closes it; bytes read go to the codec for the next
        request. One task reads at a time; others wait for it (and take over if it stops)."""
        while not self.gone:
            if self._reading is not None:
                await self._reading.wait()
                continue
            self._reading = event = trio.Event()
            try:
                await self._read_until_gone()
            finally:
                self._reading = self._reader_scope = None
                event.set()

    async def _read_until_gone(self) -> None:
        buffered = 0
        with trio.CancelScope() as self._reader_scope:
            while buffered < MAX_PIPELINED_BYTES:
                data = await self._receive()
                if not data:
                    self.mark_gone()
                    return
                buffered += len(data)
                self.http.receive_data(data)
            await trio.sleep_forever()  # the client keeps sending: stop reading, wait for the end


class _Exchange:
    """One request and its response: the ASGI scope, ``receive`` and ``send``."""

    __slots__ = ("body_deadline", "body_done", "complete", "conn", "head", "is_head", "scope", "started")

    def __init__(self, conn: _Connection, request: Request) -> None:
        self.conn = conn
        self.started = False
        self.complete = False
        self.body_done = False
        self.body_deadline = conn.clock.current_time() + conn.options.body_timeout_s
        #: the response head's bytes, held for the first write of its body
        self.head: bytes | None = None
        headers = request.headers
        has_length = has_coding = False
        for name, _ in headers:
            if name == b"content-length":
                has_length = True
            elif name == b"transfer-encoding":
                has_coding = True
        if has_length and has_coding:
            # RFC 9112 §6.1: "a server MAY reject a request that contains both Content-Length and
            # Transfer-Encoding or process such a request in accordance with the Transfer-Encoding
            # alone. Regardless, the server MUST close the connection after responding"
            log.debug("%s: a request with both Content-Length and Transfer-Encoding; closing after it", conn.peer)
            conn.must_close = True
        method = request.method.decode("ascii")
        self.is_head = method == "HEAD"
        root = conn.options.root_path
        target = conn.targets.get(request.target)
        if target is None:
            raw_path, query = _split_target(request.target)
            target = (raw_path, query, root + unquote(raw_path.decode("ascii")))
            if len(request.target) <= MAX_KEPT_TARGET_BYTES:
                if len(conn.targets) >= MAX_KEPT_TARGETS:
                    conn.targets.clear()
                conn.targets[request.target] = target
        raw_path, query, path = target
        self.scope: dict[str, Any] = {
            "type": "http",
            "asgi": ASGI_VERSION,
            "http_version": request.http_version.decode("ascii"),
            "method": method,
            "scheme": conn.scheme,
            "path": path,
            "raw_path": raw_path,
            "query_string": query,
            "root_path": root,
            "headers": headers,
            "client": conn.client,
            "server": conn.local,
            "state": dict(conn.state),
        }

    # -- receive ---------------------------------------------------------------------------

    async def receive(self) -> Message:
        conn = self.conn
        if self.body_done:
            if not self.complete and not conn.gone:
                await conn.wait_gone()
            return _DISCONNECT
        http = conn.http
        if http.waiting_for_100_continue:
            await conn.write(http.informational(100, [], b"Continue"))
        chunks: list[bytes] = []
        while True:
            try:
                event = http.next_event()
            except BadRequest as exc:
                log.debug("%s: malformed request body: %s", conn.peer, clean(str(exc)))
                conn.mark_gone()
                event = None
            if type(event) is bytes:
                chunks.append(event)
            elif event is END:
                self.body_done = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            elif event is NEED_DATA:
                if chunks:
                    return {"type": "http.request", "body": b"".join(chunks), "more_body": True}
                if not await conn.read_body_bytes(self.body_deadline):
                    self.body_done = True
                    return _DISCONNECT
            else:  # the body cannot be read: the client is gone, or sent garbage
                self.body_done = True
                conn.mark_gone()
                return _DISCONNECT

    async def skip_body(self) -> None:
        """Discards what is left of a body the app did not read, if it is small and prompt."""
        skipped = 0
        with trio.move_on_after(CLOSE_LINGER_S):
            while skipped <= MAX_SKIPPED_BODY_BYTES and not self.body_done:
                message = await self.receive()
                skipped += len(message.get("body", b""))
            return
        self.conn.must_close = True

    # -- send ------------------------------------------------------------------------------

    async def send(self, message: Message) -> None:
        kind = message["type"]
        conn = self.conn
        if kind == "http.response.start":
            if self._start(message) and not conn.gone:
                # a body of unknown length (a stream): the client may wait for the head alone
                await conn.write(self.take_head())
        elif kind == "http.response.body":
            if not self.started or self.complete:
                where = "before http.response.start" if not self.started else "after the end"
                raise RuntimeError(f"ASGI: http.response.body {where}")
            more = bool(message.get("more_body", False))
            if conn.gone:
                self.complete = not more
                return
            http = conn.http
            data = self.take_head()
            body = message.get("body", b"")
            if body and not self.is_head:
                data += http.body(body)
            if not more:
                data += http.end()
            if data:
                await conn.write(data)
            # complete only once the last write has returned: a watcher of the client's end
            # must not be told "disconnect" while the response is still being written
            if not more:
                self.complete = True
        else:
            raise RuntimeError(f"ASGI: unexpected message type {kind!r} on an http scope")

    def _start(self, message: Message) -> bool:
        """Takes the response head; whether it streams (a body of unknown length, or an event
        stream): then the head is written at once, else it waits for the body, to leave in the
        same write."""
        if self.started:
            raise RuntimeError("ASGI: http.response.start sent twice")
        headers = list(message.get("headers", ()))
        streaming = has_date = has_length = False
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"content-type" and value.startswith(b"text/event-stream"):
                streaming = True
            elif lowered == b"content-length":
                has_length = True
            elif lowered == b"date":
                has_date = True
        if not has_date:
            headers.append((b"date", _DateCache.get()))
        conn = self.conn
        if conn.connections.closing or conn.must_close:
            headers.append((b"connection", b"close"))
        status = int(message["status"])
        self.head = conn.http.response(status, headers, _REASONS.get(status, b""))
        self.started = True
        conn.streaming_get = streaming and self.scope["method"] == "GET"
        if conn.connections.closing and conn.streaming_get:
            conn.cancel_scope.cancel()
        return streaming or not has_length

    def take_head(self) -> bytes:
        """The response head's bytes, once (b"" after)."""
        if self.head is None:
            return b""
        head, self.head = self.head, None
        return head

    async def send_plain(self, status: int, text: str) -> None:
        """An error response of the server's own, when the app gave none."""
        body = f"{text}\n".encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body))]
        try:
            await self.send({"type": "http.response.start", "status": status, "headers": headers})
            await self.send({"type": "http.response.body", "body": body})
        except LocalProtocolError:  # the app's headers were invalid: the codec refused them
            self.conn.must_close = True


def connection_handler(app: ASGIApp) -> Callable[[dict[str, Any]], ConnectionHandler]:
    """The built-in server's connection handler for :func:`~.listen.run_server`."""

    def make(state: dict[str, Any]) -> ConnectionHandler:
        async def handle(accepted: Accepted) -> None:
            connection = _Connection(accepted, app, state)
            registry = accepted.connections
            registry.handles.add(connection)
            try:
                await connection.run()
            finally:
                registry.handles.discard(connection)

        return handle

    return make


async def serve_http1(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    options: ServerOptions | None = None,
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` (any ASGI 3 application) over HTTP/1.1 on ``host:port`` (HTTPS with a
    certificate in ``options``).

    ``task_status.started`` receives the bound URLs (``http://127.0.0.1:54321``) once the app's
    lifespan startup is complete and the sockets listen.

    Args:
        host: an address or name to bind (``::1`` and ``0.0.0.0`` work; brackets are removed).
        port: 0 picks a free port.
        shutdown_trigger: when it returns, the server shuts down gracefully and this returns.

    Cancellation: cancelling it closes the listening sockets and every connection at once.

    Raises:
        OSError: the address cannot be bound.
        ValueError: the certificate or key cannot be loaded.
        StartupFailed: the app's lifespan startup failed or took too long.
    """
    options = options or ServerOptions()
    tls = tls_context(options)
    served = forwarded(app, options.forwarded_allow_ips)
    await run_server(
        served,
        connection_handler(served),
        host=host,
        port=port,
        options=options,
        tls=tls,
        shutdown_trigger=shutdown_trigger,
        task_status=task_status,
    )
