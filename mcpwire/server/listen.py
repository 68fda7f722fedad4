"""Listening, admitting and draining: what both HTTP servers share.

Theory of operation: :func:`run_server` runs the app's lifespan (:class:`~.lifespan.Lifespan`),
binds with :func:`trio.open_tcp_listeners` (port 0 and IPv6 work), reports the bound URLs through
``task_status`` and accepts into a nursery of its own. Every accepted socket goes through
:class:`Connections` before any byte of it is read:

- at most ``max_connections`` connections at once; when the server is full, the connection that
  has been idle longest (a keep-alive connection waiting for its next request, nothing read) is
  closed to make room, and only when none is idle does the newcomer get a 503;
- at most ``max_connections_per_client`` from one client address (trusted proxies, which carry
  many clients, are exempt), so that one address holding idle or trickling connections cannot
  take the service from everyone else.

A connection admitted becomes a :class:`~.tcp.TcpStream` (trio's stream contract without its
per-call layers), wrapped in a :class:`trio.SSLStream` when the server has a certificate,
then handed to the server's own connection handler (the built-in HTTP/1.1 connection, or hypercorn's),
which registers a :class:`Handle` for the sweeper and the drain. One sweeper task ends every
connection whose wait on its client is past its deadline: a float per connection checked twice a
second is much cheaper than a cancel scope per read.

Graceful shutdown (when ``shutdown_trigger`` returns): stop accepting, let each connection close
what is idle (:meth:`Handle.on_closing`), let requests in flight finish within
``drain_timeout_s``, cancel what is left, then run the lifespan shutdown (bounded). Cancelling
:func:`run_server` instead closes everything at once.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from typing import Any, Final, Protocol

import trio

from .lifespan import ASGIApp, Lifespan, StartupFailed
from .tcp import TcpStream

__all__ = [
    "Accepted",
    "Connections",
    "Handle",
    "ServerOptions",
    "TrustedProxies",
    "plain_response",
    "run_server",
    "tls_context",
]

log = logging.getLogger("mcpwire.server.http")

#: seconds spent refusing a connection, writing an error response or lingering at close
CLOSE_LINGER_S: Final = 1.0
#: how often the sweeper looks for connections past their deadline (the timeouts' resolution)
SWEEP_INTERVAL_S: Final = 0.5
NEVER: Final = float("inf")


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """Bounds of the HTTP servers; every wait they make on a client has one.

    Attributes:
        keep_alive_s: an idle keep-alive connection is closed after this long.
        header_timeout_s: a request head must arrive whole within this long of its first byte (and
            a new connection's first byte, or its TLS handshake, within this long of the accept).
        body_timeout_s: a request body must arrive whole within this long of its head (the server
            waits for it only while the app reads it).
        send_timeout_s: the longest a write may block on a client that does not read.
        max_header_bytes: the largest request head (request line and headers).
        max_connections: connections served at once; past it the longest idle one is closed,
            and if none is idle the newcomer gets a 503.
        max_connections_per_client: connections at once from one client address (a trusted
            proxy's are not counted); one more gets a 503.
        drain_timeout_s: at shutdown, how long requests in flight may take to finish.
        lifespan_timeout_s: the longest the app's lifespan startup or shutdown may take.
        root_path: the ASGI ``root_path`` (the prefix a proxy mounts the app at).
        certfile: a PEM certificate chain: the server speaks HTTPS (TLS) only.
        keyfile: the certificate's private key (PEM), if not in ``certfile``.
        forwarded_allow_ips: addresses and networks of proxies whose ``Forwarded``,
            ``X-Forwarded-For`` and ``X-Forwarded-Proto`` headers are believed (``*``: any).
    """

    keep_alive_s: float = 30.0
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    send_timeout_s: float = 30.0
    max_header_bytes: int = 65536
    max_connections: int = 1000
    max_connections_per_client: int = 256
    drain_timeout_s: float = 10.0
    lifespan_timeout_s: float = 60.0
    root_path: str = ""
    certfile: str | None = None
    keyfile: str | None = None
    forwarded_allow_ips: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("keep_alive_s", "header_timeout_s", "body_timeout_s", "send_timeout_s", "lifespan_timeout_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")
        if not isinstance(self.drain_timeout_s, int | float) or not self.drain_timeout_s >= 0:
            raise ValueError(f"drain_timeout_s must be a number of seconds, not {self.drain_timeout_s!r}")
        for name in ("max_header_bytes", "max_connections", "max_connections_per_client"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive whole number, not {value!r}")
        if self.keyfile is not None and self.certfile is None:
            raise ValueError("keyfile needs a certfile")
        TrustedProxies(self.forwarded_allow_ips)  # raises on a bad entry

    @property
    def scheme(self) -> str:
        return "https" if self.certfile is not None else "http"


class TrustedProxies:
    """The proxies whose forwarding headers are believed: addresses and networks, or ``*``."""

    __slots__ = ("_any", "_exact", "_networks")

    def __init__(self, entries: Sequence[str]) -> None:
        self._any = False
        self._exact: set[str] = set()
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for raw in entries:
            entry = raw.strip()
            if entry == "*":
                self._any = True
            elif entry:
                try:
                    network = ipaddress.ip_network(entry.strip("[]"), strict=False)
                except ValueError:
                    raise ValueError(
                        f"forwarded-allow-ips: {entry!r} is not an IP address or network (e.g. 10.0.0.0/8, ::1, *)"
                    ) from None
                if network.num_addresses == 1:
                    self._exact.add(str(network.network_address))
                else:
                    self._networks.append(network)

    def __bool__(self) -> bool:
        return self._any or bool(self._exact) or bool(self._networks)

    def __contains__(self, host: object) -> bool:
        if self._any:
            return True
        if not isinstance(host, str) or not (self._exact or self._networks):
            return False
        try:
            address = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if str(address) in self._exact:
            return True
        return any(address in network for network in self._networks)


def tls_context(options: ServerOptions, alpn: Sequence[str] = ("http/1.1",)) -> ssl.SSLContext | None:
    """The server's TLS context (TLS 1.2 or newer), or None without a certificate.

    Raises:
        ValueError: the certificate or key cannot be read or do not match, naming the file.
    """
    if options.certfile is None:
        return None
    for name in (options.certfile, options.keyfile):
        if name is not None and not os.path.isfile(name):
            raise ValueError(f"cannot read the TLS certificate or key {name}: no such file")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(options.certfile, options.keyfile)
    except (ssl.SSLError, OSError) as exc:
        files = options.certfile + (f" and {options.keyfile}" if options.keyfile else "")
        if isinstance(exc, ssl.SSLError):
            reason = "not a PEM certificate chain with its matching private key"
            if options.keyfile is None:
                reason += " (give the key with keyfile if it is in a file of its own)"
        else:
            reason = exc.strerror or str(exc)
        raise ValueError(f"cannot load the TLS certificate {files}: {reason}") from None
    context.set_alpn_protocols(list(alpn))
    return context


def address(sockaddr: Any) -> tuple[str, int] | None:
    """An ASGI ``client``/``server`` value from a socket address."""
    if isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
        return (str(sockaddr[0]), int(sockaddr[1]))
    return None


def url_of(sockaddr: Any, scheme: str) -> str:
    host, port = sockaddr[0], sockaddr[1]
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def plain_response(status: int, text: str) -> bytes:
    """A complete error response of the server's own, written before any request was read (there
    is no request to answer in), closing the connection."""
    body = f"{text}\n".encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


async def close_gently(stream: trio.abc.Stream, *, drain: bool = True) -> None:
    """Half-closes (on a plain socket), then reads briefly until the client's end, so bytes it
    sent that were never read do not turn into a reset that destroys the response still in
    flight. Shielded, bounded."""
    with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_LINGER_S):
        try:
            if isinstance(stream, TcpStream | trio.SocketStream):
                await stream.send_eof()
            while drain and await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError, OSError):
            pass
    await trio.aclose_forcefully(stream)


class Handle(Protocol):
    """What the sweeper and the drain know of a connection."""

    #: when the current wait on the client ends the connection (``NEVER`` when not waiting)
    deadline: float
    #: since when the connection waits for a request with nothing read (``NEVER`` when busy)
    idle_since: float

    def expire(self) -> None:
        """The wait on the client is over: end the connection."""

    def on_closing(self) -> None:
        """The server shuts down: end what is idle or streams forever; let the rest finish."""


@dataclass(frozen=True, slots=True)
class Accepted:
    """A connection admitted: its stream (TLS already wrapped, not yet shaken hands), its
    addresses and scheme, and the registry to register its :class:`Handle` with."""

    stream: trio.abc.Stream
    client: tuple[str, int] | None
    local: tuple[str, int] | None
    scheme: str
    connections: Connections


class Connections:
    """Every connection served: admission by count and by client address, the sweeper, the drain."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.trusted = TrustedProxies(options.forwarded_allow_ips)
        self.handles: set[Handle] = set()
        #: admitted connections per client address (trusted proxies are not counted)
        self.per_client: dict[str, int] = {}
        self.admitted = 0
        self.closing = False
        self.all_closed = trio.Event()

    def admit(self, host: str | None) -> str | None:
        """Takes a slot for a new connection from ``host``; or why not (it then gets a 503)."""
        if self.closing:
            return "the server is shutting down"
        if host is not None and host not in self.trusted:
            count = self.per_client.get(host, 0)
            if count >= self.options.max_connections_per_client:
                return "too many connections from your address"
        if self.admitted >= self.options.max_connections and not self._evict_idle():
            return "the server is busy"
        self.admitted += 1
        if host is not None and host not in self.trusted:
            self.per_client[host] = self.per_client.get(host, 0) + 1
        return None

    def release(self, host: str | None) -> None:
        self.admitted -= 1
        if host is not None and host in self.per_client:
            left = self.per_client[host] - 1
            if left > 0:
                self.per_client[host] = left
            else:
                del self.per_client[host]
        if self.closing and self.admitted <= 0:
            self.all_closed.set()

    def _evict_idle(self) -> bool:
        """Ends the connection idle longest to make room; whether there was one."""
        oldest: Handle | None = None
        for handle in self.handles:
            if handle.idle_since != NEVER and (oldest is None or handle.idle_since < oldest.idle_since):
                oldest = handle
        if oldest is None:
            return False
        oldest.idle_since = NEVER
        oldest.expire()
        return True

    async def sweep(self) -> None:
        while True:
            await trio.sleep(SWEEP_INTERVAL_S)
            now = trio.current_time()
            for handle in list(self.handles):
                if handle.deadline <= now:
                    handle.expire()

    def begin_closing(self) -> None:
        self.closing = True
        if self.admitted <= 0:
            self.all_closed.set()
        for handle in list(self.handles):
            handle.on_closing()


ConnectionHandler = Callable[[Accepted], Awaitable[None]]


async def _admit_and_serve(
    connections: Connections,
    handler: ConnectionHandler,
    tls: ssl.SSLContext | None,
    stream: trio.SocketStream,
) -> None:
    """One accepted socket, for its whole life (:func:`trio.serve_listeners` closes it)."""
    try:
        client = address(stream.socket.getpeername())
        local = address(stream.socket.getsockname())
    except OSError:  # gone before we looked
        await trio.aclose_forcefully(stream)
        return
    host = client[0] if client else None
    refusal = connections.admit(host)
    if refusal is not None:
        # said and closed at once: a refused client gets no lingering read (one address opening
        # connections by the thousand must cost the service as little as can be)
        log.debug("%s: connection refused: %s", host, refusal)
        if tls is None:  # a TLS client would read plain text as garbage: it just sees the close
            with trio.move_on_after(CLOSE_LINGER_S):
                try:
                    await stream.send_all(plain_response(503, refusal))
                    await stream.send_eof()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass
        await trio.aclose_forcefully(stream)
        return
    plain = TcpStream(stream)
    try:
        served: trio.abc.Stream = plain
        if tls is not None:
            served = trio.SSLStream(plain, tls, server_side=True, https_compatible=True)
        await handler(Accepted(served, client, local, "https" if tls is not None else "http", connections))
    finally:
        plain.close()
        connections.release(host)


async def run_server(
    app: ASGIApp,
    handler: Callable[[dict[str, Any]], ConnectionHandler],
    *,
    host: str,
    port: int,
    options: ServerOptions,
    tls: ssl.SSLContext | None,
    on_closing: Callable[[], Awaitable[None]] | None = None,
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serves ``app`` with the connection handler ``handler(lifespan_state)`` makes, on
    ``host:port``, until cancelled or ``shutdown_trigger`` returns (see the module's docs).

    Raises:
        OSError: the address cannot be bound.
        StartupFailed: the app's lifespan startup failed or took too long.
    """
    listeners = await trio.open_tcp_listeners(port, host=host.strip("[]") or None)
    failed: StartupFailed | None = None
    try:
        lifespan = Lifespan(app)
        async with trio.open_nursery() as outer:
            outer.start_soon(lifespan.run)
            try:
                await lifespan.start(options.lifespan_timeout_s)
            except StartupFailed as exc:
                failed = exc  # raised below, outside the nursery (not inside an exception group)
            else:
                connections = Connections(options)
                serve_one = partial(_admit_and_serve, connections, handler(lifespan.state), tls)
                await _accept(connections, listeners, serve_one, options, on_closing, shutdown_trigger, task_status)
                await lifespan.shutdown(options.lifespan_timeout_s)
            outer.cancel_scope.cancel()
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)
    if failed is not None:
        raise failed


async def _accept(
    connections: Connections,
    listeners: list[trio.SocketListener],
    serve_one: Callable[[trio.SocketStream], Awaitable[None]],
    options: ServerOptions,
    on_closing: Callable[[], Awaitable[None]] | None,
    shutdown_trigger: Callable[[], Awaitable[object]] | None,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    """Accepts until ``shutdown_trigger`` returns, then drains (bounded) and closes the rest."""
    urls = [url_of(listener.socket.getsockname(), options.scheme) for listener in listeners]
    async with trio.open_nursery() as handlers:
        async with trio.open_nursery() as accepting:
            handlers.start_soon(connections.sweep)
            await accepting.start(partial(trio.serve_listeners, serve_one, listeners, handler_nursery=handlers))
            log.info("serving on %s", ", ".join(urls))
            task_status.started(urls)
            if shutdown_trigger is None:
                await trio.sleep_forever()
            else:
                await shutdown_trigger()
            accepting.cancel_scope.cancel()
        for listener in listeners:
            await listener.aclose()
        connections.begin_closing()
        if on_closing is not None:
            await on_closing()
        with trio.move_on_after(options.drain_timeout_s):
            await connections.all_closed.wait()
        if connections.admitted > 0:
            log.info("%d connection(s) still busy after the drain; closing them", connections.admitted)
        handlers.cancel_scope.cancel()
