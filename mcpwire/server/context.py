"""One request being served: what the client declared, and what a handler may do meanwhile.

Theory of operation: the connection admits a request (its era, revision and the client's
capabilities are known by then) and hands the handler a :class:`RequestContext`. Everything the
handler sends while it runs (progress, log messages, server-to-client requests, notifications)
goes to the request's own outlet, so that over Streamable HTTP it travels on the request's
response stream. The context's cancel scope is cancelled by ``notifications/cancelled`` (or by
a closed 2026-07-28 response stream); a cancelled request is never answered.

Server-to-client requests exist in the legacy era only (:meth:`RequestContext.request`); in
2026-07-28 a handler that needs the client raises :class:`~mcpwire.server.core.InputRequired`
and finds the answers of the retry in :attr:`RequestContext.input_responses`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol

import trio

from ..protocol.serving import INVALID_PARAMS, LOG_LEVELS, is_request_id
from ..protocol.versions import V2025_03_26, Era
from .base import JSONObject, Outlet, RequestError

__all__ = ["INPUT_TIMEOUT_S", "ClientRequestError", "Peer", "RequestContext", "Waiter"]

log = logging.getLogger("mcpwire.server")

#: How long a server-to-client request waits for the client's answer by default.
INPUT_TIMEOUT_S: Final = 30.0
#: How long the ``notifications/cancelled`` of an abandoned server request may take to send.
_CANCEL_NOTICE_S: Final = 2.0


@dataclass(slots=True, eq=False)
class Waiter:
    """A server-to-client request awaiting the client's answer."""

    id: str
    context: RequestContext
    answered: trio.Event = field(default_factory=trio.Event)
    response: JSONObject | None = None


class Peer(Protocol):
    """What a request's context needs of the connection it came on (a
    :class:`~mcpwire.server.connection.Connection`)."""

    @property
    def log_level(self) -> str | None: ...

    @property
    def closed(self) -> bool: ...

    @property
    def ended(self) -> str | None:
        """Why the connection ended (None while it lives)."""
        ...

    @property
    def input_timeout(self) -> float:
        """How long a server-to-client request waits for the client."""
        ...

    async def notify_unrelated(
        self, method: str, params: JSONObject | None = None, *, origin: RequestContext | None = None
    ) -> None:
        """A notification about the connection rather than a request."""
        ...

    def new_waiter(self, context: RequestContext) -> Waiter:
        """A waiter for a request this context sends the client, under a new id."""
        ...

    def forget_waiter(self, waiter_id: str) -> None: ...


class ClientRequestError(Exception):
    """A server-to-client request failed: the client answered with an error, or not in time."""

    def __init__(self, method: str, message: str, *, error: JSONObject | None = None) -> None:
        super().__init__(message)
        self.method = method
        #: the client's error object (None when it did not answer in time)
        self.error = error


class RequestContext:
    """One request, as its handler sees it.

    Attributes:
        id, method, params: the request.
        era, revision: the era and protocol revision the request is served in.
        client_capabilities, client_info: declared in ``initialize`` (legacy) or in the
            request's ``_meta`` (2026-07-28).
        progress_token: ``params._meta.progressToken`` when the client asked for progress.
        scope: cancelled when the client cancels the request.
        connection: the connection (and legacy session) the request arrived on.
        outlet: where the request's messages go.
        transport: what the transport knows of the request's origin.
    """

    __slots__ = (
        "_log_level",
        "cancelled",
        "client_capabilities",
        "client_info",
        "connection",
        "ended",
        "era",
        "id",
        "method",
        "outlet",
        "params",
        "progress_token",
        "revision",
        "scope",
        "transport",
    )

    def __init__(
        self,
        connection: Peer,
        request_id: int | str,
        method: str,
        params: JSONObject,
        *,
        era: Era,
        revision: str,
        client_capabilities: JSONObject,
        client_info: JSONObject,
        log_level: str | None,
        outlet: Outlet,
        transport: Mapping[str, str] | None = None,
        scope: trio.CancelScope | None = None,
    ) -> None:
        self.connection = connection
        self.id = request_id
        self.method = method
        self.params = params
        self.era = era
        self.revision = revision
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self._log_level = log_level
        self.outlet = outlet
        #: what the transport knows of the request's origin (over HTTP: ``trace_id``, ``caller``)
        self.transport: Mapping[str, str] = transport or {}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.progress_token: int | str | None = token if isinstance(token, int | str) and is_request_id(token) else None
        self.scope = trio.CancelScope() if scope is None else scope
        #: set when the client cancelled the request (it is then never answered)
        self.cancelled = False
        #: why the request was cancelled, as a sentence (``notifications/cancelled``, the session ended)
        self.ended: str | None = None

    @property
    def modern(self) -> bool:
        """True in the 2026-07-28 era."""
        return self.era is Era.MODERN

    @property
    def log_level(self) -> str | None:
        """The least severe level the client wants (None: send no log messages)."""
        if self.era is Era.LEGACY:
            return self.connection.log_level
        return self._log_level

    def since(self, revision: str) -> bool:
        """True when the request's revision has what ``revision`` introduced."""
        return self.revision >= revision

    def cancel(self, reason: str | None = None) -> None:
        """Cancel the request: its handler stops and it is never answered (``reason``: why)."""
        self.cancelled = True
        if self.ended is None:
            self.ended = reason
        self.scope.cancel()

    @property
    def listening(self) -> bool:
        """Whether a response is reading what the request sends now. A legacy request over
        Streamable HTTP outlives its connection: its stream waits unread until the client resumes
        it (``Last-Event-ID``); elsewhere the transport cancels the request when its client goes,
        and this is True."""
        readers = getattr(self.outlet, "readers", None)
        return self.era is Era.MODERN or not isinstance(readers, int) or readers > 0 or self.outlet.closed

    @property
    def resumable(self) -> bool:
        """Whether the client may resume the request's stream after its connection closed."""
        return self.era is Era.LEGACY and getattr(self.outlet, "resumable", True) is True

    # -- sending while the request runs -----------------------------------------------------

    async def notify(self, method: str, params: JSONObject | None = None) -> None:
        """Send a notification related to this request (on its stream, over HTTP)."""
        if self.cancelled:
            return
        message: JSONObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.outlet.send(message)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """``notifications/progress`` when the client asked for it (a progress token), else nothing."""
        if self.progress_token is None or not math.isfinite(progress):
            return
        params: JSONObject = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and self.since(V2025_03_26):  # 2024-11-05 progress had no message
            params["message"] = message
        await self.notify("notifications/progress", params)

    async def log(self, level: str, data: object, *, logger: str | None = None) -> None:
        """``notifications/message`` when the client wants ``level`` (2026-07-28: only when the
        request's ``_meta`` names a level: "The server MUST NOT emit notifications/message for
        a request that does not include this field")."""
        threshold = self.log_level
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params: JSONObject = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.notify("notifications/message", params)

    def drop_connection(self) -> None:
        """End the request's current HTTP response without ending its stream (the client
        resumes it with ``Last-Event-ID``); nothing happens on other transports."""
        self.outlet.drop_connection()

    # -- asking the client --------------------------------------------------------------------

    async def request(
        self, method: str, params: JSONObject | None = None, *, timeout: float = INPUT_TIMEOUT_S
    ) -> object:
        """Send a server-to-client request (legacy era) and return the client's ``result``.

        Cancellation: when the request is cancelled meanwhile, the client is told with
        ``notifications/cancelled`` (bounded, shielded) and the cancellation propagates.

        Raises:
            RuntimeError: called in the 2026-07-28 era (raise InputRequired instead).
            ClientRequestError: the client answered with an error, or not within ``timeout``.
        """
        if self.era is Era.MODERN:
            raise RuntimeError("2026-07-28 has no server-to-client requests: raise InputRequired instead")
        waiter: Waiter = self.connection.new_waiter(self)
        message: JSONObject = {"jsonrpc": "2.0", "id": waiter.id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self.outlet.send(message)
            with trio.move_on_after(timeout):
                await waiter.answered.wait()
            if waiter.response is None:
                await self._abandon(waiter.id, "no answer in time")
                raise ClientRequestError(method, f"no answer to {method} within {timeout:g} s")
        except trio.Cancelled:
            with trio.CancelScope(shield=True):
                await self._abandon(waiter.id, "the request was cancelled")
            raise
        finally:
            self.connection.forget_waiter(waiter.id)
        error = waiter.response.get("error")
        if error is not None:
            detail = error.get("message") if isinstance(error, dict) else error
            raise ClientRequestError(
                method, f"{method} failed: {detail}", error=error if isinstance(error, dict) else None
            )
        return waiter.response.get("result")

    async def _abandon(self, server_id: str, reason: str) -> None:
        if self.connection.closed or self.outlet.closed:
            return
        with trio.move_on_after(_CANCEL_NOTICE_S):
            await self.outlet.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": server_id, "reason": reason},
                }
            )

    @property
    def input_responses(self) -> JSONObject:
        """2026-07-28: the ``inputResponses`` of a retried request (empty on the first attempt).

        Raises:
            RequestError: ``inputResponses`` is not an object (-32602: "malformed input is a
                protocol error").
        """
        responses = self.params.get("inputResponses", {})
        if not isinstance(responses, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'inputResponses' must be an object")
        return responses
