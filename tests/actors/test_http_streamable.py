"""Legacy Streamable HTTP (2025-03-26 .. 2025-11-25) against the fake server in ``http_fakes``.

Every test talks to :class:`FakeMCPServer` through an injected ``httpx.MockTransport``, runs on
the autojump clock (backoff and ``retry`` waits cost no wall time, and a hang fails at the
``fail_after`` bound at once), and asserts what went over the wire from the fake's records.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
import trio
from http_fakes import HANG, LEGACY_VERSION, FakeMCPServer, connect, fresh_era_cache  # noqa: F401 (fixture)
from trio.testing import MockClock

from mcpwire.actors.streamable_http import RESUME_ATTEMPTS, StreamableHTTPTransport
from mcpwire.errors import (
    ConnectError,
    ConnectionBroken,
    FrameTooLarge,
    HTTPStatusError,
    InvalidResponse,
    RPCError,
    ServerGone,
    SessionExpired,
)
from mcpwire.protocol import jsonrpc
from mcpwire.protocol.types import TextContent
from mcpwire.protocol.versions import Era
from mcpwire.transports import HttpServer

BOUND = 10.0  # virtual seconds: nothing here should take more than a few


def _echo(text: str) -> list[TextContent]:
    return [TextContent(text=f'echo {{"text": "{text}"}}')]


# -- headers and sessions ---------------------------------------------------------------------------


@pytest.mark.parametrize("answer_as", ["json", "sse"])
async def test_session_headers_on_every_request_after_initialize(autojump_clock: MockClock, answer_as: str) -> None:
    """HT-01, HT-02, HT-03, HT-05, LC-03, HT-L08, HT-L09, AMB-07, LC-46 (step 2): the probe is
    refused, ``initialize`` carries the dual Accept and no version header; every later request
    (the initialized notification, the GET stream, each call) carries ``MCP-Protocol-Version:
    2025-11-25`` and the session id the initialize answer set. JSON and SSE answers both work."""
    fake = FakeMCPServer(answer_as=answer_as)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            assert (client.era, client.protocol_version) == (Era.LEGACY, LEGACY_VERSION)
            tools = await client.list_tools()
            result = await client.call_tool("echo", {"text": "hi"})
    assert [t.name for t in tools] == ["echo"]
    assert result.content == _echo("hi")
    assert fake.trace() == [
        ("POST", "/mcp", "server/discover", 400),
        ("POST", "/mcp", "initialize", 200),
        ("POST", "/mcp", "notifications/initialized", 202),
        ("GET", "/mcp", None, 405),
        ("POST", "/mcp", "tools/list", 200),
        ("POST", "/mcp", "tools/call", 200),
        ("DELETE", "/mcp", None, 200),
    ]
    probe, init, *later = fake.requests
    assert probe.header("mcp-session-id") is None
    assert init.header("accept") == "application/json, text/event-stream"
    assert init.header("content-type") == "application/json"
    assert init.header("mcp-protocol-version") is None
    assert init.header("mcp-session-id") is None
    assert init.params["protocolVersion"] == LEGACY_VERSION
    session = init.response_headers["mcp-session-id"]
    for rec in later:
        assert rec.header("mcp-session-id") == session, rec
    for rec in later[:-1]:  # the DELETE is checked on its own below
        assert rec.header("mcp-protocol-version") == LEGACY_VERSION, rec
    posts = [r for r in later if r.method == "POST"]
    assert all(r.header("accept") == "application/json, text/event-stream" for r in posts)
    assert all(r.header("content-type") == "application/json" for r in posts)
    get = fake.sent(http_method="GET")[0]
    assert get.header("accept") == "text/event-stream"


@pytest.mark.parametrize(("version", "header"), [("2025-06-18", "2025-06-18"), ("2025-03-26", None)])
async def test_version_header_follows_the_negotiated_revision(
    autojump_clock: MockClock, version: str, header: str | None
) -> None:
    """LC-11, LC-13, HT-L08: a server that answers ``initialize`` with an older revision gets
    that revision in ``MCP-Protocol-Version`` (2025-06-18), or no header at all (2025-03-26,
    which predates it)."""
    fake = FakeMCPServer(versions=(version,), get_stream="sse")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            assert client.protocol_version == version
            await client.call_tool("echo", {"text": "x"})
    later = [r for r in fake.requests[2:] if r.method != "DELETE"]
    assert [(r.method, r.rpc_method) for r in later] == [
        ("POST", "notifications/initialized"),
        ("GET", None),
        ("POST", "tools/call"),
    ]
    assert [r.header("mcp-protocol-version") for r in later] == [header] * 3


async def test_sse_answer_content_type_is_compared_case_insensitively(autojump_clock: MockClock) -> None:
    """HT-03, HT-05: ``Text/Event-Stream; charset=UTF-8`` is an SSE answer."""
    fake = FakeMCPServer(answer_as="sse", sse_content_type="Text/Event-Stream; charset=UTF-8")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            result = await client.call_tool("echo", {"text": "x"})
    assert result.content == _echo("x")


async def test_delete_carries_the_protocol_version_header(autojump_clock: MockClock) -> None:
    """HT-L08, HT-L15: the DELETE that ends a 2025-11-25 session is a request after
    initialization, so it carries ``MCP-Protocol-Version``; a server that checks the header
    (it answers 400 without it) then really ends the session."""
    fake = FakeMCPServer(require_version_header=True)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.call_tool("echo", {"text": "x"})
    (delete,) = fake.sent(http_method="DELETE")
    assert delete.header("mcp-protocol-version") == LEGACY_VERSION
    assert delete.status == 200
    assert fake.sessions == {}


async def test_session_id_comes_only_from_the_initialize_answer(autojump_clock: MockClock) -> None:
    """HT-L09, HT-L12: the session id is the one "returned by the server during
    initialization"; an ``Mcp-Session-Id`` on the refused probe is not a session, and
    ``initialize`` goes out without one."""
    fake = FakeMCPServer(session_on_errors=True)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.call_tool("echo", {"text": "x"})
    (init,) = fake.sent("initialize")
    assert init.header("mcp-session-id") is None
    session = init.response_headers["mcp-session-id"]
    assert fake.sent("tools/call")[0].header("mcp-session-id") == session


@pytest.mark.parametrize("status", [202, 200])
async def test_notifications_accept_202_and_tolerate_200_with_a_body(autojump_clock: MockClock, status: int) -> None:
    """HT-04, HT-L21: a POSTed notification is acknowledged with 202; a server that answers 200
    with a JSON body is tolerated (the body is read and ignored, not routed)."""
    fake = FakeMCPServer(notification_status=status)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.notify("notifications/roots/list_changed")
            result = await client.call_tool("echo", {"text": "after"})
            stats = client.statistics()
    assert result.content == _echo("after")
    assert [(r.rpc_method, r.status) for r in fake.sent(http_method="POST") if "id" not in r.body] == [
        ("notifications/initialized", status),
        ("notifications/roots/list_changed", status),
    ]
    assert (stats.protocol_violations, stats.unknown_responses) == (0, 0)


@pytest.mark.parametrize("status", [200, 405])
async def test_delete_on_close(autojump_clock: MockClock, caplog: pytest.LogCaptureFixture, status: int) -> None:
    """HT-L15, LC-53: closing DELETEs the session (with its id); 405 ("the server does not allow
    clients to terminate sessions") is not an error and logs nothing above DEBUG."""
    fake = FakeMCPServer(delete_status=status)
    caplog.set_level(logging.DEBUG, logger="mcpwire")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.call_tool("echo", {"text": "x"})
    (delete,) = fake.sent(http_method="DELETE")
    assert delete.header("mcp-session-id") == fake.sent("initialize")[0].response_headers["mcp-session-id"]
    assert delete.status == status
    assert fake.requests[-1] is delete
    assert [r.getMessage() for r in caplog.records if r.levelno > logging.INFO] == []


async def test_expired_session_is_reinitialised_and_the_call_resent_once(autojump_clock: MockClock) -> None:
    """HT-L12, HT-L13: a 404 on a request carrying a known session id starts a new session with
    a fresh ``initialize`` *without* the session header, then re-sends the call once, on the new
    session; the caller only sees the answer."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.call_tool("echo", {"text": "one"})
            fake.expire_sessions()
            result = await client.call_tool("echo", {"text": "two"})
    assert result.content == _echo("two")
    first, second = fake.sent("initialize")
    old, new = first.response_headers["mcp-session-id"], second.response_headers["mcp-session-id"]
    assert old != new
    assert second.header("mcp-session-id") is None
    assert second.header("mcp-protocol-version") is None
    calls = fake.sent("tools/call")
    assert [(c.params["arguments"]["text"], c.header("mcp-session-id"), c.status) for c in calls] == [
        ("one", old, 200),
        ("two", old, 404),
        ("two", new, 200),
    ]
    assert [r.header("mcp-session-id") for r in fake.sent("notifications/initialized")] == [old, new]
    assert fake.requests[-1].method == "DELETE"
    assert fake.requests[-1].header("mcp-session-id") == new


async def test_session_expiring_again_surfaces_after_one_resend(autojump_clock: MockClock) -> None:
    """HT-L12: the re-send happens once; a server that forgets the new session too makes the
    call fail with :class:`SessionExpired` instead of looping."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(404, rpc_method="tools/call", times=2)
            with pytest.raises(SessionExpired, match=r"^server 'mcp\.test' no longer knows the session \(HTTP 404\)$"):
                await client.call_tool("echo", {"text": "x"})
    assert [r.status for r in fake.sent("tools/call")] == [404, 404]
    assert len(fake.sent("initialize")) == 2


# -- SSE answers: resumption, keep-alives, framing ----------------------------------------------------


async def test_stream_cut_after_priming_event_is_resumed_with_last_event_id(autojump_clock: MockClock) -> None:
    """HT-L16, HT-L17, HT-L18, HT-L19, HT-S02: the POST's SSE answer is a priming event (an id,
    empty data, ``retry: 50``) and then ends. The client waits the 50 ms it was told, GETs the
    endpoint with ``Last-Event-ID`` of that stream, and the answer arriving there is routed to the
    call by its JSON-RPC id."""
    fake = FakeMCPServer(answer_as="sse", drop_after_priming={"tools/call"}, retry_ms=50)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            result = await client.call_tool("echo", {"text": "resumed"})
            stats = client.statistics()
    assert result.content == _echo("resumed")
    assert (stats.pending, stats.late_responses, stats.unknown_responses) == (0, 0, 0)
    post = fake.sent("tools/call")[0]
    cut = next(s for s in fake.streams if s.rpc_method == "tools/call")
    resume = [r for r in fake.sent(http_method="GET") if r.header("last-event-id") is not None]
    assert len(resume) == 1
    (get,) = resume
    assert get.header("last-event-id") == cut.last_id == f"{cut.number}-0"
    assert get.header("accept") == "text/event-stream"
    assert get.header("mcp-session-id") == post.header("mcp-session-id")
    assert get.header("mcp-protocol-version") == LEGACY_VERSION
    assert get.status == 200
    # "The client MUST respect the retry field": 50 ms, not the 1 s default.
    assert 0.05 <= get.time - post.time < 0.5


@pytest.mark.parametrize("how", ["end", "drop"])
async def test_stream_ending_without_event_ids_fails_the_call(autojump_clock: MockClock, how: str) -> None:
    """HT-L19, HT-09: a POST's SSE answer that ends (or breaks) before the response, with no
    event id to resume from, fails that call with :class:`ServerGone`; no GET is attempted."""
    fake = FakeMCPServer(answer_as="sse")
    fake.handlers["tools/call"] = lambda params: HANG
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    with pytest.raises(
                        ServerGone, match=r"^server 'mcp\.test' closed the response stream before answering$"
                    ):
                        await client.call_tool("echo", {"text": "x"})

                nursery.start_soon(call)
                stream = await fake.stream_for("tools/call")
                stream.end() if how == "end" else stream.drop()
            stats = client.statistics()
    assert stats.pending == 0
    assert [r for r in fake.requests if r.method == "GET" and r.header("last-event-id")] == []


async def test_refused_resumption_fails_the_call_after_one_get(autojump_clock: MockClock) -> None:
    """HT-L16: when the server answers the resuming GET with 404 (it kept no events), the call
    fails with :class:`ServerGone` at once; the GET is not retried."""
    fake = FakeMCPServer(answer_as="sse", drop_after_priming={"tools/call"}, retry_ms=10)
    fake.inject(404, http_method="GET", times=5)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(
                ServerGone,
                match=r"^server 'mcp\.test' closed the response stream before answering, and refused to resume it "
                r"\(GET with Last-Event-ID answered HTTP 404\)$",
            ):
                await client.call_tool("echo", {"text": "x"})
    resumes = [r for r in fake.requests if r.header("last-event-id") is not None]
    assert [(r.method, r.status) for r in resumes] == [("GET", 404)]


async def test_refused_resumption_says_what_happened(autojump_clock: MockClock) -> None:
    """HT-L16, STYLE ("A message says what was expected, what happened"): the error names the
    status that refused the resumption instead of claiming five failed attempts."""
    fake = FakeMCPServer(answer_as="sse", drop_after_priming={"tools/call"}, retry_ms=10)
    fake.inject(404, http_method="GET", times=5)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(ServerGone) as info:
                await client.call_tool("echo", {"text": "x"})
    assert "404" in str(info.value)
    assert "5 attempts" not in str(info.value)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
async def test_keepalive_comments_and_multiline_data(autojump_clock: MockClock, newline: str) -> None:
    """HT-M14, HT-S01, HT-S02, HT-L03: SSE answers with keep-alive comments before and inside
    events, JSON spread over several ``data:`` lines, any line ending, and bytes arriving seven
    at a time (so lines and CRLFs split across chunks) decode to the same messages; a progress
    notification before the answer reaches the caller's callback."""
    fake = FakeMCPServer(answer_as="sse", keepalive=True, multiline=True, newline=newline, chunk_size=7, priming=True)
    seen: list[tuple[float, float | None, str | None]] = []
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            tools = await client.list_tools()
            result = await client.call_tool(
                "echo", {"text": "Grüße, 世界"}, on_progress=lambda p: seen.append((p.progress, p.total, p.message))
            )
            stats = client.statistics()
    assert [t.name for t in tools] == ["echo"]
    assert result.content == [TextContent(text='echo {"text": "Grüße, 世界"}')]
    assert seen == [(1.0, 2.0, "half way")]
    assert (stats.protocol_violations, stats.non_protocol_lines) == (0, 0)


# -- transient failures ------------------------------------------------------------------------------


async def test_503_once_is_retried(autojump_clock: MockClock) -> None:
    """HT-09 (transient statuses): a 503 is retried after a backoff with the identical message,
    and the caller sees only the answer."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(503, rpc_method="tools/call", content=b"busy")
            result = await client.call_tool("echo", {"text": "again"})
    assert result.content == _echo("again")
    first, second = fake.sent("tools/call")
    assert (first.status, second.status) == (503, 200)
    assert first.raw == second.raw
    assert second.time > first.time


async def test_503_every_time_gives_up_after_three_attempts(autojump_clock: MockClock) -> None:
    """HT-09: retries are bounded; the last status becomes an :class:`HTTPStatusError` naming
    the server and carrying the body's beginning."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(503, rpc_method="tools/call", content=b"busy", times=5)
            with pytest.raises(HTTPStatusError, match=r"^server 'mcp\.test' answered HTTP 503: busy$") as info:
                await client.call_tool("echo", {"text": "x"})
    assert info.value.status == 503
    assert [r.status for r in fake.sent("tools/call")] == [503, 503, 503]


# -- the optional GET stream ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 405])
async def test_get_stream_refused_is_not_an_error(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    """HT-L05: the client may open a GET stream; a server that has none answers 405 (or 404) and
    that is not an error: no retry, no warning, calls work."""
    fake = FakeMCPServer(get_stream=status)
    caplog.set_level(logging.DEBUG, logger="mcpwire")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            result = await client.call_tool("echo", {"text": "x"})
    assert result.content == _echo("x")
    (get,) = fake.sent(http_method="GET")
    assert get.status == status
    assert get.header("accept") == "text/event-stream"
    assert get.header("mcp-protocol-version") == LEGACY_VERSION
    assert get.header("mcp-session-id") == fake.sent("initialize")[0].response_headers["mcp-session-id"]
    assert [r.getMessage() for r in caplog.records if r.levelno > logging.INFO] == []


async def test_get_stream_carries_server_notifications_and_requests(autojump_clock: MockClock) -> None:
    """HT-L05, HT-L06, HT-L01, UT-P01: messages the server starts arrive on the GET stream: a
    notification reaches ``notifications()``, a ``ping`` is answered with a POSTed response
    (202) carrying the session and version headers."""
    fake = FakeMCPServer(get_stream="sse")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            stream = await fake.stream_for(None, kind="get")
            stream.message({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            stream.message({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            async for note in client.notifications():
                assert (note.method, note.params) == ("notifications/tools/list_changed", {})
                break
            answer = await fake.wait_for_request(lambda r: r.rpc_id == "srv-1")
    assert [r for r in fake.requests if r.rpc_id == "srv-1"] == [answer]
    assert answer.body == {"jsonrpc": "2.0", "id": "srv-1", "result": {}}
    assert answer.status == 202
    assert answer.header("mcp-protocol-version") == LEGACY_VERSION
    assert answer.header("mcp-session-id") == fake.sent("initialize")[0].response_headers["mcp-session-id"]
    assert stream.closed_early  # the client closed its GET stream when it closed


async def test_get_stream_content_type_is_compared_case_insensitively(autojump_clock: MockClock) -> None:
    """HT-05, HT-L05 (RFC 9110: media type names are case-insensitive): a GET stream answered
    ``Text/Event-Stream; charset=UTF-8`` is read, once."""
    fake = FakeMCPServer(get_stream="sse", sse_content_type="Text/Event-Stream; charset=UTF-8")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            stream = await fake.stream_for(None, kind="get")
            stream.message({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            async for note in client.notifications():
                assert note.method == "notifications/tools/list_changed"
                break
    assert len(fake.sent(http_method="GET")) == 1


async def test_server_that_requires_the_version_header(autojump_clock: MockClock) -> None:
    """HT-L08, LC-13: a 2025-11-25 server that answers 400 to any request after initialization
    without the right ``MCP-Protocol-Version`` accepts every POST and the GET of the client."""
    fake = FakeMCPServer(require_version_header=True, get_stream="sse")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.list_tools()
            await client.call_tool("echo", {"text": "x"})
            await client.ping()
    assert [(r.method, r.rpc_method, r.status) for r in fake.requests if r.method != "DELETE"] == [
        ("POST", "server/discover", 400),
        ("POST", "initialize", 200),
        ("POST", "notifications/initialized", 202),
        ("GET", None, 200),
        ("POST", "tools/list", 200),
        ("POST", "tools/call", 200),
        ("POST", "ping", 200),
    ]


async def test_cancelled_call_sends_notifications_cancelled(autojump_clock: MockClock) -> None:
    """HT-L04, UT-C02: in the legacy era, closing the stream is not cancelling; a cancelled call
    POSTs ``notifications/cancelled`` with its id, with the session and version headers."""
    fake = FakeMCPServer(answer_as="sse")
    fake.handlers["tools/call"] = lambda params: HANG
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with trio.CancelScope() as outer:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client.call_tool, "echo", {"text": "slow"})
                    stream = await fake.stream_for("tools/call")
                    outer.cancel()
            await stream.wait_closed()
            stats = client.statistics()
    (call,) = fake.sent("tools/call")
    (cancel,) = fake.sent("notifications/cancelled")
    assert cancel.params == {"requestId": call.rpc_id, "reason": "cancelled by the client"}
    assert cancel.header("mcp-session-id") == call.header("mcp-session-id")
    assert cancel.header("mcp-protocol-version") == LEGACY_VERSION
    assert stats.pending == 0


# -- bounded memory -----------------------------------------------------------------------------------


@pytest.mark.parametrize("answer_as", ["json", "sse"])
async def test_oversized_answer_fails_the_call(autojump_clock: MockClock, answer_as: str) -> None:
    """HT-S03: an answer (JSON body or SSE event) larger than ``max_message_bytes`` fails that
    call with :class:`FrameTooLarge` saying how to raise the limit; it does not hang, and the
    connection stays usable."""
    fake = FakeMCPServer(answer_as=answer_as)
    fake.handlers["tools/call"] = lambda params: {"content": [{"type": "text", "text": "x" * 10_000}]}
    with trio.fail_after(BOUND):
        async with connect(fake, max_message_bytes=4096) as client:
            with pytest.raises(
                FrameTooLarge,
                match=r"^message of at least \d+ bytes exceeds the limit of 4096 bytes; "
                r"raise max_message_bytes if the server legitimately sends larger messages$",
            ) as info:
                await client.call_tool("echo", {"text": "big"})
            tools = await client.list_tools()
    assert info.value.size > 4096
    assert [t.name for t in tools] == ["echo"]


# -- batches (2025-03-26) ---------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "violations"), [("2025-03-26", 0), ("2025-11-25", 1)])
async def test_a_batch_answer_is_received(autojump_clock: MockClock, version: str, violations: int) -> None:
    """JR-21, HT-L02: a 2025-03-26 server may answer a POST with a JSON array batching a
    notification and the response; both are delivered. From 2025-06-18 on a batch is a
    violation (JR-22), counted, and its messages are still not lost."""
    fake = FakeMCPServer(versions=(version,))
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            assert client.protocol_version == version
            call_id = client.statistics().requests_sent + 1  # ids are allocated in order
            fake.inject(
                200,
                rpc_method="tools/call",
                json=[
                    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "b"}},
                    {"jsonrpc": "2.0", "id": call_id, "result": {"content": [{"type": "text", "text": "batched"}]}},
                ],
            )
            result = await client.call_tool("echo", {"text": "x"})
            async for note in client.notifications():
                assert (note.method, note.params) == ("notifications/message", {"level": "info", "data": "b"})
                break
            stats = client.statistics()
    assert result.text() == "batched"
    assert stats.protocol_violations == violations


# -- session expiry with several requests in flight ------------------------------------------------


async def test_every_call_in_flight_on_an_expired_session_is_resent_after_one_initialize(
    autojump_clock: MockClock,
) -> None:
    """HT-L12: three calls are sent on a session the server has just forgotten, so all three get
    404. Each is a request "containing an MCP-Session-Id" that got 404: each is re-sent once, on
    the one new session (a single ``initialize``), and every caller sees its answer; none gets the
    server's ``-32001`` body as an error."""
    fake = FakeMCPServer()
    results: dict[str, list[TextContent]] = {}
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.call_tool("echo", {"text": "before"})
            fake.expire_sessions()
            async with trio.open_nursery() as nursery:
                for text in ("a", "b", "c"):

                    async def call(text: str = text) -> None:
                        results[text] = (await client.call_tool("echo", {"text": text})).content  # type: ignore[assignment]

                    nursery.start_soon(call)
    assert results == {text: _echo(text) for text in "abc"}
    first, second = fake.sent("initialize")
    old, new = first.response_headers["mcp-session-id"], second.response_headers["mcp-session-id"]
    assert second.header("mcp-session-id") is None
    calls = [(c.params["arguments"]["text"], c.header("mcp-session-id"), c.status) for c in fake.sent("tools/call")]
    assert calls[0] == ("before", old, 200)
    assert sorted(calls[1:]) == sorted([(t, old, 404) for t in "abc"] + [(t, new, 200) for t in "abc"])
    assert fake.requests[-1].method == "DELETE"
    assert fake.requests[-1].header("mcp-session-id") == new


class _Sink:
    """What a transport reports, for tests that drive one without a client."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self.failed: dict[Any, BaseException] = {}
        self.changed = trio.Event()

    def classify(self, data: bytes) -> Any:
        return jsonrpc.classify(data)

    def message_received(self, message: Any) -> None:
        self.received.append(message)
        self.changed.set()

    def connection_lost(self, exc: BaseException) -> None:  # pragma: no cover - not expected here
        raise AssertionError(f"connection lost: {exc!r}")

    def request_failed(self, request_id: Any, exc: BaseException) -> None:
        self.failed[request_id] = exc
        self.changed.set()

    def session_lost(self, exc: BaseException) -> None:  # pragma: no cover - HTTP+SSE only
        raise AssertionError(f"session lost: {exc!r}")

    async def wait_for(self, request_id: Any) -> Any:
        while True:
            for message in self.received:
                if getattr(message, "id", None) == request_id:
                    return message
            if request_id in self.failed:
                return self.failed[request_id]
            self.changed = trio.Event()
            await self.changed.wait()


def _request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


async def test_request_made_while_the_session_is_gone_is_not_sent_without_one(autojump_clock: MockClock) -> None:
    """HT-L12, HT-L14: after the 404 that ended the session and before a new ``initialize``, a
    request has no session id to carry; sent without one, a server that requires sessions would
    answer 400. It fails at once with :class:`SessionExpired` (which the client answers by
    re-sending it on the new session) and nothing goes on the wire; ``initialize`` itself does."""
    fake = FakeMCPServer()
    sink = _Sink()
    call = {"name": "echo", "arguments": {"text": "x"}}
    with trio.fail_after(BOUND):
        async with (
            httpx.AsyncClient(transport=httpx.MockTransport(fake.handle)) as http,
            trio.open_nursery() as nursery,
        ):
            transport = StreamableHTTPTransport(HttpServer(url=fake.url), sink, http_client=http)
            await nursery.start(transport.run)
            init = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            await transport.send(_request(1, "initialize", init), request_id=1, opens_session=True)
            assert isinstance(await sink.wait_for(1), jsonrpc.Response)
            fake.expire_sessions()
            await transport.send(_request(2, "tools/call", call), request_id=2)
            assert isinstance(await sink.wait_for(2), SessionExpired)
            await transport.send(_request(3, "tools/call", call), request_id=3)
            assert isinstance(await sink.wait_for(3), SessionExpired)
            assert transport.session_id is None
            await transport.send(_request(4, "initialize", init), request_id=4, opens_session=True)
            assert isinstance(await sink.wait_for(4), jsonrpc.Response)
            await transport.send(_request(5, "tools/call", call), request_id=5)
            assert isinstance(await sink.wait_for(5), jsonrpc.Response)
            await transport.aclose()
    assert [(r.rpc_id, r.status) for r in fake.sent(http_method="POST")] == [(1, 200), (2, 404), (4, 200), (5, 200)]
    assert str(sink.failed[3]) == "server 'mcp.test' no longer knows the session (HTTP 404 to an earlier request)"


async def test_get_stream_is_reopened_on_the_new_session(autojump_clock: MockClock) -> None:
    """HT-L12, HT-L13, HT-L05: the GET stream belongs to its session; after an expiry the client
    closes the old one and opens one on the new session, where server messages arrive again."""
    fake = FakeMCPServer(get_stream="sse")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            first = await fake.stream_for(None, kind="get")
            fake.expire_sessions()
            await client.call_tool("echo", {"text": "x"})
            second = await fake.stream_for(None, kind="get", index=1)
            second.message({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            async for note in client.notifications():
                assert note.method == "notifications/tools/list_changed"
                break
            await first.wait_closed()
    old, new = (r.response_headers["mcp-session-id"] for r in fake.sent("initialize"))
    gets = fake.sent(http_method="GET")
    assert [(g.header("mcp-session-id"), g.header("last-event-id"), g.status) for g in gets] == [
        (old, None, 200),
        (new, None, 200),
    ]
    assert first.closed_early


async def test_log_level_and_subscriptions_are_restored_on_the_new_session(autojump_clock: MockClock) -> None:
    """HT-L13: "after re-initialization, everything session-scoped is lost: re-issue
    logging/setLevel, resources/subscribe, re-open GET stream". The client sends the level it
    set and the subscriptions of the open ``subscribe`` block again on the new session, and an
    update the server sends there reaches the subscription."""
    fake = FakeMCPServer(get_stream="sse", capabilities={"tools": {}, "resources": {"subscribe": True}, "logging": {}})
    for method in ("resources/subscribe", "resources/unsubscribe", "logging/setLevel"):
        fake.handlers[method] = lambda params: {}
    uri = "file:///readme.txt"
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.set_logging_level("debug")
            async with client.subscribe([uri]) as sub:
                fake.expire_sessions()
                await client.call_tool("echo", {"text": "x"})
                new = fake.sent("initialize")[1].response_headers["mcp-session-id"]
                await fake.wait_for_request(
                    lambda r: r.rpc_method == "resources/subscribe" and r.header("mcp-session-id") == new
                )
                stream = await fake.stream_for(None, kind="get", index=1)
                stream.message({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
                async for note in sub:
                    assert (note.method, note.params) == ("notifications/resources/updated", {"uri": uri})
                    break
    old = fake.sent("initialize")[0].response_headers["mcp-session-id"]
    scoped = [
        (r.rpc_method, r.params, "new" if r.header("mcp-session-id") == new else "old", r.status)
        for r in fake.requests
        if r.rpc_method in ("logging/setLevel", "resources/subscribe", "resources/unsubscribe")
    ]
    assert scoped == [
        ("logging/setLevel", {"level": "debug"}, "old", 200),
        ("resources/subscribe", {"uri": uri}, "old", 200),
        ("logging/setLevel", {"level": "debug"}, "new", 200),
        ("resources/subscribe", {"uri": uri}, "new", 200),
        ("resources/unsubscribe", {"uri": uri}, "new", 200),
    ]
    assert old != new


# -- what is sent again, and what is not ----------------------------------------------------------


def _broken(kind: type[httpx.TransportError], message: str) -> Any:
    return lambda request: kind(message, request=request)


@pytest.mark.parametrize(
    "error",
    [
        _broken(httpx.ReadError, "connection reset by peer"),
        _broken(httpx.RemoteProtocolError, "Server disconnected without sending a response."),
        _broken(httpx.WriteError, "broken pipe"),
        _broken(httpx.ReadTimeout, "timed out"),
    ],
    ids=["read-error", "disconnected", "write-error", "read-timeout"],
)
async def test_tool_call_is_not_sent_again_when_the_server_may_have_received_it(
    autojump_clock: MockClock, error: Any
) -> None:
    """A connection that breaks after the request went out (a read error, a server closing a
    kept-alive connection, a timeout waiting for the answer) may have delivered it: a
    ``tools/call`` is not idempotent, so it is not sent again (RFC 9112 9.3.1: only idempotent
    requests are retried automatically); the call fails with :class:`ConnectionBroken` saying why."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject_error(error, rpc_method="tools/call")
            with pytest.raises(
                ConnectionBroken,
                match=r"^the connection to server 'mcp\.test' at http://mcp\.test/mcp broke before it answered "
                r"request id \d+ \(.+\); it was not sent again, since the server may already have acted on it$",
            ):
                await client.call_tool("echo", {"text": "once"})
            again = await client.call_tool("echo", {"text": "next"})
    assert again.content == _echo("next")
    assert [c.params["arguments"]["text"] for c in fake.sent("tools/call")] == ["once", "next"]


@pytest.mark.parametrize(
    "error",
    [
        _broken(httpx.ConnectError, "connection refused"),
        _broken(httpx.ConnectTimeout, "timed out"),
        _broken(httpx.PoolTimeout, "no connection free"),
    ],
    ids=["connect-error", "connect-timeout", "pool-timeout"],
)
async def test_request_that_never_left_is_sent_again(autojump_clock: MockClock, error: Any) -> None:
    """When no connection carried the request (refused, timed out connecting, none free in the
    pool) the server never saw it: even a ``tools/call`` is sent again, identical, after a
    backoff."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject_error(error, rpc_method="tools/call")
            result = await client.call_tool("echo", {"text": "x"})
    assert result.content == _echo("x")
    first, second = fake.sent("tools/call")
    assert (first.status, second.status) == (None, 200)
    assert first.raw == second.raw
    assert second.time > first.time


async def test_never_reached_three_times_gives_up(autojump_clock: MockClock) -> None:
    """Sending again is bounded: three attempts, then :class:`ConnectError` naming the server."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject_error(_broken(httpx.ConnectError, "connection refused"), rpc_method="tools/call", times=5)
            with pytest.raises(
                ConnectError, match=r"^cannot reach server 'mcp\.test' at http://mcp\.test/mcp: connection refused$"
            ):
                await client.call_tool("echo", {"text": "x"})
    assert len(fake.sent("tools/call")) == 3


@pytest.mark.parametrize("method", ["tools/list", "resources/read"])
async def test_idempotent_request_is_sent_again_after_a_broken_connection(
    autojump_clock: MockClock, method: str
) -> None:
    """A read or a list may run twice without harm: after a connection broke with the request
    possibly delivered, it is sent again and the caller sees the answer."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject_error(_broken(httpx.RemoteProtocolError, "Server disconnected"), rpc_method=method)
            if method == "tools/list":
                assert [t.name for t in await client.list_tools()] == ["echo"]
            else:
                assert (await client.read_resource("file:///readme.txt")).contents[0].uri == "file:///readme.txt"
    assert [r.status for r in fake.sent(method)] == [None, 200]


async def test_gateway_errors_are_retried_only_for_idempotent_requests(autojump_clock: MockClock) -> None:
    """HT-09: a 502 or 504 comes from a gateway that may have passed the request on: a
    ``tools/call`` fails with the status, a ``tools/list`` is sent again."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(504, rpc_method="tools/call", content=b"upstream timed out")
            with pytest.raises(HTTPStatusError, match=r"^server 'mcp\.test' answered HTTP 504: upstream timed out$"):
                await client.call_tool("echo", {"text": "x"})
            fake.inject(502, rpc_method="tools/list")
            assert [t.name for t in await client.list_tools()] == ["echo"]
    assert [r.status for r in fake.sent("tools/call")] == [504]
    assert [r.status for r in fake.sent("tools/list")] == [502, 200]


# -- resumption gives up ----------------------------------------------------------------------------


async def test_resumption_gives_up_after_five_attempts_with_backoff(autojump_clock: MockClock) -> None:
    """HT-L16, HT-L18, HT-L19 ("Cap reconnect attempts"): when every resuming GET fails (503),
    the client tries ``RESUME_ATTEMPTS`` (5) times, each with the stream's ``Last-Event-ID``,
    waiting the ``retry`` delay first and then a growing backoff, and then fails the call with
    :class:`ServerGone`. Times are the autojump clock's."""
    fake = FakeMCPServer(answer_as="sse", drop_after_priming={"tools/call"}, retry_ms=10)
    with trio.fail_after(60):
        async with connect(fake) as client:
            fake.inject(503, http_method="GET", times=10)
            with pytest.raises(
                ServerGone,
                match=r"^server 'mcp\.test': the response stream could not be resumed after 5 attempts$",
            ):
                await client.call_tool("echo", {"text": "x"})
    assert RESUME_ATTEMPTS == 5
    (post,) = fake.sent("tools/call")
    cut = next(s for s in fake.streams if s.rpc_method == "tools/call")
    resumes = [r for r in fake.requests if r.header("last-event-id") is not None]
    assert [(r.method, r.header("last-event-id"), r.status) for r in resumes] == [("GET", cut.last_id, 503)] * 5
    gaps = [b.time - a.time for a, b in zip([post, *resumes], resumes, strict=False)]
    assert gaps[0] >= 0.01  # the retry field first
    for attempt, gap in enumerate(gaps[1:], start=1):
        # backoff: 0.25 s * 2**attempt, jittered down to half of it, capped at 5 s
        assert 0.125 * 2**attempt <= gap <= min(5.0, 0.25 * 2**attempt) + 0.01, (attempt, gaps)


# -- large events -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "modern", "sse"])
async def test_a_3_mib_event_is_received_with_default_limits(autojump_clock: MockClock, mode: str) -> None:
    """HT-S03 and the issue's "do not copy the official SDK's 1 MiB event cap": a 3 MiB
    ``message`` event - on a Streamable HTTP SSE answer of either era, or on the 2024-11-05
    stream - arriving in 64 KiB pieces is received whole with the default limits."""
    big = "x" * (3 * 1024 * 1024)
    fake = FakeMCPServer(mode=mode, answer_as="sse", chunk_size=64 * 1024)
    fake.handlers["tools/call"] = lambda params: {"content": [{"type": "text", "text": big}]}
    spec = HttpServer(url=fake.url, transport="sse") if mode == "sse" else None
    with trio.fail_after(BOUND):
        async with connect(fake, spec) as client:
            result = await client.call_tool("echo", {"text": "big"})
    assert result.text() == big


# -- an error status whose body names another id --------------------------------------------------

SDK1_REFUSAL = {
    "jsonrpc": "2.0",
    "id": "server-error",
    "error": {"code": -32600, "message": "Bad Request: Missing session ID"},
}


@pytest.mark.parametrize("body", [SDK1_REFUSAL, None], ids=["foreign-id", "no-body"])
async def test_probe_refused_with_an_error_status_falls_back_at_once(autojump_clock: MockClock, body: Any) -> None:
    """LC-41, LC-46: Python SDK 1.x streamable HTTP servers (mcp-proxy among them) answer the
    session-less ``server/discover`` with HTTP 400 and a JSON-RPC error whose id is their own
    (``"server-error"``), plus a session id they forget at once. That status answers the probe:
    the client goes to ``initialize`` at once instead of waiting for an answer that never
    comes, and takes no session from the refusal (HT-L09)."""
    fake = FakeMCPServer()
    if body is None:
        fake.inject(400, rpc_method="server/discover", headers={"Mcp-Session-Id": "refused"})
    else:
        fake.inject(400, rpc_method="server/discover", json=body, headers={"Mcp-Session-Id": "refused"})
    start = trio.current_time()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            connected = trio.current_time() - start
            assert (client.era, client.protocol_version) == (Era.LEGACY, LEGACY_VERSION)
            assert [t.name for t in await client.list_tools()] == ["echo"]
    assert connected < 0.5
    assert [r.rpc_method for r in fake.sent(http_method="POST")][:2] == ["server/discover", "initialize"]
    assert fake.sent("initialize")[0].header("mcp-session-id") is None
    assert fake.sent("tools/list")[0].header("mcp-session-id") != "refused"


async def test_error_status_naming_another_id_fails_the_call_at_once(autojump_clock: MockClock) -> None:
    """An HTTP error status with a JSON-RPC error for an id that is not the request's is that
    request's answer (the POST carried only it): the call fails with that error at once, not
    after its timeout."""
    fake = FakeMCPServer()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            fake.inject(400, rpc_method="tools/call", json=SDK1_REFUSAL)
            start = trio.current_time()
            with pytest.raises(
                RPCError,
                match=r"^error -32600 from server 'mcp\.test' to 'tools/call' \(id 3\): "
                r"Bad Request: Missing session ID$",
            ):
                await client.call_tool("echo", {"text": "x"}, timeout=20)
            assert trio.current_time() - start < 0.5
            assert client.statistics().unknown_responses == 0


@pytest.mark.parametrize("answer_as", ["json", "sse"])
async def test_a_too_deep_answer_fails_the_call_at_once(autojump_clock: MockClock, answer_as: str) -> None:
    """An answer nested 200,000 levels deep cannot be decoded; as a JSON body or as an SSE event
    it still names its request, which fails at once with an error naming server, method and id."""
    deep = "[" * 200_000 + "]" * 200_000

    def rewrite(rec: Any, response: httpx.Response) -> httpx.Response:
        if rec.rpc_method != "tools/call":
            return response
        body = f'{{"jsonrpc":"2.0","id":{rec.rpc_id},"result":{{"content":{deep}}}}}'
        if answer_as == "json":
            return httpx.Response(200, headers={"Content-Type": "application/json"}, content=body.encode())
        return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=f"data: {body}\n\n".encode())

    fake = FakeMCPServer(rewrite=rewrite)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            start = trio.current_time()
            with pytest.raises(
                InvalidResponse,
                match=r"^server 'mcp\.test' answered 'tools/call' \(id 3\) with a message that cannot be read: "
                r"nested too deeply$",
            ):
                await client.call_tool("echo", {"text": "x"}, timeout=30)
            assert trio.current_time() - start < 1
