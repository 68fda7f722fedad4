"""The Streamable HTTP actor (2025-03-26 .. 2026-07-28), on a :class:`~mcpwire.actors.http_sender.Sender`.

Theory of operation: every message is its own POST with ``Accept: application/json,
text/event-stream`` (HT-01, HT-02). A request's POST runs as a task in this actor's nursery, under
a cancel scope registered by request id, so the caller's timeout covers the whole exchange and a
2026-07-28 cancellation is simply closing that stream (HT-M10). What the server answers - one
JSON body, or an SSE stream of notifications, server requests and finally the response - goes to
the sink message by message. An HTTP failure of a request goes to ``sink.request_failed``.

Legacy sessions (2025-03-26 .. 2025-11-25): the ``Mcp-Session-Id`` from the ``initialize`` answer
is echoed on every later request (HT-L09); ``MCP-Protocol-Version`` comes with the headers the
client computes. After negotiation an optional GET stream carries server-initiated messages (404
and 405 mean "none", HT-L05). Streams are resumable (HT-L16..HT-L19): event ids are remembered,
empty-data priming events accepted, ``retry:`` honoured, and a stream that ends before its
response is resumed with GET + ``Last-Event-ID`` (bounded attempts, backoff); what arrives there is
routed by id like anything else. A 404 to a request that carried a session id raises
:class:`SessionExpired` for the client to re-initialise and re-send once (HT-L12); the session id
is forgotten only when it is still the one that request carried (several requests in flight all
get the 404, and the first may already have led to a new session). While the session is known to
be gone, a request without a session id is failed the same way without being sent. A new session
reopens the GET stream (the old one belonged to the old session, HT-L13). Closing sends DELETE
(405 tolerated, HT-L15).

Retries never make a request run twice: a POST is sent again after a transport error only when
the request cannot have reached the server (a :class:`~mcpwire.errors.ConnectError`: no connection
was made, or none was free), or when the client says the method is idempotent; after a status,
as :func:`~mcpwire.protocol.resend.status_resend` says (a 429 or 503 was not processed: any
message; a 502/504 may have been passed on: idempotent ones only), waiting out a ``Retry-After``
that fits within the call's deadline. A 401/403 is an :class:`~mcpwire.errors.AuthError` carrying
the ``WWW-Authenticate`` challenge. Bodies and events are bounded by ``max_message_bytes``
(HT-S03); a body cut short is an :class:`~mcpwire.errors.IncompleteBody` naming the server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Final

import trio

from ..errors import (
    ConnectError,
    ConnectionBroken,
    FrameTooLarge,
    HTTPStatusError,
    LocalProtocolError,
    ResponseStreamLost,
    ServerGone,
    SessionExpired,
    TransportError,
)
from ..protocol.framing import DEFAULT_MAX_MESSAGE_BYTES
from ..protocol.http import is_event_stream, media_type
from ..protocol.http1 import retry_after_seconds
from ..protocol.jsonrpc import ErrorResponse, Message, NotProtocol, RequestId, Response
from ..protocol.resend import MAX_RETRY_AFTER, STATUS_RESEND, status_resend
from ..redaction import redact_url
from ..transports import HttpServer
from .base import MessageSink
from .http_common import HttpActor, auth_error, backoff, close_response, describe_error, in_context, read_body
from .http_sender import Response as HttpResponse

if TYPE_CHECKING:
    import httpx

    from ..protocol.sse import SSEDecoder
    from .http_pool import Begun

__all__ = ["StreamableHTTPTransport"]

log = logging.getLogger(__name__)

ACCEPT_BOTH: Final = "application/json, text/event-stream"
#: POSTs of one message, the first included
SEND_ATTEMPTS: Final = 3
#: GETs with ``Last-Event-ID`` before a broken response stream is given up (HT-L19)
RESUME_ATTEMPTS: Final = 5
DEFAULT_RETRY_MS: Final = 1000
GET_STREAM_ATTEMPTS: Final = 5


class _Answered:
    """Tracks whether the response to one request has been seen on a stream."""

    __slots__ = ("done", "request_id")

    def __init__(self, request_id: RequestId | None) -> None:
        self.request_id = request_id
        self.done = request_id is None

    def see(self, message: Message) -> None:
        if isinstance(message, Response | ErrorResponse) and message.id == self.request_id:
            self.done = True


class StreamableHTTPTransport(HttpActor):
    """One Streamable HTTP connection (a legacy session, or stateless 2026-07-28 traffic).

    Args:
        idempotent: tells whether the request with this id may run twice without harm (a read,
            a list); such a request is sent again after a transport error even when the server
            may have received it. Without it, none is.
    """

    def __init__(
        self,
        spec: HttpServer,
        sink: MessageSink,
        *,
        http_client: httpx.AsyncClient | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        label: str | None = None,
        idempotent: Callable[[RequestId], bool] | None = None,
    ) -> None:
        super().__init__(spec, sink, http_client, max_message_bytes, label)
        self.url = spec.url
        self._idempotent = idempotent
        self._base_headers = {"Accept": ACCEPT_BOTH, **spec.auth_headers()}
        self.session_id: str | None = None
        #: the server answered 404 to the session and no new one is open yet (HT-L12)
        self._session_expired = False
        self.protocol_version: str | None = None
        self.modern = False
        self._nursery: trio.Nursery | None = None
        self._streams: dict[RequestId, trio.CancelScope] = {}
        self._get_started = False
        self._get_ready = trio.Event()
        self._get_scope: trio.CancelScope | None = None  # the GET stream of the current session
        self.wants_headers = True
        self.atomic_send = True  # a request's POST runs in its own task; send only starts it

    # -- lifetime ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[StreamableHTTPTransport] = trio.TASK_STATUS_IGNORED) -> None:
        self._open_sender()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started(self)
                await self._closed.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                # Cancelled from outside, this may run before the client's own aclose(): the
                # session's DELETE must still go out, and before the HTTP client closes (a
                # request made after would open a connection that nobody closes).
                await self.aclose()
                await self._close_sender()

    def negotiated(self, version: str, modern: bool) -> None:
        self.protocol_version = version
        self.modern = modern

    async def open_get_stream(self, timeout: float = 5.0) -> None:
        """Legacy: opens the optional GET stream for server-initiated messages (HT-L05), and
        waits (bounded) until the server accepted or refused it, so that later requests never
        race with it (a server may route messages to whichever stream exists)."""
        if self.modern or self._get_started or self._nursery is None:
            return
        self._get_started = True
        self._get_ready = trio.Event()
        self._get_scope = trio.CancelScope()
        self._nursery.start_soon(self._get_stream, self._get_scope)
        with trio.move_on_after(timeout):
            await self._get_ready.wait()

    async def aclose(self) -> None:
        """Ends every stream and DELETEs a legacy session (HT-L15). Idempotent, bounded: a
        second call waits for the first to finish."""
        if self._closing:
            with trio.CancelScope(shield=True), trio.move_on_after(3.0):
                await self._closed.wait()
            return
        self._closing = True
        with trio.CancelScope(shield=True):
            if self.session_id is not None and self._sender is not None:
                with trio.move_on_after(2.0):
                    try:
                        async with self._open_stream("DELETE", self.url, self._session_headers(None)) as response:
                            if response.status not in (200, 202, 204, 404, 405):
                                log.info("%s: DELETE of the session answered %s", self.label, response.status)
                    except Exception as exc:  # closing must not fail on a dead server
                        log.debug("%s: DELETE of the session failed: %r", self.label, exc)
            self._closed.set()

    # -- sending -------------------------------------------------------------------------------

    def _session_headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        """Headers for the session's own GET and DELETE requests: like every request after
        initialization they carry ``MCP-Protocol-Version`` (HT-L08, 2025-06-18 and later)."""
        headers = self._headers(extra)
        version = self.protocol_version
        if version is not None and not self.modern and version >= "2025-06-18":
            headers.setdefault("MCP-Protocol-Version", version)
        return headers

    def _headers(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        headers = dict(self._base_headers)
        if self.session_id is not None and not self.modern:
            headers["Mcp-Session-Id"] = self.session_id
        if extra:
            headers.update(extra)
        return headers

    async def send(
        self,
        data: bytes,
        *,
        request_id: RequestId | None = None,
        headers: Mapping[str, str] | None = None,
        opens_session: bool = False,
        deadline: float | None = None,
    ) -> None:
        """POSTs one message. A request's exchange continues in the background; a
        notification's POST is awaited (its answer is 202). ``opens_session`` marks
        ``initialize``: only its successful answer may carry the session id (HT-L09).
        ``deadline`` (trio's clock) is when the caller gives up on the request: no
        ``Retry-After`` is waited out past it.

        Raises:
            ServerGone: the transport is closed.
            AuthError, HTTPStatusError, ConnectError, ConnectionBroken: a notification could
                not be delivered.
            LocalProtocolError: a header cannot be sent (a line break in a value).
        """
        if self._closing or self._nursery is None:
            raise ServerGone(f"the connection to server '{self.label}' is closed", server=self.label)
        full = self._headers(headers)
        full["Content-Type"] = "application/json"
        self.bytes_sent += len(data)
        if request_id is None:
            await self._exchange(data, full, None)
            return
        # the request leaves now when it can (an idle pooled connection takes it): the server
        # starts on it while its task is made, and that task reads the answer
        begun = None if self._refused_unsent(full, opens_session) else self._begin("POST", self.url, full, data)
        scope = trio.CancelScope()
        self._streams[request_id] = scope
        try:
            self._nursery.start_soon(self._request_task, data, full, request_id, scope, opens_session, deadline, begun)
        except BaseException:
            self._streams.pop(request_id, None)
            if begun is not None:
                self._abandon(begun)
            raise

    async def cancel(self, request_id: RequestId) -> bool:
        """2026-07-28: closing the stream is the cancellation (HT-M10). Legacy: not enough
        (closing is not cancelling there, HT-L04): the client sends notifications/cancelled."""
        scope = self._streams.pop(request_id, None)
        if scope is not None and self.modern:
            scope.cancel()
            return True
        if scope is not None:
            scope.cancel()  # stop reading; the notification tells the server
        return False

    async def _request_task(
        self,
        data: bytes,
        headers: dict[str, str],
        request_id: RequestId,
        scope: trio.CancelScope,
        opens_session: bool,
        deadline: float | None,
        begun: Begun | None = None,
    ) -> None:
        try:
            with scope:
                await self._exchange(data, headers, request_id, opens_session, deadline, begun)
        except (TransportError, FrameTooLarge, LocalProtocolError) as exc:
            self._sink.request_failed(request_id, exc)
        finally:
            self._streams.pop(request_id, None)

    async def _exchange(
        self,
        data: bytes,
        headers: dict[str, str],
        request_id: RequestId | None,
        opens_session: bool = False,
        deadline: float | None = None,
        begun: Begun | None = None,
    ) -> None:
        """POSTs one message (``begun``: its first attempt was written already, see
        :meth:`~mcpwire.actors.http_common.HttpActor._begin`) and handles the answer, sending it
        again (at most ``SEND_ATTEMPTS`` times in all) only when that cannot make it run twice:

        - :class:`~mcpwire.errors.ConnectError` (no connection, none free in time): the server
          never saw the request; any message is sent again, after a backoff.
        - :class:`~mcpwire.errors.ConnectionBroken` (a read or write failed or timed out, the
          server closed the connection - even a kept-alive one that may have closed before the
          request arrived, RFC 9112 9.3.1): the request may have been received and acted on, so
          only an idempotent request is sent again.
        - A status in :data:`~mcpwire.protocol.resend.STATUS_RESEND`: as
          :func:`~mcpwire.protocol.resend.status_resend` says, after its ``Retry-After`` (within
          ``deadline``) or a backoff.

        Raises:
            SessionExpired: the session is gone (HT-L12), or the 404 came now.
            ConnectError: the request could not be delivered.
            ConnectionBroken: its connection broke (:class:`~mcpwire.errors.IncompleteBody`: the
                answer was cut short).
            HTTPStatusError: an error status without a JSON-RPC answer.
        """
        sent_session = headers.get("Mcp-Session-Id")
        if begun is None and self._refused_unsent(headers, opens_session):
            raise SessionExpired(f"server '{self.label}' no longer knows the session (HTTP 404 to an earlier request)")
        what = f"request id {request_id}" if request_id is not None else "a message"
        attempt = 1
        while True:
            try:
                if begun is not None:
                    written, begun = begun, None
                    response = await self._finish(written)
                else:
                    response = await self._send("POST", self.url, headers, data)
            except (ConnectError, ConnectionBroken) as exc:
                unsent = isinstance(exc, ConnectError)
                if attempt < SEND_ATTEMPTS and not self._closing and (unsent or self._may_repeat(request_id)):
                    log.info("%s: POST failed (%r); sending it again", self.label, exc)
                    await trio.sleep(backoff(attempt))
                    attempt += 1
                    continue
                url = redact_url(self.url)
                if unsent:
                    raise ConnectError(f"cannot reach server '{self.label}' at {url}: {describe_error(exc)}") from exc
                raise ConnectionBroken(
                    f"the connection to server '{self.label}' at {url} broke before it answered {what} "
                    f"({describe_error(exc)}); it was not sent again, since the server may already have acted on it"
                ) from exc
            try:
                status = response.status
                note = ""
                if status in STATUS_RESEND:
                    wait = retry_after_seconds(response.headers.get("retry-after"))
                    remaining = None if deadline is None else deadline - trio.current_time()
                    step = status_resend(status, wait, idempotent=self._may_repeat(request_id), remaining=remaining)
                    if step is not None and attempt < SEND_ATTEMPTS and not self._closing:
                        delay = backoff(attempt) if step.wait is None else step.wait
                        log.info("%s: HTTP %s; sending it again in %.2f s", self.label, status, delay)
                        await close_response(response)
                        await trio.sleep(delay)
                        attempt += 1
                        continue
                    if wait is not None:
                        why = (
                            f"more than the {MAX_RETRY_AFTER:g} s mcpwire waits"
                            if wait > MAX_RETRY_AFTER
                            else "beyond the call's timeout"
                            if remaining is not None and wait >= remaining
                            else f"after {attempt} attempts"
                        )
                        note = f" and asked to wait {wait:g} s (Retry-After), {why}"
                await self._handle_response(response, request_id, opens_session, sent_session, note)
                return
            except ConnectionBroken as exc:
                raise in_context(exc, f"server '{self.label}' at {redact_url(self.url)}, answering {what}") from exc
            finally:
                await close_response(response)

    def _refused_unsent(self, headers: Mapping[str, str], opens_session: bool) -> bool:
        """Whether a message is not sent at all: the server forgot the session and no new one is
        open yet, and without a session id the server would answer 400. It fails like the 404
        did, so that the client sends it again on the new session."""
        return self._session_expired and "Mcp-Session-Id" not in headers and not opens_session and not self.modern

    def _may_repeat(self, request_id: RequestId | None) -> bool:
        """Whether the request may run twice without harm (never a notification or response)."""
        return request_id is not None and self._idempotent is not None and self._idempotent(request_id)

    def _session_opened(self, session_id: str | None) -> None:
        """An ``initialize`` succeeded. After an expiry or with a new id, the GET stream belongs
        to the old session: it is closed, and opened again on demand (HT-L13)."""
        renewed = self._session_expired or (self.session_id is not None and session_id != self.session_id)
        self.session_id = session_id
        self._session_expired = False
        if renewed:
            if self._get_scope is not None:
                self._get_scope.cancel()
                self._get_scope = None
            self._get_started = False

    async def _handle_response(
        self,
        response: HttpResponse,
        request_id: RequestId | None,
        opens_session: bool = False,
        sent_session: str | None = None,
        note: str = "",
    ) -> None:
        status = response.status
        if opens_session and 200 <= status < 300 and not self.modern:
            # HT-L09: the session id is the one "returned by the server during initialization";
            # one on a refused probe or on any other answer names no session of ours.
            self._session_opened(response.headers.get("mcp-session-id") or None)
        ctype = media_type(response.headers.get("content-type", ""))
        if status in (401, 403):
            raise auth_error(self.spec, self.label, status, response.headers.get("www-authenticate", ""))
        if status == 404 and sent_session is not None and not self.modern:
            # HT-L12: "When a client receives HTTP 404 in response to a request containing an
            # MCP-Session-Id, it MUST start a new session". Every request that carried the lost
            # id gets this 404; only the first finds it current (the others may even arrive
            # after a new session opened), so only then is it forgotten.
            if self.session_id == sent_session:
                self.session_id = None
                self._session_expired = True
            raise SessionExpired(f"server '{self.label}' no longer knows the session (HTTP 404)")
        if 200 <= status < 300 and ctype == "text/event-stream":
            await self._consume_stream(response, _Answered(request_id), resumable=not self.modern)
            return
        if status == 202 or (200 <= status < 300 and request_id is None):
            # 202 for notifications; some servers answer 200 with a body: read and ignore it.
            await self._read_body(response)
            return
        body = await self._read_body(response)
        if ctype == "application/json" and body and not body.isspace():
            message = self._sink.classify(body)
            if isinstance(message, NotProtocol) and request_id is not None and message.answer_id == request_id:
                self._sink.message_received(message)  # our answer, unreadable: the call fails with why
                return
            # A JSON-RPC answer, even on 4xx: 2026-07-28 answers -32020/-32021/-32022 with
            # 400 and -32601 with 404, and the client acts on the error (LC-43, LC-47).
            if not isinstance(message, NotProtocol) and (200 <= status < 300 or isinstance(message, ErrorResponse)):
                if (
                    isinstance(message, ErrorResponse)
                    and request_id is not None
                    and message.id != request_id
                    and (message.id is None or not 200 <= status < 300)
                ):
                    # An error status answers this POST, whatever id its body names: null when
                    # the server could not read ours (JR-09), or one of its own - Python SDK 1.x
                    # servers answer a request without a session id with 400 and the id
                    # "server-error". Left unmatched, the request would wait its whole timeout.
                    message = ErrorResponse(request_id, message.code, message.message, message.data)
                self._sink.message_received(message)
                return
        if 200 <= status < 300:
            raise HTTPStatusError(
                f"server '{self.label}' answered HTTP {status} with {ctype or 'no content type'}, not JSON-RPC",
                status=status,
                server=self.label,
            )
        snippet = body[:200].decode("utf-8", "replace").strip()
        raise HTTPStatusError(
            f"server '{self.label}' answered HTTP {status}{note}" + (f": {snippet}" if snippet else ""),
            status=status,
            server=self.label,
        )

    async def _read_body(self, response: HttpResponse) -> bytes:
        body = await read_body(response, self._max)
        self.bytes_received += len(body)
        return body

    # -- SSE streams ----------------------------------------------------------------------------

    def _sse_decoder(self) -> SSEDecoder:
        """A decoder for an event stream, imported on the first one: a server that answers in JSON
        never needs it."""
        from ..protocol.sse import SSEDecoder

        return SSEDecoder(self._max)

    async def _consume_stream(self, response: HttpResponse, answered: _Answered, *, resumable: bool) -> None:
        decoder = self._sse_decoder()
        try:
            async with aclosing(response.chunks()) as pieces:  # closed on any early exit
                async for chunk in pieces:
                    self.bytes_received += len(chunk)
                    for event in decoder.feed(chunk):
                        self._event(event.event, event.data, answered)
                    if answered.done and answered.request_id is not None:
                        return  # HT-L: the response ends our interest in the stream
        except ConnectionBroken as exc:
            log.info("%s: stream interrupted: %r", self.label, exc)
        if answered.done or self._closing:
            return
        if not resumable:
            # HT-M12: no resumption in 2026-07-28; the client re-issues the request.
            raise ResponseStreamLost(
                f"server '{self.label}' closed the response stream before answering "
                "(2026-07-28 streams cannot be resumed)",
                server=self.label,
            )
        if decoder.last_event_id is None:
            raise ServerGone(f"server '{self.label}' closed the response stream before answering", server=self.label)
        await self._resume(decoder.last_event_id, decoder.retry, answered)

    async def _resume(self, last_id: str, retry_ms: int | None, answered: _Answered) -> None:
        """GET + Last-Event-ID until the response arrives (HT-L16..HT-L19), bounded."""
        delay = (retry_ms if retry_ms is not None else DEFAULT_RETRY_MS) / 1000
        refused: int | None = None
        for attempt in range(RESUME_ATTEMPTS):
            await trio.sleep(delay if attempt == 0 else max(delay, backoff(attempt)))
            headers = self._session_headers({"Accept": "text/event-stream", "Last-Event-ID": last_id})
            decoder = self._sse_decoder()
            try:
                async with self._open_stream("GET", self.url, headers) as response:
                    if response.status != 200:
                        log.info("%s: resuming the stream answered HTTP %s", self.label, response.status)
                        if response.status in (404, 405):
                            refused = response.status  # the server keeps no stream to resume
                            break
                        continue
                    async with aclosing(response.chunks()) as pieces:  # closed on any early exit
                        async for chunk in pieces:
                            self.bytes_received += len(chunk)
                            for event in decoder.feed(chunk):
                                self._event(event.event, event.data, answered)
                            if answered.done:
                                return
            except (ConnectError, ConnectionBroken) as exc:
                log.info("%s: resumed stream interrupted: %r", self.label, exc)
            if decoder.last_event_id is not None:
                last_id = decoder.last_event_id
            if decoder.retry is not None:
                delay = decoder.retry / 1000
        if refused is not None:
            raise ServerGone(
                f"server '{self.label}' closed the response stream before answering, and refused to resume it "
                f"(GET with Last-Event-ID answered HTTP {refused})",
                server=self.label,
            )
        raise ServerGone(
            f"server '{self.label}': the response stream could not be resumed after {RESUME_ATTEMPTS} attempts",
            server=self.label,
        )

    def _event(self, kind: str, data: str, answered: _Answered) -> None:
        if kind != "message" or not data.strip():
            return  # priming events, or event types that carry no JSON-RPC (HT-S02)
        message = self._sink.classify(data.encode())
        answered.see(message)
        self._sink.message_received(message)

    async def _get_stream(self, scope: trio.CancelScope) -> None:
        """Legacy: the standalone GET stream for server-initiated messages, reconnected on drop;
        ``scope`` ends it when its session is replaced."""
        with scope:
            await self._read_get_stream()

    async def _read_get_stream(self) -> None:
        ready = self._get_ready
        last_id: str | None = None
        failures = 0
        while not self._closing and failures < GET_STREAM_ATTEMPTS:
            if self._session_expired:
                ready.set()
                return  # the stream belonged to that session; a new session opens a new one
            headers = self._session_headers({"Accept": "text/event-stream"})
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            decoder: SSEDecoder | None = None  # made once the server opens the stream
            try:
                async with self._open_stream("GET", self.url, headers) as response:
                    ready.set()
                    if response.status in (404, 405):
                        log.debug("%s: no GET stream (HTTP %s)", self.label, response.status)
                        return
                    ctype = response.headers.get("content-type", "")
                    if response.status != 200 or not is_event_stream(ctype):
                        log.info("%s: GET stream answered HTTP %s (%s)", self.label, response.status, ctype)
                        failures += 1
                    else:
                        failures = 0
                        decoder = self._sse_decoder()
                        async with aclosing(response.chunks()) as pieces:  # closed on any early exit
                            async for chunk in pieces:
                                self.bytes_received += len(chunk)
                                for event in decoder.feed(chunk):
                                    self._event(event.event, event.data, _Answered(None))
            except (ConnectError, ConnectionBroken) as exc:
                ready.set()
                failures += 1
                log.info("%s: GET stream interrupted: %r", self.label, exc)
            except FrameTooLarge as exc:
                failures += 1
                log.warning("%s: GET stream: %s", self.label, exc)
            if self._closing:
                return
            retry = None
            if decoder is not None:
                last_id = decoder.last_event_id or last_id
                retry = decoder.retry / 1000 if decoder.retry is not None else None
            await trio.sleep(retry if retry is not None else backoff(failures))
