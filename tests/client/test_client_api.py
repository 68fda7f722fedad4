"""The typed client surface against a real server process, in both eras: output schema checks,
completion, logging levels, resource subscriptions, tool errors and the notification buffer.

Each test starts ``fixtures/demo_recorded.py`` (the bundled demo server, recording what it receives)
with the era forced, and asserts the exact outcome through the public client and on the wire.
"""

from __future__ import annotations

import logging
import sys
from contextlib import aclosing

import pytest
import trio
from _demo import ERAS, QUIET_ENV, WRONG_STRUCTURED, next_of, open_demo, requests, take, without_meta
from _faulty import Record

import mcpwire
from mcpwire import (
    MCPWireError,
    OutputSchemaError,
    RemoteProtocolError,
    RPCError,
    StdioServer,
    ToolError,
)
from mcpwire.client import ServerNotification
from mcpwire.protocol.types import Completion

HELLO = "demo://static/hello"
BLOB = "demo://static/blob"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
NOTIFY_LOG = "[demo] the notify tool was called"

# -- TL-11: structuredContent against the outputSchema ----------------------------------------------


def wrong_structured() -> StdioServer:
    return StdioServer(command=sys.executable, args=("-u", str(WRONG_STRUCTURED)), name="wrong", env=QUIET_ENV)


@pytest.mark.parametrize("era", ERAS)
async def test_structured_content_breaking_the_output_schema_raises(era: str) -> None:
    """TL-11: ``add`` declares ``{"sum": number}`` and returns ``{"sum": "a number, honestly"}``.
    Once ``list_tools`` has made the schema known, ``call_tool`` raises OutputSchemaError naming
    the tool, the server and the failing path; before that, or with ``validate_output=False``, the
    result is returned as it came. Other calls carry on."""
    bad = {"sum": "a number, honestly"}
    with trio.fail_after(20):
        async with mcpwire.open_client(wrong_structured(), era=era, era_cache=False) as client:
            unknown_yet = await client.call_tool("add", {"a": 1, "b": 2})
            tools = {tool.name: tool for tool in await client.list_tools()}
            assert tools["add"].output_schema == {
                "type": "object",
                "properties": {"sum": {"type": "number"}},
                "required": ["sum"],
            }
            with pytest.raises(OutputSchemaError) as info:
                await client.call_tool("add", {"a": 1, "b": 2})
            assert (await client.call_tool("echo", {"text": "still here"})).text() == "still here"
        async with mcpwire.open_client(
            wrong_structured(), era=era, era_cache=False, validate_output=False
        ) as unchecked:
            await unchecked.list_tools()
            not_validated = await unchecked.call_tool("add", {"a": 1, "b": 2})
    assert str(info.value) == (
        "tool 'add' of server 'wrong' returned structuredContent that breaks its outputSchema at sum: "
        "'a number, honestly' is not of type 'number'"
    )
    assert isinstance(info.value, RemoteProtocolError)
    assert unknown_yet.structured_content == bad
    assert not_validated.structured_content == bad


# -- completion/complete ---------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_complete_for_a_prompt_and_a_resource_template(era: str, record: Record) -> None:
    """``complete()`` sends ``completion/complete`` with the ref, the argument and the context,
    and returns the server's Completion; an unknown prompt is the server's -32602 as RPCError."""
    with trio.fail_after(10):
        async with open_demo(record, era=era) as client:
            names = await client.complete({"type": "ref/prompt", "name": "greet"}, "name", "a")
            items = await client.complete(
                {"type": "ref/resource", "uri": "demo://items/{id}"}, "id", "", context={"kind": "all"}
            )
            with pytest.raises(RPCError) as info:
                await client.complete({"type": "ref/prompt", "name": "nope"}, "name", "")
    assert names == Completion(values=["alice"], total=1, has_more=False)
    assert items == Completion(values=["1", "2", "3"], total=3, has_more=False)
    assert (info.value.code, info.value.message) == (-32602, "Invalid params: unknown prompt 'nope'")
    assert info.value.method == "completion/complete"
    sent_params = [without_meta(m["params"]) for m in requests(record, "completion/complete")]
    assert sent_params == [
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "a"}},
        {
            "ref": {"type": "ref/resource", "uri": "demo://items/{id}"},
            "argument": {"name": "id", "value": ""},
            "context": {"arguments": {"kind": "all"}},
        },
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "name", "value": ""}},
    ]


# -- UT-L01..UT-L03: log levels ----------------------------------------------------------------------


def server_log(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "mcpwire.server.demo"]


async def test_set_logging_level_in_the_legacy_era(record: Record, caplog: pytest.LogCaptureFixture) -> None:
    """UT-L01, UT-L02: ``set_logging_level`` sends ``logging/setLevel``; at "error" the server's
    info message is not sent, at "debug" it is, and it reaches the ``mcpwire.server.<name>`` logger.
    The list_changed notification of the same tool comes either way."""
    caplog.set_level(logging.DEBUG, logger="mcpwire.server.demo")
    with trio.fail_after(10):
        async with open_demo(record, era="legacy") as client:
            await client.set_logging_level("error")
            await client.call_tool("notify", {})
            await client.set_logging_level("debug")
            await client.call_tool("notify", {})
            notes = await take(client, 3)
            stats = client.statistics()
    assert [m["params"] for m in requests(record, "logging/setLevel")] == [{"level": "error"}, {"level": "debug"}]
    assert [n.method for n in notes] == [
        "notifications/tools/list_changed",
        "notifications/message",
        "notifications/tools/list_changed",
    ]
    assert notes[1].params == {"level": "info", "logger": "demo", "data": "the notify tool was called"}
    assert stats.notifications_received == 3
    assert server_log(caplog) == [(logging.INFO, NOTIFY_LOG)]


async def test_set_logging_level_in_the_modern_era(record: Record, caplog: pytest.LogCaptureFixture) -> None:
    """UT-L03: in 2026-07-28 the level travels in each later request's ``_meta``
    (``io.modelcontextprotocol/logLevel``), never as ``logging/setLevel``; before any level is set
    the key is absent, so the server logs nothing for the request."""
    caplog.set_level(logging.DEBUG, logger="mcpwire.server.demo")
    with trio.fail_after(10):
        async with open_demo(record, era="modern") as client:
            await client.call_tool("notify", {})
            await client.set_logging_level("warning")
            await client.call_tool("notify", {})
            await client.set_logging_level("info")
            await client.call_tool("notify", {})
            notes = await take(client, 1)
            stats = client.statistics()
    calls = requests(record, "tools/call")
    assert [call["params"]["_meta"].get(LOG_LEVEL) for call in calls] == [None, "warning", "info"]
    assert LOG_LEVEL not in calls[0]["params"]["_meta"]
    assert requests(record, "logging/setLevel") == []
    assert [(n.method, n.params) for n in notes] == [
        ("notifications/message", {"level": "info", "logger": "demo", "data": "the notify tool was called"})
    ]
    assert stats.notifications_received == 1
    assert server_log(caplog) == [(logging.INFO, NOTIFY_LOG)]


@pytest.mark.parametrize("era", ERAS)
async def test_an_unknown_log_level_is_refused_before_sending(era: str, record: Record) -> None:
    with trio.fail_after(10):
        async with open_demo(record, era=era) as client:
            with pytest.raises(
                ValueError,
                match=r"^unknown log level 'loud'; one of debug, info, notice, warning, error, critical, alert, "
                r"emergency$",
            ):
                await client.set_logging_level("loud")
    assert requests(record, "logging/setLevel") == []


# -- UT-S01..UT-S09: resource subscriptions ------------------------------------------------------------


async def test_legacy_subscribe_subscribes_delivers_and_unsubscribes(record: Record) -> None:
    """UT-S09: entering ``subscribe`` sends ``resources/subscribe`` per URI; the server's
    ``notifications/resources/updated`` for it reaches the subscription (not one for another URI);
    leaving sends ``resources/unsubscribe``, after which the server sends nothing more."""
    with trio.fail_after(10):
        async with open_demo(record, era="legacy") as client:
            async with client.subscribe([HELLO]) as sub:
                assert sub.id is None
                assert sub.acknowledged == {"resourceSubscriptions": [HELLO]}
                async with aclosing(sub.__aiter__()) as updates:
                    await client.call_tool("touch", {"uri": BLOB})
                    await client.call_tool("touch", {"uri": HELLO})
                    update = await next_of(updates)
            during = client.statistics().notifications_received
            await client.call_tool("touch", {"uri": HELLO})
            after = client.statistics().notifications_received
    assert update == ServerNotification("notifications/resources/updated", {"uri": HELLO}, None)
    assert (during, after) == (1, 1)
    assert [(m.get("method"), (m.get("params") or {}).get("uri")) for m in record.messages()][2:] == [
        ("resources/subscribe", HELLO),
        ("tools/call", None),
        ("tools/call", None),
        ("resources/unsubscribe", HELLO),
        ("tools/call", None),
    ]


async def test_modern_subscribe_listens_demultiplexes_and_cancels(record: Record) -> None:
    """UT-S01, UT-S02, UT-S04, UT-S06: ``subscribe`` sends ``subscriptions/listen`` with the filter
    and returns once acknowledged; updates and list changes carrying its subscription id reach it;
    leaving sends ``notifications/cancelled`` for the listen request, and the server stops."""
    with trio.fail_after(10):
        async with open_demo(record, era="modern") as client:
            async with client.subscribe([HELLO], tools_list_changed=True) as sub:
                assert sub.acknowledged == {"toolsListChanged": True, "resourceSubscriptions": [HELLO]}
                async with aclosing(sub.__aiter__()) as updates:
                    await client.call_tool("touch", {"uri": HELLO})
                    update = await next_of(updates)
                    await client.call_tool("notify", {})
                    changed = await next_of(updates)
                listen_id = sub.id
            received = client.statistics().notifications_received
            await client.call_tool("touch", {"uri": HELLO})
            assert client.statistics().notifications_received == received
    (listen,) = requests(record, "subscriptions/listen")
    assert listen["id"] == listen_id
    assert without_meta(listen["params"]) == {
        "notifications": {"toolsListChanged": True, "resourceSubscriptions": [HELLO]}
    }
    assert update == ServerNotification(
        "notifications/resources/updated", {"uri": HELLO, "_meta": {SUBSCRIPTION_ID: listen_id}}, listen_id
    )
    assert changed == ServerNotification(
        "notifications/tools/list_changed", {"_meta": {SUBSCRIPTION_ID: listen_id}}, listen_id
    )
    assert requests(record, "notifications/cancelled") == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": listen_id, "reason": "cancelled by the client"},
        }
    ]


# -- ToolResult.raise_for_error ----------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_tool_errors_are_values_until_raise_for_error(era: str) -> None:
    """An ``isError`` result is returned, not raised; ``raise_for_error()`` raises ToolError with
    the tool's text (or a fallback), the tool and the server; on success it returns the result."""
    with trio.fail_after(10):
        async with open_demo(None, era=era) as client:
            failed = await client.call_tool("fail", {"message": "disk full"})
            silent = await client.call_tool("fail", {"message": ""})
            fine = await client.call_tool("echo", {"text": "ok"})
    assert (failed.is_error, failed.text()) == (True, "disk full")
    with pytest.raises(ToolError, match=r"^tool 'fail' failed: disk full$") as info:
        failed.raise_for_error()
    assert (info.value.tool, info.value.server) == ("fail", "demo")
    assert isinstance(info.value, MCPWireError)
    with pytest.raises(ToolError, match=r"^tool 'fail' failed: the tool reported an error without text$"):
        silent.raise_for_error()
    assert fine.raise_for_error() is fine


# -- the bounded notification buffer -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("era", "per_call", "methods"),
    [
        pytest.param("legacy", 2, ["notifications/message", "notifications/tools/list_changed"], id="legacy"),
        pytest.param("modern", 1, ["notifications/message", "notifications/message"], id="modern"),
    ],
)
async def test_a_full_notification_buffer_drops_and_counts(era: str, per_call: int, methods: list[str]) -> None:
    """STYLE ("Notifications go to a bounded, counted channel"): with ``notification_buffer=2`` and
    nobody reading, three ``notify`` calls keep the two oldest notifications and count the rest in
    ``notifications_dropped``; the calls themselves are not held up. Reading makes room again."""
    with trio.fail_after(10):
        async with open_demo(None, era=era, notification_buffer=2) as client:
            await client.set_logging_level("info")
            for _ in range(3):
                await client.call_tool("notify", {})
            full = client.statistics()
            kept = await take(client, 2)
            await client.call_tool("notify", {})
            (again,) = await take(client, 1)
            later = client.statistics()
    assert (full.notifications_received, full.notifications_dropped) == (3 * per_call, 3 * per_call - 2)
    assert [n.method for n in kept] == methods
    assert again.method == "notifications/message"
    assert (later.notifications_received, later.notifications_dropped) == (4 * per_call, 3 * per_call - 2)
