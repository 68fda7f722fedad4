"""A lean HTTP/1.1 transport for ``httpx``, on trio: the default client's connection pool.

Theory of operation: an MCP client over HTTP sends many small requests, often dozens at once, to
one origin. ``httpx``'s default transport (httpcore over anyio) spends most of a small call's
client-side CPU on its general machinery: a pool that scans every connection for every request,
several layers of async context managers, and two socket writes per request (the head, then the
body). This transport does the least that HTTP/1.1 needs and nothing else:

- one connection carries one request at a time; finished connections wait in a per-origin stack
  (the most recently used first, its socket the likeliest still warm) and are reused;
- a request's head and body leave in one write; the answer is read in 64 KiB pieces and framed
  and checked by :mod:`mcpwire.protocol.http1` (sans I/O, as strict as h11, and cheaper);
- an idle connection the server has closed (or written to: nothing may arrive between answers) is
  noticed before reuse by a zero-time readability check, and dropped;
- the pool holds at most ``max_connections`` open connections; a request waits for one up to the
  ``pool`` timeout;
- a response's body is read as it is consumed; its connection goes back to the pool only when the
  body was read to its end and both sides may go on (no ``Connection: close``); a body left early,
  a cancelled read or any error closes the connection instead.

The ``connect``, ``read``, ``write`` and ``pool`` timeouts of the request are honoured, and every
failure surfaces as the ``httpx`` exception the default transport would raise, with the original
error as its cause (so that :func:`~mcpwire.actors.http_common.describe_error` can name a TLS
failure). HTTP/2, proxies and ``Expect: 100-continue`` are not spoken: the default client uses
this transport only when no proxy applies to its URL.
"""

from __future__ import annotations

import math
import os
import select
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Final

import httpx
import trio

from ..protocol import http1

__all__ = ["DirectSender", "PooledTransport"]

READ_SIZE: Final = 65536
#: the most bytes a response's status line and headers may take
MAX_HEAD_BYTES: Final = 64 * 1024
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


class _Connection:
    """One HTTP/1.1 connection: its stream, the reader framing its responses, and when it went
    idle."""

    __slots__ = ("idle_since", "origin", "reader", "stream")

    def __init__(self, origin: Origin, stream: trio.abc.Stream) -> None:
        self.origin = origin
        self.stream = stream
        self.reader = http1.ResponseReader(MAX_HEAD_BYTES)
        self.idle_since = 0.0

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

    async def next_event(self, request: httpx.Request | None, timeout: float | None) -> http1.Head | bytes | object:
        """The next part of the answer (:class:`~mcpwire.protocol.http1.Head`, body bytes or
        :data:`~mcpwire.protocol.http1.END`), reading from the socket as the reader needs."""
        reader = self.reader
        while True:
            try:
                event = reader.next_event()
            except http1.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc), request=request) from exc
            if event is not http1.NEED_DATA:
                return event
            try:
                if timeout is None:
                    data = await self._receive(reader.awaiting_head)
                else:
                    with trio.fail_after(timeout):
                        data = await self._receive(reader.awaiting_head)
            except trio.TooSlowError as exc:
                raise httpx.ReadTimeout(f"no answer within {timeout:g} s", request=request) from exc
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise httpx.ReadError(_os_message(exc, "reading the answer"), request=request) from exc
            if data:
                reader.feed(data)
            else:
                reader.feed_eof()

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


def _os_message(exc: BaseException, doing: str) -> str:
    if isinstance(exc, trio.ClosedResourceError):
        return f"connection closed while {doing}"
    if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return str(exc) or f"connection broken while {doing}"


class _Body(httpx.AsyncByteStream):
    """A response's body, read from its connection as it is consumed; closing it returns the
    connection to the pool when the body was read to its end, and closes it otherwise."""

    def __init__(
        self, pool: PooledTransport, connection: _Connection, request: httpx.Request | None, timeout: float | None
    ) -> None:
        self._pool = pool
        self._connection = connection
        self._request = request
        self._timeout = timeout
        self._complete = False
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._released:
            raise httpx.StreamClosed()
        while not self._complete:
            event = await self._connection.next_event(self._request, self._timeout)
            if event is http1.END:
                self._complete = True
            elif type(event) is bytes:
                if event:
                    yield event
            else:  # a head cannot come inside a body: the reader frames it
                raise httpx.RemoteProtocolError("unexpected response head in a body", request=self._request)

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            await self._pool.release(self._connection, reusable=self._complete)


class PooledTransport(httpx.AsyncBaseTransport):
    """An ``httpx`` transport for ``http://`` and ``https://`` over HTTP/1.1, pooling connections.

    Args:
        tls: makes the TLS context for ``https://`` origins (called on the first one).
        max_connections: open connections at most (idle ones included).
        max_idle: idle connections kept at most; the oldest beyond it are closed.
        idle_expiry: seconds an idle connection is kept: under the 5 s after which common servers
            (uvicorn, hypercorn, Node's) close one, so that a request does not race that close.
    """

    def __init__(
        self,
        *,
        tls: Callable[[], ssl.SSLContext],
        max_connections: int = 100,
        max_idle: int = 100,
        idle_expiry: float = 4.0,
    ) -> None:
        if max_connections < 1 or max_idle < 0 or idle_expiry < 0:
            raise ValueError("max_connections must be >= 1, max_idle and idle_expiry >= 0")
        self._tls = tls
        self._tls_context: ssl.SSLContext | None = None
        self._max_connections = max_connections
        self._open = 0  # connections open, idle or in use
        self._freed = trio.lowlevel.ParkingLot()
        self._max_idle = max_idle
        self._idle_expiry = idle_expiry
        self._idle: dict[Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = request.headers.raw
        try:
            body = request.content
        except httpx.RequestNotRead:  # a streamed body (sent chunked by httpx's own): read, then sized
            body = b"".join([piece async for piece in request.stream])  # type: ignore[union-attr]
            headers = [(k, v) for k, v in headers if k.lower() not in (b"transfer-encoding", b"content-length")]
            headers.append((b"Content-Length", b"%d" % len(body)))
        timeouts = request.extensions.get("timeout", {})
        return await self.send(request.method, request.url, headers, body, timeouts, request)

    async def send(
        self,
        method: str,
        url: httpx.URL,
        headers: list[tuple[bytes, bytes]],
        body: bytes | None,
        timeouts: Mapping[str, float | None],
        request: httpx.Request | None = None,
    ) -> httpx.Response:
        """Sends one request (``headers`` complete: ``Host`` and ``Content-Length`` included) and
        returns the response, its body not read yet; errors name ``request`` when there is one."""
        if self._closed:
            raise RuntimeError("the transport is closed")
        scheme = url.scheme
        if scheme not in DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}", request=request)
        origin = (scheme, url.host, url.port or DEFAULT_PORTS[scheme])
        connection = await self._take_idle(origin) or await self._acquire(origin, request, timeouts)
        released = False
        try:
            try:
                data = http1.encode_request(method, url.raw_path, headers, body)
            except http1.LocalProtocolError as exc:
                raise httpx.LocalProtocolError(str(exc), request=request) from exc
            connection.reader.expect(head_request=method == "HEAD")
            await _send(connection, request, data, timeouts.get("write"))
            response = await self._answer(connection, request, timeouts.get("read"))
            released = True  # the body owns the connection now
            return response
        finally:
            if not released:
                await self.release(connection, reusable=False)

    async def _answer(
        self, connection: _Connection, request: httpx.Request | None, read_timeout: float | None
    ) -> httpx.Response:
        while True:
            event = await connection.next_event(request, read_timeout)
            if type(event) is http1.Head and event.status >= 200:
                break
            # an informational (1xx) head is passed over; nothing else comes before a head
        return httpx.Response(
            status_code=event.status,
            headers=event.headers,
            stream=_Body(self, connection, request, read_timeout),
            extensions={"http_version": b"HTTP/" + event.http_version, "reason_phrase": event.reason},
        )

    async def _acquire(
        self, origin: Origin, request: httpx.Request | None, timeouts: Mapping[str, float | None]
    ) -> _Connection:
        """An idle connection to ``origin`` that is still good, or a new one; waits for one up to
        the pool timeout. A connection counts towards the limit from its opening to its close."""
        pool_timeout = timeouts.get("pool")
        try:
            with trio.fail_after(math.inf if pool_timeout is None else pool_timeout):
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
            raise httpx.PoolTimeout(f"no free connection within {pool_timeout:g} s", request=request) from exc
        self._open += 1
        try:
            return await self._connect(origin, request, timeouts.get("connect"))
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
            if now - connection.idle_since <= self._idle_expiry and not connection.readable():
                return connection
            await self._discard(connection)
        return None

    async def _connect(self, origin: Origin, request: httpx.Request | None, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        stream: trio.abc.Stream | None = None
        try:
            with trio.fail_after(math.inf if timeout is None else timeout):
                stream = await trio.open_tcp_stream(host, port)
                if scheme == "https":
                    if self._tls_context is None:
                        self._tls_context = self._tls()
                    stream = trio.SSLStream(stream, self._tls_context, server_hostname=host, https_compatible=True)
                    await stream.do_handshake()
        except trio.TooSlowError as exc:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise httpx.ConnectTimeout(f"no connection within {timeout:g} s", request=request) from exc
        except (OSError, trio.BrokenResourceError) as exc:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise httpx.ConnectError(_os_message(exc, "connecting"), request=request) from exc
        except BaseException:
            if stream is not None:
                await trio.aclose_forcefully(stream)
            raise
        return _Connection(origin, stream)

    async def release(self, connection: _Connection, *, reusable: bool) -> None:
        """Gives a connection back: to its origin's idle stack when it may carry another request,
        else closed. Its slot in the pool stays taken while it is idle."""
        reader = connection.reader
        if reusable and not self._closed and reader.complete and reader.reusable:
            reader.next_response()
            connection.idle_since = trio.current_time()
            self._idle.setdefault(connection.origin, []).append(connection)
            self._idle_count += 1
            if self._idle_count > self._max_idle:
                await self._discard_oldest_idle()
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


async def _send(connection: _Connection, request: httpx.Request | None, data: bytes, timeout: float | None) -> None:
    """Sends ``data``: on a plain socket, what it takes at once is written directly (a small
    request nearly always goes whole, with no deadline scope to set up); the rest is sent under
    the write timeout."""
    stream = connection.stream
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
            await connection.stream.send_all(data)
        else:
            with trio.fail_after(timeout):
                await connection.stream.send_all(data)
    except trio.TooSlowError as exc:
        raise httpx.WriteTimeout(f"request not sent within {timeout:g} s", request=request) from exc
    except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise httpx.WriteError(_os_message(exc, "sending the request"), request=request) from exc


class DirectSender:
    """Sends a request of ``client`` straight to its :class:`PooledTransport`, doing only what the
    client would do for an MCP request: its default headers (the request's own win, names
    compared without case), its cookies (sent, and stored from ``Set-Cookie``), its timeouts.
    Auth, redirects and event hooks are not applied: it is for a client made without them (the
    default one), where building the request through the client would cost a third of a small
    call's CPU for nothing. No ``httpx.Request`` is built unless cookies need one, or an error
    must name it."""

    def __init__(self, client: httpx.AsyncClient, transport: PooledTransport) -> None:
        self._client = client
        self._transport = transport
        self._defaults = {name.lower(): value for name, value in client.headers.multi_items()}
        self._timeouts = client.timeout.as_dict()
        self._urls: dict[str, httpx.URL] = {}

    def _url(self, url: str) -> httpx.URL:
        parsed = self._urls.get(url)
        if parsed is None:
            if len(self._urls) >= 16:  # a handful of endpoints per server; never grows without bound
                self._urls.clear()
            parsed = self._urls[url] = httpx.URL(url)
        return parsed

    async def send(self, method: str, url: str, headers: Mapping[str, str], content: bytes | None) -> httpx.Response:
        """The response, its body not read yet (close it when done)."""
        merged = dict(self._defaults)
        for name, value in headers.items():
            merged[name.lower()] = value
        parsed = self._url(url)
        cookies = self._client.cookies
        request: httpx.Request | None = None
        if cookies:  # rare (an affinity cookie): the request is built as httpx builds it
            extensions = {"timeout": self._timeouts}
            request = httpx.Request(method, parsed, headers=merged, content=content, extensions=extensions)
            cookies.set_cookie_header(request)
            response = await self._transport.handle_async_request(request)
        else:
            raw = [(b"host", parsed.netloc)]
            raw += [(name.encode("ascii"), value.encode("ascii")) for name, value in merged.items()]
            if content is not None:
                raw.append((b"content-length", b"%d" % len(content)))
            try:
                response = await self._transport.send(method, parsed, raw, content, self._timeouts)
            except httpx.RequestError as exc:
                exc.request = httpx.Request(method, parsed)
                raise
        if "set-cookie" in response.headers:
            response.request = request or httpx.Request(method, parsed)
            cookies.extract_cookies(response)
        return response
