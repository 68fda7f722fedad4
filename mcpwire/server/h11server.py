"""An ASGI 3 HTTP/1.1 server on trio and h11: what ``mcpwire serve`` and :func:`serve_http` run.

Theory of operation: :func:`serve_h11` starts the app's lifespan (its startup must complete
before the first connection is accepted; an app without lifespan support is served anyway),
binds with :func:`trio.open_tcp_listeners` (port 0 and IPv6 work), reports the bound URLs through
``task_status`` and accepts with :func:`trio.serve_listeners` into a nursery of its own.

Each connection is **one task** and one :class:`h11.Connection`; nothing else is spawned per
request. The task reads a request head (bounded in size by h11's ``max_incomplete_event_size``
and in time by ``header_timeout_s`` from its first byte, so a slowloris client is answered 408),
then awaits the app directly with a ``receive``/``send`` pair bound to that exchange. A simple
request that arrives whole in one read (HTTP/1.1 with a ``Content-Length`` body, the shape of
nearly every MCP call) is read by :func:`~mcpwire.protocol.http1.read_simple_request`, which
accepts only what h11 reads the same way; h11 is given its bytes later only if it must write the
response (a stream, say), so a small fixed-length answer costs no h11 work at all.

- ``receive`` parses the request body on demand (Content-Length or chunked; an
  ``Expect: 100-continue`` client gets its ``100 Continue`` on the first read, so a body the
  app refuses is never sent). Once the body is consumed, ``receive`` reads the socket itself
  until the client goes away and then returns ``http.disconnect``: the app learns of a
  vanished client while it streams, without a watcher task per request. Bytes read meanwhile
  (a pipelined request) stay in h11's buffer, bounded, and are served in order afterwards.
- ``send`` holds the response head until the first body message so head and body leave in one
  write; h11 picks the framing (Content-Length as given, else chunked). A HEAD request gets the
  head only. Every write is bounded by ``send_timeout_s``; a client that stopped reading counts
  as gone, and sends after the client is gone are dropped, as uvicorn and hypercorn do.

When the app raises before its response starts, the client gets a 500; after, the connection is
closed (the response cannot be finished honestly). After a complete exchange the connection is
reused when both sides allow it (keep-alive, ``Connection: close``, HTTP/1.0, an unread body
that is small enough to skip). A malformed request line or header gets a 400 (431 for a head
over the limit) and the connection closes; nothing a client sent reaches a log line unescaped.
An idle connection is closed after ``keep_alive_s``; above ``max_connections`` a new connection
gets a 503 at once.

Graceful shutdown (when ``shutdown_trigger`` returns): stop accepting, close idle connections
and end streamed GET responses (SSE) at once, with a clean last chunk, let other requests in
flight finish within ``drain_timeout_s`` (their responses say ``Connection: close``), cancel
what is left, then run the lifespan shutdown (bounded). Cancelling :func:`serve_h11` instead
closes everything at once.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from email.utils import formatdate
from functools import partial
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import unquote

import h11
import trio

from ..protocol.http1 import FIELD_VALUE, TOKEN, SimpleRequest, read_simple_request
from ..redaction import clean_terminal, shorten
from .asgi import Receive, Scope, Send

__all__ = ["ServerOptions", "StartupFailed", "serve_h11"]

log = logging.getLogger("mcpwire.server.http")

Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: bytes asked of the socket per read
RECV_BYTES: Final = 65536
#: bytes of pipelined requests buffered while the app streams; beyond this, reading stops
MAX_PIPELINED_BYTES: Final = 65536
#: bytes of a request body the app left unread that are skipped to keep the connection
MAX_SKIPPED_BODY_BYTES: Final = 65536
#: seconds spent skipping an unread body, writing an error response or lingering at close
CLOSE_LINGER_S: Final = 1.0
#: how often the sweeper looks for connections past their deadline (the timeouts' resolution)
SWEEP_INTERVAL_S: Final = 0.5
_NEVER: Final = float("inf")
_H11Request = h11.Request  # (inside _Connection, ``h11`` names its property)
_ASGI: Final = {"version": "3.0", "spec_version": "2.3"}
_DISCONNECT: Final = {"type": "http.disconnect"}
_REASONS: Final = {status.value: status.phrase.encode() for status in HTTPStatus}
#: response headers found valid (:func:`_valid_field`), at most MAX_VALID_FIELDS of them
_VALID_FIELDS: Final[set[tuple[bytes, bytes]]] = set()
MAX_VALID_FIELDS: Final = 1024
#: response headers that change the framing or the connection: such a response goes through h11
_FRAMING_HEADERS: Final = frozenset({b"connection", b"transfer-encoding", b"host"})


class StartupFailed(RuntimeError):
    """The app's lifespan startup failed (``lifespan.startup.failed``) or did not finish in time."""


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Bounds of the built-in server; every wait it makes on a client has one.

    Attributes:
        keep_alive_s: an idle keep-alive connection is closed after this long.
        header_timeout_s: a request head must arrive within this long of its first byte (and a
            new connection's first byte within this long of the accept).
        body_timeout_s: the longest wait for the next bytes of a request body.
        send_timeout_s: the longest a write may block on a client that does not read.
        max_header_bytes: the largest request head (request line and headers).
        max_connections: connections served at once; one more gets a 503.
        drain_timeout_s: at shutdown, how long requests in flight may take to finish.
        lifespan_timeout_s: the longest the app's lifespan startup or shutdown may take.
        root_path: the ASGI ``root_path`` (the prefix a proxy mounts the app at).
    """

    keep_alive_s: float = 30.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    send_timeout_s: float = 30.0
    max_header_bytes: int = 65536
    max_connections: int = 1000
    drain_timeout_s: float = 10.0
    lifespan_timeout_s: float = 60.0
    root_path: str = ""


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


def _clean(value: bytes | str, limit: int = 200) -> str:
    """Client bytes fit for a log line: shortened, control characters shown as escapes."""
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    return clean_terminal(shorten(text, limit), newlines=False)


def _address(sockaddr: Any) -> tuple[str, int] | None:
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        return (str(sockaddr[0]), int(sockaddr[1]))
    return None


def _url(sockaddr: Any) -> str:
    host, port = sockaddr[0], sockaddr[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _plain_response(status: int, text: str) -> bytes:
    """A complete error response written without h11 (there may be no valid request to answer)."""
    body = f"{text}\n".encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _response_head(status: int, headers: list[tuple[bytes, bytes]]) -> bytes:
    """A response head as h11 writes it (the headers already checked by ``_writable_by_hand``)."""
    parts = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS.get(status, b""))]
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


def _valid_field(name: object, value: object) -> bool:
    """Whether h11 would write this response header as it is (a token name, a valid value).
    The same few headers come back on every response: those found valid are remembered."""
    if type(name) is not bytes or type(value) is not bytes:
        return False
    if (name, value) in _VALID_FIELDS:
        return True
    if TOKEN.fullmatch(name) is None or FIELD_VALUE.fullmatch(value) is None:
        return False
    if len(_VALID_FIELDS) >= MAX_VALID_FIELDS:
        _VALID_FIELDS.clear()
    _VALID_FIELDS.add((name, value))
    return True


def _head_size(request: h11.Request) -> int:
    """The size of a request head as sent (request line, headers, blank line)."""
    size = len(request.method) + len(request.target) + 14
    for name, value in request.headers:
        size += len(name) + len(value) + 4
    return size


async def _close_gently(stream: trio.SocketStream, *, drain: bool = True) -> None:
    """Half-closes, then reads briefly until the client's end, so bytes it sent that were never
    read do not turn into a reset that destroys the response still in flight. Shielded, bounded."""
    with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_LINGER_S):
        try:
            await stream.send_eof()
            while drain and await stream.receive_some(RECV_BYTES):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    await trio.aclose_forcefully(stream)


class _BadTarget(Exception):
    pass


def _split_target(target: bytes) -> tuple[bytes, bytes]:
    """``(raw_path, query_string)`` of a request target in origin, absolute or asterisk form."""
    path, _, query = target.partition(b"?")
    if path.startswith(b"/"):
        return path, query
    if path == b"*":
        return path, query
    lowered = path[:8].lower()
    if lowered.startswith((b"http://", b"https://")):
        rest = path.split(b"://", 1)[1]
        slash = rest.find(b"/")
        return (rest[slash:] if slash >= 0 else b"/"), query
    raise _BadTarget


class _Lifespan:
    """The ASGI lifespan protocol, run as one task for the whole life of the server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self.started = trio.Event()
        self.stopped = trio.Event()
        self._stop = trio.Event()
        self._asked_startup = False
        self.failure: str | None = None
        self.supported = True

    async def run(self) -> None:
        scope = {"type": "lifespan", "asgi": _ASGI, "state": self.state}
        try:
            await self.app(scope, self._receive, self._send)
        except Exception:
            if self.started.is_set():
                log.exception("the application's lifespan raised")
            else:
                # ASGI lifespan: an app that raises instead of starting up does not support it
                log.debug("the application does not support the lifespan protocol", exc_info=True)
                self.supported = False
        finally:
            if not self.started.is_set():  # returned without starting up: no lifespan support
                self.supported = False
                self.started.set()
            self.stopped.set()

    async def _receive(self) -> Message:
        if not self._asked_startup:
            self._asked_startup = True
            return {"type": "lifespan.startup"}
        await self._stop.wait()
        return {"type": "lifespan.shutdown"}

    async def _send(self, message: Message) -> None:
        kind = message.get("type")
        if kind == "lifespan.startup.complete":
            self.started.set()
        elif kind == "lifespan.startup.failed":
            self.failure = str(message.get("message", "")) or "no reason given"
            self.started.set()
        elif kind == "lifespan.shutdown.complete":
            self.stopped.set()
        elif kind == "lifespan.shutdown.failed":
            if trio.current_effective_deadline() == -math.inf:  # this task is cancelled: a forced stop
                log.info("the application's lifespan shutdown was cut short by a forced stop")
            else:
                log.error("the application's lifespan shutdown failed: %s", _clean(str(message.get("message", ""))))
            self.stopped.set()

    async def shutdown(self, timeout: float) -> None:
        self._stop.set()
        with trio.move_on_after(timeout) as waited:
            await self.stopped.wait()
        if waited.cancelled_caught:
            log.warning("the application's lifespan shutdown took over %.3g s; cancelled", timeout)


class _Server:
    def __init__(self, app: ASGIApp, options: ServerOptions, state: dict[str, Any]) -> None:
        self.app = app
        self.options = options
        self.state = state
        self.connections: set[_Connection] = set()
        self.closing = False
        self.all_closed = trio.Event()

    async def handle(self, stream: trio.SocketStream) -> None:
        """One accepted connection, for its whole life (:func:`trio.serve_listeners` closes it)."""
        if self.closing or len(self.connections) >= self.options.max_connections:
            with trio.move_on_after(CLOSE_LINGER_S):
                try:
                    await stream.send_all(_plain_response(503, "the server is busy or shutting down"))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
            await _close_gently(stream)
            return
        connection = _Connection(self, stream)
        self.connections.add(connection)
        try:
            await connection.run()
        finally:
            self.connections.discard(connection)
            if self.closing and not self.connections:
                self.all_closed.set()

    async def sweep(self) -> None:
        """Ends every connection whose wait on its client is past its deadline. One task checking
        a float per connection twice a second is much cheaper than a cancel scope per read."""
        while True:
            await trio.sleep(SWEEP_INTERVAL_S)
            now = trio.current_time()
            for connection in list(self.connections):
                if connection.deadline <= now:
                    connection.expire()

    def begin_closing(self) -> None:
        self.closing = True
        if not self.connections:
            self.all_closed.set()
        for connection in list(self.connections):
            connection.on_closing()


class _Connection:
    """One client connection: h11's state, the socket and the exchange in progress."""

    def __init__(self, server: _Server, stream: trio.SocketStream) -> None:
        self.server = server
        self.stream = stream
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=server.options.max_header_bytes)
        #: the bytes of a request read without h11 (:func:`read_simple_request`) and of any read
        #: after it, which h11 has not seen; it is given them only when it must write a response
        self._unseen: bytes | None = None
        #: how many of those bytes the request took
        self._unseen_request = 0
        #: cancelled at shutdown (idle or streaming) and when a wait on the client expires
        self.cancel_scope = trio.CancelScope()
        #: when the current wait on the client (head, body, write, idle) ends the connection
        self.deadline = _NEVER
        self.expired = False
        #: part of a request head has arrived (an expired wait then gets a 408)
        self.in_head = False
        sock = stream.socket
        self.client = _address(sock.getpeername())
        self.local = _address(sock.getsockname())
        self.peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
        #: the app is running for a request
        self.busy = False
        #: the response in progress streams a GET (SSE): ended at once at shutdown
        self.streaming_get = False
        #: a write is under way (a cancelled write leaves the framing unknown)
        self.writing = False
        self.must_close = False
        self.gone = False
        self._gone_event: trio.Event | None = None
        self._watch_scope: trio.CancelScope | None = None
        self.requests = 0

    @property
    def h11(self) -> h11.Connection:
        """The connection's h11 state, caught up with a request it has not seen yet."""
        if self._unseen is not None:
            self._catch_up()
        return self._h11

    def _catch_up(self) -> None:
        """Gives h11 the request read without it: h11 reads it as the shortcut did (the shortcut
        accepts only such requests), and is then ready to write the response."""
        data, self._unseen = self._unseen, None
        assert data is not None
        conn = self._h11
        conn.receive_data(data)
        event = conn.next_event()
        while type(event) is h11.Request or type(event) is h11.Data:
            event = conn.next_event()
        if type(event) is not h11.EndOfMessage:  # pragma: no cover - the shortcut reads as h11 does
            raise RuntimeError(f"h11 did not read a simple request as one: {event!r}")

    def keep(self, data: bytes) -> None:
        """Bytes read after the request (a pipelined one), for the next cycle."""
        if self._unseen is not None:
            self._unseen += data
        else:
            self._h11.receive_data(data)

    def expire(self) -> None:
        self.expired = True
        self.cancel_scope.cancel()

    def on_closing(self) -> None:
        if not self.busy or self.streaming_get:
            self.cancel_scope.cancel()

    async def run(self) -> None:
        exchange: _Exchange | None = None
        with self.cancel_scope:
            try:
                while not self.server.closing:
                    request = await self._next_request()
                    if request is None:
                        break
                    try:
                        exchange = _Exchange(self, request)
                    except _BadTarget:
                        log.debug("%s: bad request target %s", self.peer, _clean(request.target))
                        await self._refuse(400, "bad request target")
                        break
                    await self._serve(exchange)
                    if not await self._next_cycle(exchange):
                        break
                    exchange = None
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
        if self.expired:
            if self.in_head:
                log.debug(
                    "%s: request head not complete within %.3g s", self.peer, self.server.options.header_timeout_s
                )
                await self._refuse(408, "request head not complete in time")
            else:
                log.debug("%s: the client stalled or stayed idle too long; closing", self.peer)
        elif self.cancel_scope.cancelled_caught and exchange is not None:
            await self._end_stream(exchange)
        await self._close()

    # -- the request head ----------------------------------------------------------------

    async def _next_request(self) -> _H11Request | SimpleRequest | None:
        """The next request head (a simple request whole), or None when the connection is to close
        (answered if need be)."""
        conn, options = self.h11, self.server.options
        idle = options.keep_alive_s if self.requests else options.header_timeout_s
        self.deadline = trio.current_time() + idle
        received = 0
        buffered, closed = conn.trailing_data
        # nothing read yet on a connection waiting for a request: h11 can only say NEED_DATA
        waiting = conn.their_state is h11.IDLE and not buffered and not closed
        first = waiting  # the next read starts a request: it may be a simple one, read whole
        while True:
            try:
                event = h11.NEED_DATA if waiting else conn.next_event()
                waiting = False
            except h11.RemoteProtocolError as exc:
                log.debug("%s: malformed request: %s", self.peer, _clean(str(exc)))
                await self._refuse(exc.error_status_hint, "malformed request")
                return None
            if event is h11.NEED_DATA:
                if not self.in_head and conn.trailing_data[0]:  # part of a pipelined head
                    self._head_started()
                data = await self.stream.receive_some(RECV_BYTES)
                if first:
                    first = False
                    simple = read_simple_request(data, options.max_header_bytes) if data else None
                    if simple is not None:
                        self._unseen, self._unseen_request = data, simple.size
                        self.deadline = _NEVER
                        self.requests += 1
                        return simple
                if data and not self.in_head:
                    self._head_started()
                received += len(data)
                conn.receive_data(data)
                continue
            self.in_head = False
            self.deadline = _NEVER
            if type(event) is h11.Request:
                # h11 bounds a head that arrives in pieces; one that came whole (or pipelined) is
                # measured here, unless what was read is smaller than the bound anyway
                if (not received or received > options.max_header_bytes) and _head_size(
                    event
                ) > options.max_header_bytes:
                    log.debug("%s: request head over %d bytes", self.peer, options.max_header_bytes)
                    await self._refuse(431, "request head too large")
                    return None
                self.requests += 1
                return event
            return None  # ConnectionClosed (or PAUSED after an unreadable cycle)

    def _head_started(self) -> None:
        self.in_head = True
        self.deadline = trio.current_time() + self.server.options.header_timeout_s

    async def _refuse(self, status: int, text: str) -> None:
        self.must_close = True
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with trio.move_on_after(CLOSE_LINGER_S):
                try:
                    await self.stream.send_all(_plain_response(status, text))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass

    # -- one exchange ----------------------------------------------------------------------

    async def _serve(self, exchange: _Exchange) -> None:
        self.busy = True
        try:
            await self.server.app(exchange.scope, exchange.receive, exchange.send)
        except Exception:
            log.exception(
                "%s %s: the application raised%s",
                _clean(exchange.scope["method"]),
                _clean(exchange.scope["raw_path"]),
                "" if not exchange.started else " after its response started; closing the connection",
            )
            if not exchange.started:
                await exchange.send_plain(500, "internal server error")
            else:
                self.must_close = True
        else:
            if not exchange.started:
                log.error(
                    "%s %s: the application returned without a response",
                    _clean(exchange.scope["method"]),
                    _clean(exchange.scope["raw_path"]),
                )
                await exchange.send_plain(500, "internal server error")
            elif not exchange.complete:
                self.must_close = True
        finally:
            self.busy = False
            self.streaming_get = False

    async def _next_cycle(self, exchange: _Exchange) -> bool:
        """Whether the connection can carry another request (skipping a small unread body)."""
        if exchange.bypassed and not (self.must_close or self.gone):
            if self._unseen is not None:
                # h11 saw neither the request nor the response: it goes on from the bytes after them
                rest, self._unseen = self._unseen[self._unseen_request :], None
                if rest:
                    self._h11.receive_data(rest)
                return True
            # h11 read the whole request but did not see the response: a new h11 connection
            # goes on from the bytes read after the request
            data, closed = self._h11.trailing_data
            self._h11 = fresh = h11.Connection(
                h11.SERVER, max_incomplete_event_size=self.server.options.max_header_bytes
            )
            if data:
                fresh.receive_data(data)
            if closed:
                fresh.receive_data(b"")
            return True
        if self.must_close or self.gone:
            return False
        conn = self.h11
        if conn.our_state is not h11.DONE:
            return False
        if conn.their_state is h11.SEND_BODY and not conn.they_are_waiting_for_100_continue:
            await exchange.skip_body()
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE and not self.must_close:
            conn.start_next_cycle()
            return True
        return False

    async def _end_stream(self, exchange: _Exchange) -> None:
        """A streamed response cut short at shutdown: its last chunk, when the framing allows."""
        if not exchange.started or exchange.complete or self.writing or self.gone:
            return
        try:
            data = exchange.flush_head() + self.h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError:
            return  # Content-Length framing: the response cannot end early; closing says so
        with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_LINGER_S):
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    async def _close(self) -> None:
        await _close_gently(self.stream, drain=not self.gone)

    # -- socket helpers for the exchange -----------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Writes ``data``; a client that is gone is marked gone. Bounded by ``send_timeout_s``:
        past it the connection (and the app serving it) is cancelled."""
        if self.gone:
            return
        self.writing = True
        self.deadline = trio.current_time() + self.server.options.send_timeout_s
        try:
            sent = await self._send_at_once(data)
            if sent < len(data):
                await self.stream.send_all(memoryview(data)[sent:])
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.mark_gone()
        finally:
            self.writing = False
            self.deadline = _NEVER

    async def _send_at_once(self, data: bytes) -> int:
        """What the socket takes of ``data`` without waiting. A cancellation point, but not a
        yield to the scheduler when everything went out (a response that fits the socket's
        buffer costs its task no extra step); ``send_all`` waits for the rest.

        Raises:
            trio.BrokenResourceError, trio.ClosedResourceError: as ``send_all`` does.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        sock = self.stream.socket
        if sock.did_shutdown_SHUT_WR:
            raise trio.ClosedResourceError("can't send data after sending EOF")
        fd = sock.fileno()
        if fd < 0:
            raise trio.ClosedResourceError("socket was already closed")
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc

    def mark_gone(self) -> None:
        self.gone = True
        self.must_close = True
        if self._gone_event is not None:
            self._gone_event.set()
        if self._watch_scope is not None:
            self._watch_scope.cancel()

    async def wait_gone(self) -> None:
        """Reads the socket until the client closes it; bytes read are kept for the next request.

        One task reads at a time; others wait for it (and take over if it is cancelled).
        """
        while not self.gone:
            if self._gone_event is not None:
                await self._gone_event.wait()
                continue
            self._gone_event = event = trio.Event()
            try:
                await self._read_until_gone()
            finally:
                self._gone_event = None
                event.set()

    async def _read_until_gone(self) -> None:
        buffered = 0
        with trio.CancelScope() as self._watch_scope:
            while buffered < MAX_PIPELINED_BYTES:
                data = await self._receive_when_readable()
                if not data:
                    self.mark_gone()
                    return
                buffered += len(data)
                self.keep(data)
            await trio.sleep_forever()  # the client keeps sending: stop reading, wait for the end

    async def _receive_when_readable(self) -> bytes:
        """The next bytes from the client once the socket is readable; b"" when the client is
        gone (its end, a broken or closed socket). For a watch that is usually cancelled (the
        response is written before the client does anything): it waits first and reads after, so
        that a cancellation unwinds from one plain wait, not through the socket's wrappers."""
        sock = self.stream.socket
        while True:
            fd = sock.fileno()
            if fd < 0:
                return b""
            try:
                await trio.lowlevel.wait_readable(fd)
            except trio.ClosedResourceError:
                return b""
            fd = sock.fileno()
            if fd < 0:
                return b""
            try:
                return os.read(fd, RECV_BYTES)
            except BlockingIOError:
                continue  # readable, then not (another reader took it): wait again
            except OSError:
                return b""

    async def read_body_bytes(self) -> bool:
        """Reads more of a request body into h11; False when the client is gone. Bounded by
        ``body_timeout_s``: past it the connection (and the app serving it) is cancelled."""
        self.deadline = trio.current_time() + self.server.options.body_timeout_s
        try:
            data = await self.stream.receive_some(RECV_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        finally:
            self.deadline = _NEVER
        if data:
            self.h11.receive_data(data)
            return True
        self.mark_gone()
        return False


class _Exchange:
    """One request and its response: the ASGI scope, ``receive`` and ``send``."""

    __slots__ = (
        "body_done",
        "bypassed",
        "complete",
        "conn",
        "direct",
        "head",
        "is_head",
        "scope",
        "simple",
        "simple_body",
        "started",
    )

    def __init__(self, conn: _Connection, request: h11.Request | SimpleRequest) -> None:
        self.conn = conn
        self.started = False
        self.complete = False
        self.body_done = False
        self.head: h11.Response | None = None
        #: a head that may be written by hand with its body (status, headers, Content-Length)
        self.direct: tuple[int, list[tuple[bytes, bytes]], bytes] | None = None
        #: the response was written by hand: h11 did not see it (the next request needs a new one)
        self.bypassed = False
        #: read whole without h11: the body is at hand, and h11 catches up only if it must
        self.simple = isinstance(request, SimpleRequest)
        self.simple_body: bytes | None = None
        if isinstance(request, SimpleRequest):
            headers, self.simple_body = request.headers, request.body
        else:
            headers = [(name.lower(), value) for name, value in request.headers.raw_items()]
        method = request.method.decode("ascii")
        self.is_head = method == "HEAD"
        raw_path, query = _split_target(request.target)
        root = conn.server.options.root_path
        self.scope: Scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": request.http_version.decode("ascii"),
            "method": method,
            "scheme": "http",
            "path": root + unquote(raw_path.decode("ascii")),
            "raw_path": raw_path,
            "query_string": query,
            "root_path": root,
            "headers": headers,
            "client": conn.client,
            "server": conn.local,
            "state": dict(conn.server.state),
        }

    # -- receive ---------------------------------------------------------------------------

    async def receive(self) -> Message:
        if self.body_done:
            if not self.complete and not self.conn.gone:
                await self.conn.wait_gone()
            return _DISCONNECT
        if self.simple_body is not None:
            body, self.simple_body = self.simple_body, None
            self.body_done = True
            return {"type": "http.request", "body": body, "more_body": False}
        conn = self.conn.h11
        if conn.they_are_waiting_for_100_continue:
            await self.conn.write(conn.send(h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")))
        chunks: list[bytes] = []
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                log.debug("%s: malformed request body: %s", self.conn.peer, _clean(str(exc)))
                self.conn.mark_gone()
                event = None
            if type(event) is h11.Data:
                chunks.append(event.data)
            elif type(event) is h11.EndOfMessage:
                self.body_done = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            elif event is h11.NEED_DATA:
                if chunks:
                    return {"type": "http.request", "body": b"".join(chunks), "more_body": True}
                if not await self.conn.read_body_bytes():
                    self.body_done = True
                    return _DISCONNECT
            else:  # the body cannot be read: the client is gone, or sent garbage
                self.body_done = True
                self.conn.mark_gone()
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
        if kind == "http.response.start":
            if not self._start(message) and not self.conn.gone:
                # a body of unknown length (a stream): the client may wait for the head alone
                await self.conn.write(self.flush_head())
        elif kind == "http.response.body":
            if not self.started or self.complete:
                where = "before http.response.start" if not self.started else "after the end"
                raise RuntimeError(f"ASGI: http.response.body {where}")
            more = bool(message.get("more_body", False))
            body = message.get("body", b"")
            if self.conn.gone:
                self.complete = not more
                return
            if self.direct is not None and not more and (self.simple or self.conn.h11.their_state is h11.DONE):
                status, headers, length = self.direct
                if length == b"%d" % len(body):
                    self.direct = None
                    self.complete = self.bypassed = True
                    await self.conn.write(_response_head(status, headers) + body)
                    return
            conn = self.conn.h11
            data = self.flush_head()
            if body and not self.is_head:
                data += conn.send(h11.Data(data=body))
            if not more:
                data += conn.send(h11.EndOfMessage())
                self.complete = True
            if data:
                await self.conn.write(data)
        else:
            raise RuntimeError(f"ASGI: unexpected message type {kind!r} on an http scope")

    def _start(self, message: Message) -> bool:
        """Takes the response head; whether it declares its length (then it waits for the body,
        to leave in the same write)."""
        if self.started:
            raise RuntimeError("ASGI: http.response.start sent twice")
        headers = list(message.get("headers", ()))
        streaming = has_date = has_length = False
        length: bytes | None = None
        plain = True  # no header that changes the framing or the connection
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"content-type" and value.startswith(b"text/event-stream"):
                streaming = True
            elif lowered == b"content-length":
                plain = plain and not has_length
                has_length = True
                length = value
            elif lowered == b"date":
                has_date = True
            elif lowered in _FRAMING_HEADERS:
                plain = False
        if not has_date:
            headers.append((b"date", _DateCache.get()))
        if self.conn.server.closing:
            headers.append((b"connection", b"close"))
            plain = False
        status = int(message["status"])
        if plain and length is not None and not streaming and self._writable_by_hand(status, headers, length):
            self.direct = (status, headers, length)
        else:
            self.head = h11.Response(status_code=status, headers=headers, reason=_REASONS.get(status, b""))
        self.started = True
        self.conn.streaming_get = streaming and self.scope["method"] == "GET"
        if self.conn.server.closing and self.conn.streaming_get:
            self.conn.cancel_scope.cancel()
        return has_length and not streaming

    def _writable_by_hand(self, status: int, headers: list[tuple[bytes, bytes]], length: bytes) -> bool:
        """Whether h11 would write this head as :func:`_response_head` does and then expect exactly
        ``length`` bytes of body, leaving the connection reusable: a valid head of a fixed-length
        response to an HTTP/1.1 keep-alive request that is not HEAD or CONNECT."""
        if self.is_head or not 200 <= status < 600 or status in (204, 304) or self.scope["method"] == "CONNECT":
            return False
        if self.scope["http_version"] != "1.1":
            return False
        if type(length) is not bytes or not length.isdigit() or len(length) > 18:
            return False
        for name, value in headers:
            if not _valid_field(name, value):
                return False
        for name, value in self.scope["headers"]:  # h11's keep-alive rule for the request
            if name == b"connection" and b"close" in [token.strip() for token in value.lower().split(b",")]:
                return False
        return True

    def flush_head(self) -> bytes:
        if self.direct is not None:  # not written by hand after all: h11 writes it
            status, headers, _ = self.direct
            self.direct = None
            self.head = h11.Response(status_code=status, headers=headers, reason=_REASONS.get(status, b""))
        if self.head is None:
            return b""
        head, self.head = self.head, None
        return self.conn.h11.send(head)

    async def send_plain(self, status: int, text: str) -> None:
        """An error response of the server's own, when the app gave none."""
        body = f"{text}\n".encode()
        await self.send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(body))],
            }
        )
        await self.send({"type": "http.response.body", "body": body})


async def serve_h11(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    options: ServerOptions = ServerOptions(),
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` (any ASGI 3 application) over HTTP/1.1 on ``host:port``.

    ``task_status.started`` receives the bound URLs (``http://127.0.0.1:54321``) once the app's
    lifespan startup is complete and the sockets listen.

    Args:
        host: an address or name to bind (``::1`` and ``0.0.0.0`` work; brackets are removed).
        port: 0 picks a free port.
        shutdown_trigger: when it returns, the server shuts down gracefully and this returns.

    Cancellation: cancelling it closes the listening sockets and every connection at once.

    Raises:
        OSError: the address cannot be bound.
        StartupFailed: the app's lifespan startup failed or took too long.
    """
    listeners = await trio.open_tcp_listeners(port, host=host.strip("[]") or None)
    try:
        lifespan = _Lifespan(app)
        failure: str | None = None
        async with trio.open_nursery() as outer:
            outer.start_soon(lifespan.run)
            with trio.move_on_after(options.lifespan_timeout_s):
                await lifespan.started.wait()
            if not lifespan.started.is_set() or lifespan.failure is not None:
                failure = lifespan.failure or f"it did not complete within {options.lifespan_timeout_s:.3g} s"
            else:
                server = _Server(app, options, lifespan.state)
                await _accept(server, listeners, shutdown_trigger, task_status)
                if lifespan.supported:
                    await lifespan.shutdown(options.lifespan_timeout_s)
            outer.cancel_scope.cancel()
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)
    if failure is not None:
        raise StartupFailed(f"the application's lifespan startup failed: {_clean(failure)}")


async def _accept(
    server: _Server,
    listeners: list[trio.SocketListener],
    shutdown_trigger: Callable[[], Awaitable[object]] | None,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    """Accepts until ``shutdown_trigger`` returns, then drains (bounded) and closes the rest."""
    urls = [_url(listener.socket.getsockname()) for listener in listeners]
    async with trio.open_nursery() as handlers:
        async with trio.open_nursery() as accepting:
            handlers.start_soon(server.sweep)
            await accepting.start(partial(trio.serve_listeners, server.handle, listeners, handler_nursery=handlers))
            log.info("serving on %s", ", ".join(urls))
            task_status.started(urls)
            if shutdown_trigger is None:
                await trio.sleep_forever()
            else:
                await shutdown_trigger()
            accepting.cancel_scope.cancel()
        for listener in listeners:
            await listener.aclose()
        server.begin_closing()
        with trio.move_on_after(server.options.drain_timeout_s):
            await server.all_closed.wait()
        if server.connections:
            log.info("%d connection(s) still busy after the drain; closing them", len(server.connections))
        handlers.cancel_scope.cancel()
