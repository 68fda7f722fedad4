"""One connection of mcpwire.server, in-process: admission by era, the legacy lifecycle, dispatch,
errors, cancellation, server-to-client requests, progress and logging, batches, listen streams
and the routing of list changes."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from _server_support import MODERN, Peer, Recorder, connected, meta, text, tools_server

from mcpwire.server import ClientRequestError, InputRequired, RequestContext, RequestError, Server

SUB = "io.modelcontextprotocol/subscriptionId"
INFO = {"io.modelcontextprotocol/serverInfo": {"name": "test-server", "version": "1.0.0"}}


async def _echo(ctx: RequestContext) -> Any:
    return text(str(ctx.params.get("arguments")))


# -- the legacy lifecycle --------------------------------------------------------------------------


@pytest.mark.parametrize(("requested", "negotiated"), [("2024-11-05", "2024-11-05"), ("2099-01-01", "2025-11-25")])
async def test_initialize_negotiates_and_declares_the_routes_capabilities(requested: str, negotiated: str) -> None:
    async with connected(tools_server(echo=_echo)) as peer:
        result = await peer.initialize(requested)
        assert result == {
            "protocolVersion": negotiated,
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "serverInfo": {"name": "test-server", "version": "1.0.0"},
            "instructions": "be nice",
        }
        assert peer.connection.revision == negotiated
        again = await peer.request("initialize", {"protocolVersion": negotiated, "capabilities": {}, "clientInfo": {}})
        assert again["error"] == {"code": -32600, "message": "Invalid Request: already initialized"}


async def test_requests_before_initialize_are_refused_but_ping_is_served() -> None:
    async with connected(tools_server(echo=_echo)) as peer:
        assert await peer.request("ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
        refused = await peer.request("tools/list")
        assert refused["error"] == {"code": -32600, "message": "not initialized: send 'initialize' first"}
        unknown = await peer.request("nope/nothing")
        assert unknown["error"] == {"code": -32601, "message": "Method not found: nope/nothing"}
        bad = await peer.request("initialize", {"protocolVersion": 7})
        assert bad["error"] == {"code": -32602, "message": "Invalid params: 'protocolVersion' must be a string"}


async def test_legacy_results_are_plain_and_modern_ones_decorated() -> None:
    async with connected(tools_server(echo=_echo)) as peer:
        await peer.initialize()
        legacy = await peer.result("tools/call", {"name": "echo", "arguments": {"a": 1}})
        assert legacy == text("{'a': 1}")
        modern = await peer.result("tools/call", {"name": "echo", "arguments": {"a": 2}, "_meta": meta()})
        assert modern == {"resultType": "complete", **text("{'a': 2}"), "_meta": INFO}


# -- 2026-07-28 admission --------------------------------------------------------------------------


async def test_modern_requests_are_admitted_by_their_meta() -> None:
    async with connected(tools_server(echo=_echo)) as peer:
        missing = await peer.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})
        assert missing["error"]["code"] == -32602
        future = await peer.request(
            "tools/list", {"_meta": meta() | {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
        )
        assert future["error"] == {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": [MODERN], "requested": "2099-01-01"},
        }
        discover = await peer.result("server/discover", {"_meta": meta()})
        assert discover == {
            "resultType": "complete",
            "supportedVersions": [MODERN],
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "instructions": "be nice",
            "ttlMs": 60000,
            "cacheScope": "public",
            "_meta": INFO,
        }


async def test_the_era_mode_limits_the_lifecycles() -> None:
    legacy_only = tools_server(echo=_echo)
    legacy_only.era = "legacy"
    async with connected(legacy_only) as peer:
        assert (await peer.request("server/discover", {"_meta": meta()}))["error"]["code"] == -32601
    async with connected(tools_server(echo=_echo), era="modern") as peer:
        refused = await peer.request(
            "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}
        )
        assert refused["error"]["code"] == -32601
        assert refused["error"]["data"] == {"supported": [MODERN]}
        assert "speaks only 2026-07-28" in refused["error"]["message"]
        # modern-only: a request without _meta is modern (and malformed), not legacy
        assert (await peer.request("tools/list"))["error"]["code"] == -32602
    with pytest.raises(ValueError, match=r"^era must be 'both', 'legacy' or 'modern', not 'new'$"):
        Server("x", era="new")  # type: ignore[arg-type]


# -- handler outcomes ---------------------------------------------------------------------------------


async def test_handler_errors_input_required_and_crashes(caplog: pytest.LogCaptureFixture) -> None:
    async def refuse(ctx: RequestContext) -> Any:
        raise RequestError(-32602, "Invalid params: no", {"why": "because"})

    async def asks(ctx: RequestContext) -> Any:
        raise InputRequired({"k": {"method": "roots/list"}}, "state-1")

    async def crashes(ctx: RequestContext) -> Any:
        raise ZeroDivisionError("boom")

    async with connected(tools_server(refuse=refuse, asks=asks, crashes=crashes)) as peer:
        refused = await peer.request("tools/call", {"name": "refuse", "_meta": meta()})
        assert refused["error"] == {"code": -32602, "message": "Invalid params: no", "data": {"why": "because"}}
        asked = await peer.result("tools/call", {"name": "asks", "_meta": meta()})
        assert asked == {
            "resultType": "input_required",
            "inputRequests": {"k": {"method": "roots/list"}},
            "requestState": "state-1",
            "_meta": INFO,
        }
        with caplog.at_level(logging.ERROR, logger="mcpwire.server"):
            crashed = await peer.request("tools/call", {"name": "crashes", "_meta": meta()})
        assert crashed["error"] == {"code": -32603, "message": "Internal error"}
        assert "tools/call (id 3) failed" in caplog.text
        assert "ZeroDivisionError: boom" in caplog.text


async def test_invalid_messages_are_answered_and_responses_to_nothing_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with connected(tools_server()) as peer:
        assert await peer.send([1, 2]) is True  # a batch outside 2025-03-26
        assert await peer.send({"jsonrpc": "1.0", "id": 5, "method": "ping"}) is True
        with caplog.at_level(logging.WARNING, logger="mcpwire.server"):
            assert await peer.send({"jsonrpc": "2.0", "id": "srv-9", "result": {}}) is False
        assert await peer.send({"jsonrpc": "2.0", "method": "notifications/whatever"}) is False
    assert peer.outlet.messages == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "Invalid Request: JSON-RPC batches are only supported in protocol revision 2025-03-26",
            },
        },
        {"jsonrpc": "2.0", "id": 5, "error": {"code": -32600, "message": "Invalid Request: 'jsonrpc' must be \"2.0\""}},
    ]
    assert "dropping a response to unknown request id 'srv-9'" in caplog.text


# -- cancellation ---------------------------------------------------------------------------------


async def test_notifications_cancelled_stops_the_handler_and_nothing_is_answered() -> None:
    started, stopped = trio.Event(), trio.Event()

    async def hang(ctx: RequestContext) -> Any:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            stopped.set()

    async with connected(tools_server(hang=hang)) as peer:
        await peer.initialize()
        await peer.send({"jsonrpc": "2.0", "id": "h", "method": "tools/call", "params": {"name": "hang"}})
        await started.wait()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "h"}})
        await stopped.wait()
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "unknown"}})
        assert await peer.request("ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert peer.connection.inflight == 0
    assert [m for m in peer.outlet.messages if m.get("id") == "h"] == []


async def test_close_cancels_requests_in_flight_unanswered() -> None:
    started = trio.Event()

    async def hang(ctx: RequestContext) -> Any:
        started.set()
        await trio.sleep_forever()

    async with connected(tools_server(hang=hang)) as peer:
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang", "_meta": meta()}}
        )
        await started.wait()
        await peer.connection.close()
        await peer.connection.wait_idle()
        assert await peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"}) is False  # closed: ignored
    assert peer.outlet.messages == []


# -- server-to-client requests (legacy) -------------------------------------------------------------


async def test_a_server_request_gets_the_clients_result_or_its_error() -> None:
    seen: list[Any] = []

    async def roots(ctx: RequestContext) -> Any:
        result = await ctx.request("roots/list")
        try:
            await ctx.request("sampling/createMessage", {"messages": []})
        except ClientRequestError as exc:
            seen.append((str(exc), exc.method, exc.error))
        return text(str(result))

    async with connected(tools_server(roots=roots)) as peer:
        await peer.initialize(caps={"roots": {}})
        await peer.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "roots"}})
        ask = await peer.outlet.wait_for(lambda m: m.get("method") == "roots/list")
        assert ask == {"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}
        await peer.send({"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}})
        sample = await peer.outlet.wait_for(lambda m: m.get("method") == "sampling/createMessage")
        await peer.send({"jsonrpc": "2.0", "id": sample["id"], "error": {"code": -1, "message": "user said no"}})
        assert (await peer.outlet.answer(7))["result"] == text("{'roots': []}")
    assert seen == [
        (
            "sampling/createMessage failed: user said no",
            "sampling/createMessage",
            {"code": -1, "message": "user said no"},
        )
    ]


async def test_a_server_request_times_out_and_tells_the_client(autojump_clock: trio.testing.MockClock) -> None:
    async def ask(ctx: RequestContext) -> Any:
        try:
            await ctx.request("elicitation/create", {"message": "?"}, timeout=3)
        except ClientRequestError as exc:
            return text(str(exc))
        raise AssertionError("answered")

    async with connected(tools_server(ask=ask)) as peer:
        await peer.initialize()
        assert (await peer.result("tools/call", {"name": "ask"})) == text("no answer to elicitation/create within 3 s")
    assert {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "srv-1", "reason": "no answer in time"},
    } in peer.outlet.messages


async def test_cancelling_a_request_that_waits_on_the_client_cancels_the_server_request() -> None:
    async def ask(ctx: RequestContext) -> Any:
        await ctx.request("elicitation/create", {"message": "?"})
        raise AssertionError("answered")

    async with connected(tools_server(ask=ask)) as peer:
        await peer.initialize()
        await peer.send({"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "ask"}})
        await peer.outlet.wait_for(lambda m: m.get("method") == "elicitation/create")
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c"}})
        note = await peer.outlet.wait_for(lambda m: m.get("method") == "notifications/cancelled")
        assert note["params"] == {"requestId": "srv-1", "reason": "the request was cancelled"}


async def test_modern_requests_cannot_send_server_requests() -> None:
    async def ask(ctx: RequestContext) -> Any:
        await ctx.request("roots/list")
        return text("no")

    async with connected(tools_server(ask=ask)) as peer:
        answer = await peer.request("tools/call", {"name": "ask", "_meta": meta()})
        assert answer["error"] == {"code": -32603, "message": "Internal error"}


# -- progress and logging ------------------------------------------------------------------------


async def test_progress_goes_out_only_with_a_token_and_without_a_message_in_2024_11_05() -> None:
    async def work(ctx: RequestContext) -> Any:
        await ctx.progress(1, 2, "half")
        await ctx.progress(float("nan"))  # never sent
        return text("done")

    for version, params in (("2025-03-26", {"message": "half"}), ("2024-11-05", {})):
        async with connected(tools_server(work=work)) as peer:
            await peer.initialize(version)
            await peer.result("tools/call", {"name": "work", "_meta": {"progressToken": "p"}})
            await peer.result("tools/call", {"name": "work"})
        progress = [m for m in peer.outlet.messages if m.get("method") == "notifications/progress"]
        assert progress == [
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": "p", "progress": 1, "total": 2, **params},
            }
        ]


async def test_log_messages_follow_the_session_level_or_the_requests_meta() -> None:
    async def chatty(ctx: RequestContext) -> Any:
        for level in ("debug", "info", "error"):
            await ctx.log(level, level, logger="t")
        return text("ok")

    def levels(peer: Peer) -> list[str]:
        return [m["params"]["data"] for m in peer.outlet.messages if m.get("method") == "notifications/message"]

    async with connected(tools_server(chatty=chatty)) as peer:
        await peer.initialize()
        await peer.result("tools/call", {"name": "chatty"})
        assert levels(peer) == ["info", "error"]  # "info" until logging/setLevel
        assert (await peer.request("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602
        await peer.result("logging/setLevel", {"level": "error"})
        await peer.result("tools/call", {"name": "chatty"})
        assert levels(peer) == ["info", "error", "error"]
    async with connected(tools_server(chatty=chatty)) as peer:
        # 2026-07-28: "MUST NOT emit notifications/message for a request that does not include this field"
        await peer.result("tools/call", {"name": "chatty", "_meta": meta()})
        await peer.result("tools/call", {"name": "chatty", "_meta": meta(logLevel="debug")})
        assert levels(peer) == ["debug", "info", "error"]


# -- 2025-03-26 batches ------------------------------------------------------------------------------


async def test_a_batch_is_answered_with_one_array_once_every_request_is() -> None:
    release = trio.Event()

    async def late(ctx: RequestContext) -> Any:
        await release.wait()
        return text("late")

    async with connected(tools_server(late=late, echo=_echo)) as peer:
        await peer.initialize("2025-03-26")
        batch = [
            {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "late"}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "b", "method": "ping"},
            {"jsonrpc": "2.0", "id": "c", "method": 5},
        ]
        assert await peer.send(batch) is True
        await trio.testing.wait_all_tasks_blocked()
        assert not any(isinstance(m, list) for m in peer.outlet.messages)
        release.set()
        array = await peer.outlet.wait_for(lambda m: isinstance(m, list))
        assert sorted(a["id"] for a in array) == ["a", "b", "c"]
        assert await peer.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}]) is False
        assert await peer.send([]) is True
        assert peer.outlet.messages[-1]["error"] == {"code": -32600, "message": "Invalid Request: empty batch"}


# -- subscriptions/listen and list changes ---------------------------------------------------------


async def test_a_listen_is_acknowledged_first_then_gets_what_it_asked_for() -> None:
    server = tools_server(echo=_echo)
    async with connected(server) as peer:
        listen = Recorder()
        wanted = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["r://1"]}
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": "L",
                "method": "subscriptions/listen",
                "params": {"notifications": wanted, "_meta": meta()},
            },
            listen,
        )
        ack = await listen.wait_for(lambda m: True)
        # prompts are not served: not granted
        assert ack == {
            "jsonrpc": "2.0",
            "method": "notifications/subscriptions/acknowledged",
            "params": {
                "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["r://1"]},
                "_meta": {SUB: "L"},
            },
        }
        await server.list_changed("tools")
        await server.list_changed("prompts")
        await server.resource_updated("r://1")
        await server.resource_updated("r://2")
        assert listen.messages[1:] == [
            {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {"_meta": {SUB: "L"}}},
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"uri": "r://1", "_meta": {SUB: "L"}},
            },
        ]
        again = Recorder()
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": "L",
                "method": "subscriptions/listen",
                "params": {"notifications": {}, "_meta": meta()},
            },
            again,
        )
        assert (await again.answer("L"))["error"]["message"] == "Invalid Request: subscription 'L' is already open"
        await peer.connection.close()
        done = await listen.answer("L")
        assert done["result"] == {"resultType": "complete", "_meta": {SUB: "L", **INFO}}


async def test_a_cancelled_listen_just_stops() -> None:
    server = tools_server()
    async with connected(server) as peer:
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "subscriptions/listen",
                "params": {"notifications": {"toolsListChanged": True}, "_meta": meta()},
            }
        )
        await peer.outlet.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        assert len(server.listens) == 1
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        await peer.connection.wait_idle()
        assert server.listens == set()
        bad = await peer.request("subscriptions/listen", {"notifications": [], "_meta": meta()}, rid=2)
        assert bad["error"] == {"code": -32602, "message": "Invalid params: 'notifications' must be an object"}
    assert [m for m in peer.outlet.messages if m.get("id") == 1] == []


async def test_legacy_list_changes_reach_every_session_on_its_standalone_stream_or_the_origins_stream() -> None:
    server = tools_server(echo=_echo)
    async with connected(server) as first, connected(server) as second:
        await first.initialize()
        await second.initialize()
        second.connection.standalone = None  # an HTTP session without a GET stream
        origin = Recorder()

        async def changed(ctx: RequestContext) -> Any:
            await server.list_changed("tools", origin=ctx)
            return text("ok")

        server.route("tools/call", changed)
        await second.send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "x"}}, origin)
        await origin.answer(9)
        note = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
        assert note in first.outlet.messages  # the other session: its standalone stream
        assert origin.messages[0] == note  # the origin's session has none: the request's own stream
        await server.list_changed("tools")  # from outside any request: second has nowhere to get it
        assert origin.messages.count(note) == 1
        assert first.outlet.messages.count(note) == 2


async def test_legacy_subscriptions_pick_resource_updates() -> None:
    server = tools_server()
    async with connected(server) as peer:
        await peer.initialize()
        assert (await peer.request("resources/subscribe", {"uri": 5}))["error"]["code"] == -32602
        await peer.result("resources/subscribe", {"uri": "r://a"})
        await server.resource_updated("r://a")
        await server.resource_updated("r://b")
        await peer.result("resources/unsubscribe", {"uri": "r://a"})
        await server.resource_updated("r://a")
    updates = [m for m in peer.outlet.messages if m.get("method") == "notifications/resources/updated"]
    assert updates == [{"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "r://a"}}]
