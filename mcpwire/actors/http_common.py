"""What the two HTTP actors share: their common state (:class:`HttpActor`), the choice of their
:class:`~mcpwire.actors.http_sender.Sender`, bounded and cancellation-safe reading of responses,
backoff, and the wording of HTTP failures.

Theory of operation: an actor sends through an injected ``httpx.AsyncClient`` when it was given
one (:class:`~mcpwire.actors.http_adapter.HttpxSender`), else through mcpwire's own pool
(:class:`~mcpwire.actors.http_pool.PoolSender`), which imports no HTTP library; only when a proxy
from the environment applies to the URL (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and
``NO_PROXY``, read by :func:`environment_proxy` as ``httpx`` reads them) does it make an
``httpx`` client of its own, which speaks to proxies.

TLS contexts are cheap to share and costly to build (loading the CA bundle takes tens of
milliseconds, far more on a busy machine): one verifying context per process is built on the
first ``https://`` connection; a plain-HTTP client gets one that trusts nothing (it never does
TLS; should it ever be asked to, verification fails closed).

Failures are worded once, here: an error whose own message is empty (a TLS failure often is) is
described by the first cause in its chain that says something, a TLS failure is named as one, and
a 401 or 403 becomes an :class:`~mcpwire.errors.AuthError` that carries the challenge and says
what to do about it.
"""

from __future__ import annotations

import os
import random
import re
import ssl
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

import trio

from ..errors import AuthError, ConnectionBroken, FrameTooLarge, IncompleteBody
from ..redaction import clean_terminal, redact_url, shorten
from ..transports import HttpServer
from .base import MessageSink
from .http_sender import Response, Sender

if TYPE_CHECKING:
    import httpx

    from .http_pool import Begun, PoolSender

__all__ = [
    "OWNED_CLIENT_CLOSE_TIMEOUT",
    "RESPONSE_CLOSE_TIMEOUT",
    "HttpActor",
    "auth_error",
    "backoff",
    "close_response",
    "describe_error",
    "environment_proxy",
    "in_context",
    "make_sender",
    "read_body",
    "tls_context",
]

RESPONSE_CLOSE_TIMEOUT: Final = 2.0  # seconds to close a streamed response, even when cancelled
OWNED_CLIENT_CLOSE_TIMEOUT: Final = 5.0  # seconds to close the sender an actor made itself
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


def make_sender(url: str, http: httpx.AsyncClient | None) -> Sender:
    """The sender of an actor for ``url``: over the injected client ``http``; else over a client
    made for the environment's proxy when one applies to ``url``; else mcpwire's own pool."""
    if http is not None:
        from .http_adapter import HttpxSender

        return HttpxSender(http, owned=False)
    if environment_proxy(url) is not None:
        from .http_adapter import HttpxSender, open_http_client

        return HttpxSender(open_http_client(url), owned=True)
    from .http_pool import PoolSender

    return PoolSender(tls=partial(tls_context, "https:"))


# -- the environment's proxies, as httpx reads them ---------------------------------------------

_PORTS: Final = {"http": 80, "https": 443}
# a NO_PROXY entry as a pattern (compiled on the first one, through the re module's cache)
_PATTERN: Final = r"(?:(?P<scheme>[a-z][a-z0-9+.-]*)://)?(?P<host>\[[^\]]*\]|[^:/]*)(?::(?P<port>[0-9]+))?"


def _environment_settings() -> dict[str, str]:
    """``urllib.request.getproxies()`` without importing it on Linux (a tenth of the default
    client's start-up): ``<scheme>_proxy`` variables in any case, lowercase ones first, an
    upper-case ``HTTP_PROXY`` ignored in a CGI script. Elsewhere the system's settings count too,
    as httpx reads them, so the standard library is asked."""
    if sys.platform in ("darwin", "win32"):
        import urllib.request

        return dict(urllib.request.getproxies())
    environ = os.environ
    names = [name for name in environ if name.lower()[-6:] == "_proxy"]  # only their values are read
    proxies: dict[str, str] = {}
    for name in names:
        value = environ[name]
        if value:
            proxies[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in environ:
        proxies.pop("http", None)
    for name in names:
        if name[-6:] == "_proxy":
            if environ[name]:
                proxies[name[:-6]] = environ[name]
            else:
                proxies.pop(name[:-6], None)
    return proxies


def _is_address(text: str, version: int) -> bool:
    import ipaddress  # only with a proxy in the environment

    try:
        (ipaddress.IPv4Address if version == 4 else ipaddress.IPv6Address)(text.split("/")[0])
    except ValueError:
        return False
    return True


def environment_proxy(url: str) -> str | None:
    """The proxy from the environment that ``httpx`` would send a request to ``url`` through, or
    None: the most specific of the ``http``, ``https`` and ``all`` proxies and of the ``NO_PROXY``
    entries that matches (a port first, then the longest host, then the longest scheme), with
    ``httpx``'s reading of ``NO_PROXY`` (``*`` for all hosts, an address, ``localhost``, a domain
    and its subdomains, or a ``scheme://host[:port]`` pattern)."""
    settings = _environment_settings()
    proxies = {scheme: settings[scheme] for scheme in ("http", "https", "all") if settings.get(scheme)}
    if not proxies:
        return None
    patterns: list[tuple[str, str, int | None, str | None]] = []  # scheme, host, port, proxy
    for scheme, proxy in proxies.items():
        patterns.append(("" if scheme == "all" else scheme, "", None, proxy if "://" in proxy else f"http://{proxy}"))
    for entry in (host.strip() for host in settings.get("no", "").split(",")):
        if entry == "*":
            return None
        if not entry:
            continue
        if "://" in entry:
            pattern = entry
        elif _is_address(entry, 4) or entry.lower() == "localhost":
            pattern = f"all://{entry}"
        elif _is_address(entry, 6):
            pattern = f"all://[{entry}]"
        else:
            pattern = f"all://*{entry}"
        match = re.match(_PATTERN, pattern.lower())
        if match is None:  # pragma: no cover - the pattern matches any text
            continue
        scheme = match["scheme"] or ""
        port = _explicit_port(scheme, int(match["port"]) if match["port"] else None)
        host = match["host"].strip("[]")
        patterns.append(("" if scheme == "all" else scheme, "" if host == "*" else host, port, None))
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = _explicit_port(scheme, parts.port)
    # httpx tries its mounts from the most specific: a port, then the longest host and scheme
    for pattern_scheme, pattern_host, pattern_port, chosen in sorted(
        patterns, key=lambda p: (0 if p[2] is not None else 1, -len(p[1]), -len(p[0]))
    ):
        if pattern_scheme and pattern_scheme != scheme:
            continue
        if pattern_host and not _host_matches(pattern_host, host):
            continue
        if pattern_port is not None and pattern_port != port:
            continue
        return chosen
    return None


def _explicit_port(scheme: str, port: int | None) -> int | None:
    """A port as httpx keeps it in a URL: None when absent or the scheme's default."""
    return None if port == _PORTS.get(scheme) else port


def _host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):  # subdomains only
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    if pattern.startswith("*"):  # the domain and its subdomains
        domain = pattern[1:]
        return host == domain or host.endswith("." + domain)
    return host == pattern


class HttpActor:
    """What both HTTP actors hold: the spec, the sink, the sender (over the injected ``httpx``
    client, or made when the actor starts and closed when it ends), the message bound, the byte
    counters and whether it is closing. There is no process: no pid, no stderr."""

    def __init__(
        self, spec: HttpServer, sink: MessageSink, http: httpx.AsyncClient | None, max_bytes: int, label: str | None
    ) -> None:
        self.spec = spec
        self.label = label or spec.label
        self._sink = sink
        self._http = http
        self._sender: Sender | None = None
        #: the sender when it is mcpwire's pool (which can write a request at once)
        self._pool: PoolSender | None = None
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

    def _open_sender(self) -> Sender:
        """The actor's sender, made when ``run`` starts (see :func:`make_sender`)."""
        if self._sender is None:
            from .http_pool import PoolSender

            self._sender = make_sender(self.spec.url, self._http)
            self._pool = self._sender if isinstance(self._sender, PoolSender) else None
        return self._sender

    async def _send(self, method: str, url: str, headers: Mapping[str, str], content: bytes | None = None) -> Response:
        """Sends a request; the response's body is not read yet (close it when done)."""
        return await self._open_sender().send(method, url, headers, content)

    def _begin(self, method: str, url: str, headers: Mapping[str, str], content: bytes | None = None) -> Begun | None:
        """Writes a small request at once, in the caller's step, when mcpwire's pool can (see
        :meth:`~mcpwire.actors.http_pool.PoolSender.begin`); :meth:`_finish` reads its answer
        and :meth:`_abandon` drops it. None: :meth:`_send` sends it."""
        self._open_sender()
        return None if self._pool is None else self._pool.begin(method, url, headers, content)

    async def _finish(self, begun: Begun) -> Response:
        """The answer to a request :meth:`_begin` wrote; as :meth:`_send` returns it, and raises."""
        assert self._pool is not None
        return await self._pool.finish(begun)

    def _abandon(self, begun: Begun) -> None:
        """Drops a request :meth:`_begin` wrote whose answer will not be read (its connection is closed)."""
        assert self._pool is not None
        self._pool.abandon(begun)

    @asynccontextmanager
    async def _open_stream(
        self, method: str, url: str, headers: Mapping[str, str], content: bytes | None = None
    ) -> AsyncIterator[Response]:
        """A streamed response, closed even when the caller is cancelled: a close interrupted by
        the cancellation would leave its socket to the garbage collector."""
        response = await self._send(method, url, headers, content)
        try:
            yield response
        finally:
            await close_response(response)

    async def _close_sender(self) -> None:
        """Closes the sender, shielded and bounded (an injected client stays open)."""
        if self._sender is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(OWNED_CLIENT_CLOSE_TIMEOUT):
                await self._sender.aclose()


async def close_response(response: Response) -> None:
    """Closes a streamed response; shielded and bounded."""
    if response.closed:  # read to the end (the usual answer): nothing left to release
        return
    with trio.CancelScope(shield=True), trio.move_on_after(RESPONSE_CLOSE_TIMEOUT):
        await response.aclose()


async def read_body(response: Response, limit: int) -> bytes:
    """The whole body of a streamed response, never more than ``limit`` bytes in memory (HT-S03).

    Raises:
        FrameTooLarge: the declared or the actual length exceeds ``limit``; the rest is not read.
        ConnectionBroken: reading failed (:class:`~mcpwire.errors.IncompleteBody`: cut short).
    """
    declared = response.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise FrameTooLarge(int(declared), limit)
    whole = response.body_at_once()  # (the usual answer: a small body that came with its head)
    if whole is not None:
        await response.aclose()
        if len(whole) > limit:
            raise FrameTooLarge(len(whole), limit)
        return whole
    pieces: list[bytes] = []
    size = 0
    async with aclosing(response.chunks()) as body:  # closed on any early exit
        async for chunk in body:
            size += len(chunk)
            if size > limit:
                raise FrameTooLarge(size, limit)
            pieces.append(chunk)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def in_context(exc: ConnectionBroken, prefix: str) -> ConnectionBroken:
    """``exc`` again, its message led by ``prefix`` (which server, which request), its class and
    details kept and itself as the cause."""
    message = f"{prefix}: {exc}"
    if isinstance(exc, IncompleteBody):
        wrapped: ConnectionBroken = IncompleteBody(message, received=exc.received, expected=exc.expected)
    else:
        wrapped = type(exc)(message)
    wrapped.__cause__ = exc
    return wrapped


def backoff(attempt: int, base: float = 0.25, cap: float = 5.0) -> float:
    """Seconds to wait before attempt ``attempt`` (from 1): exponential, capped, jittered."""
    return float(min(cap, base * 2**attempt) * (0.5 + random.random() / 2))


def describe_error(exc: BaseException) -> str:
    """What went wrong, in words: the error's message, or, when that is empty (a TLS failure
    often is), the first cause in its chain that says something; a TLS failure is named as one,
    wherever it is in the chain."""
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
