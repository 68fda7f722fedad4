"""429 and 503 with ``Retry-After``: waited out and sent again (the server did not process the
request, so even a ``tools/call`` goes again), within bounds: at most 30 s per wait, three
attempts in all, never past the call's timeout. Times are the autojump clock's."""

from __future__ import annotations

import email.utils
import time

import pytest
import trio
from http_fakes import FakeMCPServer, connect
from trio.testing import MockClock

from mcpwire.errors import HTTPStatusError
from mcpwire.protocol.resend import MAX_RETRY_AFTER
from mcpwire.transports import HttpServer

BOUND = 120


@pytest.mark.parametrize("mode", ["legacy", "modern"])
@pytest.mark.parametrize("status", [429, 503])
async def test_a_retry_after_is_waited_out_and_the_call_sent_again(
    autojump_clock: MockClock, mode: str, status: int
) -> None:
    fake = FakeMCPServer(mode=mode)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(status, rpc_method="tools/call", headers={"Retry-After": "7"})
            result = await client.call_tool("echo", {"text": "x"})
    assert result.is_error is False
    first, second = fake.sent("tools/call")
    assert (first.status, second.status) == (status, 200)
    assert first.raw == second.raw  # the same request: the server never processed the first
    assert 7.0 <= second.time - first.time < 7.1


async def test_an_http_date_is_waited_out_too(autojump_clock: MockClock) -> None:
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            when = email.utils.formatdate(time.time() + 4, usegmt=True)
            fake.inject(503, rpc_method="tools/call", headers={"Retry-After": when})
            await client.call_tool("echo", {"text": "x"})
    first, second = fake.sent("tools/call")
    assert 2.0 <= second.time - first.time <= 4.1


@pytest.mark.parametrize(
    ("headers", "timeout", "message"),
    [
        ({}, None, r"^server 'mcp\.test' answered HTTP 429: slow down$"),
        (
            {"Retry-After": "120"},
            None,
            rf"^server 'mcp\.test' answered HTTP 429 and asked to wait 120 s \(Retry-After\), more than the "
            rf"{MAX_RETRY_AFTER:g} s mcpwire waits: slow down$",
        ),
        (
            {"Retry-After": "20"},
            5.0,
            r"^server 'mcp\.test' answered HTTP 429 and asked to wait 20 s \(Retry-After\), beyond the call's "
            r"timeout: slow down$",
        ),
        ({"Retry-After": "soon"}, None, r"^server 'mcp\.test' answered HTTP 429: slow down$"),
    ],
    ids=["no-retry-after", "too-long", "past-the-deadline", "unreadable"],
)
async def test_a_429_that_cannot_be_waited_out_answers_the_call_at_once(
    autojump_clock: MockClock, headers: dict[str, str], timeout: float | None, message: str
) -> None:
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(429, rpc_method="tools/call", headers=headers, content=b"slow down")
            start = trio.current_time()
            with pytest.raises(HTTPStatusError, match=message) as caught:
                await client.call_tool("echo", {"text": "x"}, timeout=timeout)
            assert trio.current_time() - start < 1.0  # no wait at all: the status is the answer
    assert caught.value.status == 429
    assert [r.status for r in fake.sent("tools/call")] == [429]


async def test_waits_are_bounded_in_number(autojump_clock: MockClock) -> None:
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(503, rpc_method="tools/call", headers={"Retry-After": "1"}, times=10)
            with pytest.raises(
                HTTPStatusError,
                match=r"^server 'mcp\.test' answered HTTP 503 and asked to wait 1 s \(Retry-After\), after 3 attempts",
            ):
                await client.call_tool("echo", {"text": "x"})
    assert [r.status for r in fake.sent("tools/call")] == [503, 503, 503]


async def test_a_gateways_retry_after_is_honoured_only_for_idempotent_requests(autojump_clock: MockClock) -> None:
    """A 502 or 504 may come after the request was passed on: a ``tools/call`` is not sent
    again, whatever the ``Retry-After``; a ``tools/list`` is, after it."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(502, rpc_method="tools/call", headers={"Retry-After": "2"})
            with pytest.raises(HTTPStatusError, match="HTTP 502"):
                await client.call_tool("echo", {"text": "x"})
            fake.inject(504, rpc_method="tools/list", headers={"Retry-After": "2"})
            await client.list_tools()
    first, second = fake.sent("tools/list")[-2:]
    assert (first.status, second.status) == (504, 200)
    assert 2.0 <= second.time - first.time < 2.1


async def test_the_http_sse_post_waits_out_a_retry_after(autojump_clock: MockClock) -> None:
    fake = FakeMCPServer(mode="sse")
    with trio.fail_after(BOUND):
        async with connect(fake, HttpServer(url=fake.url, transport="sse")) as client:
            posts = len(fake.sent(http_method="POST"))
            fake.inject(429, http_method="POST", headers={"Retry-After": "3"})
            result = await client.call_tool("echo", {"text": "x"})
    assert result.is_error is False
    first, second = fake.sent(http_method="POST")[posts : posts + 2]
    assert (first.status, second.status) == (429, 202)
    assert 3.0 <= second.time - first.time < 3.1
