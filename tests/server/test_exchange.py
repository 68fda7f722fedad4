"""An exchange's view of a request: its headers by lower-case name, the values of a repeated one
joined in order (as the servers' ASGI scopes give them, or any iterable of pairs)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

from mcpwire.server.exchange import Exchange


async def _receive() -> dict[str, Any]:
    return {"type": "http.disconnect"}


async def _send(message: MutableMapping[str, Any]) -> None:
    pass


def _exchange(headers: Any) -> Exchange:
    scope = {"type": "http", "method": "POST", "headers": headers, "state": {"trace_id": "t", "caller": "c"}}
    return Exchange(scope, _receive, _send, "/mcp", "")


@pytest.mark.parametrize("shape", [list, tuple, iter])
def test_headers_by_lower_case_name_with_repeated_ones_joined_in_order(shape: Any) -> None:
    pairs = [
        (b"host", b"example"),
        (b"Accept", b"application/json"),
        (b"x-many", b"one"),
        (b"X-Many", b"two"),
        (b"content-type", b"application/json"),
        (b"x-many", b"three \xe9"),
    ]
    exchange = _exchange(shape(pairs))
    assert exchange.headers == {
        "host": "example",
        "accept": "application/json",
        "x-many": "one, two, three \xe9",
        "content-type": "application/json",
    }
    assert exchange.origin == {"trace_id": "t", "caller": "c"}


def test_headers_of_a_plain_request_and_of_none() -> None:
    def pairs() -> Iterator[tuple[bytes, bytes]]:
        yield b"host", b"a"
        yield b"mcp-session-id", b"s"

    assert _exchange([(b"host", b"a"), (b"mcp-session-id", b"s")]).headers == {"host": "a", "mcp-session-id": "s"}
    assert _exchange(pairs()).headers == {"host": "a", "mcp-session-id": "s"}
    assert _exchange([]).headers == {}
