"""A connection's shared state: what every part of a client reads, each part writing its own.

Theory of operation: a :class:`~mcpwire.client.Client` is a few parts with one concern each - the
request engine, the connector (transport, era detection, sessions), the dispatcher (what the
transport reads), the subscriptions - around one :class:`Link`: the server's spec and label, the
options, the sans-I/O session, the current transport, whether the connection is lost or closing,
and the counters behind :meth:`~mcpwire.Client.statistics`. The connector replaces the transport
and the session-ready event; the dispatcher records a lost connection; the engine counts requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from ..actors.base import Transport
from ..errors import ClientClosed, MCPWireError, RemoteProtocolError, ServerGone
from ..protocol.http import HeaderSpec
from ..protocol.legacy_session import LegacySession
from ..protocol.session import ClientSession
from ..transports import HttpServer, StdioServer
from .options import ClientOptions
from .waiters import Waiter

__all__ = ["Counters", "Link", "ServerSpec"]

ServerSpec = StdioServer | HttpServer


def _ready() -> trio.Event:
    event = trio.Event()
    event.set()
    return event


@dataclass(slots=True)
class Counters:
    """What :meth:`~mcpwire.Client.statistics` reports beside the request table's own counts."""

    requests_sent: int = 0
    notifications: int = 0
    dropped: int = 0
    #: the table's unknown-answer count when one was last logged
    unknown_logged: int = 0
    server_requests: int = 0
    noise: int = 0
    violations: int = 0
    restarts: int = 0


@dataclass(slots=True, eq=False)
class Link:
    """One connection's shared state."""

    spec: ServerSpec
    label: str
    options: ClientOptions
    nursery: trio.Nursery
    session: ClientSession[Waiter]
    transport: Transport | None = None
    #: why the connection was lost (its first cause); ``None`` while it is up
    lost: BaseException | None = None
    #: ``aclose()`` has begun
    closing: bool = False
    #: set while the session is usable; an unset one while a new session is initialised
    session_ready: trio.Event = field(default_factory=_ready)
    #: legacy HTTP: the session's life and what belongs to it (``None`` elsewhere)
    legacy: LegacySession | None = None
    #: ``call_tool`` calls in flight (a large message is then first tried as their answer)
    tool_calls: int = 0
    #: 2026-07-28 HTTP: the ``x-mcp-header`` annotations of each listed tool (HT-M08)
    tool_headers: dict[str, HeaderSpec] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)

    @property
    def is_http(self) -> bool:
        return isinstance(self.spec, HttpServer)

    def gone_error(self) -> MCPWireError:
        """The error for a request made on a connection that is closed or lost."""
        if self.closing:
            return ClientClosed(f"the client of server '{self.label}' is closed")
        lost = self.lost
        if isinstance(lost, ServerGone):
            gone = ServerGone(lost.reason, server=self.label, returncode=lost.returncode, stderr_tail=lost.stderr_tail)
            gone.__cause__ = lost.__cause__
            return gone
        if isinstance(lost, RemoteProtocolError):
            return RemoteProtocolError(f"the connection was closed after an earlier error: {lost}")
        return ServerGone(f"server '{self.label}' is not connected", server=self.label)
