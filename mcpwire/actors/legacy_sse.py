"""The HTTP+SSE actor of 2024-11-05 (deprecated, kept as a fallback, HS-05).

Theory of operation: one GET opens an SSE stream; the server's first event is ``endpoint``, whose
data is the URI to POST every client message to; every server message arrives as a ``message``
event on the GET stream (HS-01). The endpoint is resolved against the SSE URL and refused unless
it has the same origin, no userinfo and no fragment: otherwise a server could redirect the
client's messages, and its credentials, elsewhere (HS-02, AMB-06). POST answers (usually 202) are
not parsed as JSON-RPC (HS-03), and are read bounded by ``max_message_bytes`` like everything else
(HT-S03).

A dropped stream loses the session (HS-04). The actor reconnects with bounded backoff; the new
stream has a new endpoint and needs a new ``initialize``, so the sink is told the connection was
lost only when reconnecting fails. (The client re-connects the session on its own.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Final
from urllib.parse import urljoin, urlsplit

import trio

from ..errors import ConnectError, ConnectionBroken, FrameTooLarge, HTTPStatusError, ServerGone
from ..protocol.framing import DEFAULT_MAX_MESSAGE_BYTES
from ..protocol.http import is_event_stream
from ..protocol.http1 import retry_after_seconds
from ..protocol.jsonrpc import RequestId
from ..protocol.resend import status_resend
from ..protocol.sse import SSEDecoder
from ..transports import HttpServer
from .base import MessageSink
from .http_common import HttpActor, auth_error, backoff, close_response, describe_error, in_context, read_body
from .http_sender import Response

if TYPE_CHECKING:
    import httpx

__all__ = ["LegacySSETransport", "check_endpoint"]

log = logging.getLogger(__name__)

ENDPOINT_TIMEOUT: Final = 30.0
#: POSTs of one message, the first included (a 429 or 503 sends it again)
SEND_ATTEMPTS: Final = 3


def check_endpoint(sse_url: str, data: str) -> str:
    """Resolves an ``endpoint`` event and refuses one on another origin (HS-02).

    Raises:
        ConnectError: the endpoint is on another origin, or carries userinfo or a fragment.
    """
    endpoint = urljoin(sse_url, data.strip())
    base, target = urlsplit(sse_url), urlsplit(endpoint)
    if (base.scheme, base.hostname, base.port) != (target.scheme, target.hostname, target.port):
        raise ConnectError(
            f"the SSE server announced a POST endpoint on another origin ({target.scheme}://{target.netloc}, "
            f"not {base.scheme}://{base.netloc}); refusing it, since it would send your messages elsewhere"
        )
    if target.username or target.password or target.fragment:
        raise ConnectError("the SSE server announced a POST endpoint with userinfo or a fragment; refusing it")
    return endpoint


class LegacySSETransport(HttpActor):
    """One HTTP+SSE (2024-11-05) connection."""

    def __init__(
        self,
        spec: HttpServer,
        sink: MessageSink,
        *,
        http_client: httpx.AsyncClient | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        label: str | None = None,
        reconnect_attempts: int = 3,
    ) -> None:
        super().__init__(spec, sink, http_client, max_message_bytes, label)
        self._reconnects = reconnect_attempts
        self._headers = spec.auth_headers()
        self.endpoint: str | None = None
        self.wants_headers = False
        self.atomic_send = False  # a POST cancelled midway may have reached the server

    def negotiated(self, version: str, modern: bool) -> None:
        """2024-11-05 has no protocol-version header (HS-07)."""

    async def cancel(self, request_id: RequestId) -> bool:
        return False

    async def aclose(self) -> None:
        self._closing = True
        self._closed.set()

    async def run(self, *, task_status: trio.TaskStatus[LegacySSETransport] = trio.TASK_STATUS_IGNORED) -> None:
        """Connects (waits for the ``endpoint`` event), then reads the stream until closed."""
        self._open_sender()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_close, nursery.cancel_scope)
                await self._stream(task_status)
                nursery.cancel_scope.cancel()
        finally:
            self._closed.set()
            await self._close_sender()

    async def _watch_close(self, scope: trio.CancelScope) -> None:
        await self._closed.wait()
        scope.cancel()

    async def _stream(self, task_status: trio.TaskStatus[LegacySSETransport]) -> None:
        started = False
        failures = 0
        dropped: BaseException | None = None  # why the previous stream ended
        while not self._closing:
            decoder = SSEDecoder(self._max)
            self.endpoint = None
            headers = {**self._headers, "Accept": "text/event-stream"}
            failure: ConnectError | ConnectionBroken | FrameTooLarge | None = None
            try:
                response = await self._send("GET", self.spec.url, headers)
            except ConnectError as exc:  # the sender's: no connection
                failure = exc
            else:
                try:
                    self._check_status(response)
                    with trio.move_on_after(ENDPOINT_TIMEOUT) as wait_endpoint:
                        async with aclosing(response.chunks()) as pieces:  # closed on any early exit
                            async for chunk in pieces:
                                self.bytes_received += len(chunk)
                                for event in decoder.feed(chunk):
                                    if event.event == "endpoint" and self.endpoint is None:
                                        self.endpoint = check_endpoint(self.spec.url, event.data)
                                        wait_endpoint.deadline = float("inf")
                                        failures = 0
                                        if not started:
                                            started = True
                                            task_status.started(self)
                                        else:
                                            # HS-04: a new stream is a new session: pending requests are lost
                                            # and the client must initialise again.
                                            log.info("%s: SSE stream reconnected; the session starts anew", self.label)
                                            self._sink.session_lost(self._dropped(dropped))
                                            dropped = None
                                    elif event.event == "message" and event.data.strip():
                                        if self.endpoint is None:
                                            continue  # nothing precedes the endpoint event (HS-03)
                                        self._sink.message_received(self._sink.classify(event.data.encode()))
                    if wait_endpoint.cancelled_caught:
                        raise ConnectError(f"server '{self.label}' sent no endpoint event within {ENDPOINT_TIMEOUT:g}s")
                except (ConnectionBroken, FrameTooLarge) as exc:
                    failure = exc
                except (ConnectError, HTTPStatusError):  # the endpoint refused, or the GET
                    if not started:
                        raise
                finally:
                    await close_response(response)
            if failure is not None:
                if not started:
                    raise ConnectError(
                        f"cannot reach the SSE stream of server '{self.label}': {describe_error(failure)}"
                    ) from failure
                dropped = failure
                if isinstance(failure, FrameTooLarge):
                    log.warning("%s: SSE stream dropped: %s", self.label, failure)
                else:
                    log.info("%s: SSE stream interrupted: %r", self.label, failure)
            if self._closing:
                return
            failures += 1
            if not started or failures > self._reconnects:
                break
            await trio.sleep(backoff(failures))
        if not self._closing:
            self._sink.connection_lost(ServerGone(f"server '{self.label}' closed the SSE stream", server=self.label))

    def _dropped(self, cause: BaseException | None) -> ServerGone:
        why = f": {cause}" if isinstance(cause, FrameTooLarge) else ""
        gone = ServerGone(f"server '{self.label}' dropped the SSE stream{why}", server=self.label)
        gone.__cause__ = cause
        return gone

    def _check_status(self, response: Response) -> None:
        status = response.status
        if status in (401, 403):
            raise auth_error(self.spec, self.label, status, response.headers.get("www-authenticate", ""))
        ctype = response.headers.get("content-type", "")
        if status != 200 or not is_event_stream(ctype):
            raise HTTPStatusError(
                f"server '{self.label}' answered the SSE GET with HTTP {status} ({ctype or 'no content type'})",
                status=status,
                server=self.label,
            )

    async def send(
        self,
        data: bytes,
        *,
        request_id: RequestId | None = None,
        headers: Mapping[str, str] | None = None,
        opens_session: bool = False,
        deadline: float | None = None,
    ) -> None:
        """POSTs one message to the endpoint; the answer comes on the SSE stream. A 429 or 503
        (not processed) is sent again as :func:`~mcpwire.protocol.resend.status_resend` says,
        waiting out a ``Retry-After`` that ends before ``deadline`` (trio's clock).

        Raises:
            ServerGone: the connection is not open, or the POST failed.
            AuthError: HTTP 401/403, with the challenge.
            HTTPStatusError: any other error status.
            FrameTooLarge: the POST's answer is larger than ``max_message_bytes``.
            LocalProtocolError: a header cannot be sent (a line break in a value).
        """
        if self._closing or self.endpoint is None or self._sender is None:
            raise ServerGone(f"the SSE connection to server '{self.label}' is not open", server=self.label)
        post_headers = {**self._headers, "Content-Type": "application/json"}
        attempt = 1
        while True:
            try:
                async with self._open_stream("POST", self.endpoint, post_headers, data) as response:
                    self.bytes_sent += len(data)
                    wait = retry_after_seconds(response.headers.get("retry-after"))
                    remaining = None if deadline is None else deadline - trio.current_time()
                    step = status_resend(response.status, wait, idempotent=False, remaining=remaining)
                    if step is None or attempt >= SEND_ATTEMPTS or self._closing:
                        self._check_post(response)
                        # HS-03: the body is not JSON-RPC, but it is read (to free the connection), and
                        # bounded: a server cannot make the client buffer an endless answer (HT-S03).
                        self.bytes_received += len(await read_body(response, self._max))
                        return
            except ConnectionBroken as exc:
                raise in_context(exc, f"cannot POST to server '{self.label}'") from exc
            except ConnectError as exc:
                why = describe_error(exc)
                raise ServerGone(f"cannot POST to server '{self.label}': {why}", server=self.label) from exc
            delay = backoff(attempt) if step.wait is None else step.wait
            log.info("%s: HTTP %s to the POST; sending it again in %.2f s", self.label, response.status, delay)
            await trio.sleep(delay)
            attempt += 1

    def _check_post(self, response: Response) -> None:
        status = response.status
        if status in (401, 403):
            raise auth_error(self.spec, self.label, status, response.headers.get("www-authenticate", ""))
        if status >= 400:
            raise HTTPStatusError(
                f"server '{self.label}' answered the POST with HTTP {status}", status=status, server=self.label
            )
