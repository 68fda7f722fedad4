"""A lean HTTP/1.1 client on trio: the default :class:`~mcpwire.actors.http_sender.Sender`.

Theory of operation: an MCP client over HTTP sends many small requests, often dozens at once, to
one origin. This pool does the least that HTTP/1.1 needs, with no HTTP library under it (its one
codec is :mod:`mcpwire.protocol.http1`, which reads what h11 reads):

- one connection carries one request at a time; finished connections wait in a per-origin stack
  (the most recently used first, its socket the likeliest still warm) and are reused;
- a request's head and body leave in one write; the answer is read in 64 KiB pieces and framed
  by :class:`~mcpwire.protocol.http1.ResponseReader`;
- a small request on an idle connection can be written in the caller's own step
  (:meth:`PoolSender.begin`), before the task that reads its answer (:meth:`PoolSender.finish`)
  has run: the server starts on it one pass of the scheduler sooner. A body that arrived whole
  with its head is taken at once (:meth:`_PooledResponse.body_at_once`);
- a request larger than a socket buffer is written while the answer is awaited: a server that
  answers early (413, 401) and closes is heard, and its answer returned, instead of a write
  error. After any failed write, an answer already sent is still looked for (bounded);
- an idle connection the server has closed (or written to: nothing may arrive between answers) is
  noticed before reuse by a zero-time readability check, and dropped;
- the pool holds at most ``max_connections`` open connections; a request waits for one up to the
  ``pool`` timeout;
- a response's body is read as it is consumed; its connection goes back to the pool as soon as
  the body was read to its end and both sides may go on; a body left early, a cancelled read or
  any error closes the connection instead.

What a client does around the bytes is done here too, as ``httpx`` would do it for such requests:
``Host``, ``Content-Length`` and a ``User-Agent`` are added, a URL's userinfo becomes Basic
credentials, unsafe bytes of a path are percent-encoded, and cookies the server sets (a load
balancer's affinity cookie) are sent back to it. HTTP/2, proxies, ``Expect: 100-continue`` and
content codings are not spoken: the default actors use this pool when no proxy from the
environment applies to the URL, and ask for no coding (an answer in one is refused).

Every failure is one of mcpwire's exceptions (see :mod:`~mcpwire.actors.http_sender`), with the
original error as its cause.
"""

from __future__ import annotations

import logging
import math
import os
import select
import socket
import ssl
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Final

import trio

from .._version import __version__
from ..errors import ConnectError, ConnectionBroken, InvalidHTTPResponse, LocalProtocolError
from ..protocol import http1
from ..redaction import redact_url
from .http_sender import DEFAULT_TIMEOUTS, Headers, Timeouts

__all__ = ["Begun", "PoolSender"]

log = logging.getLogger(__name__)

READ_SIZE: Final = 65536
#: the most bytes a response's incomplete head (or chunk-size line, or trailer section) may take
MAX_HEAD_BYTES: Final = 64 * 1024
#: a request larger than this is written while its answer is awaited (an early answer is heard)
WRITE_ALONE_BYTES: Final = 64 * 1024
#: request heads a pool keeps made (a client sends a few, again and again)
MAX_KEPT_HEADS: Final = 64
#: seconds an answer is still awaited after the request could not be written whole
EARLY_ANSWER_TIMEOUT: Final = 5.0
USER_AGENT: Final = b"mcpwire/" + __version__.encode("ascii")
#: cookies kept per host at most, and the longest ``name=value`` kept
MAX_COOKIES: Final = 50
MAX_COOKIE_BYTES: Final = 4096

Origin = tuple[str, str, int]  # scheme, host, port
_HeadKey = tuple[str, str, tuple[tuple[str, str], ...]]  # method, URL, headers


def _parse(url: str) -> http1.Target:
    """The parts of ``url`` a request needs.

    Raises:
        ConnectError: the URL cannot be used (the message says why).
    """
    try:
        return http1.parse_url(url)
    except ValueError as exc:
        raise ConnectError(f"the URL cannot be used: {exc}") from exc


class _Cookies:
    """The cookies servers set, sent back to them (RFC 6265, the part a client of one origin
    needs): per host, matched by path, dropped when expired, ``Secure`` ones only over TLS."""

    __slots__ = ("_jar",)

    def __init__(self) -> None:
        # host -> name -> (value, path, secure, expiry on trio's clock)
        self._jar: dict[str, dict[str, tuple[str, str, bool, float]]] = {}

    def __bool__(self) -> bool:
        return bool(self._jar)

    def store(self, host: str, path: bytes, headers: Headers) -> None:
        """Keeps the cookies of the ``Set-Cookie`` headers of an answer to ``path``."""
        for name, raw in headers.raw:
            if name.lower() == b"set-cookie":
                self._store(host, path.decode("ascii").split("?", 1)[0], raw.decode("latin-1"))

    def _store(self, host: str, request_path: str, line: str) -> None:
        pair, *attributes = line.split(";")
        name, equals, value = pair.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name or len(name) + len(value) > MAX_COOKIE_BYTES:
            return
        path = request_path[: request_path.rfind("/")] or "/"  # RFC 6265 5.1.4: the default path
        secure = False
        expires = math.inf
        now = trio.current_time()
        for attribute in attributes:
            key, _, argument = attribute.partition("=")
            key, argument = key.strip().lower(), argument.strip()
            if key == "path" and argument.startswith("/"):
                path = argument
            elif key == "secure":
                secure = True
            elif key == "max-age" and argument.lstrip("-").isdigit():
                expires = now + int(argument)
            elif key == "expires" and expires == math.inf:
                seconds = http1.retry_after_seconds(argument)  # the same HTTP-date reading
                if seconds is not None:
                    expires = now + seconds if seconds > 0 else -math.inf
        cookies = self._jar.setdefault(host, {})
        if expires <= now:
            cookies.pop(name, None)
        elif name in cookies or len(cookies) < MAX_COOKIES:
            cookies[name] = (value, path, secure, expires)

    def header(self, host: str, path: bytes, secure: bool) -> bytes | None:
        """The ``Cookie`` value for a request to ``path`` on ``host``, or None."""
        cookies = self._jar.get(host)
        if not cookies:
            return None
        now = trio.current_time()
        target = path.decode("ascii").split("?", 1)[0]
        sent = []
        for name, (value, scope, only_tls, expires) in list(cookies.items()):
            if expires <= now:
                del cookies[name]
            elif (not only_tls or secure) and (
                target == scope or target.startswith(scope if scope.endswith("/") else scope + "/")
            ):
                sent.append(f"{name}={value}")
        return "; ".join(sent).encode("latin-1") if sent else None


class _Connection:
    """One HTTP/1.1 connection: its stream, the reader framing its responses, and when it went
    idle."""

    __slots__ = ("idle_since", "origin", "reader", "spoiled", "stream")

    def __init__(self, origin: Origin, stream: trio.abc.Stream) -> None:
        self.origin = origin
        self.stream = stream
        self.reader = http1.ResponseReader(MAX_HEAD_BYTES)
        self.idle_since = 0.0
        self.spoiled = False  # a request was not written whole: never reused

    def readable(self) -> bool:
        """Whether the idle connection's socket has something to read: an end of file (the server
        closed it) or bytes no request asked for. Either way it must not be reused."""
        stream = self.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        if not isinstance(stream, trio.SocketStream):
            return False
        try:
            poller = select.poll()  # not select.select: it cannot watch a descriptor past 1023
            poller.register(stream.socket.fileno(), select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):  # closed under us
            return True

    async def write(self, data: bytes, timeout: float | None) -> None:
        """Sends ``data``: on a plain socket, what it takes at once is written directly (a small
        request nearly always goes whole, with no deadline scope to set up); the rest is sent
        under the write timeout.

        Raises:
            ConnectionBroken: the connection failed, or the time ran out.
        """
        stream = self.stream
        try:
            if type(stream) is trio.SocketStream:
                try:
                    sent = os.write(stream.socket.fileno(), data)
                except BlockingIOError:
                    sent = 0
                if sent == len(data):
                    return
                data = data[sent:]
            if timeout is None:
                await stream.send_all(data)
            else:
                with trio.fail_after(timeout):
                    await stream.send_all(data)
        except trio.TooSlowError as exc:
            raise ConnectionBroken(f"the request was not sent within {timeout:g} s") from exc
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionBroken(_os_message(exc, "sending the request")) from exc

    async def next_event(self, timeout: float | None) -> http1.Head | bytes | object:
        """The next part of the answer (:class:`~mcpwire.protocol.http1.Head`, body bytes or
        :data:`~mcpwire.protocol.http1.END`), reading from the socket as the reader needs.

        Raises:
            ConnectionBroken: reading failed, timed out, or the answer broke HTTP/1.1
                (:class:`~mcpwire.errors.InvalidHTTPResponse`, :class:`~mcpwire.errors.IncompleteBody`).
        """
        reader = self.reader
        while True:
            event = reader.next_event()
            if event is not http1.NEED_DATA:
                return event
            try:
                if timeout is None:
                    data = await self._receive(reader.awaiting_head)
                else:
                    with trio.fail_after(timeout):
                        data = await self._receive(reader.awaiting_head)
            except trio.TooSlowError as exc:
                raise ConnectionBroken(f"no answer within {timeout:g} s") from exc
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise ConnectionBroken(_os_message(exc, "reading the answer")) from exc
            if data:
                reader.feed(data)
            else:
                reader.feed_eof()

    async def final_head(self, timeout: float | None) -> http1.Head:
        """The answer's head, informational (1xx) heads passed over."""
        while True:
            event = await self.next_event(timeout)
            if type(event) is http1.Head and event.status >= 200:
                return event
            # an informational head; nothing else comes before the final one

    async def _receive(self, fresh: bool) -> bytes | bytearray:
        """The next bytes read (b"" at the end of the stream). On a plain socket, a read for an
        answer not yet begun (``fresh``) waits for the socket first and reads once, instead of
        trying a read that would fail, then waiting, then reading."""
        stream = self.stream
        if type(stream) is not trio.SocketStream:
            return await stream.receive_some(READ_SIZE)
        sock = stream.socket
        if fresh:
            await trio.lowlevel.wait_readable(sock)
        else:
            await trio.lowlevel.checkpoint_if_cancelled()
        while True:
            fd = sock.fileno()
            if fd < 0:
                raise trio.ClosedResourceError("the connection was closed")
            try:
                return os.read(fd, READ_SIZE)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)

    async def close(self) -> None:
        """Closes the connection at once (no TLS goodbye waited for)."""
        await trio.aclose_forcefully(self.stream)


async def _open_tcp(host: str, port: int) -> trio.SocketStream:
    """A TCP connection to ``host``. An IP address is connected to at once: with one address,
    ``trio.open_tcp_stream``'s resolution and happy eyeballs have nothing to do, and cost a first
    connect twice as long. A name goes through ``trio.open_tcp_stream``."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        sock = trio.socket.socket(family, socket.SOCK_STREAM)
        try:
            await sock.connect((host, port))
        except BaseException:
            sock.close()
            raise
        return trio.SocketStream(sock)
    # an ASCII name as bytes: a str would be IDNA-encoded (a codec import) for nothing
    return await trio.open_tcp_stream(host.encode("ascii"), port)


def _os_message(exc: BaseException, doing: str) -> str:
    if isinstance(exc, trio.ClosedResourceError):
        return f"connection closed while {doing}"
    if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or f"connection broken while {doing}"


class _PooledResponse:
    """An answer read from a pooled connection (a :class:`~mcpwire.actors.http_sender.Response`):
    the body is read as it is consumed; its end returns the connection to the pool."""

    __slots__ = ("_complete", "_connection", "_pool", "_read_timeout", "_released", "headers", "status")

    def __init__(self, pool: PoolSender, connection: _Connection, head: http1.Head, read_timeout: float | None) -> None:
        self.status = head.status
        self.headers = Headers(head.headers)
        self._pool = pool
        self._connection = connection
        self._read_timeout = read_timeout
        self._complete = connection.reader.complete  # no body at all (204, 304, HEAD, a length of 0)
        self._released = False

    @property
    def closed(self) -> bool:
        return self._released

    def body_at_once(self) -> bytes | None:
        if self._complete or self._released or not self._connection.reader.buffered_to_end:
            return None
        if "content-encoding" in self.headers:
            return None  # (chunks() says whether it is one that was not asked for)
        data = self._connection.reader.next_event()
        assert type(data) is bytes and self._connection.reader.complete
        self._complete = True
        return data

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        if self._complete:
            return  # read to its end already, or empty
        if self._released:
            raise RuntimeError("the response is closed")
        coding = self.headers.get("content-encoding")
        if coding is not None and coding.strip().lower() not in ("", "identity"):
            raise InvalidHTTPResponse(f"the answer is in the content coding {coding[:40]!r}, which was not asked for")
        connection = self._connection
        while True:
            event = await connection.next_event(self._read_timeout)
            if event is http1.END:
                self._complete = self._released = True
                await self._pool.release(connection, reusable=True)
                return
            if type(event) is bytes:
                yield event
            else:  # pragma: no cover - a head cannot come inside a body: the reader frames it
                raise InvalidHTTPResponse("a response head inside a body")

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            await self._pool.release(self._connection, reusable=self._complete)

    def __repr__(self) -> str:
        return f"<response {self.status}>"


class Begun:
    """A request :meth:`PoolSender.begin` wrote (all but ``rest``) on ``connection``."""

    __slots__ = ("connection", "method", "rest", "target", "url")

    def __init__(self, connection: _Connection, method: str, url: str, target: http1.Target, rest: bytes) -> None:
        self.connection = connection
        self.method = method
        self.url = url
        self.target = target
        self.rest = rest


class PoolSender:
    """Sends requests over pooled HTTP/1.1 connections (``http://`` and ``https://``).

    Args:
        tls: makes the TLS context for ``https://`` origins (called on the first one).
        timeouts: the bounds of an exchange that names none of its own.
        max_connections: open connections at most (idle ones included).
        max_idle: idle connections kept at most; the oldest beyond it are closed.
        idle_expiry: seconds an idle connection is kept: under the 5 s after which common servers
            (uvicorn, hypercorn, Node's) close one, so that a request does not race that close.
    """

    def __init__(
        self,
        *,
        tls: Callable[[], ssl.SSLContext],
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        max_connections: int = 100,
        max_idle: int = 100,
        idle_expiry: float = 4.0,
    ) -> None:
        if max_connections < 1 or max_idle < 0 or idle_expiry < 0:
            raise ValueError("max_connections must be >= 1, max_idle and idle_expiry >= 0")
        self._tls = tls
        self._tls_context: ssl.SSLContext | None = None
        self._timeouts = timeouts
        self._max_connections = max_connections
        self._open = 0  # connections open, idle or in use
        self._freed = trio.lowlevel.ParkingLot()
        self._max_idle = max_idle
        self._idle_expiry = idle_expiry
        self._idle: dict[Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._targets: dict[str, http1.Target] = {}
        #: request heads made (see :meth:`_head`), by method, URL and headers
        self._heads: dict[_HeadKey, bytes] = {}
        self._cookies = _Cookies()
        self._closed = False

    def _target(self, url: str) -> http1.Target:
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) >= 16:  # a handful of endpoints per server; never grows without bound
                self._targets.clear()
            target = self._targets[url] = _parse(url)
        return target

    def _head(self, key: _HeadKey, target: http1.Target, headers: Mapping[str, str]) -> bytes:
        """The request's head but its ``Content-Length`` and the empty line; kept for the next
        request with the same method, URL and headers unless a cookie went in it (a client sends
        the same few heads again and again: each is checked and encoded once)."""
        fields = [(b"Host", target.authority), (b"User-Agent", USER_AGENT)]
        given = {name.lower() for name in headers}
        if "user-agent" in given:
            del fields[1]
        if target.credentials is not None and "authorization" not in given:
            fields.append((b"Authorization", target.credentials))
        cookie = None
        if self._cookies and "cookie" not in given:
            cookie = self._cookies.header(target.host, target.path, target.scheme == "https")
            if cookie is not None:
                fields.append((b"Cookie", cookie))
        for name, value in headers.items():
            try:
                fields.append((name.encode("ascii"), value.encode("latin-1")))
            except UnicodeEncodeError as exc:
                raise LocalProtocolError(
                    f"header {name!r} cannot be sent: HTTP/1.1 header names are ASCII and values Latin-1"
                ) from exc
        head = http1.encode_head(key[0], target.path, fields)
        if cookie is None and not self._cookies:
            if len(self._heads) >= MAX_KEPT_HEADS:  # bounded whatever the caller sends
                self._heads.clear()
            self._heads[key] = head
        return head

    def _request(
        self, method: str, url: str, target: http1.Target, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        """The request's bytes: its head (kept, see :meth:`_head`), ``Content-Length`` and body."""
        key = (method, url, tuple(headers.items()))
        made = self._heads.get(key)
        if made is None:
            made = self._head(key, target, headers)
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        return b"".join((made, length, b"\r\n", body or b""))

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeouts: Timeouts | None = None,
    ) -> _PooledResponse:
        """See :meth:`~mcpwire.actors.http_sender.Sender.send`."""
        if self._closed:
            raise ConnectError("the HTTP connection pool is closed")
        limits = timeouts or self._timeouts
        target = self._target(url)
        data = self._request(method, url, target, headers, body)
        connection = await self._take_idle(target.origin) or await self._acquire(target, limits)
        try:
            connection.reader.expect(head_request=method == "HEAD")
            if len(data) <= WRITE_ALONE_BYTES:
                head = await self._exchange(connection, data, limits)
            else:
                head = await self._exchange_large(connection, data, limits)
        except BaseException:
            await self.release(connection, reusable=False)
            raise
        return await self._answered(method, url, target, connection, head, limits)

    def begin(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None = None) -> Begun | None:
        """Writes a small request now, on the idle connection :meth:`send` would take, when that
        needs no wait: what :meth:`send` does before it waits for the answer, done in the
        caller's step (no checkpoint). :meth:`finish` reads the answer. None when it cannot be
        done at once (no idle connection that is fresh and quiet, a TLS connection, a large
        body, a socket that takes nothing now, a request that cannot be encoded, a closed
        pool); nothing was written then, and :meth:`send` does it all."""
        if self._closed:
            return None
        try:
            target = self._target(url)
            data = self._request(method, url, target, headers, body)
        except (ConnectError, LocalProtocolError):
            return None  # (send raises them)
        stack = self._idle.get(target.origin)
        if not stack or len(data) > WRITE_ALONE_BYTES:
            return None
        connection = stack[-1]
        stream = connection.stream
        if type(stream) is not trio.SocketStream or not self._fresh(connection, trio.current_time()):
            return None  # (send closes a stale one)
        try:
            sent = os.write(stream.socket.fileno(), data)
        except OSError:  # (BlockingIOError: the socket takes nothing now; else the next read sees why)
            return None
        connection.reader.expect(head_request=method == "HEAD")
        stack.pop()
        self._idle_count -= 1
        return Begun(connection, method, url, target, data[sent:])

    async def finish(self, begun: Begun, timeouts: Timeouts | None = None) -> _PooledResponse:
        """The answer to a request :meth:`begin` wrote (the rest of it written first); as
        :meth:`send` returns it, and raises.

        Cancellation: as :meth:`send`'s (the connection is closed)."""
        limits = timeouts or self._timeouts
        connection = begun.connection
        try:
            head = await self._exchange(connection, begun.rest, limits)
        except BaseException:
            await self.release(connection, reusable=False)
            raise
        return await self._answered(begun.method, begun.url, begun.target, connection, head, limits)

    def abandon(self, begun: Begun) -> None:
        """Closes the connection of a request :meth:`begin` wrote whose answer nobody will read."""
        self._open -= 1
        self._freed.unpark()
        stream = begun.connection.stream
        if isinstance(stream, trio.SocketStream):
            stream.socket.close()

    async def _answered(
        self, method: str, url: str, target: http1.Target, connection: _Connection, head: http1.Head, limits: Timeouts
    ) -> _PooledResponse:
        """The response whose head was read."""
        response = _PooledResponse(self, connection, head, limits.read)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s: HTTP %d", method, redact_url(url), head.status)
        if "set-cookie" in response.headers:
            self._cookies.store(target.host, target.path, response.headers)
            self._heads.clear()  # the next heads carry the cookies: made per request from now on
        if response._complete:  # nothing more to read: the connection may serve another request now
            await response.aclose()
        return response

    async def _exchange(self, connection: _Connection, data: bytes, limits: Timeouts) -> http1.Head:
        """Writes a request that a socket buffer takes whole, then reads the answer's head; when
        the write fails, an answer the server sent before closing is still read."""
        try:
            await connection.write(data, limits.write)
        except ConnectionBroken as failure:
            if isinstance(failure.__cause__, trio.TooSlowError):
                raise  # the server takes nothing: waiting for an answer would add to the wait
            early = await _early_answer(connection, limits.read)
            if early is None:
                raise
            return early
        return await connection.final_head(limits.read)

    async def _exchange_large(self, connection: _Connection, data: bytes, limits: Timeouts) -> http1.Head:
        """Writes a large request while the answer is awaited. A head that arrives first ends the
        writing (the server has answered; the connection is not reused); a failed write leaves
        the reading ``EARLY_ANSWER_TIMEOUT`` more seconds for an answer sent before a close."""
        failure: ConnectionBroken | None = None
        written = False
        outcome: http1.Head | ConnectionBroken | None = None
        reading = trio.CancelScope()

        async def write() -> None:
            nonlocal failure, written
            try:
                await connection.write(data, limits.write)
                written = True
            except ConnectionBroken as exc:
                failure = exc
                reading.deadline = min(reading.deadline, trio.current_time() + EARLY_ANSWER_TIMEOUT)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            with reading:
                try:
                    outcome = await connection.final_head(limits.read)
                except ConnectionBroken as exc:
                    outcome = exc
            if not written:
                nursery.cancel_scope.cancel()
        if isinstance(outcome, http1.Head):
            connection.spoiled = not written  # part of the request may never have been sent
            return outcome
        if failure is not None:
            raise failure
        assert outcome is not None  # the reading ends with a head or an error unless cut short by a failure
        raise outcome

    async def _acquire(self, target: http1.Target, limits: Timeouts) -> _Connection:
        """An idle connection to the target's origin that is still good, or a new one; waits for
        one up to the pool timeout. A connection counts towards the limit from its opening to its
        close."""
        origin = target.origin
        try:
            with trio.fail_after(math.inf if limits.pool is None else limits.pool):
                while True:
                    connection = await self._take_idle(origin)
                    if connection is not None:
                        return connection
                    if self._open < self._max_connections:
                        break
                    if self._idle_count:  # full, partly with other origins' idle connections
                        await self._discard_oldest_idle()
                        continue
                    await self._freed.park()  # woken when a connection goes idle or is closed
        except trio.TooSlowError as exc:
            raise ConnectError(
                f"no free connection within {limits.pool:g} s (all {self._max_connections} in use)"
            ) from exc
        self._open += 1
        try:
            return await self._connect(origin, limits.connect)
        except BaseException:
            self._open -= 1
            self._freed.unpark()
            raise

    async def _take_idle(self, origin: Origin) -> _Connection | None:
        """The most recently used idle connection to ``origin`` that is fresh and quiet; stale ones
        met on the way are closed."""
        stack = self._idle.get(origin)
        now = trio.current_time()
        while stack:
            connection = stack.pop()
            self._idle_count -= 1
            if self._fresh(connection, now):
                return connection
            await self._discard(connection)
        return None

    def _fresh(self, connection: _Connection, now: float) -> bool:
        """Whether an idle connection may carry a request: not expired, and quiet."""
        return now - connection.idle_since <= self._idle_expiry and not connection.readable()

    async def _connect(self, origin: Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        stream: trio.abc.Stream | None = None
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                stream = await _open_tcp(host, port)
                if scheme == "https":
                    if self._tls_context is None:
                        self._tls_context = self._tls()
                    stream = trio.SSLStream(stream, self._tls_context, server_hostname=host, https_compatible=True)
                    await stream.do_handshake()
        except trio.TooSlowError as exc:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise ConnectError(f"no connection to {host}:{port} within {timeout:g} s") from exc
        except (OSError, trio.BrokenResourceError) as exc:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise ConnectError(_os_message(exc, "connecting")) from exc
        except BaseException:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise
        return _Connection(origin, stream)

    async def release(self, connection: _Connection, *, reusable: bool) -> None:
        """Gives a connection back: to its origin's idle stack when it may carry another request,
        else closed. Its slot in the pool stays taken while it is idle."""
        reader = connection.reader
        if reusable and not self._closed and not connection.spoiled and reader.complete and reader.reusable:
            reader.next_response()
            connection.idle_since = trio.current_time()
            self._idle.setdefault(connection.origin, []).append(connection)
            self._idle_count += 1
            if self._idle_count > self._max_idle:
                await self._discard_oldest_idle()
            if self._freed:  # (someone waits for a connection)
                self._freed.unpark()
            return
        await self._discard(connection)

    async def _discard(self, connection: _Connection) -> None:
        """Closes a connection that is in no idle stack, and frees its place in the pool."""
        self._open -= 1
        self._freed.unpark()
        with trio.CancelScope(shield=True):
            await connection.close()

    async def _discard_oldest_idle(self) -> None:
        oldest: list[_Connection] | None = None
        for stack in self._idle.values():
            if stack and (oldest is None or stack[0].idle_since < oldest[0].idle_since):
                oldest = stack
        if oldest:
            self._idle_count -= 1
            await self._discard(oldest.pop(0))

    async def aclose(self) -> None:
        """Closes every idle connection; a connection in use is closed when its response is."""
        self._closed = True
        idle = [connection for stack in self._idle.values() for connection in stack]
        self._idle.clear()
        self._idle_count = 0
        for connection in idle:
            await self._discard(connection)


async def _early_answer(connection: _Connection, read_timeout: float | None) -> http1.Head | None:
    """The head of an answer the server sent before its side failed our write, if one comes
    within ``EARLY_ANSWER_TIMEOUT`` (or the read timeout, when shorter)."""
    bound = EARLY_ANSWER_TIMEOUT if read_timeout is None else min(read_timeout, EARLY_ANSWER_TIMEOUT)
    try:
        return await connection.final_head(bound)
    except ConnectionBroken:
        return None
