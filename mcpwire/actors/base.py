"""What the client needs of a transport actor, and what a transport needs of the client.

A transport moves encoded JSON-RPC messages; it never builds or interprets payloads beyond
classifying what it reads (so it can tell a response from a notification on an HTTP stream).
Headers that mirror the body are computed by the client from the sans-I/O core and handed over
with each message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import trio

from ..protocol.jsonrpc import Message, RequestId

__all__ = ["MessageSink", "Transport"]


class MessageSink(Protocol):
    """Where a transport delivers what it reads. Every method is synchronous and never blocks."""

    def classify(self, data: bytes) -> Message:
        """Turns one complete JSON text into a message (:func:`~mcpwire.protocol.jsonrpc.classify`,
        or a faster typed path where the sink knows what it expects). Never raises."""
        ...

    def message_received(self, message: Message) -> None: ...

    def connection_lost(self, exc: BaseException) -> None: ...

    def request_failed(self, request_id: RequestId, exc: BaseException) -> None: ...

    def session_lost(self, exc: BaseException) -> None:
        """The transport reconnected, but the server forgot the session: re-initialise."""
        ...


class Transport(Protocol):
    """A connection actor; started with ``nursery.start(transport.run)``."""

    label: str
    bytes_sent: int
    bytes_received: int
    #: True when the transport carries mirrored HTTP headers (Streamable HTTP).
    wants_headers: bool
    #: True when a request's ``send`` either hands over the whole message or raises having sent
    #: nothing, even when cancelled; then a request whose send raised was never issued, and is
    #: not cancelled on the wire (UT-C01).
    atomic_send: bool

    async def run(self, *, task_status: trio.TaskStatus[Transport] = ...) -> None: ...

    async def send(
        self,
        data: bytes,
        *,
        request_id: RequestId | None = None,
        headers: Mapping[str, str] | None = None,
        opens_session: bool = False,
        deadline: float | None = None,
    ) -> None:
        """Sends one message. ``deadline`` (trio's clock): when the caller gives up on the request;
        a transport that would wait before sending again (an HTTP ``Retry-After``) does not wait
        past it."""
        ...

    async def cancel(self, request_id: RequestId) -> bool:
        """Cancels a request at the transport level; False when a notification is needed."""
        ...

    def negotiated(self, version: str, modern: bool) -> None: ...

    async def aclose(self) -> None: ...

    async def wait_closed(self) -> None: ...

    def stderr_tail(self) -> list[str]: ...

    @property
    def pid(self) -> int | None: ...
