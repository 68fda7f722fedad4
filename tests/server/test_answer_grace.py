"""StreamableHTTPApp's ``answer_grace_s`` (what the gateway uses): a legacy request whose answer is
ready first is one JSON body; one that streams, or takes longer, is SSE that starts with its priming
event; a dropped connection stays resumable. And 2026-07-28 requests served in the POST's own task:
an answer alone is JSON, messages before it make SSE, a closed response cancels the request."""

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
from mcpwire.server.http import serve_http
from mcpwire.server.streamable_app import prefers_sse

BOTH = ACCEPT_BOTH
#: the legacy tests run with requests served in the session's tasks and in the POST's own task
HOLD = pytest.mark.parametrize("hold", [False, True], ids=["spawned", "held"])


@asynccontextmanager
async def served(
    server: Server, grace: float | None, *, hold: bool = False
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    app = StreamableHTTPApp(server, answer_grace_s=grace, hold_requests=hold)
    async with trio.open_nursery() as nursery:
        [base] = await nursery.start(partial(serve_http, app, port=0))
        try:
            async with httpx.AsyncClient(timeout=5) as client:
                yield client, f"{base}/mcp"
        finally:
            nursery.cancel_scope.cancel()


async def session_of(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    reply = await client.post(url, json=INIT, headers=BOTH)
    return {"Mcp-Session-Id": reply.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"}


def call(name: str, rid: int = 2, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, **params}}


async def _quick(ctx: RequestContext) -> Any:
    return text("quick")


async def _progress(ctx: RequestContext) -> Any:
    await ctx.progress(1, 1, "half")
    return text("done")


@HOLD
async def test_an_answer_ready_within_the_grace_is_one_json_body(hold: bool) -> None:
    async with served(tools_server(quick=_quick), grace=5.0, hold=hold) as (client, url):
        session = await session_of(client, url)
        reply = await client.post(url, json=call("quick"), headers={**BOTH, **session})
        assert (reply.status_code, reply.headers["content-type"]) == (200, "application/json")
        assert reply.json() == {"jsonrpc": "2.0", "id": 2, "result": text("quick")}
        # only a client that takes JSON gets it: an SSE-only client still gets its stream
        sse_only = {"Accept": "text/event-stream", **session}
        async with client.stream("POST", url, json=call("quick", 3), headers=sse_only) as streamed:
            got = [e async for e in sse_events(streamed)]
        assert got[0] == {"id": "2.0", "retry": "500", "data": ""}
        assert json.loads(got[1]["data"])["result"] == text("quick")


@HOLD
async def test_a_client_that_lists_sse_first_gets_its_stream_at_once(hold: bool) -> None:
    """The client's preference in ``Accept`` decides when it states one (a higher q, or the same q
    and listed first): the conformance runner's SSE polling requests list ``text/event-stream``
    first; the SDKs and mcpwire list ``application/json`` first and get one JSON body."""
    async with served(tools_server(quick=_quick), grace=5.0, hold=hold) as (client, url):
        session = await session_of(client, url)
        streaming = ("text/event-stream, application/json", "application/json;q=0.5, text/event-stream")
        for rid, accept in enumerate(streaming):
            headers = {"Accept": accept, **session}
            async with client.stream("POST", url, json=call("quick", 10 + rid), headers=headers) as streamed:
                assert streamed.headers["content-type"] == "text/event-stream"
                got = [e async for e in sse_events(streamed)]
            assert got[0]["retry"] == "500" and got[0]["data"] == ""  # primed first
            assert json.loads(got[1]["data"])["result"] == text("quick")
        for rid, accept in enumerate(("application/json, text/event-stream", "*/*", "text/event-stream;q=0.9, */*")):
            reply = await client.post(url, json=call("quick", 20 + rid), headers={"Accept": accept, **session})
            assert reply.headers["content-type"] == "application/json", accept


def test_prefers_sse_reads_weights_then_order() -> None:
    cases = {
        "application/json, text/event-stream": False,
        "text/event-stream, application/json": True,
        "TEXT/EVENT-STREAM , Application/JSON": True,
        "text/event-stream, application/json;q=0.9": True,
        "text/event-stream;q=0.5, application/json": False,
        "application/json;q=0, text/event-stream": True,
        "text/event-stream": True,
        "*/*": False,
        "*/*, text/event-stream": False,
        "text/event-stream, */*": True,
        "application/json;q=bad, text/event-stream": True,
    }
    assert {accept: prefers_sse(accept) for accept in cases} == cases


async def test_without_a_grace_resumable_answers_are_sse_from_the_start() -> None:
    async with served(tools_server(quick=_quick), grace=None) as (client, url):
        session = await session_of(client, url)
        async with client.stream("POST", url, json=call("quick"), headers={**BOTH, **session}) as streamed:
            got = [e async for e in sse_events(streamed)]
        assert [e.get("id") for e in got] == ["1.0", "1.1"]


@HOLD
async def test_messages_before_the_answer_make_sse_that_starts_with_its_priming_event(hold: bool) -> None:
    async with served(tools_server(progress=_progress), grace=5.0, hold=hold) as (client, url):
        session = await session_of(client, url)
        body = call("progress", _meta={"progressToken": 7})
        async with client.stream("POST", url, json=body, headers={**BOTH, **session}) as streamed:
            assert streamed.headers["content-type"] == "text/event-stream"
            got = [e async for e in sse_events(streamed)]
        assert got[0] == {"id": "1.0", "retry": "500", "data": ""}
        assert [json.loads(e["data"]).get("method", "answer") for e in got[1:]] == ["notifications/progress", "answer"]
        assert [e["id"] for e in got[1:]] == ["1.1", "1.2"]


@HOLD
async def test_an_answer_slower_than_the_grace_comes_on_a_primed_stream(hold: bool) -> None:
    primed = trio.Event()

    async def slow(ctx: RequestContext) -> Any:
        await primed.wait()  # answered only once the client has seen the priming event
        return text("slow")

    async with served(tools_server(slow=slow), grace=0.01, hold=hold) as (client, url):
        session = await session_of(client, url)
        with trio.fail_after(5):
            async with client.stream("POST", url, json=call("slow"), headers={**BOTH, **session}) as streamed:
                got: list[dict[str, str]] = []
                async for event in sse_events(streamed):
                    got.append(event)
                    primed.set()
        assert got[0] == {"id": "1.0", "retry": "500", "data": ""}
        assert json.loads(got[1]["data"])["result"] == text("slow")


@HOLD
async def test_graces_end_for_every_waiting_request_among_answered_ones(hold: bool) -> None:
    """One timer ends the graces: quick answers queued ahead of a slow one, or a queue that ran
    empty in between, do not keep a slow request waiting past its own grace."""
    primed = trio.Event()

    async def slow(ctx: RequestContext) -> Any:
        await primed.wait()
        return text("slow")

    async def slow_call(client: httpx.AsyncClient, url: str, headers: dict[str, str], rid: int) -> str:
        nonlocal primed
        primed = trio.Event()
        async with client.stream("POST", url, json=call("slow", rid), headers=headers) as streamed:
            assert streamed.headers["content-type"] == "text/event-stream"
            got: list[dict[str, str]] = []
            async for event in sse_events(streamed):
                got.append(event)
                primed.set()
        assert got[0]["data"] == ""  # the priming event: the grace ended before the answer
        return str(json.loads(got[1]["data"])["result"]["content"][0]["text"])

    async with served(tools_server(quick=_quick, slow=slow), grace=0.05, hold=hold) as (client, url):
        session = await session_of(client, url)
        headers = {**BOTH, **session}
        with trio.fail_after(10):
            for rid in range(10, 13):
                reply = await client.post(url, json=call("quick", rid), headers=headers)
                assert reply.headers["content-type"] == "application/json"
            assert await slow_call(client, url, headers, 20) == "slow"
            await trio.sleep(0.2)  # every grace has ended: the timer waits for the next one
            reply = await client.post(url, json=call("quick", 30), headers=headers)
            assert reply.json()["result"] == text("quick")
            assert await slow_call(client, url, headers, 31) == "slow"


async def test_a_connection_dropped_within_the_grace_is_resumed() -> None:
    resumed = trio.Event()

    async def reconnect(ctx: RequestContext) -> Any:
        ctx.drop_connection()
        await resumed.wait()
        return text("resumed")

    async with served(tools_server(reconnect=reconnect), grace=5.0) as (client, url):
        session = await session_of(client, url)
        with trio.fail_after(5):
            async with client.stream("POST", url, json=call("reconnect"), headers={**BOTH, **session}) as streamed:
                first = [e async for e in sse_events(streamed)]  # the priming event, then the server closes
            assert first == [{"id": "1.0", "retry": "500", "data": ""}]
            resumed.set()
            headers = {**BOTH, **session, "Last-Event-ID": "1.0"}
            async with client.stream("GET", url, headers=headers) as again:
                rest = [json.loads(e["data"]) async for e in sse_events(again) if e["data"]]
        assert rest == [{"jsonrpc": "2.0", "id": 2, "result": text("resumed")}]


async def test_a_held_request_cannot_drop_its_connection(caplog: pytest.LogCaptureFixture) -> None:
    """A request served in its POST's task cannot end its response first: drop_connection is
    refused (logged), and the answer comes on the response as usual."""

    async def reconnect(ctx: RequestContext) -> Any:
        ctx.drop_connection()
        return text("kept")

    async with served(tools_server(reconnect=reconnect), grace=5.0, hold=True) as (client, url):
        session = await session_of(client, url)
        with trio.fail_after(5):
            reply = await client.post(url, json=call("reconnect"), headers={**BOTH, **session})
        assert reply.headers["content-type"] == "application/json"
        assert reply.json()["result"] == text("kept")
    assert any("cannot end first" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def _hanging() -> tuple[Any, trio.Event, trio.Event]:
    started, cancelled = trio.Event(), trio.Event()

    async def hang(ctx: RequestContext) -> Any:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    return hang, started, cancelled


async def test_a_held_request_is_cancelled_by_the_client_and_by_its_session_end() -> None:
    hang, started, cancelled = _hanging()
    async with served(tools_server(hang=hang), grace=0.05, hold=True) as (client, url):
        session = await session_of(client, url)
        headers = {**BOTH, **session}
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:

                async def post() -> None:
                    async with client.stream("POST", url, json=call("hang", 41), headers=headers) as streamed:
                        async for _ in sse_events(streamed):  # primed when the grace ends, then nothing
                            pass

                nursery.start_soon(post)
                await started.wait()
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}
                assert (await client.post(url, json=cancel, headers=headers)).status_code == 202
                await cancelled.wait()
                nursery.cancel_scope.cancel()
        hang, started, cancelled = _hanging()
        async with served(tools_server(hang=hang), grace=5.0, hold=True) as (client2, url2):
            session = await session_of(client2, url2)
            with trio.fail_after(5):
                async with trio.open_nursery() as nursery:

                    async def post2() -> None:
                        reply = await client2.post(url2, json=call("hang", 42), headers={**BOTH, **session})
                        # the session ended: its streams end, with no answer (as a spawned request's)
                        assert reply.headers["content-type"] == "text/event-stream"
                        assert "jsonrpc" not in reply.text

                    nursery.start_soon(post2)
                    await started.wait()
                    assert (await client2.delete(url2, headers=session)).status_code == 200
                    await cancelled.wait()


async def test_a_held_request_outlives_its_client_and_its_answer_is_resumed() -> None:
    """Legacy: a closed connection is not a cancellation. The request served in the POST's task
    goes on once its client has gone, and its answer waits for a resuming GET."""
    started, release, finished = trio.Event(), trio.Event(), trio.Event()

    async def waits(ctx: RequestContext) -> Any:
        started.set()
        await release.wait()
        finished.set()
        return text("after you left")

    async with served(tools_server(waits=waits), grace=5.0, hold=True) as (client, url):
        session = await session_of(client, url)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:

                async def post() -> None:
                    async with httpx.AsyncClient(timeout=5) as own:  # its own connection, closed below
                        await own.post(url, json=call("waits", 43), headers={**BOTH, **session})

                nursery.start_soon(post)
                await started.wait()
                nursery.cancel_scope.cancel()
            release.set()
            await finished.wait()
            headers = {**BOTH, **session, "Last-Event-ID": "1.0"}
            async with client.stream("GET", url, headers=headers) as again:
                rest = [json.loads(e["data"]) async for e in sse_events(again) if e["data"]]
        assert rest == [{"jsonrpc": "2.0", "id": 43, "result": text("after you left")}]


def modern_call(name: str, **meta_extra: Any) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": name, "_meta": meta() | meta_extra}}
    headers = {**BOTH, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return body, headers


@HOLD
async def test_modern_requests_answer_alone_in_json_and_stream_what_comes_before(hold: bool) -> None:
    grace = 0.05 if hold else None
    async with served(tools_server(quick=_quick, progress=_progress), grace=grace, hold=hold) as (client, url):
        body, headers = modern_call("quick")
        reply = await client.post(url, json=body, headers=headers)
        assert (reply.status_code, reply.headers["content-type"]) == (200, "application/json")
        assert reply.json()["result"]["content"] == text("quick")["content"]
        body, headers = modern_call("progress", progressToken=1)
        async with client.stream("POST", url, json=body, headers=headers) as streamed:
            assert streamed.headers["content-type"] == "text/event-stream"
            got = [json.loads(e["data"]) async for e in sse_events(streamed)]
        assert [m.get("method", "answer") for m in got] == ["notifications/progress", "answer"]
        assert got[1]["result"]["content"] == text("done")["content"]


@HOLD
async def test_closing_a_modern_response_cancels_its_request_even_before_it_streams(
    hold: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Held, the watcher starts at the end of the grace, and sees the client gone then. An app
    that stops without a response because its client left is no error of the server's."""
    hang, started, cancelled = _hanging()
    async with served(tools_server(hang=hang), grace=0.05 if hold else None, hold=hold) as (client, url):
        body, headers = modern_call("hang")
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:

                async def post() -> None:
                    try:
                        await client.post(url, json=body, headers=headers)
                    except httpx.HTTPError:
                        pass

                nursery.start_soon(post)
                await started.wait()
                nursery.cancel_scope.cancel()  # the client goes away without reading anything
            await cancelled.wait()
            await trio.sleep(0.1)  # the POST's task ends
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_a_held_modern_request_slower_than_the_grace_is_watched_then_answered_alone() -> None:
    """Past the grace the watcher runs; the answer is still one JSON body, and the watcher is gone
    before the next request on the same connection is read."""
    release = trio.Event()

    async def slow(ctx: RequestContext) -> Any:
        await release.wait()
        return text("slow")

    async with served(tools_server(slow=slow, quick=_quick), grace=0.01, hold=True) as (client, url):
        body, headers = modern_call("slow")
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(partial(trio.sleep, 0.2))
                replies: list[httpx.Response] = []

                async def post() -> None:
                    replies.append(await client.post(url, json=body, headers=headers))

                nursery.start_soon(post)
                await trio.sleep(0.1)  # the grace is over: the watcher reads the connection
                release.set()
            assert replies[0].headers["content-type"] == "application/json"
            assert replies[0].json()["result"]["content"] == text("slow")["content"]
            for _ in range(3):  # the same connection carries the next requests
                body, headers = modern_call("quick")
                reply = await client.post(url, json=body, headers=headers)
                assert reply.json()["result"]["content"] == text("quick")["content"]
