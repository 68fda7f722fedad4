"""The :class:`~mcpwire.actors.http_sender.Sender` over an ``httpx.AsyncClient``.

Theory of operation: an embedder injects an ``httpx.AsyncClient`` for what mcpwire's own pool
does not do: an OAuth flow (``auth=``), event hooks, HTTP/2, a proxy, mutual TLS, headers set
after the client was made. Every request is built and sent by that client
(``client.build_request`` then ``client.send(..., stream=True)``), so all of it applies, always;
nothing goes around it. When no client is injected and a proxy from the environment applies to
the server's URL, the actor makes one here (:func:`open_http_client`), the only case in which the
default path imports ``httpx``.

``httpx``'s exceptions are mapped to mcpwire's here and nowhere else, each with the original as
its cause: what could not have been sent (``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``,
``ProxyError``, ``UnsupportedProtocol``, an invalid URL) is a :class:`~mcpwire.errors.ConnectError`;
a request ``httpx`` refuses to write is a :class:`~mcpwire.errors.LocalProtocolError` (the header's
value is never quoted: it may be a credential); anything else is a
:class:`~mcpwire.errors.ConnectionBroken`, and :class:`~mcpwire.errors.IncompleteBody` when fewer
bytes arrived than the answer's ``Content-Length`` announced.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing

import httpx

from ..errors import ConnectError, ConnectionBroken, IncompleteBody, InvalidHTTPResponse, LocalProtocolError
from .http_common import describe_error, tls_context
from .http_sender import DEFAULT_TIMEOUTS, Headers, Timeouts

__all__ = ["HttpxSender", "open_http_client"]

_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError, httpx.UnsupportedProtocol)


def open_http_client(url: str | None = None) -> httpx.AsyncClient:
    """The ``httpx`` client an actor makes when a proxy from the environment applies to its URL:
    the default timeouts (no read timeout: streams are long-lived, and the MCP client bounds
    every request itself), redirects not followed, the process's shared TLS context for ``url``,
    and the environment's proxies."""
    limits = DEFAULT_TIMEOUTS
    timeout = httpx.Timeout(connect=limits.connect, read=limits.read, write=limits.write, pool=limits.pool)
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False, verify=tls_context(url or "https:"))


class _HttpxResponse:
    """An ``httpx`` streamed response as a :class:`~mcpwire.actors.http_sender.Response`."""

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers = Headers(response.headers.raw)

    @property
    def closed(self) -> bool:
        return self._response.is_closed

    def body_at_once(self) -> None:
        return None  # (httpx reads a body as it is iterated)

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        response = self._response
        try:
            async with aclosing(response.aiter_bytes()) as pieces:  # type: ignore[type-var]
                async for chunk in pieces:
                    yield chunk
        except httpx.DecodingError as exc:
            raise InvalidHTTPResponse(f"the answer's content coding cannot be decoded: {describe_error(exc)}") from exc
        except httpx.TransportError as exc:
            declared = self.headers.get("content-length")
            expected = int(declared) if declared is not None and declared.isdigit() else None
            received = response.num_bytes_downloaded
            if isinstance(exc, httpx.RemoteProtocolError) and expected is not None and received < expected:
                raise IncompleteBody(
                    f"the server closed the connection after {received} of the {expected} bytes "
                    "its Content-Length announced",
                    received=received,
                    expected=expected,
                ) from exc
            raise ConnectionBroken(describe_error(exc)) from exc

    async def aclose(self) -> None:
        await self._response.aclose()

    def __repr__(self) -> str:
        return f"<response {self.status} (httpx)>"


class HttpxSender:
    """Sends every request through ``client``.

    Args:
        client: the injected client, or one made for a proxy.
        owned: close the client with the sender (only one the actor made).
    """

    def __init__(self, client: httpx.AsyncClient, *, owned: bool) -> None:
        self.client = client
        self._owned = owned

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeouts: Timeouts | None = None,
    ) -> _HttpxResponse:
        """See :meth:`~mcpwire.actors.http_sender.Sender.send`."""
        client = self.client
        try:
            if timeouts is None:  # the client's own timeouts
                request = client.build_request(method, url, headers=headers, content=body)
            else:
                timeout = httpx.Timeout(
                    connect=timeouts.connect, read=timeouts.read, write=timeouts.write, pool=timeouts.pool
                )
                request = client.build_request(method, url, headers=headers, content=body, timeout=timeout)
            return _HttpxResponse(await client.send(request, stream=True))
        except httpx.InvalidURL as exc:
            raise ConnectError(f"the URL cannot be used: {exc}") from exc
        except _UNSENT as exc:
            raise ConnectError(describe_error(exc)) from exc
        except (httpx.LocalProtocolError, UnicodeEncodeError) as exc:
            raise LocalProtocolError("the request cannot be sent: a header name or value is not valid HTTP") from exc
        except httpx.RequestError as exc:
            raise ConnectionBroken(describe_error(exc)) from exc

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()
