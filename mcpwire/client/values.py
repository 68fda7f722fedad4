"""The small values a client hands out: progress updates, notifications, statistics."""

from __future__ import annotations

from typing import Protocol

import msgspec

from ..protocol.jsonrpc import RequestId
from ..protocol.types import JSONObject
from ..redaction import clean_terminal, shorten

__all__ = [
    "ClientStatistics",
    "NotDeclared",
    "NotificationSink",
    "Progress",
    "ServerNotification",
    "printable",
    "progress_from",
]


class NotDeclared(Exception):
    """The server asked for something this client declared no handler for."""


class Progress(msgspec.Struct, frozen=True):
    """One ``notifications/progress`` update for a request."""

    progress: float
    total: float | None = None
    message: str | None = None


class ServerNotification(msgspec.Struct, frozen=True):
    """A notification from the server. ``params`` is the decoded JSON object."""

    method: str
    params: JSONObject
    subscription_id: RequestId | None = None


class NotificationSink(Protocol):
    """What the dispatcher hands a subscription's notifications to (a
    :class:`~mcpwire.client.Subscription`); ``id``: its ``subscriptions/listen`` request id."""

    id: RequestId | None

    def deliver(self, note: ServerNotification) -> None: ...

    def end(self, error: BaseException | None) -> None: ...


class ClientStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one client connection (a snapshot)."""

    requests_sent: int
    pending: int
    late_responses: int
    unknown_responses: int
    notifications_received: int
    notifications_dropped: int
    server_requests: int
    non_protocol_lines: int
    protocol_violations: int
    restarts: int
    bytes_sent: int
    bytes_received: int


def progress_from(params: JSONObject) -> Progress:
    """A :class:`Progress` from ``notifications/progress`` params (bad fields read as absent)."""
    value = params.get("progress")
    total = params.get("total")
    message = params.get("message")
    return Progress(
        float(value) if isinstance(value, int | float) else 0.0,
        float(total) if isinstance(total, int | float) else None,
        message if isinstance(message, str) else None,
    )


def printable(text: str, limit: int = 200) -> str:
    """Server text made safe for one log line or message: no terminal escapes, bounded (UT-L05)."""
    return shorten(clean_terminal(text, newlines=False), limit)
