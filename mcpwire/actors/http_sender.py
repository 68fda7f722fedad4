"""The one seam under the HTTP actors: send a request, get its status, headers and body.

Theory of operation: both HTTP actors (Streamable HTTP, HTTP+SSE) speak to the network through a
:class:`Sender`, in mcpwire's own types: :meth:`Sender.send` takes a method, a URL, headers, a
body and :class:`Timeouts`, and returns a :class:`Response` (status, :class:`Headers`, a body read
as it is consumed); :meth:`Sender.aclose` ends it. Two senders implement it:

- :class:`~mcpwire.actors.http_pool.PoolSender`, mcpwire's own HTTP/1.1 pool on trio and
  :mod:`mcpwire.protocol.http1`: the default, which imports no HTTP library;
- :class:`~mcpwire.actors.http_adapter.HttpxSender`, over an ``httpx.AsyncClient``: an injected
  one (its auth flow, event hooks, cookies, default headers, HTTP/2, proxies and later changes all
  apply, since every request goes through the client), or the one made when a proxy from the
  environment applies to the URL.

Every failure of a sender is one of mcpwire's exceptions, mapped once where it is detected (the
original error chained as ``__cause__``, so that :func:`~mcpwire.actors.http_common.describe_error`
can name a TLS failure):

- :class:`~mcpwire.errors.ConnectError`: the request was not sent (no connection could be made,
  the TLS handshake failed, no connection was free in time, the URL cannot be used);
- :class:`~mcpwire.errors.ConnectionBroken`: the request may have reached the server (a write or
  read failed or timed out), with :class:`~mcpwire.errors.IncompleteBody` for a body cut short
  and :class:`~mcpwire.errors.InvalidHTTPResponse` for an answer that is not HTTP/1.1;
- :class:`~mcpwire.errors.LocalProtocolError`: the request itself cannot be sent (a header value
  with a line break), so nothing was.

A response that arrives while its request is still being written (a server answering 413 or
401 early and closing) is returned as that response, not as a write error.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Final, Protocol, overload

import msgspec

__all__ = ["DEFAULT_TIMEOUTS", "Headers", "Response", "Sender", "Timeouts"]


class Timeouts(msgspec.Struct, frozen=True):
    """Seconds each step of an exchange may take (None: no bound).

    Attributes:
        connect: to open a connection (the TLS handshake included).
        read: between two reads of the answer.
        write: to send the request.
        pool: to wait for a free connection.
    """

    connect: float | None = 10.0
    read: float | None = None
    write: float | None = 30.0
    pool: float | None = 30.0


#: the default client's: no read bound (streams are long-lived; the MCP client bounds every
#: request itself), bounded connect, write and pool waits
DEFAULT_TIMEOUTS: Final = Timeouts()


class Headers:
    """A response's headers: the pairs as they came, and a lookup without regard to case (values
    of a repeated header joined with ``", "``, as ``httpx`` joins them). Bytes are read as
    Latin-1, so any value survives the trip back to the server unchanged."""

    __slots__ = ("_lookup", "raw")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.raw = raw
        self._lookup: dict[str, str] | None = None

    def _table(self) -> dict[str, str]:
        table = self._lookup
        if table is None:
            table = {}
            for name, value in self.raw:
                key = name.decode("latin-1").lower()
                text = value.decode("latin-1")
                table[key] = f"{table[key]}, {text}" if key in table else text
            self._lookup = table
        return table

    @overload
    def get(self, name: str) -> str | None: ...

    @overload
    def get(self, name: str, default: str) -> str: ...

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of the header ``name`` (any case), or ``default``."""
        return self._table().get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._table()

    def __getitem__(self, name: str) -> str:
        return self._table()[name.lower()]

    def items(self) -> Iterator[tuple[str, str]]:
        """``(lowercased name, value)`` pairs, one per name."""
        return iter(self._table().items())

    def __repr__(self) -> str:
        return f"Headers({[name.decode('latin-1') for name, _ in self.raw]!r})"


class Response(Protocol):
    """One answer, its body not read yet. Close it when done (:meth:`aclose`); reading the body
    to its end closes it too."""

    status: int
    headers: Headers

    @property
    def closed(self) -> bool:
        """Whether the response is closed (its body read to the end, or :meth:`aclose` called)."""
        ...

    def body_at_once(self) -> bytes | None:
        """The whole body, taken, when it arrived with the head (nothing to wait for); the
        response is then read to its end. None otherwise, and nothing was taken."""
        ...

    def chunks(self) -> AsyncGenerator[bytes, None]:
        """The body's pieces as they are read (use under ``contextlib.aclosing``).

        Raises:
            ConnectionBroken: reading failed; :class:`~mcpwire.errors.IncompleteBody` when the
                server closed the connection before the body's end.
        """
        ...

    async def aclose(self) -> None:
        """Releases the response (its connection returns to the pool only when the body was read
        to its end). Idempotent."""
        ...


class Sender(Protocol):
    """What sends the HTTP requests of one actor (see the module's theory of operation)."""

    async def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None = None,
        timeouts: Timeouts | None = None,
    ) -> Response:
        """Sends one request; the answer's body is not read yet.

        Args:
            headers: the request's own headers (``Host`` and ``Content-Length`` are added).
            timeouts: bounds for this exchange (default: the sender's own).

        Raises:
            ConnectError: the request was not sent.
            ConnectionBroken: the request may have reached the server, and no answer came.
            LocalProtocolError: the request cannot be sent as given.

        Cancellation: the exchange is abandoned and its connection closed.
        """
        ...

    async def aclose(self) -> None:
        """Closes the sender's connections (an injected client stays open). Idempotent."""
        ...
