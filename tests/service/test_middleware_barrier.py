"""The service's middleware tells the audit barrier whether other requests are under way, so
that calls finishing together share a commit; an open event stream (a GET) is not one of them."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from mcpwire.service.middleware import RateLimiter, ServiceMiddleware
from mcpwire.service.settings import Settings


def _scope(method: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": "/mcp",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 40000),
    }


async def _no_body() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


class _Inner:
    """A GET stays open until ``release`` is set; a POST answers at once, or when ``hold`` is set."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.hold: trio.Event | None = None
        self.streaming = trio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["method"] == "GET":
            stream_head = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": stream_head})
            self.streaming.set()
            await self.release.wait()
            await send({"type": "http.response.body", "body": b""})
            return
        if self.hold is not None:
            await self.hold.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})


async def test_an_open_event_stream_does_not_make_a_call_wait_for_others() -> None:
    told: list[tuple[str, bool]] = []
    current: list[str] = []

    async def barrier(others: bool) -> bool:
        told.append((current[-1] if current else "?", others))
        return True

    inner = _Inner()
    middleware = ServiceMiddleware(
        inner,
        settings=Settings(),
        is_public=lambda method, path: True,
        is_call=lambda method, path: False,
        limiter=RateLimiter(rate=0, burst=0),
        barrier=barrier,
    )
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(middleware, _scope("GET"), _no_body, send)
        await inner.streaming.wait()
        assert middleware.active == 0  # the open stream is not counted

        current.append("post alone")
        await middleware(_scope("POST"), _no_body, send)
        assert told[-1] == ("post alone", False)

        # another POST under way: this one's barrier is told so
        held = inner.hold = trio.Event()
        nursery.start_soon(middleware, _scope("POST"), _no_body, send)
        await trio.testing.wait_all_tasks_blocked()
        assert middleware.active == 1
        inner.hold = None
        current.append("post with another")
        await middleware(_scope("POST"), _no_body, send)
        assert told[-1] == ("post with another", True)
        held.set()

        inner.release.set()
    assert middleware.active == 0
