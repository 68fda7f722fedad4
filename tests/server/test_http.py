"""StreamableHTTPApp under each HTTP server (the built-in one and hypercorn's trio worker), on
loopback, with httpx as the client: both eras, sessions, JSON and SSE answers, resumption, the
standalone GET stream, HTTP+SSE, cancellation by a closed stream, DNS-rebinding protection, body
limits, and embedding (run(), a mount point)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx
import pytest
import trio
from _server_support import ACCEPT_BOTH, INIT, MODERN, meta, sse_events, text, tools_server

from mcpwire.server import RequestContext, Server, StreamableHTTPApp
from mcpwire.server.http import HTTP_SERVERS, HttpServerName, serve_http

#: the server every test of this module runs under (set by the ``http_server`` fixture)
SERVER: list[HttpServerName] = ["builtin"]


@pytest.fixture(autouse=True, params=HTTP_SERVERS)
def http_server(request: pytest.FixtureRequest) -> HttpServerName:
    SERVER[0] = request.param
    return SERVER[0]


SSE = ACCEPT_BOTH


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` under the chosen server on a free loopback port; its base URL."""
    async with trio.open_nursery() as nursery:
        [url] = await nursery.start(partial(serve_http, app, port=0, server=SERVER[0]))
        try:
            yield url
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def client_of(server: Server, **options: Any) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    async with serving(StreamableHTTPApp(server, **options)) as base, httpx.AsyncClient(timeout=5) as client:
        yield client, f"{base}/mcp"


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**SSE, "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def call(name: str, rid: Any = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "_meta": meta(), **params}}


async def _progress(ctx: RequestContext) -> Any:
    await ctx.progress(1, 1, "all")
    return text("done")


async def _quick(ctx: RequestContext) -> Any:
    return text("quick")


# -- 2026-07-28 ---------------------------------------------------------------------------------


async def test_modern_answers_are_json_alone_and_sse_with_messages_before_them() -> None:
    async with client_of(tools_server(quick=_quick, progress=_progress)) as (client, url):
        reply = await client.post(url, json=call("quick"), headers=modern_headers("tools/call", "quick"))
        assert (reply.status_code, reply.headers["content-type"]) == (200, "application/json")
        assert reply.json()["result"]["content"] == [{"type": "text", "text": "quick"}]
        body = call("progress", _meta=meta() | {"progressToken": 5})
        async with client.stream("POST", url, json=body, headers=modern_headers("tools/call", "progress")) as streamed:
            assert streamed.headers["content-type"] == "text/event-stream"
            assert streamed.headers["x-accel-buffering"] == "no"
            got = [e async for e in sse_events(streamed)]
        assert [json.loads(e["data"]).get("method", "answer") for e in got] == ["notifications/progress", "answer"]
        assert all("id" not in e for e in got)  # 2026-07-28 streams are not resumable


FUTURE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {"_meta": meta() | {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
}


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "nope", "params": {"_meta": meta()}}, modern_headers("nope"), 404, -32601),  # noqa: E501
        (FUTURE, modern_headers("tools/list") | {"MCP-Protocol-Version": "2099-01-01"}, 400, -32022),
        (call("quick"), modern_headers("tools/call", "other"), 400, -32020),
        (call("quick"), modern_headers("tools/list", "quick"), 400, -32020),
        ([call("quick")], modern_headers("tools/call", "quick"), 400, -32600),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, modern_headers("tools/call"), 400, -32600),
        (b"{", modern_headers("tools/call"), 400, -32700),
    ],
)  # fmt: skip
async def test_modern_refusals_carry_their_http_status(
    body: Any, headers: dict[str, str], status: int, code: int
) -> None:
    async with client_of(tools_server(quick=_quick)) as (client, url):
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        reply = await client.post(url, content=content, headers={**headers, "Content-Type": "application/json"})
        assert reply.status_code == status, reply.text
        assert reply.json()["error"]["code"] == code


async def test_modern_notifications_are_accepted_and_there_is_no_get_or_delete() -> None:
    async with client_of(tools_server()) as (client, url):
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        reply = await client.post(url, json=note, headers=modern_headers("notifications/cancelled"))
        assert (reply.status_code, reply.content) == (202, b"")
        for verb in ("GET", "DELETE"):
            reply = await client.request(verb, url, headers={"MCP-Protocol-Version": MODERN})
            assert (reply.status_code, reply.headers["allow"]) == (405, "POST")


async def test_closing_a_modern_response_stream_cancels_the_request() -> None:
    started, stopped = trio.Event(), trio.Event()

    async def hang(ctx: RequestContext) -> Any:
        started.set()
        try:
            await ctx.progress(0, message="started")
            await trio.sleep_forever()
        finally:
            stopped.set()
        raise AssertionError

    async with client_of(tools_server(hang=hang)) as (client, url):
        body = call("hang", _meta=meta() | {"progressToken": 1})
        with trio.fail_after(5):
            async with client.stream("POST", url, json=body, headers=modern_headers("tools/call", "hang")) as streamed:
                await anext(sse_events(streamed))
            await stopped.wait()
        assert started.is_set()


# -- legacy sessions ------------------------------------------------------------------------------


async def _session(client: httpx.AsyncClient, url: str, version: str = "2025-11-25") -> dict[str, str]:
    body = {**INIT, "params": {**INIT["params"], "protocolVersion": version}}  # type: ignore[dict-item]
    reply = await client.post(url, json=body, headers=SSE)
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    return {"Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": version}


async def test_a_legacy_session_lives_from_initialize_to_delete() -> None:
    async with client_of(tools_server(quick=_quick)) as (client, url):
        session = await _session(client, url)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        async with client.stream("POST", url, json=listing, headers={**SSE, **session}) as streamed:
            got = [e async for e in sse_events(streamed)]
        # 2025-11-25: a priming event (an id, empty data, a retry field), then the answer with its id
        assert got[0] == {"id": "1.0", "retry": "500", "data": ""}
        assert (got[1]["event"], got[1]["id"]) == ("message", "1.1")
        assert json.loads(got[1]["data"])["result"]["tools"][0]["name"] == "quick"
        json_only = await client.post(url, json={**listing, "id": 3}, headers={**session, "Accept": "application/json"})
        assert json_only.json()["id"] == 3
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await client.post(url, json=note, headers=session)).status_code == 202
        assert (await client.delete(url, headers=session)).status_code == 200
        gone = await client.post(url, json=listing, headers={**SSE, **session})
        assert (gone.status_code, gone.json()["error"]["message"]) == (404, "Session not found")
        assert (await client.delete(url, headers=session)).status_code == 404


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({}, 400, "Bad Request: no Mcp-Session-Id header; send initialize first"),
        ({"Mcp-Session-Id": "nope"}, 404, "Session not found"),
        ({"MCP-Protocol-Version": "1999-01-01"}, 400, "Bad Request: unsupported MCP-Protocol-Version '1999-01-01'"),
    ],
)
async def test_legacy_requests_without_a_valid_session_are_refused(
    headers: dict[str, str], status: int, message: str
) -> None:
    async with client_of(tools_server()) as (client, url):
        session = await _session(client, url)
        sent = {**session, **headers} if "MCP-Protocol-Version" in headers else headers
        reply = await client.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers={**SSE, **sent}
        )
        assert (reply.status_code, reply.json()["error"]["message"]) == (status, message)
        again = await client.post(url, json=INIT, headers={**SSE, **session})
        assert again.json()["error"]["message"] == "Bad Request: initialize opens a session; do not send Mcp-Session-Id"


async def test_a_dropped_stream_is_resumed_with_last_event_id_and_the_request_runs_on() -> None:
    dropped = trio.Event()

    async def reconnect(ctx: RequestContext) -> Any:
        await ctx.log("info", "before")
        ctx.drop_connection()
        await dropped.wait()
        await ctx.log("info", "after")
        return text("resumed")

    async with client_of(tools_server(reconnect=reconnect)) as (client, url):
        session = await _session(client, url)
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "reconnect"}}
        async with client.stream("POST", url, json=body, headers={**SSE, **session}) as streamed:
            first = [e async for e in sse_events(streamed)]  # ends early: the server closed the response
        assert [e.get("id") for e in first] == ["1.0", "1.1"]
        dropped.set()
        async with client.stream("GET", url, headers={**SSE, **session, "Last-Event-ID": "1.1"}) as resumed:
            rest = [json.loads(e["data"]) for e in [e async for e in sse_events(resumed)]]
        assert [m.get("params", {}).get("data") for m in rest[:-1]] == ["after"]
        assert rest[-1]["result"]["content"][0]["text"] == "resumed"
        missing = await client.get(url, headers={**SSE, **session, "Last-Event-ID": "9.1"})
        assert missing.status_code == 404


async def test_the_standalone_get_stream_carries_list_changes_and_is_one_per_session() -> None:
    server = tools_server()
    async with client_of(server) as (client, url):
        session = await _session(client, url)
        assert (await client.get(url, headers={**session, "Accept": "application/json"})).status_code == 406
        with trio.fail_after(5):
            async with client.stream("GET", url, headers={**SSE, **session}) as standalone:
                assert standalone.status_code == 200
                second = await client.get(url, headers={**SSE, **session})
                assert second.status_code == 409
                await server.list_changed("tools")
                note = json.loads((await anext(sse_events(standalone)))["data"])
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


async def test_a_2025_03_26_batch_is_answered_with_an_array() -> None:
    async with client_of(tools_server(quick=_quick)) as (client, url):
        session = await _session(client, url, "2025-03-26")
        batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in (2, 3)]
        reply = await client.post(url, json=batch, headers={**SSE, **session})
        assert sorted(a["id"] for a in reply.json()) == [2, 3]
        notes = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
        assert (await client.post(url, json=notes, headers={**SSE, **session})).status_code == 202
        newer = await _session(client, url)
        refused = await client.post(url, json=batch, headers={**SSE, **newer})
        assert refused.status_code == 400


# -- HTTP+SSE (2024-11-05) --------------------------------------------------------------------------


async def test_the_http_sse_transport_answers_on_its_one_stream() -> None:
    async with serving(StreamableHTTPApp(tools_server(quick=_quick))) as base, httpx.AsyncClient(timeout=5) as client:
        with trio.fail_after(5):
            async with client.stream("GET", f"{base}/sse", headers={"Accept": "text/event-stream"}) as stream:
                feed = sse_events(stream)
                endpoint = await anext(feed)
                assert endpoint["event"] == "endpoint"
                assert endpoint["data"].startswith("/messages?session_id=")
                posted = await client.post(
                    f"{base}{endpoint['data']}",
                    json={**INIT, "params": {**INIT["params"], "protocolVersion": "2024-11-05"}},
                )  # type: ignore[dict-item]
                assert (posted.status_code, posted.text) == (202, "Accepted")
                answer = json.loads((await anext(feed))["data"])
                assert answer["result"]["protocolVersion"] == "2024-11-05"
        unknown = await client.post(f"{base}/messages?session_id=nope", json=INIT)
        assert unknown.status_code == 404


# -- the HTTP surface --------------------------------------------------------------------------------


async def test_host_and_origin_are_checked_unless_the_embedder_does_it() -> None:
    async with client_of(tools_server()) as (client, url):
        foreign = await client.post(url, json=INIT, headers={"Host": "evil.example"})
        assert (foreign.status_code, foreign.json()["error"]["message"]) == (
            403,
            "Forbidden: Host 'evil.example' is not allowed",
        )
        origin = await client.post(url, json=INIT, headers={"Origin": "http://evil.example"})
        assert origin.status_code == 403
        assert (await client.post(url, json=INIT, headers={"Origin": "http://localhost:3000"})).status_code == 200
    async with client_of(tools_server(), allowed_hosts=None) as (client, url):
        assert (await client.post(url, json=INIT, headers={"Host": "evil.example"})).status_code == 200


async def test_paths_verbs_and_body_limits() -> None:
    async with client_of(tools_server(), max_body_bytes=1024) as (client, url):
        assert (await client.get(url.replace("/mcp", "/other"))).status_code == 404
        assert (await client.put(url)).headers["allow"] == "GET, POST, DELETE"
        big = await client.post(url, content=b"x" * 2048, headers={"Content-Type": "application/json"})
        assert (big.status_code, big.content) == (413, b"")


async def test_embedded_under_a_mount_point_with_run_in_the_embedders_nursery() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    server = tools_server(quick=_quick)
    async with trio.open_nursery() as nursery:
        mcp = await nursery.start(StreamableHTTPApp(server, mcp_path=None, sse_path=None, messages_path=None).run)
        outer = Starlette(routes=[Mount("/gateway", app=mcp)])
        async with serving(outer) as base, httpx.AsyncClient(timeout=5) as client:
            reply = await client.post(f"{base}/gateway/", json=INIT, headers=SSE)
            assert reply.status_code == 200
            assert mcp.sessions.keys() == {reply.headers["mcp-session-id"]}
        nursery.cancel_scope.cancel()
    assert mcp.sessions == {}
