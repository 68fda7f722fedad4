"""2026-07-28 Streamable HTTP against the fake server of ``http_fakes`` in ``modern`` mode.

The fake validates every POST like a strict 2026-07-28 server (SV-27) and answers 400 + ``-32020``
on any mismatch between headers and body, so "the server accepted it" is itself an assertion;
the tests also read the exact headers from the fake's records.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from http_fakes import (  # noqa: F401 (fresh_era_cache is an autouse fixture)
    ECHO_TOOL,
    HANG,
    MODERN_VERSION,
    FakeMCPServer,
    RpcFault,
    connect,
    fresh_era_cache,
    sentinel,
)
from trio.testing import MockClock

from mcpwire.errors import (
    MCPWireError,
    MissingClientCapability,
    RemoteProtocolError,
    RequestTimeout,
    ResponseStreamLost,
    RPCError,
    UnsupportedVersion,
)
from mcpwire.protocol.types import TextContent
from mcpwire.protocol.versions import Era

BOUND = 10.0
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"

ROUTE_TOOL: dict[str, Any] = {
    "name": "route",
    "inputSchema": {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "dry_run": {"type": "boolean", "x-mcp-header": "Dry-Run"},
            "options": {
                "type": "object",
                "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
            },
            "note": {"type": "string", "x-mcp-header": "Note"},
            "query": {"type": "string"},
        },
    },
}


def _modern_fake(**switches: Any) -> FakeMCPServer:
    fake = FakeMCPServer(mode="modern", **switches)
    fake.tools = [dict(ECHO_TOOL), ROUTE_TOOL]
    return fake


def _assert_mirrors_body(rec: Any) -> None:
    """HT-M03, HT-M04: the headers a strict server compares with the body."""
    meta = rec.params["_meta"]
    assert rec.header("mcp-protocol-version") == meta[META_VERSION] == MODERN_VERSION, rec
    assert rec.header("mcp-method") == rec.rpc_method, rec
    assert isinstance(meta[META_CAPABILITIES], dict), rec
    assert meta[META_CLIENT_INFO]["name"] == "mcpwire", rec
    assert rec.header("accept") == "application/json, text/event-stream", rec
    assert rec.header("content-type") == "application/json", rec


# -- detection and the standard headers ------------------------------------------------------------


async def test_detection_picks_modern_via_server_discover(autojump_clock: MockClock) -> None:
    """LC-25, LC-26, LC-46 (step 1), LC-20, LC-21, HT-M03, HT-M04: the first request is a
    ``server/discover`` with modern headers and ``_meta``; its result decides the era and no
    ``initialize`` follows."""
    fake = _modern_fake()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            assert (client.era, client.protocol_version) == (Era.MODERN, MODERN_VERSION)
            assert client.server_info is not None and client.server_info.name == "fake-mcp"
            result = await client.call_tool("echo", {"text": "hi"})
    assert result.content == [TextContent(text='echo {"text": "hi"}')]
    assert fake.trace() == [("POST", "/mcp", "server/discover", 200), ("POST", "/mcp", "tools/call", 200)]
    _assert_mirrors_body(fake.requests[0])


@pytest.mark.parametrize("answer_as", ["json", "sse"])
async def test_strict_server_accepts_every_request(autojump_clock: MockClock, answer_as: str) -> None:
    """HT-01, HT-03, HT-M03, HT-M04, HT-M11, LC-20, LC-22, JR-10, SV-27: a tour of the API
    against a server that checks every header against the body: nothing is refused, and every
    POST carries ``MCP-Protocol-Version`` equal to ``_meta``, ``Mcp-Method``, and ``Mcp-Name``
    exactly on ``tools/call``, ``resources/read`` and ``prompts/get``."""
    fake = _modern_fake(answer_as=answer_as)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.list_tools()
            await client.call_tool("route", {"region": "eu", "limit": 3, "query": "q"})
            await client.list_resources()
            read = await client.read_resource("file:///readme.txt")
            await client.list_prompts()
            prompt = await client.get_prompt("greet", {"who": "you"})
            await client.discover()
    assert fake.rejections == []
    assert read.contents[0].uri == "file:///readme.txt"
    assert prompt.messages[0].block() == TextContent(text="Hello, you")
    assert [(r.method, r.rpc_method, r.status) for r in fake.requests] == [
        ("POST", "server/discover", 200),
        ("POST", "tools/list", 200),
        ("POST", "tools/call", 200),
        ("POST", "resources/list", 200),
        ("POST", "resources/read", 200),
        ("POST", "prompts/list", 200),
        ("POST", "prompts/get", 200),
        ("POST", "server/discover", 200),
    ]
    for rec in fake.requests:
        _assert_mirrors_body(rec)
    names = {r.rpc_method: r.header("mcp-name") for r in fake.requests}
    assert names == {
        "server/discover": None,
        "tools/list": None,
        "tools/call": "route",
        "resources/list": None,
        "resources/read": "file:///readme.txt",
        "prompts/list": None,
        "prompts/get": "greet",
    }


@pytest.mark.parametrize(
    ("uri", "header"),
    [
        ("file:///notes/plain.txt", "file:///notes/plain.txt"),
        ("file:///notes/café.txt", sentinel("file:///notes/café.txt")),
        ("=?base64?Zm9v?=", sentinel("=?base64?Zm9v?=")),
    ],
    ids=["ascii", "non-ascii", "sentinel-shaped"],
)
async def test_mcp_name_uses_the_base64_sentinel_when_needed(autojump_clock: MockClock, uri: str, header: str) -> None:
    """HT-M05: ``Mcp-Name`` is sent as is when it is plain visible ASCII, otherwise (and when
    it already looks like the sentinel) as ``=?base64?...?=``; the strict server decodes it to
    the body's ``uri``."""
    fake = _modern_fake()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.read_resource(uri)
    (read,) = fake.sent("resources/read")
    assert read.header("mcp-name") == header
    assert (read.status, fake.rejections) == (200, [])


@pytest.mark.parametrize(
    ("region", "header"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", sentinel("Hello, 世界")),
        (" padded ", sentinel(" padded ")),
        ("=?base64?SGk=?=", sentinel("=?base64?SGk=?=")),
        ("line\r\nX-Injected: 1", sentinel("line\r\nX-Injected: 1")),
    ],
    ids=["plain", "non-ascii", "padded", "sentinel-shaped", "control-chars"],
)
async def test_x_mcp_header_arguments_are_mirrored(autojump_clock: MockClock, region: str, header: str) -> None:
    """HT-M06, HT-M07, HT-M05: every argument a tool annotates with ``x-mcp-header`` (nested
    ones too) travels as ``Mcp-Param-{Name}``: strings as is when safe, else the base64
    sentinel; integers in decimal; booleans as ``true``; a ``null`` argument sends no header; an
    unannotated one never does. The strict server accepts the call."""
    fake = _modern_fake()
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.list_tools()
            result = await client.call_tool(
                "route",
                {
                    "region": region,
                    "limit": 42,
                    "dry_run": True,
                    "options": {"tenant": "acme"},
                    "note": None,
                    "query": "select 1",
                },
            )
    assert result.is_error is False
    (call,) = fake.sent("tools/call")
    mirrored = {k.lower(): v for k, v in call.headers.items() if k.lower().startswith("mcp-param-")}
    assert mirrored == {
        "mcp-param-region": header,
        "mcp-param-limit": "42",
        "mcp-param-dry-run": "true",
        "mcp-param-tenant": "acme",
    }
    assert (call.status, fake.rejections) == (200, [])


@pytest.mark.parametrize(
    ("tool", "reason"),
    [
        (
            {
                "name": "bad_number",
                "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
            },
            "x-mcp-header 'N' at n is on a parameter of type 'number'; only string, integer and boolean are allowed",
        ),
        (
            {
                "name": "bad_items",
                "inputSchema": {
                    "type": "object",
                    "properties": {"tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}},
                },
            },
            "x-mcp-header at tags is not statically reachable through 'properties'",
        ),
        (
            {
                "name": "bad_token",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Bad Name"}}},
            },
            "x-mcp-header 'Bad Name' at a is not an HTTP field-name token",
        ),
        (
            {
                "name": "bad_duplicate",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "a": {"type": "string", "x-mcp-header": "Key"},
                        "b": {"type": "string", "x-mcp-header": "key"},
                    },
                },
            },
            "x-mcp-header 'key' is used twice (case-insensitively), at a and b",
        ),
    ],
    ids=["number", "under-items", "not-a-token", "duplicate"],
)
async def test_tools_with_invalid_annotations_are_dropped_with_a_warning(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture, tool: dict[str, Any], reason: str
) -> None:
    """HT-M08, TL-02: a tool whose ``x-mcp-header`` annotations break the rules is left out of
    ``list_tools`` and a warning names the tool and the reason; the other tools stay usable."""
    fake = FakeMCPServer(mode="modern")
    fake.tools = [tool, dict(ECHO_TOOL)]
    caplog.set_level(logging.WARNING, logger="mcpwire")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            tools = await client.list_tools()
            await client.call_tool("echo", {"text": "still fine"})
    assert [t.name for t in tools] == ["echo"]
    assert [r.getMessage() for r in caplog.records] == [
        f"mcp.test: skipping an invalid tool: tool {tool['name']!r}: {reason}"
    ]


# -- the client fixing its own headers ---------------------------------------------------------------


async def test_header_mismatch_relists_tools_and_retries_once(autojump_clock: MockClock) -> None:
    """HT-M09, SV-27: the server added an ``x-mcp-header`` annotation after the client listed
    its tools, so the call lacks ``Mcp-Param-Region`` and is refused with 400 + ``-32020``. The
    client re-lists the tools and re-sends the call, now with the header, and it succeeds."""
    fake = FakeMCPServer(mode="modern")
    fake.tools = [{"name": "route", "inputSchema": {"type": "object", "properties": {"region": {"type": "string"}}}}]
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.list_tools()
            fake.tools = [
                {
                    "name": "route",
                    "inputSchema": {
                        "type": "object",
                        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
                    },
                }
            ]
            result = await client.call_tool("route", {"region": "eu"})
    assert result.content == [TextContent(text='route {"region": "eu"}')]
    assert [(r.rpc_method, r.status, r.header("mcp-param-region")) for r in fake.requests[1:]] == [
        ("tools/list", 200, None),
        ("tools/call", 400, None),
        ("tools/list", 200, None),
        ("tools/call", 200, "eu"),
    ]
    assert fake.rejections == [("tools/call", "Mcp-Param-Region is missing")]
    first, second = fake.sent("tools/call")
    assert first.rpc_id != second.rpc_id  # a new request, a new id (JR-04)


async def test_header_mismatch_again_is_raised_after_one_retry(autojump_clock: MockClock) -> None:
    """HT-M09: the re-list and retry happen once; a second ``-32020`` reaches the caller as an
    :class:`RPCError` with the server's message."""
    fake = FakeMCPServer(mode="modern")

    def refuse(params: dict[str, Any]) -> Any:
        raise RpcFault(-32020, "Header mismatch: Mcp-Param-Region", status=400)

    fake.handlers["tools/call"] = refuse
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(
                RPCError,
                match=r"^error -32020 from server 'mcp\.test' to 'tools/call' \(id \d+\): "
                r"Header mismatch: Mcp-Param-Region$",
            ) as info:
                await client.call_tool("echo", {"text": "x"})
    assert info.value.code == -32020
    assert [(r.rpc_method, r.status) for r in fake.requests[1:]] == [
        ("tools/call", 400),
        ("tools/list", 200),
        ("tools/call", 400),
    ]


# -- version negotiation during detection ------------------------------------------------------------


async def test_unsupported_version_on_discover_is_retried_not_a_fallback(autojump_clock: MockClock) -> None:
    """LC-24, LC-40, LC-43, LC-47, HT-M15: 400 + ``-32022`` with ``data.supported`` is a
    recognised modern error: the client retries ``server/discover`` with a version from the list
    and never falls back to ``initialize``."""
    fake = FakeMCPServer(mode="modern")

    def refuse_once(params: dict[str, Any]) -> Any:
        del fake.handlers["server/discover"]
        raise RpcFault(
            -32022,
            "Unsupported protocol version",
            {"supported": [MODERN_VERSION, "2025-11-25"], "requested": MODERN_VERSION},
            status=400,
        )

    fake.handlers["server/discover"] = refuse_once
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            assert client.era is Era.MODERN
            await client.call_tool("echo", {"text": "x"})
    assert [(r.rpc_method, r.status) for r in fake.requests] == [
        ("server/discover", 400),
        ("server/discover", 200),
        ("tools/call", 200),
    ]
    assert fake.requests[1].params["_meta"][META_VERSION] == MODERN_VERSION


async def test_unsupported_version_with_nothing_in_common_fails_without_fallback(autojump_clock: MockClock) -> None:
    """LC-24, LC-43, LC-47: when ``data.supported`` lists only revisions mcpwire does not speak,
    connecting fails with :class:`UnsupportedVersion` naming them; no ``initialize`` and no GET
    are tried, since the server is modern."""
    fake = FakeMCPServer(mode="modern", versions=("2099-01-01",))
    with (
        trio.fail_after(BOUND),
        pytest.raises(
            UnsupportedVersion,
            match=r"^cannot connect to server 'mcp\.test': server/discover answered error -32022: "
            r"Unsupported protocol version$",
        ) as info,
    ):
        async with connect(fake):
            pass
    assert info.value.offered == ("2099-01-01",)
    assert fake.trace() == [("POST", "/mcp", "server/discover", 400)]


@pytest.mark.parametrize("code", [-32020, -32021])
async def test_recognised_modern_error_on_discover_is_not_a_fallback(autojump_clock: MockClock, code: int) -> None:
    """LC-43, LC-47, HS-06 (2026-07-28 wording): a 400 whose body is a recognised modern
    JSON-RPC error means the server is modern: the client must not fall back to ``initialize``
    (and certainly not to the HTTP+SSE GET); the error reaches the caller."""
    fake = FakeMCPServer(mode="modern")

    def refuse(params: dict[str, Any]) -> Any:
        raise RpcFault(code, "Header mismatch: Mcp-Method", status=400)

    fake.handlers["server/discover"] = refuse
    with trio.fail_after(BOUND), pytest.raises(MCPWireError) as info:
        async with connect(fake):
            pass
    assert [r.rpc_method for r in fake.requests] == ["server/discover"]
    assert str(code) in str(info.value)


# -- errors of a modern server ----------------------------------------------------------------------


async def test_missing_client_capability_is_its_own_error(autojump_clock: MockClock) -> None:
    """LC-23, HT-M15: 400 + ``-32021`` on a call raises :class:`MissingClientCapability` with the
    server's ``requiredCapabilities``; it is not retried."""
    fake = FakeMCPServer(mode="modern")

    def refuse(params: dict[str, Any]) -> Any:
        raise RpcFault(
            -32021, "Missing required client capability", {"requiredCapabilities": {"elicitation": {}}}, status=400
        )

    fake.handlers["tools/call"] = refuse
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(
                MissingClientCapability,
                match=r"^error -32021 from server 'mcp\.test' to 'tools/call' \(id \d+\): "
                r"Missing required client capability$",
            ) as info:
                await client.call_tool("echo", {"text": "x"})
    assert info.value.required == {"elicitation": {}}
    assert [r.status for r in fake.sent("tools/call")] == [400]


async def test_unknown_method_404_is_an_rpc_error_not_a_lost_session(autojump_clock: MockClock) -> None:
    """HT-M15: 404 + ``-32601`` from a 2026-07-28 server is "method not found" - an
    :class:`RPCError` - and not a sign of a legacy server or an expired session."""
    fake = FakeMCPServer(mode="modern")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(RPCError) as info:
                await client.request("vendor.example/unknown", {})
            assert client.era is Era.MODERN
            await client.call_tool("echo", {"text": "still modern"})
    assert info.value.is_method_not_found
    assert [(r.rpc_method, r.status) for r in fake.requests] == [
        ("server/discover", 200),
        ("vendor.example/unknown", 404),
        ("tools/call", 200),
    ]
    assert fake.requests[1].header("mcp-method") == "vendor.example/unknown"


@pytest.mark.parametrize("how", ["end", "drop"])
async def test_broken_response_stream_is_reissued_with_a_new_id(autojump_clock: MockClock, how: str) -> None:
    """HT-M12, HT-M16: a 2026-07-28 response stream that ends or breaks before the answer (here
    after a progress notification) loses the request: the client re-issues it as a new request
    with a new id, never with GET + ``Last-Event-ID``, and the call returns the new answer."""
    fake = FakeMCPServer(mode="modern", answer_as="sse")
    attempts: list[dict[str, Any]] = []

    def call(params: dict[str, Any]) -> Any:
        attempts.append(params)
        return HANG if len(attempts) == 1 else fake.builtin("tools/call", params)

    fake.handlers["tools/call"] = call
    results: list[Any] = []
    with trio.fail_after(BOUND):
        async with connect(fake) as client, trio.open_nursery() as nursery:

            async def run() -> None:
                results.append(await client.call_tool("echo", {"text": "lost"}, on_progress=lambda p: None))

            nursery.start_soon(run)
            stream = await fake.stream_for("tools/call")
            stream.end() if how == "end" else stream.drop()
    assert results[0].content == [TextContent(text='echo {"text": "lost"}')]
    assert {r.method for r in fake.requests} == {"POST"}
    assert all(r.header("last-event-id") is None for r in fake.requests)
    first, second = fake.sent("tools/call")
    assert first.rpc_id != second.rpc_id
    assert first.params["arguments"] == second.params["arguments"] == {"text": "lost"}


async def test_a_request_lost_twice_fails(autojump_clock: MockClock) -> None:
    """HT-M12: the re-issue happens once; when its stream breaks too, the call fails with
    :class:`ResponseStreamLost` (a :class:`ServerGone`) and the client stays usable."""
    fake = FakeMCPServer(mode="modern", answer_as="sse")
    fake.handlers["tools/call"] = lambda p: HANG if p["arguments"]["text"] == "lost" else fake.builtin("tools/call", p)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    with pytest.raises(
                        ResponseStreamLost,
                        match=r"^server 'mcp\.test' closed the response stream before answering "
                        r"\(2026-07-28 streams cannot be resumed\)$",
                    ):
                        await client.call_tool("echo", {"text": "lost"})

                nursery.start_soon(run)
                (await fake.stream_for("tools/call", index=0)).drop()
                (await fake.stream_for("tools/call", index=1)).drop()
            again = await client.call_tool("echo", {"text": "again"})
    assert again.content == [TextContent(text='echo {"text": "again"}')]
    assert len({r.rpc_id for r in fake.sent("tools/call")}) == 3


# -- what a modern client never sends -----------------------------------------------------------------


@pytest.mark.parametrize(
    "stray",
    [False, True],
    ids=["plain", "server-sends-session-header"],
)
async def test_no_get_no_delete_no_session_id(autojump_clock: MockClock, stray: bool) -> None:
    """HT-M13, HT-M16, LC-30: a 2026-07-28 connection is POSTs only: no GET stream, no DELETE on
    close, no ``Mcp-Session-Id`` or ``Last-Event-ID`` (even when the server's answers carry a
    session header), no ``initialize`` and no notifications."""
    fake = _modern_fake(stray_session_header=stray, answer_as="sse")
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            await client.list_tools()
            await client.call_tool("echo", {"text": "x"})
            async with trio.open_nursery() as nursery:  # notifications() must not open a GET stream
                nursery.start_soon(_first_notification, client)
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
    assert {r.method for r in fake.requests} == {"POST"}
    assert [r.rpc_method for r in fake.requests] == ["server/discover", "tools/list", "tools/call"]
    assert all(r.header("mcp-session-id") is None for r in fake.requests)
    assert all(r.header("last-event-id") is None for r in fake.requests)


async def _first_notification(client: Any) -> None:
    async for _ in client.notifications():
        return


@pytest.mark.parametrize("how", ["outer-cancel-scope", "timeout"])
async def test_cancelling_a_call_closes_its_stream_and_posts_nothing(autojump_clock: MockClock, how: str) -> None:
    """HT-M10, HT-M02, LC-60, AMB-04: cancelling a 2026-07-28 call (the caller's own cancel
    scope, or its timeout) closes that request's SSE response stream - that *is* the
    cancellation - and no ``notifications/cancelled`` is POSTed; the client keeps working."""
    fake = FakeMCPServer(mode="modern", answer_as="sse")
    fake.handlers["tools/call"] = lambda params: HANG if params.get("name") == "slow" else {"content": []}
    fake.tools.append({"name": "slow", "inputSchema": {"type": "object"}})
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            if how == "timeout":
                with pytest.raises(
                    RequestTimeout,
                    match=r"^'tools/call' \(id \d+\) to server 'mcp\.test' got no answer within 1s; it was cancelled$",
                ):
                    await client.call_tool("slow", {}, timeout=1)
                stream = await fake.stream_for("tools/call")
            else:
                with trio.CancelScope() as outer:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(client.call_tool, "slow", {})
                        stream = await fake.stream_for("tools/call")
                        outer.cancel()
                assert outer.cancelled_caught
            await stream.wait_closed()
            after = await client.call_tool("echo", {"text": "next"})
            stats = client.statistics()
    assert stream.closed_early
    assert after.is_error is False
    assert stats.pending == 0
    assert [r.rpc_method for r in fake.requests] == ["server/discover", "tools/call", "tools/call"]
    assert fake.sent("notifications/cancelled") == []


# -- version negotiation after connecting -------------------------------------------------------------


def _refuse_version(fake: FakeMCPServer, supported: list[str], *, times: int) -> None:
    """``tools/call`` answers 400 + ``-32022`` the first ``times`` times (``data.supported`` as given)."""
    refused: list[dict[str, Any]] = []

    def call(params: dict[str, Any]) -> Any:
        if len(refused) < times:
            refused.append(params)
            raise RpcFault(
                -32022,
                "Unsupported protocol version",
                {"supported": supported, "requested": params["_meta"][META_VERSION]},
                status=400,
            )
        return fake.builtin("tools/call", params)

    fake.handlers["tools/call"] = call


async def test_unsupported_version_after_connecting_is_retried_once(autojump_clock: MockClock) -> None:
    """LC-24, HT-M15, DS-02: a call refused with 400 + ``-32022`` after connecting (a server
    fleet in the middle of an upgrade) is retried once, as a new request, with the newest version
    from ``data.supported`` that mcpwire speaks; the caller sees the answer."""
    fake = FakeMCPServer(mode="modern")
    _refuse_version(fake, ["2099-01-01", MODERN_VERSION], times=1)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            result = await client.call_tool("echo", {"text": "x"})
            assert client.protocol_version == MODERN_VERSION
    assert result.content == [TextContent(text='echo {"text": "x"}')]
    first, second = fake.sent("tools/call")
    assert (first.status, second.status) == (400, 200)
    assert first.rpc_id != second.rpc_id
    assert second.params["_meta"][META_VERSION] == second.header("mcp-protocol-version") == MODERN_VERSION


async def test_unsupported_version_with_nothing_in_common_after_connecting(autojump_clock: MockClock) -> None:
    """LC-24: "or surface an error to the user if no compatible version exists": when
    ``data.supported`` has no 2026-07-28-era revision mcpwire speaks, the call fails at once with
    :class:`UnsupportedVersion` naming both lists (the server's error is its cause); nothing is
    retried."""
    fake = FakeMCPServer(mode="modern")
    _refuse_version(fake, ["2099-01-01", "2025-11-25"], times=1)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(
                UnsupportedVersion,
                match=r"^server 'mcp\.test' refused protocol version 2026-07-28 for 'tools/call' \(id \d+\) with "
                r"error -32022 \(Unsupported protocol version\); it supports 2099-01-01, 2025-11-25 and mcpwire "
                r"speaks 2026-07-28 on this connection: no version in common \(a legacy revision needs a new "
                r"connection\)$",
            ) as info:
                await client.call_tool("echo", {"text": "x"})
    assert info.value.offered == ("2099-01-01", "2025-11-25")
    assert isinstance(info.value.__cause__, RPCError) and info.value.__cause__.code == -32022
    assert [r.status for r in fake.sent("tools/call")] == [400]


async def test_unsupported_version_twice_is_surfaced_after_one_retry(autojump_clock: MockClock) -> None:
    """LC-24: the retry happens once; a second ``-32022`` fails the call with
    :class:`UnsupportedVersion` naming both lists."""
    fake = FakeMCPServer(mode="modern")
    _refuse_version(fake, [MODERN_VERSION], times=2)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(
                UnsupportedVersion,
                match=r"^server 'mcp\.test' refused protocol version 2026-07-28 for 'tools/call' \(id \d+\) with "
                r"error -32022 \(Unsupported protocol version\) again after one retry; it supports 2026-07-28 and "
                r"mcpwire speaks 2026-07-28 on this connection$",
            ):
                await client.call_tool("echo", {"text": "x"})
            assert (await client.call_tool("echo", {"text": "y"})).is_error is False
    assert [r.status for r in fake.sent("tools/call")] == [400, 400, 200]


# -- bounded listings ------------------------------------------------------------------------------


def _endless_pages(fake: FakeMCPServer, per_page: int, description: str = "") -> list[int]:
    """tools/list answers page after page, each with a new cursor, for ever."""
    pages: list[int] = []

    def page(params: dict[str, Any]) -> dict[str, Any]:
        pages.append(len(pages))
        tools = [{**ECHO_TOOL, "name": f"t{len(pages)}-{i}", "description": description} for i in range(per_page)]
        return {"tools": tools, "nextCursor": f"c{len(pages)}"}

    fake.handlers["tools/list"] = page
    return pages


async def test_endless_pagination_is_bounded_by_items(autojump_clock: MockClock) -> None:
    """A server that pages for ever with fresh cursors (no cycle to catch) cannot make one
    listing hold 10,000 pages: past ``max_list_items`` the call fails, naming server, method,
    page and the option that raises the bound."""
    fake = _modern_fake()
    pages = _endless_pages(fake, per_page=1000)
    with trio.fail_after(BOUND):
        async with connect(fake) as client:
            with pytest.raises(
                RemoteProtocolError,
                match=r"^server 'mcp\.test' returned more than 100000 items while paginating 'tools/list' "
                r"\(page 101\); raise max_list_items if it legitimately lists that many$",
            ):
                await client.list_tools()
    assert len(pages) == 101


async def test_endless_pagination_is_bounded_by_bytes(autojump_clock: MockClock) -> None:
    """The total size of a listing is bounded too (``max_list_bytes``), however few the items."""
    fake = _modern_fake()
    pages = _endless_pages(fake, per_page=1, description="x" * 100_000)
    with trio.fail_after(BOUND):
        async with connect(fake, max_list_bytes=1_000_000) as client:
            with pytest.raises(
                RemoteProtocolError,
                match=r"^server 'mcp\.test' returned more than 1000000 bytes while paginating 'tools/list' "
                r"\(page 10\); raise max_list_bytes if it legitimately lists that much$",
            ):
                await client.list_tools()
    assert len(pages) == 10


async def test_a_listing_within_the_bounds_is_whole(autojump_clock: MockClock) -> None:
    """Ten pages of 100 tools end with no cursor: all 1,000 come back."""
    fake = _modern_fake()
    pages = _endless_pages(fake, per_page=100)
    inner = fake.handlers["tools/list"]

    def ten(params: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = inner(params)
        if len(pages) == 10:
            del result["nextCursor"]
        return result

    fake.handlers["tools/list"] = ten
    with trio.fail_after(BOUND):
        async with connect(fake, max_list_items=1000) as client:
            assert len(await client.list_tools()) == 1000
