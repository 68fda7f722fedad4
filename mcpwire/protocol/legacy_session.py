"""The life of a legacy session over HTTP, without I/O: open, lost, renewed, restored.

Theory of operation: a legacy (2024-11-05 .. 2025-11-25) connection over HTTP lives in a session
the server may forget. Over Streamable HTTP it answers a request carrying the session id with
404 (HT-L12: the client "MUST start a new session"); over HTTP+SSE the stream drops, and the
reconnected stream is a new session (HS-04). Either way the client initialises a new session
once, however many calls noticed the loss, and then restores what belonged to the old one:
2025-11-25 transports, "after re-initialization, everything session-scoped is lost: re-issue
logging/setLevel, resources/subscribe, re-open GET stream" (HT-L13).

:class:`LegacySession` keeps that state and decides; the client performs the actions it returns
(:class:`Renew`, then :class:`OpenServerStream`, :class:`SetLogLevel`, :class:`Resubscribe`, or
:class:`Fail`). Sessions are counted (``generation``): a call that saw generation *n* fail asks
for a renewal of *n*; when *n* was already replaced, it is simply sent again, on the new one.
"""

from __future__ import annotations

import enum

import msgspec

__all__ = [
    "Action",
    "Fail",
    "LegacySession",
    "OpenServerStream",
    "Renew",
    "Resubscribe",
    "SessionLife",
    "SetLogLevel",
]


class SessionLife(enum.Enum):
    """Where a legacy HTTP session is in its life."""

    #: usable; requests carry its id.
    OPEN = "open"
    #: lost; a new one is being initialised (calls wait for it).
    RENEWING = "renewing"
    #: could not be renewed: the connection is lost.
    FAILED = "failed"
    #: the client closed it.
    CLOSED = "closed"


class Renew(msgspec.Struct, frozen=True):
    """Initialise a new session (``initialize`` with the same revision, then
    ``notifications/initialized``), then report :meth:`LegacySession.renewed` or
    :meth:`LegacySession.renewal_failed`."""


class OpenServerStream(msgspec.Struct, frozen=True):
    """Open the standalone GET stream again: the old one belonged to the old session."""


class SetLogLevel(msgspec.Struct, frozen=True):
    """Send ``logging/setLevel`` again with this level."""

    level: str


class Resubscribe(msgspec.Struct, frozen=True):
    """Send ``resources/subscribe`` again for this URI."""

    uri: str


class Fail(msgspec.Struct, frozen=True):
    """The session could not be renewed: the connection is lost, for this reason."""

    reason: str


Action = Renew | OpenServerStream | SetLogLevel | Resubscribe | Fail


class LegacySession:
    """The session-scoped state of one legacy HTTP connection, and its renewals.

    Args:
        server_stream: whether the standalone GET stream is wanted (it is reopened on renewal).
    """

    __slots__ = ("_subscriptions", "generation", "life", "log_level", "server_stream")

    def __init__(self, *, server_stream: bool = True) -> None:
        self.life = SessionLife.OPEN
        #: sessions opened so far, after the first (a renewal replaces generation n by n + 1)
        self.generation = 0
        self.server_stream = server_stream
        self.log_level: str | None = None
        self._subscriptions: dict[str, int] = {}  # URI -> open subscriptions to it, in order

    # -- what the session holds ---------------------------------------------------------------

    def level_set(self, level: str) -> None:
        """``logging/setLevel`` succeeded: a new session gets it again."""
        self.log_level = level

    def subscribed(self, uri: str) -> None:
        """``resources/subscribe`` succeeded: a new session subscribes again."""
        self._subscriptions[uri] = self._subscriptions.get(uri, 0) + 1

    def unsubscribed(self, uri: str) -> None:
        count = self._subscriptions.get(uri, 0) - 1
        if count > 0:
            self._subscriptions[uri] = count
        else:
            self._subscriptions.pop(uri, None)

    @property
    def subscriptions(self) -> list[str]:
        """The URIs subscribed to, each once, in the order first subscribed."""
        return list(self._subscriptions)

    # -- its life ---------------------------------------------------------------------------------

    def lost(self, generation: int) -> list[Action]:
        """A request sent on session ``generation`` found it gone (or the transport reconnected
        without it). Renew it unless it is already being renewed or was replaced since (then
        the caller waits for, or simply uses, the new one)."""
        if self.life is not SessionLife.OPEN or generation != self.generation:
            return []
        self.life = SessionLife.RENEWING
        return [Renew()]

    def renewed(self) -> list[Action]:
        """The new session is initialised: restore what belonged to the old one (HT-L13)."""
        if self.life is not SessionLife.RENEWING:
            return []
        self.life = SessionLife.OPEN
        self.generation += 1
        actions: list[Action] = []
        if self.server_stream:
            actions.append(OpenServerStream())
        if self.log_level is not None:
            actions.append(SetLogLevel(self.log_level))
        actions.extend(Resubscribe(uri) for uri in self._subscriptions)
        return actions

    def renewal_failed(self, reason: str) -> list[Action]:
        if self.life is not SessionLife.RENEWING:
            return []
        self.life = SessionLife.FAILED
        return [Fail(reason)]

    def closed(self) -> None:
        self.life = SessionLife.CLOSED
