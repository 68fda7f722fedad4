"""Redirect handlers: how the user agent visits the authorization URL and how the code comes back.

Theory of operation: the provider hands a handler the full authorization URL and gets back the
URL the authorization server redirected to (with ``code``, ``state`` and maybe ``iss``). It then
checks ``state`` and ``iss`` itself (AU-19, AU-20), so handlers only move URLs around.

- :class:`HeadlessRedirect` GETs the authorization URL without following redirects and reads
  ``Location``: for authorization servers that approve at once (tests, conformance mocks).
- :func:`open_loopback_redirect` listens on ``127.0.0.1`` (never another interface), shows the
  URL to the user and/or opens a browser on it, and waits, bounded, for one request to the
  callback path (AU-21: redirect URIs are localhost or https). Showing the URL matters on a
  machine without a browser: the user opens it elsewhere (the redirect still has to reach this
  machine's loopback interface, e.g. through an SSH port forward).
"""

from __future__ import annotations

import logging
import webbrowser
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urljoin

import trio

if TYPE_CHECKING:
    import httpx

__all__ = ["HeadlessRedirect", "LoopbackRedirect", "RedirectHandler", "open_loopback_redirect"]

log = logging.getLogger(__name__)

#: How long a headless GET of the authorization URL may take.
HEADLESS_TIMEOUT_SECONDS = 20.0
#: How long the loopback listener waits for the browser to come back.
LOOPBACK_TIMEOUT_SECONDS = 300.0
#: The most bytes read of one callback request head.
MAX_REQUEST_HEAD_BYTES = 16_384


class RedirectHandler(Protocol):
    """Visits an authorization URL and returns the redirect URL the AS sent the user agent to."""

    @property
    def redirect_uri(self) -> str: ...

    async def authorize(self, authorization_url: str) -> str:
        """Returns the callback URL (with its query). Raises on failure or timeout."""
        ...


class RedirectError(RuntimeError):
    """The user agent step failed: no redirect, a timeout, a closed listener."""


@dataclass(slots=True)
class HeadlessRedirect:
    """Stands in for a browser by GETting the authorization URL (no user interaction).

    Args:
        redirect_uri: the URI registered with the AS; it is never contacted.
        http: the client to GET with (default: a fresh ``httpx.AsyncClient``); inject one with
            a ``MockTransport`` in tests.
    """

    redirect_uri: str = "http://127.0.0.1:33418/callback"
    http: httpx.AsyncClient | None = field(default=None, repr=False)
    timeout: float = HEADLESS_TIMEOUT_SECONDS

    async def authorize(self, authorization_url: str) -> str:
        """GETs the URL once, without following redirects; bounded by ``timeout``.

        Cancellation: the GET is abandoned.
        """
        import httpx

        with trio.fail_after(self.timeout):
            if self.http is not None:
                response = await self.http.get(authorization_url, follow_redirects=False)
            else:
                async with httpx.AsyncClient(timeout=self.timeout) as client:
                    response = await client.get(authorization_url, follow_redirects=False)
        location = response.headers.get("location")
        if response.status_code not in (301, 302, 303, 307, 308) or not location:
            raise RedirectError(
                f"the authorization endpoint answered HTTP {response.status_code} without a redirect; "
                "it needs a user (use a browser-based redirect handler)"
            )
        return str(urljoin(authorization_url, location))


_PAGE = (
    b"<!doctype html><meta charset=utf-8><title>mcpwire</title>"
    b"<p>Authorization received. You can close this window and return to the terminal.</p>"
)


@dataclass(slots=True)
class LoopbackRedirect:
    """A listener on ``127.0.0.1`` that receives one authorization callback per ``authorize``.

    ``show`` receives the authorization URL (to display it); with ``open_browser`` a web browser
    is also asked to open it. Both may be on: the URL stays visible when no browser comes up.
    """

    listener: trio.SocketListener = field(repr=False)
    port: int
    path: str = "/callback"
    show: Callable[[str], None] | None = field(default=None, repr=False)
    timeout: float = LOOPBACK_TIMEOUT_SECONDS
    open_browser: bool = True

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    async def authorize(self, authorization_url: str) -> str:
        """Shows the URL, then serves requests until one hits the callback path.

        Bounded by ``timeout``; cancellation closes the connection being served.
        """
        if self.show is not None:
            self.show(authorization_url)
        if self.open_browser:
            try:
                opened = await trio.to_thread.run_sync(webbrowser.open, authorization_url)
            except webbrowser.Error:
                opened = False
            if not opened:
                # The URL itself is not logged: it carries the state of this authorization.
                log.warning("auth: no web browser could be opened for the authorization URL on port %s", self.port)
        with trio.fail_after(self.timeout):
            while True:
                stream = await self.listener.accept()
                async with stream:
                    target = await _read_target(stream)
                    if target is not None and target.split("?", 1)[0] == self.path:
                        await _respond(stream, 200, _PAGE)
                        return f"http://127.0.0.1:{self.port}{target}"
                    await _respond(stream, 404, b"not found")


async def _read_target(stream: trio.SocketStream) -> str | None:
    head = b""
    with trio.move_on_after(10):
        while b"\r\n\r\n" not in head and len(head) < MAX_REQUEST_HEAD_BYTES:
            chunk = await stream.receive_some(4096)
            if not chunk:
                break
            head += chunk
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET":
        return None
    return parts[1]


async def _respond(stream: trio.SocketStream, status: int, body: bytes) -> None:
    reason = {200: "OK", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
    )
    with trio.move_on_after(5):
        await stream.send_all(head.encode("latin-1") + body)


@asynccontextmanager
async def open_loopback_redirect(
    port: int = 0,
    *,
    path: str = "/callback",
    show: Callable[[str], None] | None = None,
    open_browser: bool | None = None,
) -> AsyncIterator[LoopbackRedirect]:
    """Listens on ``127.0.0.1:port`` (``0``: any free port) for the duration of the block.

    Register ``handler.redirect_uri`` with the AS (DCR does this for you). ``show`` receives the
    authorization URL; ``open_browser`` also asks a web browser to open it (default: only when
    there is no ``show``).
    """
    listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    listener = listeners[0]
    for extra in listeners[1:]:
        await extra.aclose()
    bound = listener.socket.getsockname()[1]
    try:
        yield LoopbackRedirect(
            listener=listener,
            port=int(bound),
            path=path,
            show=show,
            open_browser=show is None if open_browser is None else open_browser,
        )
    finally:
        await listener.aclose()
