"""The HTTP+SSE transport of 2024-11-05 and the detection ladder that reaches it (LC-46), against
the fake server of ``http_fakes`` in ``sse`` mode.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any, Literal

import httpx
import pytest
import trio
import trio.testing
from http_fakes import (  # noqa: F401 (fresh_era_cache is an autouse fixture)
    CHALLENGE,
    HANG,
    SSE_VERSION,
    FakeMCPServer,
    Recorded,
    connect,
    fresh_era_cache,
)
from trio.testing import MockClock

from mcpwire.client import DEFAULT_ERA_CACHE, ClientStatistics
from mcpwire.errors import AuthError, ConnectError, FrameTooLarge, HTTPStatusError, MCPWireError, ServerGone
from mcpwire.protocol.types import TextContent
from mcpwire.protocol.versions import Era
from mcpwire.transports import HttpServer

BOUND = 10.0


def _sse_spec(fake: FakeMCPServer, **fields: Any) -> HttpServer:
    return HttpServer(url=fake.url, transport="sse", **fields)


def _hang_after_first_initialize(fake: FakeMCPServer) -> None:
    """The first ``initialize`` is answered; later ones (a new session) are left unanswered."""
    calls: list[dict[str, Any]] = []

    def initialize(params: dict[str, Any]) -> Any:
        calls.append(params)
        return fake.builtin("initialize", params) if len(calls) == 1 else HANG

    fake.handlers["initialize"] = initialize


def _second(method: str, fake: FakeMCPServer) -> Any:
    return lambda rec: rec.rpc_method == method and len(fake.sent(method)) >= 2


async def _new_session_ready(fake: FakeMCPServer) -> Recorded:
    """Waits until the client has initialised a second session and gone idle."""
    rec = await fake.wait_for_request(_second("notifications/initialized", fake))
    await trio.testing.wait_all_tasks_blocked()
    return rec


# -- the detection ladder -----------------------------------------------------------------------------


async def test_detection_ladder_reaches_http_sse(autojump_clock: MockClock) -> None:
    """LC-46, LC-43, LC-47, HS-06, HS-01, HS-03, HS-07: ``server/discover`` answers 400 with an
    empty body (not a modern error: fall back), ``initialize`` answers 404 (not Streamable HTTP),
    so the client GETs the same URL, waits for the ``endpoint`` event, POSTs every message there
    (202) and reads the answers from the GET stream. 2024-11-05 has no session or version
    headers."""
    fake = FakeMCPServer(mode="sse")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            assert (client.era, client.protocol_version) == (Era.LEGACY, SSE_VERSION)
            tools = await client.list_tools()
            result = await client.call_tool("echo", {"text": "over sse"})
    assert [t.name for t in tools] == ["echo"]
    assert result.content == [TextContent(text='echo {"text": "over sse"}')]
    assert fake.trace() == [
        ("POST", "/mcp", "server/discover", 400),
        ("POST", "/mcp", "initialize", 404),
        ("GET", "/mcp", None, 200),
        ("POST", "/messages", "initialize", 202),
        ("POST", "/messages", "notifications/initialized", 202),
        ("POST", "/messages", "tools/list", 202),
        ("POST", "/messages", "tools/call", 202),
    ]
    probe, init, get, *posts = fake.requests
    assert probe.raw and init.raw and probe.status == 400
    assert get.header("accept") == "text/event-stream"
    session = posts[0].url.params["session_id"]
    (stream,) = fake.streams
    for rec in posts:
        assert rec.url.params["session_id"] == session
        assert rec.header("content-type") == "application/json"
        assert rec.header("mcp-protocol-version") is None
        assert rec.header("mcp-session-id") is None
    assert stream.closed_early  # closing the client closed the GET stream (HS-04)


async def test_ladder_verdict_is_cached_per_url(autojump_clock: MockClock) -> None:
    """LC-44: the era and the HTTP transport found for a URL are remembered for the life of the
    process; the next connection goes straight to the SSE GET."""
    fake = FakeMCPServer(mode="sse")
    with trio.fail_after(BOUND):
        async with connect(fake):
            pass
        first = len(fake.requests)
        async with connect(fake) as client:
            await client.call_tool("echo", {"text": "again"})
    assert [(r.method, r.rpc_method) for r in fake.requests[first:]] == [
        ("GET", None),
        ("POST", "initialize"),
        ("POST", "notifications/initialized"),
        ("POST", "tools/call"),
    ]


@pytest.mark.parametrize("step", ["discover", "initialize", "sse-get"])
async def test_401_during_detection_is_an_auth_error_not_a_fallback(autojump_clock: MockClock, step: str) -> None:
    """LC-46: "A 401 at any step is an auth challenge, not an era signal": wherever it comes in
    the ladder, connecting stops with :class:`AuthError` carrying the challenge, and no later
    step is tried."""
    fake = FakeMCPServer(mode="sse")
    challenge = {"WWW-Authenticate": CHALLENGE}
    expected: list[tuple[str, str | None, int]]
    if step == "discover":
        fake.inject(401, rpc_method="server/discover", headers=challenge)
        expected = [("POST", "server/discover", 401)]
    elif step == "initialize":
        fake.inject(401, rpc_method="initialize", headers=challenge)
        expected = [("POST", "server/discover", 400), ("POST", "initialize", 401)]
    else:
        fake.inject(401, http_method="GET", headers=challenge)
        expected = [("POST", "server/discover", 400), ("POST", "initialize", 404), ("GET", None, 401)]
    with (
        trio.fail_after(BOUND),
        pytest.raises(
            AuthError,
            match=r"^server 'mcp\.test' answered HTTP 401 \(no credentials are configured\); challenge: Bearer "
            r'resource_metadata="http://mcp\.test/\.well-known/oauth-protected-resource/mcp"; '
            r"authorize with 'mcpwire login http://mcp\.test/mcp', or pass a token \(",
        ) as info,
    ):
        async with connect(fake):
            pass
    assert (info.value.status, info.value.challenge, info.value.server) == (401, CHALLENGE, "mcp.test")
    assert [(r.method, r.rpc_method, r.status) for r in fake.requests] == expected


# -- the endpoint event ---------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["sse", "auto"])
@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        (
            "http://evil.example/messages?session_id={session}",
            r"^the SSE server announced a POST endpoint on another origin \(http://evil\.example, not "
            r"http://mcp\.test\); refusing it, since it would send your messages elsewhere$",
        ),
        (
            "https://mcp.test/messages?session_id={session}",
            r"^the SSE server announced a POST endpoint on another origin \(https://mcp\.test, not "
            r"http://mcp\.test\); refusing it, since it would send your messages elsewhere$",
        ),
        (
            "http://mcp.test:8080/messages?session_id={session}",
            r"^the SSE server announced a POST endpoint on another origin \(http://mcp\.test:8080, not "
            r"http://mcp\.test\); refusing it, since it would send your messages elsewhere$",
        ),
        (
            "http://user:pw@mcp.test/messages?session_id={session}",
            r"^the SSE server announced a POST endpoint with userinfo or a fragment; refusing it$",
        ),
    ],
    ids=["other-host", "other-scheme", "other-port", "userinfo"],
)
async def test_endpoint_on_another_origin_is_refused(
    autojump_clock: MockClock, transport: Literal["sse", "auto"], endpoint: str, message: str
) -> None:
    """HS-02, AMB-06, SEC-08: an ``endpoint`` event naming another origin (or carrying userinfo) fails
    the connection with :class:`ConnectError` and nothing - in particular no credential - is
    POSTed anywhere."""
    fake = FakeMCPServer(mode="sse", endpoint=endpoint)
    spec = HttpServer(url=fake.url, transport=transport, bearer_token="tok")
    with trio.fail_after(BOUND), pytest.raises(ConnectError, match=message):
        async with connect(fake, spec):
            pass
    assert [r.path for r in fake.requests if r.method == "POST" and r.path != "/mcp"] == []
    assert fake.requests[-1].method == "GET"


@pytest.mark.parametrize(
    ("url", "endpoint", "path"),
    [
        ("http://mcp.test/mcp/sse", "messages?session_id={session}", "/mcp/messages"),
        ("http://mcp.test/mcp/sse", "/messages/?session_id={session}", "/messages/"),
        ("http://mcp.test/sse", "http://mcp.test/rpc?session_id={session}", "/rpc"),
        ("http://mcp.test/sse", " /padded?session_id={session} ", "/padded"),
    ],
    ids=["relative", "absolute-path", "absolute-url", "surrounding-space"],
)
async def test_endpoint_is_resolved_against_the_sse_url(
    autojump_clock: MockClock, url: str, endpoint: str, path: str
) -> None:
    """HS-02, HS-01: a relative ``endpoint`` is resolved against the SSE URL (as a browser
    resolves a link), and every message goes to the result, query included."""
    fake = FakeMCPServer(mode="sse", url=url, endpoint=endpoint)
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake)) as client:
            await client.call_tool("echo", {"text": "x"})
    posts = fake.sent(http_method="POST")
    assert [r.rpc_method for r in posts] == ["initialize", "notifications/initialized", "tools/call"]
    assert {r.path for r in posts} == {path}
    assert {r.url.params["session_id"] for r in posts} == {"sse-1"}
    assert all(r.status == 202 for r in posts)


async def test_messages_before_the_endpoint_event_are_ignored(autojump_clock: MockClock) -> None:
    """HS-03: nothing precedes the ``endpoint`` event; the client neither POSTs nor routes
    anything before it arrives."""
    fake = FakeMCPServer(mode="sse", endpoint=None)  # the endpoint is sent by hand below
    spec = _sse_spec(fake)
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            connected = trio.Event()
            stats: list[ClientStatistics] = []

            async def run() -> None:
                async with connect(fake, spec) as client:
                    connected.set()
                    await client.call_tool("echo", {"text": "x"})
                    stats.append(client.statistics())

            nursery.start_soon(run)
            stream = await fake.stream_for(None, kind="sse")
            stream.message({"jsonrpc": "2.0", "id": 1, "result": {}}, event="message")
            await trio.testing.wait_all_tasks_blocked()
            assert [r.method for r in fake.requests] == ["GET"]
            stream.event("/messages?session_id=sse-1", event="endpoint")
            await connected.wait()
    assert [r.rpc_method for r in fake.requests[1:]] == ["initialize", "notifications/initialized", "tools/call"]
    assert (stats[0].unknown_responses, stats[0].late_responses) == (0, 0)


# -- framing and limits --------------------------------------------------------------------------------


async def test_keepalives_multiline_data_and_split_crlf_on_the_sse_stream(autojump_clock: MockClock) -> None:
    """HT-S01, HT-S02, HT-M14: on the 2024-11-05 stream too, comments are keep-alives, ``data:``
    lines join with newlines, and CRLFs split across chunks are one line end."""
    fake = FakeMCPServer(mode="sse", keepalive=True, multiline=True, newline="\r\n", chunk_size=5)
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake)) as client:
            result = await client.call_tool("echo", {"text": "Grüße"})
            stats = client.statistics()
    assert result.content == [TextContent(text='echo {"text": "Grüße"}')]
    assert (stats.protocol_violations, stats.non_protocol_lines) == (0, 0)


# -- a lost SSE stream is a lost session (HS-04) ---------------------------------------------------------


async def test_dropped_stream_fails_pending_calls_and_starts_a_new_session(autojump_clock: MockClock) -> None:
    """HS-04, LC-01, LC-03: when the GET stream breaks, the session is gone: the pending call
    fails with :class:`ServerGone` naming it; the client reconnects, gets a new endpoint,
    initialises a new session there, and later calls use it."""
    fake = FakeMCPServer(mode="sse")
    fake.handlers["tools/call"] = lambda p: HANG if p["arguments"]["text"] == "slow" else fake.builtin("tools/call", p)
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake)) as client:
            first = await fake.stream_for(None, kind="sse")
            async with trio.open_nursery() as nursery:

                async def slow() -> None:
                    with pytest.raises(
                        ServerGone,
                        match=r"^server 'mcp\.test' dropped the SSE stream while 'tools/call' \(id \d+\) was pending$",
                    ):
                        await client.call_tool("echo", {"text": "slow"})

                nursery.start_soon(slow)
                await fake.wait_for_request(lambda r: r.rpc_method == "tools/call")
                first.drop()
            await _new_session_ready(fake)
            result = await client.call_tool("echo", {"text": "fresh"})
    assert result.content == [TextContent(text='echo {"text": "fresh"}')]
    posts = [(r.rpc_method, r.url.params["session_id"]) for r in fake.sent(http_method="POST")]
    old, new = posts[0][1], posts[-1][1]
    assert old != new
    assert posts == [
        ("initialize", old),
        ("notifications/initialized", old),
        ("tools/call", old),
        ("initialize", new),
        ("notifications/initialized", new),
        ("tools/call", new),
    ]
    assert [r.method for r in fake.requests].count("GET") == 2


async def test_closing_while_a_new_session_initialises_raises_nothing(autojump_clock: MockClock) -> None:
    """HS-04, STYLE ("A failing server is data, not an exception in the host nursery";
    ``aclose()`` is idempotent and quiet): leaving the block while the re-initialisation after a
    dropped stream is still unanswered closes cleanly."""
    fake = FakeMCPServer(mode="sse")
    _hang_after_first_initialize(fake)
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake)):
            (await fake.stream_for(None, kind="sse")).drop()
            await fake.wait_for_request(_second("initialize", fake))
    assert len(fake.sent("initialize")) == 2


async def test_calls_wait_until_the_new_session_is_initialised(autojump_clock: MockClock) -> None:
    """HS-04, LC-01, LC-04: on the new session, "the client SHOULD NOT send requests other than
    pings before the server has responded to the initialize request"; a call made meanwhile
    waits, and goes out after ``notifications/initialized``."""
    fake = FakeMCPServer(mode="sse")
    _hang_after_first_initialize(fake)
    results: list[Any] = []
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake)) as client:
            (await fake.stream_for(None, kind="sse")).drop()
            await fake.wait_for_request(_second("initialize", fake))
            init = fake.sent("initialize")[1]  # the new session's, still unanswered
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    results.append(await client.call_tool("echo", {"text": "after"}))

                nursery.start_soon(call)
                await trio.testing.wait_all_tasks_blocked()
                assert fake.sent("tools/call") == []
                stream = await fake.stream_for(None, kind="sse", index=1)
                answer = {"jsonrpc": "2.0", "id": init.rpc_id, "result": fake.builtin("initialize", {})}
                stream.message(answer, event="message")
    posted = [r.rpc_method for r in fake.sent(http_method="POST")]
    assert posted == [
        "initialize",
        "notifications/initialized",
        "initialize",
        "notifications/initialized",
        "tools/call",
    ]
    assert results[0].content == [TextContent(text='echo {"text": "after"}')]


def _big_when_asked(fake: FakeMCPServer) -> None:
    def call(params: dict[str, Any]) -> Any:
        if params["arguments"]["text"] == "big":
            return {"content": [{"type": "text", "text": "x" * 10_000}]}
        return fake.builtin("tools/call", params)

    fake.handlers["tools/call"] = call


async def test_oversized_event_on_the_sse_stream_fails_the_call_without_hanging(autojump_clock: MockClock) -> None:
    """HT-S03, HS-04: a ``message`` event larger than ``max_message_bytes`` on the 2024-11-05
    stream cannot be skipped safely, so the stream is dropped: the pending call fails at once
    (no hang), and a new session serves later calls."""
    fake = FakeMCPServer(mode="sse")
    _big_when_asked(fake)
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake), max_message_bytes=4096) as client:
            with pytest.raises(ServerGone):
                await client.call_tool("echo", {"text": "big"})
            await _new_session_ready(fake)
            result = await client.call_tool("echo", {"text": "small"})
    assert result.content == [TextContent(text='echo {"text": "small"}')]
    assert len(fake.sent("initialize")) == 2


async def test_oversized_event_on_the_sse_stream_names_the_limit(autojump_clock: MockClock) -> None:
    """HT-S03, STYLE (errors are mapped once, "details in __cause__"): the failed call says it
    was the size limit - a :class:`FrameTooLarge`, or an error caused by one - so the user knows
    to raise ``max_message_bytes``."""
    fake = FakeMCPServer(mode="sse")
    _big_when_asked(fake)
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake), max_message_bytes=4096) as client:
            with pytest.raises(MCPWireError) as info:
                await client.call_tool("echo", {"text": "big"})
            await _new_session_ready(fake)
    assert isinstance(info.value, FrameTooLarge) or isinstance(info.value.__cause__, FrameTooLarge)


async def test_sse_content_type_is_compared_case_insensitively(autojump_clock: MockClock) -> None:
    """HT-05, HS-01 (RFC 9110: media type names are case-insensitive): an SSE GET answered
    ``Text/Event-Stream; charset=UTF-8`` is the 2024-11-05 stream."""
    fake = FakeMCPServer(mode="sse", sse_content_type="Text/Event-Stream; charset=UTF-8")
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake)) as client:
            result = await client.call_tool("echo", {"text": "x"})
    assert result.content == [TextContent(text='echo {"text": "x"}')]


# -- reconnecting is bounded ----------------------------------------------------------------------------


async def test_reconnect_gives_up_after_bounded_attempts(autojump_clock: MockClock) -> None:
    """HS-04, STYLE ("A failing server is data"): when the stream drops and every new GET fails
    (503), the client tries three times with backoff, then gives up: the pending call and every
    later one fail with :class:`ServerGone`, and nothing escapes into the nursery."""
    fake = FakeMCPServer(mode="sse")
    fake.handlers["tools/call"] = lambda params: HANG
    with trio.fail_after(60):
        async with connect(fake, _sse_spec(fake)) as client:
            first = await fake.stream_for(None, kind="sse")
            async with trio.open_nursery() as nursery:

                async def pending() -> None:
                    with pytest.raises(
                        ServerGone,
                        match=r"^server 'mcp\.test' closed the SSE stream while 'tools/call' \(id \d+\) was pending$",
                    ):
                        await client.call_tool("echo", {"text": "slow"})

                nursery.start_soon(pending)
                await fake.wait_for_request(lambda r: r.rpc_method == "tools/call")
                fake.inject(503, http_method="GET", times=10)
                first.drop()
            await client.wait_closed()
            with pytest.raises(ServerGone, match=r"^server 'mcp\.test' closed the SSE stream$"):
                await client.call_tool("echo", {"text": "later"})
    gets = fake.sent(http_method="GET")
    assert [g.status for g in gets] == [200, 503, 503, 503]
    assert all(b.time > a.time for a, b in itertools.pairwise(gets[1:]))
    assert len(fake.sent("tools/call")) == 1


# -- POST answers are bounded -----------------------------------------------------------------------------


class _LongBody(httpx.AsyncByteStream):
    """A body of ``chunks`` KiB that counts what was read and whether it was closed."""

    def __init__(self, chunks: int) -> None:
        self.chunks = chunks
        self.read = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.read += 1
            yield b"x" * 1024

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("framing", ["content-length", "streamed"])
async def test_post_answer_is_read_bounded(autojump_clock: MockClock, framing: str) -> None:
    """HT-S03, HS-03: the answer to a POST is not JSON-RPC, but it is read, and never more than
    ``max_message_bytes`` of it: a 202 with a body past the limit fails that send with
    :class:`FrameTooLarge` (declared too long: nothing is read; streamed: reading stops at the
    limit and the body is closed), and the connection stays usable."""
    fake = FakeMCPServer(mode="sse")
    body = _LongBody(64)

    def rewrite(rec: Recorded, response: httpx.Response) -> httpx.Response:
        if rec.rpc_method != "tools/call" or rec.params["arguments"]["text"] != "big":
            return response
        if framing == "content-length":
            return httpx.Response(202, content=b"x" * 65536)
        return httpx.Response(202, stream=body)

    fake.rewrite = rewrite
    with trio.fail_after(BOUND):
        async with connect(fake, _sse_spec(fake), max_message_bytes=4096) as client:
            with pytest.raises(FrameTooLarge, match=r"^message of at least \d+ bytes exceeds the limit of 4096 bytes"):
                await client.call_tool("echo", {"text": "big"})
            result = await client.call_tool("echo", {"text": "small"})
    assert result.content == [TextContent(text='echo {"text": "small"}')]
    if framing == "streamed":
        assert body.read <= 5 and body.closed


# -- a cached verdict that no longer holds ---------------------------------------------------------------


@pytest.mark.parametrize("now", ["legacy", "modern"])
async def test_stale_sse_verdict_is_dropped_and_detection_runs_again(autojump_clock: MockClock, now: str) -> None:
    """LC-44 ("re-probing if the cached assumption later fails"), LC-46: the URL was an HTTP+SSE
    server, and the process remembers that; the server has since moved to Streamable HTTP, so
    the cached transport's GET answers 400 (405 for a 2026-07-28 server). The client forgets the
    verdict, runs the detection ladder from the start, connects, and remembers the new verdict."""
    before = FakeMCPServer(mode="sse")
    with trio.fail_after(BOUND):
        async with connect(before):
            pass
    assert DEFAULT_ERA_CACHE.http_kind(before.url) == "sse"
    after = FakeMCPServer(mode=now)
    with trio.fail_after(BOUND):
        async with connect(after) as client:
            result = await client.call_tool("echo", {"text": "moved"})
            assert client.era is (Era.MODERN if now == "modern" else Era.LEGACY)
    assert result.content == [TextContent(text='echo {"text": "moved"}')]
    refused = 405 if now == "modern" else 400
    assert after.trace()[:3] == [
        ("GET", "/mcp", None, refused),
        ("POST", "/mcp", "server/discover", 200 if now == "modern" else 400),
        ("POST", "/mcp", "initialize" if now == "legacy" else "tools/call", 200),
    ]
    assert DEFAULT_ERA_CACHE.http_kind(after.url) == "streamable-http"
    assert DEFAULT_ERA_CACHE.era(("http", after.url)) == (Era.MODERN if now == "modern" else Era.LEGACY)


async def test_stale_sse_verdict_retries_detection_only_once(autojump_clock: MockClock) -> None:
    """LC-44: the cached verdict is dropped and detection runs once more; a server that fails
    that too makes connecting fail with what detection found, not loop."""
    before = FakeMCPServer(mode="sse")
    with trio.fail_after(BOUND):
        async with connect(before):
            pass
    broken = FakeMCPServer(mode="sse", ladder={"server/discover": 500, "initialize": 500})
    broken.inject(500, http_method="GET", times=10)
    with trio.fail_after(BOUND), pytest.raises(MCPWireError):
        async with connect(broken):
            pass
    assert [(r.method, r.rpc_method) for r in broken.requests] == [
        ("GET", None),
        ("POST", "server/discover"),
        ("POST", "initialize"),
    ]
    assert DEFAULT_ERA_CACHE.http_kind(broken.url) is None


async def test_a_wrong_path_is_blamed_on_the_post_not_the_last_fallback(autojump_clock: MockClock) -> None:
    """A URL where nothing serves MCP (a wrong path on a Streamable HTTP server): the probe, the
    ``initialize`` POST and the HTTP+SSE GET all answer 404. The error names the POST first (the
    transport that was asked for) and the fallback second, and says what to check."""
    fake = FakeMCPServer(mode="sse")
    fake.inject(404, http_method="GET", headers={"Content-Type": "text/html"}, content=b"Cannot GET /wrong")
    with (
        trio.fail_after(BOUND),
        pytest.raises(
            HTTPStatusError,
            match=r"^server 'mcp\.test' answered the POST of 'initialize' to http://mcp\.test/mcp with HTTP 404, "
            r"and the HTTP\+SSE GET with HTTP 404: no MCP endpoint answers at that URL \(is the path right\? "
            r"Streamable HTTP servers often serve /mcp, HTTP\+SSE ones /sse\)$",
        ) as info,
    ):
        async with connect(fake):
            pass
    assert info.value.status == 404
    assert fake.trace() == [
        ("POST", "/mcp", "server/discover", 400),
        ("POST", "/mcp", "initialize", 404),
        ("GET", "/mcp", None, 404),
    ]
