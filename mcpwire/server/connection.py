"""One peer of a server: admission by era, the legacy lifecycle, dispatch, cancellation, batches.

Theory of operation: a :class:`Connection` is fed decoded JSON values (:meth:`Connection.receive`)
together with the outlet their answers go to. A stdio process is one connection; over HTTP each
legacy session is one, and 2026-07-28 requests, being stateless, share one that serves each
request inside the HTTP request's own task (:meth:`Connection.serve`).

Each request is admitted first (:meth:`Connection.admit`): in dual-era mode a request whose
``params._meta`` names a protocol version (or whose method exists only in 2026-07-28) is
modern and must carry the fields every modern request carries; anything else needs the legacy
session that ``initialize`` opened. ``initialize``, ``ping`` and the methods that change the
session (``logging/setLevel``, ``resources/subscribe``) are answered at once, in order, so that
the next message sees their effect; every other request runs in a task of its own in the
connection's nursery, inside its context's cancel scope. ``notifications/cancelled`` cancels
that scope; a cancelled request is never answered. Answers to the server's own requests resolve
their :class:`Waiter`. A 2025-03-26 batch is dispatched item by item and answered with one
array once every request in it is answered (:class:`_Batch`).

:meth:`Connection.close` cancels what is in flight and ends open ``subscriptions/listen``
streams with their completion result (2026-07-28 basic/patterns/subscriptions: "When the server
ends a subscription on its own initiative (for example, during shutdown), it SHOULD respond to
the original subscriptions/listen request with a completion result before closing the stream").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Final

import trio

from ..protocol.serving import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LOG_LEVELS,
    METHOD_NOT_FOUND,
    InNotification,
    InRequest,
    InResponse,
    Refusal,
    classify_incoming,
    error_message,
    is_modern_request,
    is_request_id,
    modern_meta,
    negotiate,
)
from ..protocol.types import META_SUBSCRIPTION_ID
from ..protocol.versions import MODERN_REVISIONS, V2025_03_26, Era
from .context import RequestContext, Waiter
from .core import LIST_KINDS, InputRequired, JSONObject, Listen, Outlet, RequestError, Server, log

__all__ = ["Connection", "DEFAULT_LOG_LEVEL", "Waiter"]

#: The legacy session's log level until ``logging/setLevel``.
DEFAULT_LOG_LEVEL: Final = "info"
_INLINE: Final = frozenset({"logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
_MODERN_ONLY_MACHINERY: Final = frozenset({"server/discover", "subscriptions/listen"})


class Connection:
    """One peer: a stdio process, a legacy HTTP session, or the 2026-07-28 HTTP requests.

    Args:
        server: what is served.
        nursery: where request handlers run (they outlive the message that started them).
        standalone: where messages unrelated to any request go (stdout; the session's GET
            stream over HTTP, set and cleared by the transport).
        era: the lifecycles this connection offers (defaults to the server's).
        input_timeout: seconds a server-to-client request waits for the client.
    """

    def __init__(
        self,
        server: Server,
        nursery: trio.Nursery,
        *,
        standalone: Outlet | None = None,
        era: str | None = None,
        input_timeout: float = 30.0,
        label: str = "connection",
    ) -> None:
        self.server = server
        self.era = era or server.era
        self.standalone = standalone
        self.input_timeout = input_timeout
        self.label = label
        self._nursery = nursery
        #: the legacy session's revision, once ``initialize`` was answered
        self.revision: str | None = None
        self.client_capabilities: JSONObject = {}
        self.client_info: JSONObject = {}
        self.log_level = DEFAULT_LOG_LEVEL
        #: URIs of legacy ``resources/subscribe``
        self.subscriptions: set[str] = set()
        self.closed = False
        #: why the connection closed (the session was deleted, its stream closed...), once it did
        self.ended: str | None = None
        self._inflight: dict[object, RequestContext] = {}
        #: open listen streams, by their context (ids may repeat across 2026-07-28 HTTP clients)
        self._listens: dict[RequestContext, trio.Event] = {}
        self._waiters: dict[str, Waiter] = {}
        self._next_waiter = 0
        self._idle: trio.Event | None = None

    # -- input ----------------------------------------------------------------------------

    async def receive(self, message: object, outlet: Outlet, *, transport: Mapping[str, str] | None = None) -> bool:
        """Handle one decoded message (or a 2025-03-26 batch); True when an answer will go to
        ``outlet`` (a request, or an invalid message that is answered with an error).

        ``transport`` is what the transport knows about where the message came from (over HTTP
        the service's ``trace_id`` and ``caller``); requests carry it in their context.
        """
        if self.closed:
            return False
        if isinstance(message, list):
            return await self._batch(message, outlet, transport)
        item = classify_incoming(message)
        if isinstance(item, InRequest):
            await self._request(item, outlet, spawn=True, transport=transport)
            return True
        if isinstance(item, InNotification):
            self._notification(item)
        elif isinstance(item, InResponse):
            self._response(item)
        elif item.answer is not None:
            await outlet.send(item.answer, final=True)
            return True
        return False

    async def serve(
        self,
        request: InRequest,
        outlet: Outlet,
        *,
        transport: Mapping[str, str] | None = None,
        scope: trio.CancelScope | None = None,
    ) -> None:
        """Serve one request in the calling task (2026-07-28 over HTTP, where the response stream
        is the request's lifetime: cancel the caller, or ``scope``, to cancel the request).

        ``scope``: the request's own cancel scope, made by the caller (cancelled, the request
        ends unanswered as if its client had cancelled it)."""
        await self._request(request, outlet, spawn=False, transport=transport, scope=scope)

    async def serve_tracked(
        self, request: InRequest, outlet: Outlet, *, transport: Mapping[str, str] | None = None
    ) -> None:
        """Serve one legacy request in the calling task, in flight as one :meth:`receive`
        started: ``notifications/cancelled`` and :meth:`close` cancel it (an HTTP response that
        waits for the request anyway saves a task)."""
        await self._request(request, outlet, spawn=False, track=True, transport=transport)

    async def _batch(self, items: list[object], outlet: Outlet, transport: Mapping[str, str] | None) -> bool:
        # JSON-RPC batches exist in 2025-03-26 only (added by it, removed by 2025-06-18).
        if self.revision != V2025_03_26 or self.era == "modern":
            answer = error_message(
                None,
                INVALID_REQUEST,
                "Invalid Request: JSON-RPC batches are only supported in protocol revision 2025-03-26",
            )
            await outlet.send(answer, final=True)
            return True
        if not items:
            await outlet.send(error_message(None, INVALID_REQUEST, "Invalid Request: empty batch"), final=True)
            return True
        batch = _Batch(outlet)
        answers = False
        for item in items:
            batch.expect()
            if await self.receive(item, batch, transport=transport):
                answers = True
            else:
                await batch.skip()
        await batch.skip()  # the dispatch loop's own share
        return answers

    def _notification(self, item: InNotification) -> None:
        if item.method == "notifications/cancelled":
            request_id = item.params.get("requestId")
            if is_request_id(request_id):
                self.cancel(request_id)
        elif item.method == "notifications/initialized":
            log.debug("%s: the client sent notifications/initialized", self.label)
        else:
            log.debug("%s: ignoring notification %s", self.label, item.method)

    def _response(self, item: InResponse) -> None:
        waiter = self._waiters.get(item.id) if isinstance(item.id, str) else None
        if waiter is None:
            log.warning("%s: dropping a response to unknown request id %r", self.label, item.id)
            return
        waiter.response = item.message
        waiter.answered.set()

    def cancel(self, request_id: object) -> None:
        """Cancel a request as ``notifications/cancelled`` does: it is not answered."""
        context = self._inflight.get(request_id)
        if context is None:
            log.debug("%s: ignoring cancellation of unknown request %r", self.label, request_id)
            return
        context.cancel("the client cancelled the request (notifications/cancelled)")

    # -- admission --------------------------------------------------------------------------

    async def _request(
        self,
        request: InRequest,
        outlet: Outlet,
        *,
        spawn: bool,
        transport: Mapping[str, str] | None,
        track: bool = False,
        scope: trio.CancelScope | None = None,
    ) -> None:
        try:
            context = self.admit(request, outlet, transport=transport, scope=scope)
        except Refusal as refusal:
            await outlet.send(error_message(request.id, refusal.code, refusal.message, refusal.data), final=True)
            return
        if context.method in _AT_ONCE and context.era is Era.LEGACY:
            await self._run(context)
        elif spawn or track:
            if context.method == "subscriptions/listen" and context.id in self._inflight:
                message = f"Invalid Request: subscription {context.id!r} is already open"
                await outlet.send(error_message(context.id, INVALID_REQUEST, message), final=True)
                return
            self._inflight[context.id] = context
            if spawn:
                self._nursery.start_soon(self._run, context)
            else:
                await self._run(context)
        else:
            await self._run(context)

    def admit(
        self,
        request: InRequest,
        outlet: Outlet,
        *,
        transport: Mapping[str, str] | None = None,
        scope: trio.CancelScope | None = None,
    ) -> RequestContext:
        """The context a request is served in (``scope``: its cancel scope, when the caller made it).

        Raises:
            Refusal: the request cannot be served: an unknown method (-32601), a legacy request
                before ``initialize`` (-32600), a 2026-07-28 request with bad ``_meta``.
        """
        method, params = request.method, request.params
        modern = self.era == "modern" or (self.era == "both" and is_modern_request(method, params))
        if modern:
            if method not in _MODERN_MACHINERY and self.server.route_for(method, modern=True) is None:
                if method == "initialize":
                    # 2026-07-28 basic/versioning: "A server that supports only modern versions
                    # SHOULD name the protocol versions it supports in any error it returns to an
                    # initialize request".
                    raise Refusal(
                        METHOD_NOT_FOUND,
                        f"Method not found: initialize (this server speaks only {MODERN_REVISIONS[0]}, "
                        "with the protocol version in every request's _meta)",
                        {"supported": list(MODERN_REVISIONS)},
                    )
                raise Refusal(METHOD_NOT_FOUND, f"Method not found: {method}")
            meta = modern_meta(params)
            era, revision, caps, info, level = (
                Era.MODERN,
                meta.version,
                meta.capabilities,
                meta.client_info,
                meta.log_level,
            )
        else:
            if method not in _LEGACY_MACHINERY and self.server.route_for(method, modern=False) is None:
                raise Refusal(METHOD_NOT_FOUND, f"Method not found: {method}")
            if self.revision is None and method not in ("initialize", "ping"):  # ping: allowed before
                raise Refusal(INVALID_REQUEST, "not initialized: send 'initialize' first")
            era, revision, caps, info, level = (
                Era.LEGACY,
                self.revision or "",
                self.client_capabilities,
                self.client_info,
                None,
            )
        return RequestContext(
            self,
            request.id,
            method,
            params,
            era=era,
            revision=revision,
            client_capabilities=caps,
            client_info=info,
            log_level=level,
            outlet=outlet,
            transport=transport,
            scope=scope,
        )

    # -- running a request ---------------------------------------------------------------------

    async def _run(self, context: RequestContext) -> None:
        try:
            message = await self._answer(context)
            if message is None or context.cancelled:
                if isinstance(context.outlet, _Batch):
                    await context.outlet.skip()
                return  # cancelled: no answer
            try:
                await context.outlet.send(message, final=True)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                log.debug("%s: the answer to %r found its outlet closed", self.label, context.id)
        finally:
            if self._inflight.get(context.id) is context:
                del self._inflight[context.id]
                if self._idle is not None:
                    self._idle.set()

    async def _answer(self, context: RequestContext) -> JSONObject | None:
        """The answer to one request (None when it was cancelled)."""
        with context.scope:
            try:
                result = await self._dispatch(context)
                return {"jsonrpc": "2.0", "id": context.id, "result": self._decorate(context, result)}
            except InputRequired as exc:
                return {"jsonrpc": "2.0", "id": context.id, "result": self._decorate(context, exc.result)}
            except (RequestError, Refusal) as exc:
                return error_message(context.id, exc.code, exc.message, exc.data)
            except Exception:
                log.exception("%s: %s (id %r) failed", self.label, context.method, context.id)
                return error_message(context.id, INTERNAL_ERROR, "Internal error")
        return None

    def _decorate(self, context: RequestContext, result: JSONObject) -> JSONObject:
        return self.server.decorate(context.era is Era.MODERN, result)

    async def _dispatch(self, context: RequestContext) -> JSONObject:
        builtin = _BUILTINS.get(context.method) if context.era is Era.LEGACY else _MODERN_BUILTINS.get(context.method)
        if builtin is not None:
            return await builtin(self, context)
        route = self.server.route_for(context.method, modern=context.era is Era.MODERN)
        assert route is not None  # checked by admit
        return await route.handler(context)

    # -- the methods every server has -----------------------------------------------------------

    async def _initialize(self, context: RequestContext) -> JSONObject:
        params = context.params
        version, caps, info = (
            params.get("protocolVersion"),
            params.get("capabilities", {}),
            params.get("clientInfo", {}),
        )
        if not isinstance(version, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'protocolVersion' must be a string")
        if not isinstance(caps, dict) or not isinstance(info, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'capabilities' and 'clientInfo' must be objects")
        if self.revision is not None:
            raise RequestError(INVALID_REQUEST, "Invalid Request: already initialized")
        revision = negotiate(version)
        self.revision, self.client_capabilities, self.client_info = revision, caps, info
        self.server.sessions.add(self)
        log.info("%s: initialized: revision %s, client %r", self.label, revision, info.get("name"))
        result: JSONObject = {
            "protocolVersion": revision,
            "capabilities": self.server.capabilities(revision),
            "serverInfo": self.server.server_info(),
        }
        if self.server.instructions is not None:
            result["instructions"] = self.server.instructions
        return result

    async def _ping(self, context: RequestContext) -> JSONObject:
        return {}

    async def _set_level(self, context: RequestContext) -> JSONObject:
        level = context.params.get("level")
        if level not in LOG_LEVELS:
            raise RequestError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        self.log_level = str(level)
        return {}

    async def _subscribe(self, context: RequestContext) -> JSONObject:
        uri = context.params.get("uri")
        if not isinstance(uri, str):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'uri' must be a string")
        subscribe = context.method == "resources/subscribe"
        if subscribe:
            self.subscriptions.add(uri)
        else:
            self.subscriptions.discard(uri)
        await self.server.subscribed(uri, subscribe)
        return {}

    async def _discover(self, context: RequestContext) -> JSONObject:
        return self.server.discover()

    async def _listen(self, context: RequestContext) -> JSONObject:
        wanted = context.params.get("notifications")
        if not isinstance(wanted, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'notifications' must be an object")
        # 2026-07-28 basic/patterns/subscriptions: the acknowledgment "reflects the subset the
        # server agreed to honor. Notification types the server does not support are omitted."
        caps = self.server.capabilities(context.revision)
        granted: JSONObject = {
            flag: True for kind, flag in LIST_KINDS.items() if wanted.get(flag) is True and _lists_change(caps, kind)
        }
        uris = wanted.get("resourceSubscriptions")
        if uris is not None:
            if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
                raise RequestError(INVALID_PARAMS, "Invalid params: 'resourceSubscriptions' must be a list of strings")
            granted["resourceSubscriptions"] = list(uris)
        acknowledged = trio.Event()
        listen = Listen(context, granted, context.outlet)

        async def notify(method: str, params: JSONObject) -> None:
            await acknowledged.wait()
            await listen.notify(method, params)

        async with self.server.following(context, wanted, notify) as extra:
            granted.update(extra)
            # "MUST send notifications/subscriptions/acknowledged as the first message carrying the
            # subscription's ID": sent before the stream is registered, so no publisher can precede it.
            await listen.notify("notifications/subscriptions/acknowledged", {"notifications": granted})
            acknowledged.set()
            closing = self._listens[context] = trio.Event()
            self.server.listens.add(listen)
            if self.closed:  # closed while the acknowledgement was being sent
                closing.set()
            try:
                await closing.wait()  # until the server closes (a cancel ends it with no answer)
            finally:
                self._listens.pop(context, None)
                self.server.listens.discard(listen)
        return {"_meta": {META_SUBSCRIPTION_ID: context.id}}

    # -- server-to-client requests ---------------------------------------------------------------

    def new_waiter(self, context: RequestContext) -> Waiter:
        """Register a server-to-client request of ``context`` (its id is ``srv-<n>``)."""
        self._next_waiter += 1
        waiter = Waiter(f"srv-{self._next_waiter}", context)
        self._waiters[waiter.id] = waiter
        return waiter

    def forget_waiter(self, waiter_id: str) -> None:
        self._waiters.pop(waiter_id, None)

    # -- output unrelated to a request -------------------------------------------------------------

    async def notify_unrelated(
        self, method: str, params: JSONObject | None = None, *, origin: RequestContext | None = None
    ) -> None:
        """A notification about the session rather than a request (list changes, resource
        updates): on the standalone stream; when there is none, on the stream of ``origin`` if
        that request belongs to this connection, else it is dropped."""
        message: JSONObject = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if self.standalone is not None and not self.standalone.closed:
            await self.standalone.send(message)
        elif origin is not None and origin.connection is self and not origin.outlet.closed:
            await origin.outlet.send(message)

    # -- closing ---------------------------------------------------------------------------------

    async def close(self, reason: str = "the connection closed") -> None:
        """Cancel what is in flight (unanswered) and end open listen streams with their completion
        result; ``reason`` (why it closes) is kept in :attr:`ended`. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.ended = reason
        self.server.sessions.discard(self)
        for waiter in list(self._waiters.values()):
            waiter.answered.set()
        for context in list(self._inflight.values()):
            if context.method != "subscriptions/listen":
                context.cancel(reason)
        for closing in list(self._listens.values()):
            closing.set()

    @property
    def inflight(self) -> int:
        """Requests being served (those started by :meth:`receive`)."""
        return len(self._inflight)

    async def wait_idle(self, *, listens: bool = True) -> None:
        """Wait until no request started by :meth:`receive` is in flight (``listens=False``:
        open listen streams, which never end by themselves, do not count)."""
        while any(listens or c.method != "subscriptions/listen" for c in self._inflight.values()):
            self._idle = trio.Event()
            await self._idle.wait()


def _lists_change(capabilities: JSONObject, kind: str) -> bool:
    declared = capabilities.get(kind)
    return isinstance(declared, dict) and declared.get("listChanged") is True


_AT_ONCE: Final = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
_Builtin = Callable[[Connection, RequestContext], Awaitable[JSONObject]]
_BUILTINS: Final[dict[str, _Builtin]] = {
    "initialize": Connection._initialize,
    "ping": Connection._ping,
    "logging/setLevel": Connection._set_level,
    "resources/subscribe": Connection._subscribe,
    "resources/unsubscribe": Connection._subscribe,
}
_MODERN_BUILTINS: Final[dict[str, _Builtin]] = {
    "server/discover": Connection._discover,
    "subscriptions/listen": Connection._listen,
}
_LEGACY_MACHINERY: Final = frozenset(_BUILTINS)
_MODERN_MACHINERY: Final = frozenset(_MODERN_BUILTINS)


class _Batch:
    """The outlet of a 2025-03-26 batch: answers are collected and sent as one array.

    It expects one extra answer (the dispatch loop itself), so the array cannot be sent while
    later items are still being dispatched. Messages that are not answers pass straight through.
    """

    def __init__(self, outlet: Outlet) -> None:
        self._outlet = outlet
        self._outstanding = 1
        self._answers: list[JSONObject] = []

    @property
    def closed(self) -> bool:
        return self._outlet.closed

    def drop_connection(self) -> None:
        self._outlet.drop_connection()

    def expect(self) -> None:
        self._outstanding += 1

    async def skip(self) -> None:
        """One expected answer will not come (a notification, a cancelled request)."""
        await self._deliver(None)

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        if not final:
            await self._outlet.send(message)
            return
        assert isinstance(message, dict)
        await self._deliver(message)

    async def _deliver(self, message: JSONObject | None) -> None:
        if message is not None:
            self._answers.append(message)
        self._outstanding -= 1
        if self._outstanding == 0 and self._answers:
            await self._outlet.send(self._answers, final=True)
