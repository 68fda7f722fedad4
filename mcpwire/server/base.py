"""What every part of the server side shares: JSON objects, the errors a handler raises, and the
outlet a request's messages go to. It imports nothing of the server package, so that the request
context, the server and the connection build on it without importing each other in a circle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeAlias

__all__ = ["InputRequired", "JSONObject", "Outlet", "RequestError"]

JSONObject: TypeAlias = dict[str, object]


class RequestError(Exception):
    """Raised by a handler: the request is answered with this JSON-RPC error."""

    def __init__(self, code: int, message: str, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class InputRequired(Exception):
    """Raised by a handler in 2026-07-28: the request ends with this ``input_required`` result.

    2026-07-28 basic/patterns/mrtr: the client answers ``inputRequests`` and retries the same
    request with ``inputResponses`` (and ``requestState`` when given).
    """

    def __init__(self, input_requests: Mapping[str, JSONObject], request_state: str | None = None) -> None:
        super().__init__("input required")
        self.result: JSONObject = {"resultType": "input_required"}
        if input_requests:
            self.result["inputRequests"] = dict(input_requests)
        if request_state is not None:
            self.result["requestState"] = request_state


class Outlet(Protocol):
    """Where the messages of one request (or one connection) go."""

    async def send(self, message: JSONObject | list[JSONObject], *, final: bool = False) -> None:
        """Write one message; ``final`` marks the answer that ends the request's stream."""

    @property
    def closed(self) -> bool:
        """True when nobody reads any more (the message would be lost)."""

    def drop_connection(self) -> None:
        """End the current HTTP response now, keeping the stream resumable (no-op elsewhere)."""
