"""What the two HTTP actors share: their common state (:class:`HttpActor`), the default ``httpx``
client, bounded and cancellation-safe reading of responses, backoff, and the wording of HTTP
failures.

Theory of operation: the default client is cheap to build. ``httpx.AsyncClient()`` loads the CA
bundle into a new TLS context every time it is built (tens of milliseconds, far more on a busy
machine), even for ``http://`` URLs. Here one TLS context per process is built on the first
``https://`` connection and shared; a plain-HTTP connection gets a context that trusts nothing
(it never does TLS; should it ever be asked to, verification fails closed).

Failures are worded once, here: an ``httpx`` error whose own message is empty (a TLS failure
surfaces as ``ConnectError('')``) is described by the first cause in its chain that says
something, and a 401 or 403 becomes an :class:`~mcpwire.errors.AuthError` that carries the
challenge and says what to do about it.
"""

from __future__ import annotations

import os
import random
import ssl
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Final, cast
from urllib.parse import urlsplit

import trio

from ..errors import AuthError, FrameTooLarge
from ..redaction import clean_terminal, redact_url, shorten
from ..transports import HttpServer
from .base import MessageSink

if TYPE_CHECKING:
    import httpx

    from .http_pool import DirectSender, PooledTransport

__all__ = [
    "OWNED_CLIENT_CLOSE_TIMEOUT",
    "RESPONSE_CLOSE_TIMEOUT",
    "HttpActor",
    "auth_error",
    "backoff",
    "body_chunks",
    "close_response",
    "describe_error",
    "lean_transport",
    "open_http_client",
    "read_body",
    "tls_context",
]

RESPONSE_CLOSE_TIMEOUT: Final = 2.0  # seconds to close a streamed response, even when cancelled
OWNED_CLIENT_CLOSE_TIMEOUT: Final = 5.0  # seconds to close the httpx client an actor made itself
#: how much of a server's challenge header goes into an error message
CHALLENGE_CHARS: Final = 500

_tls_contexts: dict[bool, ssl.SSLContext] = {}


def tls_context(url: str) -> ssl.SSLContext:
    """The process's TLS context for ``url``: the verifying one (CA bundle loaded once, honouring
    ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` as httpx does) for ``https://``, else one that trusts
    nothing."""
    secure = urlsplit(url).scheme == "https"
    context = _tls_contexts.get(secure)
    if context is None:
        if secure:
            if os.environ.get("SSL_CERT_FILE"):
                context = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
            elif os.environ.get("SSL_CERT_DIR"):
                context = ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
            else:
                import certifi

                context = ssl.create_default_context(cafile=certifi.where())
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, with no CA: fails closed
        _tls_contexts[secure] = context
    return context


def open_http_client(url: str | None = None, transport: PooledTransport | None = None) -> httpx.AsyncClient:
    """The client used when none is injected: no read timeout (streams are long-lived; the MCP
    client bounds every request itself), bounded connect and write, redirects not followed, and
    the shared TLS context for ``url`` (the verifying one when no URL is given).

    Its transport is ``transport``, or :func:`lean_transport`'s for ``url``, or, when a proxy
    from the environment applies to ``url``, ``httpx``'s own (which speaks to proxies)."""
    import httpx

    timeout = httpx.Timeout(connect=10.0, read=None, write=30.0, pool=30.0)
    transport = transport or (lean_transport(url) if url is not None else None)
    if transport is not None:
        return httpx.AsyncClient(timeout=timeout, follow_redirects=False, transport=transport)
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, verify=tls_context(url or "https:"))


def lean_transport(url: str) -> PooledTransport | None:
    """:class:`~mcpwire.actors.http_pool.PooledTransport` (lean HTTP/1.1, pooled) for a client of
    ``url``, or None when a proxy from the environment applies to it."""
    if _proxied(url):
        return None
    from .http_pool import PooledTransport

    return PooledTransport(tls=partial(tls_context, "https:"))


def _proxied(url: str) -> bool:
    """Whether ``httpx`` would send a request to ``url`` through a proxy named in the environment
    (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, less ``NO_PROXY``)."""
    proxies = urllib.request.getproxies()
    if not proxies:
        return False
    parts = urlsplit(url)
    if parts.scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


class HttpActor:
    """What both HTTP actors hold: the spec, the sink, the ``httpx`` client (the injected one, or
    one made when the actor starts and closed when it ends), the message bound, the byte counters
    and whether it is closing. There is no process: no pid, no stderr."""

    def __init__(
        self, spec: HttpServer, sink: MessageSink, http: httpx.AsyncClient | None, max_bytes: int, label: str | None
    ) -> None:
        self.spec = spec
        self.label = label or spec.label
        self._sink = sink
        self._http = http
        self._owns_http = http is None
        self._direct: DirectSender | None = None  # the fast path of a client made here
        self._max = max_bytes
        self._closed = trio.Event()
        self._closing = False
        self.bytes_sent = 0
        self.bytes_received = 0
        self.pid: int | None = None

    def stderr_tail(self) -> list[str]:
        return []

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def _open_client(self) -> None:
        """Makes the default client when none was injected (when ``run`` starts)."""
        if self._http is None:
            transport = lean_transport(self.spec.url)
            self._http = open_http_client(self.spec.url, transport)
            if transport is not None:
                from .http_pool import DirectSender

                self._direct = DirectSender(self._http, transport)

    async def _send(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None = None
    ) -> httpx.Response:
        """Sends a request; the response's body is not read yet (close it when done)."""
        assert self._http is not None
        if self._direct is not None:
            return await self._direct.send(method, url, headers, content)
        http = self._http
        return await http.send(http.build_request(method, url, headers=headers, content=content), stream=True)

    @asynccontextmanager
    async def _open_stream(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None = None
    ) -> AsyncIterator[httpx.Response]:
        """A streamed response, closed even when the caller is cancelled: a close interrupted by
        the cancellation would leave its socket to the garbage collector."""
        response = await self._send(method, url, headers, content)
        try:
            yield response
        finally:
            await close_response(response)

    async def _close_own_client(self) -> None:
        """Closes the client made here, shielded and bounded; an injected one stays open."""
        if self._owns_http and self._http is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(OWNED_CLIENT_CLOSE_TIMEOUT):
                await self._http.aclose()


def body_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body's chunks, as the async generator httpx makes them: used under ``aclosing`` so
    that leaving a stream early (the answer came, an error) releases it at once, not at GC."""
    return cast("AsyncGenerator[bytes, None]", response.aiter_bytes())


async def close_response(response: httpx.Response) -> None:
    """Closes a streamed response; shielded and bounded."""
    if response.is_closed:  # read to the end (the usual answer): nothing left to release
        return
    with trio.CancelScope(shield=True), trio.move_on_after(RESPONSE_CLOSE_TIMEOUT):
        await response.aclose()


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The whole body of a streamed response, never more than ``limit`` bytes in memory (HT-S03).

    Raises:
        FrameTooLarge: the declared or the actual length exceeds ``limit``; the rest is not read.
    """
    declared = response.headers.get("content-length")
    length = int(declared) if declared is not None and declared.isascii() and declared.isdigit() else None
    if length is not None and length > limit:
        raise FrameTooLarge(length, limit)
    if length is not None and response.headers.get("content-encoding", "identity") == "identity":
        # h11 frames the body by its declared length, and nothing inflates it: bounded.
        return await response.aread()
    buffer = bytearray()
    async with aclosing(body_chunks(response)) as pieces:  # closed on any early exit
        async for chunk in pieces:
            buffer += chunk
            if len(buffer) > limit:
                raise FrameTooLarge(len(buffer), limit)
    return bytes(buffer)


def backoff(attempt: int, base: float = 0.25, cap: float = 5.0) -> float:
    """Seconds to wait before attempt ``attempt`` (from 1): exponential, capped, jittered."""
    return float(min(cap, base * 2**attempt) * (0.5 + random.random() / 2))


def describe_error(exc: BaseException) -> str:
    """What went wrong, in words, for an ``httpx`` error: its message, or, when that is empty (a
    TLS failure is ``ConnectError('')``), the first cause in its chain that says something; a
    TLS failure is named as one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    first = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return f"TLS certificate verification failed: {current.verify_message or current.reason}"
        if isinstance(current, ssl.SSLError):
            detail = str(current.reason or current).replace("_", " ").lower()
            hint = " (is it plain HTTP? try http://)" if current.reason == "WRONG_VERSION_NUMBER" else ""
            return f"TLS handshake failed: {detail}{hint}"
        first = first or str(current).strip()
        current = current.__cause__ or current.__context__
    return first or type(exc).__name__


def auth_error(spec: HttpServer, label: str, status: int, challenge: str, *, when: str = "") -> AuthError:
    """The :class:`AuthError` for a 401 or 403, with the challenge (shortened, made printable)
    and, for a 401, how to authorize."""
    how = "the configured credentials were refused" if spec.has_auth else "no credentials are configured"
    shown = shorten(clean_terminal(challenge, newlines=False), CHALLENGE_CHARS)
    message = f"server '{label}' answered {when}HTTP {status} ({how})" + (f"; challenge: {shown}" if shown else "")
    if status == 401:
        url = redact_url(spec.url)
        if spec.has_auth:
            message += f"; the token may be wrong or expired: run 'mcpwire login {url}' again, or check the token"
        else:
            message += (
                f"; authorize with 'mcpwire login {url}', or pass a token "
                "(--bearer-env VAR on the command line, HttpServer(bearer_token=...) in Python)"
            )
    return AuthError(message, status=status, challenge=challenge, server=label)
