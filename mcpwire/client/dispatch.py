"""Delivery: what the transport reads goes to whoever waits for it, without ever waiting itself.

Theory of operation: the :class:`Dispatcher` is the transport's sink (:class:`~mcpwire.actors.base.
MessageSink`), called synchronously by the transport's reader for every message. It resolves
waiters (an answer, or an answer that cannot be read), routes progress to the call waiting for
it, pushes notifications into a bounded channel (dropping and counting when full) and to the
subscriptions that want them, logs the server's log messages, counts and rate-limits stdout noise,
and starts a task per server request, so the reader never waits on user code. It also ends what
is pending when the connection is lost or closed.

Server requests (legacy era) and 2026-07-28 input requests are answered by the same handlers
(:meth:`Dispatcher.fulfil`): roots, sampling, elicitation (with the schema's defaults filled in).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import trio

from ..errors import ClientClosed, InvalidResponse, MCPWireError, RemoteProtocolError, RPCError, ServerGone
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ErrorResponse, Message, Request, RequestId, Response
from ..protocol.lifecycle import SessionState
from ..protocol.pending import PendingRequest
from ..protocol.session import (
    AnswerReceived,
    AnswerUnreadable,
    NotificationReceived,
    ProgressReceived,
    ServerRequestReceived,
    ToolCallResponse,
    Violation,
    decode_tool_answer,
)
from ..protocol.types import JSONObject
from .relay import Ask
from .state import Link
from .validation import ToolCatalog
from .values import NotDeclared, NotificationSink, ServerNotification, printable
from .waiters import Waiter
from .wire import headers_for, send

__all__ = ["LOG_LEVELS", "Dispatcher", "fill_elicitation_defaults", "root"]

log = logging.getLogger(__name__)

#: messages at least this large may be read in one pass as a call_tool answer (below, the
#: generic path's second look at the result costs little)
ONE_PASS_MIN_BYTES: Final = 16 * 1024
NOISE_WARNINGS_PER_MINUTE: Final = 5
#: Answers with an id no request has that are logged, per client; the rest are only counted.
STRAY_WARNINGS: Final = 5
#: RFC 5424 levels (``notifications/message``, ``logging/setLevel``) as Python logging levels.
LOG_LEVELS: Final = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


class Dispatcher:
    """The transport's sink for one connection (see the module's theory of operation).

    Args:
        link: the connection's shared state.
        catalog: emptied on ``notifications/tools/list_changed``.
        on_session_lost: called when an HTTP+SSE transport reconnected with a new session.
    """

    def __init__(self, link: Link, catalog: ToolCatalog, on_session_lost: Callable[[BaseException], None]) -> None:
        self.link = link
        self._catalog = catalog
        self._on_session_lost = on_session_lost
        self.notify_send, self.notify_recv = trio.open_memory_channel[ServerNotification](
            link.options.notification_buffer
        )
        #: 2026-07-28 subscriptions by their ``subscriptions/listen`` id
        self.subscriptions: dict[RequestId, NotificationSink] = {}
        #: legacy subscriptions (notifications carry no subscription id: each filters them)
        self.legacy_subscriptions: list[NotificationSink] = []
        self.server_request_scopes: dict[RequestId, trio.CancelScope] = {}
        self._noise_times: list[float] = []

    # -- the sink ------------------------------------------------------------------------------

    def classify(self, data: bytes) -> Message:
        """A large message while tool calls are pending is first read as a complete
        ``tools/call`` answer, in one pass; everything else is classified generically."""
        if self.link.tool_calls and len(data) >= ONE_PASS_MIN_BYTES:
            answer = decode_tool_answer(data)
            if answer is not None:
                entry = self.link.session.table.get(answer.id)
                if entry is not None and entry.waiter.typed_tool:
                    return answer
        return jsonrpc.classify(data)

    def message_received(self, message: Message) -> None:
        link = self.link
        session = link.session
        # Fast path: an answer to one of our requests.
        if type(message) is Response or type(message) is ToolCallResponse:
            entry = session.table.resolve(message.id)
            if entry is not None:
                waiter = entry.waiter  # resolve(), inlined
                waiter.outcome = message
                waiter.set()
                if waiter.channel is not None:
                    waiter.channel.send_nowait(waiter)
            else:
                self._stray_answer(message.id)
            return
        if type(message) is ErrorResponse:
            table = session.table
            strays = table.late + table.unknown
            events = session.receive(message)
            if table.late + table.unknown != strays:
                self._stray_answer(message.id)
        else:
            events = session.receive(message)
        for event in events:
            if isinstance(event, AnswerReceived):
                resolve(event.entry.waiter, event.message)
            elif isinstance(event, AnswerUnreadable):
                self._unreadable(event.entry, event.reason)
            elif isinstance(event, ProgressReceived):
                waiter = event.entry.waiter
                if waiter.progress is not None:
                    waiter.progress.append(event.params)  # type: ignore[arg-type]
                    waiter.set()
                link.counters.notifications += 1
                self._enqueue(ServerNotification("notifications/progress", event.params))  # type: ignore[arg-type]
            elif isinstance(event, NotificationReceived):
                self._on_notification(event)
            elif isinstance(event, ServerRequestReceived):
                link.counters.server_requests += 1
                link.nursery.start_soon(self._answer_server_request, event.request, event.params)  # type: ignore[arg-type]
            else:
                self._on_violation(event)

    def request_failed(self, request_id: RequestId, exc: BaseException) -> None:
        entry = self.link.session.table.resolve(request_id)
        if entry is not None:
            resolve(entry.waiter, exc)

    def session_lost(self, exc: BaseException) -> None:
        """HTTP+SSE reconnected with a new session: what was pending is lost (HS-04)."""
        link = self.link
        for entry in link.session.table.fail_all():
            gone = ServerGone(f"{exc} while '{entry.method}' (id {entry.id}) was pending", server=link.label)
            gone.__cause__ = exc.__cause__  # e.g. the FrameTooLarge that broke the stream
            resolve(entry.waiter, gone)
        if link.session.state is SessionState.READY:
            self._on_session_lost(exc)

    def connection_lost(self, exc: BaseException) -> None:
        link = self.link
        if link.lost is None:  # keep the first cause (e.g. the strict-mode protocol error)
            link.lost = exc
        closing = link.closing
        for entry in link.session.table.fail_all():
            if closing:
                err: BaseException = closed_while_pending(entry, link.label)
            elif isinstance(exc, ServerGone):
                err = ServerGone(
                    f"{exc.reason} while '{entry.method}' (id {entry.id}) was pending",
                    server=link.label,
                    returncode=exc.returncode,
                    stderr_tail=exc.stderr_tail,
                )
                err.__cause__ = exc.__cause__
            else:  # pragma: no cover - transports only report ServerGone
                err = exc
            resolve(entry.waiter, err)
        state = link.session.state
        if state is SessionState.READY:
            link.session.state = SessionState.CLOSED
            if not closing:
                log.warning("%s: %s", link.label, exc.reason if isinstance(exc, ServerGone) else exc)
        elif state is SessionState.CONNECTING:
            return  # the handshake decides: restart the server (LC-45) or fail
        self.end(exc)

    def end(self, exc: BaseException | None) -> None:
        """The connection is over: subscriptions end (with ``exc``), the notification stream closes."""
        for sub in (*self.subscriptions.values(), *self.legacy_subscriptions):
            sub.end(exc)
        self.notify_send.close()

    def fail_pending_on_close(self) -> None:
        for entry in self.link.session.table.fail_all():
            resolve(entry.waiter, closed_while_pending(entry, self.link.label))

    # -- what the sink does ------------------------------------------------------------------------

    def _stray_answer(self, request_id: RequestId | None) -> None:
        """An answer no caller waits for: dropped, counted by the table, and logged (JR-06)."""
        link = self.link
        unknown = link.session.table.unknown
        if unknown == link.counters.unknown_logged or link.closing:
            # an id this client gave up on (timeout, cancellation, closing): expected, not the server's fault
            link.counters.unknown_logged = unknown
            log.debug("%s: dropped a late answer to id %r (its caller had given up)", link.label, request_id)
            return
        link.counters.unknown_logged = unknown
        if unknown <= STRAY_WARNINGS:
            log.warning(
                "%s: dropped an answer to id %s, which no request of this client has%s",
                link.label,
                printable(repr(request_id), 80),
                "; further ones are counted in statistics(), not logged" if unknown == STRAY_WARNINGS else "",
            )

    def _unreadable(self, entry: PendingRequest[Waiter], reason: str) -> None:
        link = self.link
        link.counters.violations += 1
        log.warning("%s: unreadable answer to '%s' (id %s): %s", link.label, entry.method, entry.id, reason)
        resolve(
            entry.waiter,
            InvalidResponse(
                f"server '{link.label}' answered '{entry.method}' (id {entry.id}) with a message that "
                f"cannot be read: {reason}"
            ),
        )

    def _on_notification(self, event: NotificationReceived) -> None:
        self.link.counters.notifications += 1
        method = event.method
        params: JSONObject = event.params  # type: ignore[assignment]
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            if isinstance(request_id, int | str):
                scope = self.server_request_scopes.pop(request_id, None)
                if scope is not None:
                    scope.cancel()  # UT-C04: stop; send no response
                sub = self.subscriptions.get(request_id)
                if sub is not None:
                    sub.end(None)  # UT-C05: the server tore the subscription down
        elif method == "notifications/message":
            self._log_server_message(params)
        elif method == "notifications/tools/list_changed":
            self._catalog.clear()
        note = ServerNotification(method, params, event.subscription_id)
        hook = self.link.options.on_notification
        if hook is not None:
            try:
                hook(note)
            except Exception:
                log.exception("%s: the on_notification callback failed", self.link.label)
        if event.subscription_id is not None:
            sub = self.subscriptions.get(event.subscription_id)
            if sub is not None:
                sub.deliver(note)
        for sub in self.legacy_subscriptions:
            sub.deliver(note)
        self._enqueue(note)

    def _enqueue(self, note: ServerNotification) -> None:
        """Into the bounded buffer of :meth:`~mcpwire.Client.notifications`; counted when it is full."""
        try:
            self.notify_send.send_nowait(note)
        except trio.WouldBlock:
            self.link.counters.dropped += 1
        except trio.ClosedResourceError:
            pass

    def _log_server_message(self, params: JSONObject) -> None:
        level = LOG_LEVELS.get(str(params.get("level")), logging.INFO)
        logger = logging.getLogger(f"mcpwire.server.{self.link.label}")
        if logger.isEnabledFor(level):
            data = params.get("data")
            text = data if isinstance(data, str) else jsonrpc.encode_json(data).decode()
            logger.log(level, "[%s] %s", printable(str(params.get("logger") or "log"), 60), printable(text, 2000))

    def _on_violation(self, event: Violation) -> None:
        link = self.link
        if event.not_protocol:
            link.counters.noise += 1
            callback = link.options.on_stdout_noise
            if callback is not None:
                try:
                    callback(event.line)
                except Exception:
                    log.exception("%s: the on_stdout_noise callback failed", link.label)
            line = printable(event.line.decode("utf-8", "replace"), 120)
            now = trio.current_time()
            recent = [t for t in self._noise_times if now - t < 60.0]
            if len(recent) < NOISE_WARNINGS_PER_MINUTE:
                recent.append(now)
                log.warning(
                    "%s: ignoring a stdout line that is not JSON-RPC (%s): %s%s",
                    link.label,
                    event.reason,
                    line,
                    " (further lines this minute are counted, not logged)"
                    if len(recent) == NOISE_WARNINGS_PER_MINUTE
                    else "",
                )
            self._noise_times = recent
            if link.options.strict:
                self._fail_connection(
                    RemoteProtocolError(
                        f"server '{link.label}' wrote a line that is not JSON-RPC to stdout ({event.reason}): {line}"
                    )
                )
            return
        link.counters.violations += 1
        log.warning("%s: protocol violation: %s", link.label, event.reason)
        if link.options.strict:
            self._fail_connection(RemoteProtocolError(f"server '{link.label}': {event.reason}"))

    def _fail_connection(self, exc: MCPWireError) -> None:
        """Strict mode: fail everything pending with ``exc`` and close the connection."""
        link = self.link
        link.lost = exc
        for entry in link.session.table.fail_all():
            resolve(entry.waiter, exc)
        link.session.closing()
        if link.transport is not None:
            link.nursery.start_soon(link.transport.aclose)

    # -- server -> client requests (legacy era), input requests (2026-07-28) -------------------------

    async def _answer_server_request(self, request: Request, params: JSONObject) -> None:
        link = self.link
        method = request.method
        with trio.CancelScope() as scope:
            self.server_request_scopes[request.id] = scope
            try:
                try:
                    if method == "ping":
                        result: JSONObject = {}  # UT-P01
                    else:
                        result = await self.fulfil(method, params)
                except NotDeclared as exc:
                    payload = jsonrpc.encode_error(request.id, -32601, str(exc))
                except RPCError as exc:
                    payload = jsonrpc.encode_error(request.id, exc.code, exc.message, exc.data)
                except Exception as exc:  # a handler's bug must not kill the connection
                    log.warning("%s: handler for '%s' failed: %r", link.label, method, exc)
                    payload = jsonrpc.encode_error(request.id, -32603, f"client handler failed: {type(exc).__name__}")
                else:
                    payload = jsonrpc.encode_result(request.id, result)
            finally:
                self.server_request_scopes.pop(request.id, None)
            try:
                await send(link, payload, headers=headers_for(link, method, None))
            except MCPWireError:  # the connection failed, or the server's answer to it was too large
                pass

    async def fulfil(self, method: str, params: JSONObject, ask: Ask | None = None) -> JSONObject:
        """Runs the handler for a server request or an input request; ``ask`` answers instead for
        a request made for another client (:mod:`mcpwire.client.relay`).

        Raises:
            NotDeclared: the client has no handler for ``method``.
        """
        if ask is not None:
            answer = await ask(method, params)
            return fill_elicitation_defaults(params, answer) if method == "elicitation/create" else answer
        options = self.link.options
        if method == "roots/list" and options.roots is not None:
            roots = options.roots
            listed = await roots() if callable(roots) else roots
            return {"roots": [root(r) for r in listed]}
        if method == "sampling/createMessage" and options.sampling is not None:
            return await options.sampling(params)
        if method == "elicitation/create" and options.elicitation is not None:
            answer = await options.elicitation(params)
            return fill_elicitation_defaults(params, answer)
        raise NotDeclared(f"the client does not handle '{method}'")


def resolve(waiter: Waiter, outcome: Response | ErrorResponse | BaseException) -> None:
    """Hands ``outcome`` to the caller waiting on ``waiter`` (and to a handshake's channel)."""
    waiter.outcome = outcome
    waiter.set()
    if waiter.channel is not None:
        waiter.channel.send_nowait(waiter)


def closed_while_pending(entry: PendingRequest[Waiter], label: str) -> MCPWireError:
    return ClientClosed(f"'{entry.method}' (id {entry.id}) to server '{label}' was pending when the client closed")


def root(value: str | JSONObject) -> JSONObject:
    """One root for ``roots/list``: a ``file://`` URI string or a ``{"uri", "name"}`` object."""
    if isinstance(value, str):
        if not value.startswith("file://"):
            raise ValueError(f"roots must be file:// URIs (CF-R05), not {value!r}")
        return {"uri": value}
    return dict(value)


def fill_elicitation_defaults(params: JSONObject, answer: JSONObject) -> JSONObject:
    """Adds schema defaults for fields an accepted elicitation left out (SEP-1034)."""
    if answer.get("action") != "accept":
        return answer
    schema = params.get("requestedSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return answer
    content = answer.get("content")
    filled: JSONObject = dict(content) if isinstance(content, dict) else {}
    for key, prop in props.items():
        if key not in filled and isinstance(prop, dict) and "default" in prop:
            filled[key] = prop["default"]
    return {**answer, "content": filled}
