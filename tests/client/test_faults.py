"""Faults of a real server subprocess during a session: stderr floods, death, stubborn exits,
reordered and stray answers, server requests mid-call, late answers, cursor cycles.

Each test starts ``fixtures/faulty_server.py`` with one fault switched on and asserts the exact
outcome through the public client (results, errors, ``statistics()``), bounded by
``trio.fail_after`` so that nothing can hang.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import pytest
import trio
from _faulty import FAULTY, Record, gone_or_zombie, open_faulty, process_gone, wait_until

from mcpwire import RemoteProtocolError, RequestTimeout, ServerGone, StdioServer, open_client
from mcpwire.client import Client
from mcpwire.protocol.lifecycle import SessionState

# Calls get ids from 3 on: 1 is the server/discover probe, 2 is initialize (JR-05).
FIRST_CALL_ID = 3

# -- ST-06, ST-07: stderr ------------------------------------------------------------------------


async def test_8_mib_of_stderr_before_the_answer_does_not_block() -> None:
    """ST-07 ("always drain stderr concurrently (a full stderr pipe blocks the server)"), ST-06
    (stderr is not an error signal): 8 MiB of stderr lines, then the answer, which arrives; the
    ring buffer keeps the last lines and attaches them to a later ServerGone."""
    with trio.fail_after(20):
        async with open_faulty() as client:
            result = await client.call_tool("stderr", {"bytes": 8 * 1024 * 1024, "line": 1024, "tail": "flood done"})
            with pytest.raises(ServerGone) as info:
                await client.call_tool("die", {"code": 7, "stderr": ["fatal: out of cheese"]})
    assert result.text() == "ok"
    error = info.value
    assert error.returncode == 7
    assert len(error.stderr_tail) == 50  # the ring's size
    assert error.stderr_tail[-3:] == ("e" * 1023, "flood done", "fatal: out of cheese")
    assert str(error) == (
        f"server 'faulty' exited with status 7: it closed its output while 'tools/call' (id {FIRST_CALL_ID + 1}) "
        "was pending\nlast stderr lines:\n  " + "\n  ".join([*["e" * 1023] * 8, "flood done", "fatal: out of cheese"])
    )


async def test_an_endless_stderr_line_is_cut_and_bounded() -> None:
    """ST-07 ("Bound memory for both pipes"): 1 MiB of stderr without a newline neither blocks the
    server nor grows a line without bound: the ring holds pieces of at most 8 KiB plus a marker."""
    with trio.fail_after(20):
        async with open_faulty() as client:
            result = await client.call_tool("stderr", {"bytes": 1024 * 1024, "line": 0, "tail": "END"})
            with pytest.raises(ServerGone) as info:
                await client.call_tool("die", {"code": 2, "stderr": ["bye"]})
    assert result.text() == "ok"
    tail = info.value.stderr_tail
    assert tail[-1] == "bye"
    for line in tail[:-2]:
        assert re.fullmatch(r"x{8192}\.\.\. \[\d+ more bytes\]", line), line[-40:]
    assert re.fullmatch(r"x*END|x{8192}\.\.\. \[\d+ more bytes\]", tail[-2]), tail[-2][-40:]


# -- LC-51, LC-54: the server dies mid-call -------------------------------------------------------


async def test_death_mid_call_fails_the_call_at_once() -> None:
    """LC-51, LC-54: the process exits while a call with a 30 s timeout is pending: the call fails
    with ServerGone well before its timeout, carrying the exit status and the last stderr lines;
    later calls fail the same way and the session is CLOSED."""
    lines = ["Traceback (most recent call last):", "RuntimeError: boom"]
    with trio.fail_after(10):
        async with open_faulty() as client:
            start = trio.current_time()
            with pytest.raises(ServerGone) as info:
                await client.call_tool("die", {"code": 3, "stderr": lines}, timeout=30)
            elapsed = trio.current_time() - start
            with pytest.raises(
                ServerGone, match=r"^server 'faulty' exited with status 3: it closed its output\n"
            ) as later:
                await client.call_tool("echo", {"text": "anyone?"})
            assert client.state is SessionState.CLOSED
            assert client.statistics().pending == 0
    assert elapsed < 1.5, f"ServerGone took {elapsed:.2f}s"
    error = info.value
    assert str(error) == (
        f"server 'faulty' exited with status 3: it closed its output while 'tools/call' (id {FIRST_CALL_ID}) was "
        "pending\nlast stderr lines:\n  Traceback (most recent call last):\n  RuntimeError: boom"
    )
    assert (error.returncode, error.stderr_tail, error.server) == (3, tuple(lines), "faulty")
    assert (later.value.returncode, later.value.stderr_tail) == (3, tuple(lines))


async def test_death_with_several_calls_pending_fails_them_all_at_once(
    record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    """LC-51, LC-54, ST-06: five calls that the server never answers are pending (30 s timeouts)
    when a sixth makes it exit with status 5: all six fail together with ServerGone, each naming
    its own method and id, with the exit status and the last stderr lines. The server's stderr
    lines went to the logger ``mcpwire.server.faulty`` as they came."""
    caplog.set_level(logging.INFO, logger="mcpwire.server.faulty")
    lines = ["worker: out of memory", "fatal: giving up"]
    errors: dict[int, ServerGone] = {}
    pending_at_failure: list[int] = []

    async def call(client: Client, tool: str, arguments: dict[str, Any]) -> None:
        with pytest.raises(ServerGone) as info:
            await client.call_tool(tool, arguments, timeout=30)
        pending_at_failure.append(client.statistics().pending)
        errors[int(re.findall(r"\(id (\d+)\)", str(info.value))[0])] = info.value

    with trio.fail_after(10):
        async with open_faulty(*record.flags) as client:
            start = trio.current_time()
            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(call, client, "slow", {})
                await record.wait_for(lambda r: r.methods().count("tools/call") == 5)
                assert client.statistics().pending == 5
                nursery.start_soon(call, client, "die", {"code": 5, "stderr": lines})
            elapsed = trio.current_time() - start
            assert client.state is SessionState.CLOSED
    assert elapsed < 5.0, f"the calls failed after {elapsed:.2f}s"
    assert pending_at_failure == [0] * 6  # every waiter was failed before any caller resumed
    assert sorted(errors) == list(range(FIRST_CALL_ID, FIRST_CALL_ID + 6))
    for request_id, error in errors.items():
        assert str(error) == (
            f"server 'faulty' exited with status 5: it closed its output while 'tools/call' (id {request_id}) "
            "was pending\nlast stderr lines:\n  worker: out of memory\n  fatal: giving up"
        )
        assert (error.returncode, error.stderr_tail, error.server) == (5, tuple(lines), "faulty")
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "mcpwire.server.faulty"]
    assert logged == [(logging.INFO, line) for line in lines]


async def test_calls_after_death_report_the_stderr_lines_once() -> None:
    """LC-54: a call made after the server died fails at once with ServerGone naming the exit
    status and the last stderr lines, once."""
    with trio.fail_after(10):
        async with open_faulty() as client:
            with pytest.raises(ServerGone):
                await client.call_tool("die", {"code": 3, "stderr": ["RuntimeError: boom"]})
            with pytest.raises(ServerGone) as info:
                await client.call_tool("echo", {"text": "anyone?"})
    assert str(info.value) == (
        "server 'faulty' exited with status 3: it closed its output\nlast stderr lines:\n  RuntimeError: boom"
    )


async def test_death_mid_call_always_carries_the_last_stderr_lines() -> None:
    """LC-54, ST-07: the stderr written just before dying is in ServerGone every time, even when
    stdout's end and the exit are noticed before the stderr reader has run (a race to avoid)."""
    with trio.fail_after(30):
        for attempt in range(15):
            async with open_faulty() as client:
                with pytest.raises(ServerGone) as info:
                    await client.call_tool("die", {"code": 9, "stderr": ["e" * 100] * 500 + [f"last words {attempt}"]})
            assert info.value.stderr_tail[-1:] == (f"last words {attempt}",), attempt


# -- LC-50, ST-18: shutdown of a stubborn server ---------------------------------------------------


def stubborn(record: Record, grace: float, *flags: str) -> StdioServer:
    return StdioServer(
        command=sys.executable,
        args=("-u", str(FAULTY), *record.flags, *flags),
        name="faulty",
        shutdown_grace=grace,
    )


async def test_a_server_ignoring_eof_and_sigterm_is_killed_within_bounds(record: Record) -> None:
    """LC-50, ST-18: stdin closed, then SIGTERM (recorded by the server, which carries on), then
    SIGKILL: leaving the block takes the two grace periods, not more, and the process is gone
    (exited and reaped) afterwards."""
    spec = stubborn(record, 0.3, "--ignore-eof", "--ignore-sigterm")
    with trio.fail_after(10):
        async with open_client(spec, era_cache=False) as client:
            assert (await client.call_tool("echo", {"text": "hi"})).text() == "hi"
            pid = client.pid
            start = trio.current_time()
        elapsed = trio.current_time() - start
    assert pid is not None and process_gone(pid)
    assert 0.6 <= elapsed < 2.5, f"shutdown took {elapsed:.2f}s"
    assert [item["event"] for item in record.items() if "event" in item] == ["start", "eof", "sigterm"]


async def test_shutdown_also_ends_a_grandchild_holding_stdout(record: Record) -> None:
    """LC-50: the server leaves a child (in its process group, holding stdout open) behind when it
    exits on EOF; the whole group is killed, so nothing outlives the block."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, "--spawn-child") as client:
            await client.call_tool("echo", {"text": "hi"})
            pid = client.pid
            start = trio.current_time()
        elapsed = trio.current_time() - start
    (child,) = [item["pid"] for item in record.events("child")]
    assert pid is not None and process_gone(pid)
    await wait_until(lambda: gone_or_zombie(child), timeout=2)
    assert elapsed < 2.0, f"shutdown took {elapsed:.2f}s"


# -- JR-05, JR-06: answers and ids ------------------------------------------------------------------


async def test_out_of_order_answers_reach_their_callers() -> None:
    """JR-05, ST-10: three concurrent calls answered in reverse order each get their own answer."""
    results: dict[int, str] = {}

    async def call(client: Client, tag: int) -> None:
        results[tag] = (await client.call_tool("hold", {"n": 3, "tag": tag})).text()

    with trio.fail_after(10):
        async with open_faulty() as client:
            async with trio.open_nursery() as nursery:
                for tag in range(3):
                    nursery.start_soon(call, client, tag)
            stats = client.statistics()
    assert results == {0: "tag-0", 1: "tag-1", 2: "tag-2"}
    assert (stats.pending, stats.unknown_responses, stats.late_responses) == (0, 0, 0)


async def test_answers_with_unknown_ids_are_counted_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    """JR-06, JR-05, JR-09: answers to ids never sent (an integer, a string, the call's own id as a
    *string*) are counted in ``unknown_responses`` and dropped; an error without an id is a counted
    protocol violation; the call still gets its real answer."""
    stray = [
        '{"jsonrpc":"2.0","id":999,"result":{"content":[]}}',
        '{"jsonrpc":"2.0","id":"abc","error":{"code":-32603,"message":"who?"}}',
        '{"jsonrpc":"2.0","id":"%ID%","result":{"content":[{"type":"text","text":"wrong id type"}]}}',
        '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
    ]
    with trio.fail_after(10):
        async with open_faulty() as client:
            result = await client.call_tool("raw", {"lines": stray})
            assert (await client.call_tool("echo", {"text": "still fine"})).text() == "still fine"
            stats = client.statistics()
    assert result.text() == "done"
    assert (stats.unknown_responses, stats.late_responses, stats.protocol_violations) == (4, 0, 1)
    assert stats.non_protocol_lines == 0
    assert "faulty: protocol violation: error without an id: -32700 Parse error" in caplog.messages


async def test_a_late_answer_after_a_timeout_is_cancelled_dropped_and_counted(record: Record) -> None:
    """LC-60, UT-C02, JR-06, UT-C03: a call times out after 0.3 s with RequestTimeout; the server
    receives ``notifications/cancelled`` with the request id and reason; its late answer is
    dropped and counted in ``late_responses``; the client stays usable."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags) as client:
            start = trio.current_time()
            with pytest.raises(
                RequestTimeout,
                match=rf"^'tools/call' \(id {FIRST_CALL_ID}\) to server 'faulty' got no answer within 0.3s; "
                r"it was cancelled$",
            ) as info:
                await client.call_tool("slow", {"late": True}, timeout=0.3)
            elapsed = trio.current_time() - start
            await wait_until(lambda: client.statistics().late_responses >= 1)
            assert (await client.call_tool("echo", {"text": "usable"})).text() == "usable"
            stats = client.statistics()
    assert 0.3 <= elapsed < 1.3
    error = info.value
    assert isinstance(error, TimeoutError)
    assert (error.method, error.request_id, error.server, error.timeout) == ("tools/call", FIRST_CALL_ID, "faulty", 0.3)
    cancels = [m for m in record.messages() if m.get("method") == "notifications/cancelled"]
    assert cancels == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": FIRST_CALL_ID, "reason": "timeout"},
        }
    ]
    assert (stats.late_responses, stats.unknown_responses, stats.pending) == (1, 0, 0)


# -- JR-12, LC-15: server requests in the middle of a call (legacy era) -------------------------------

ROOTS = ["file:///srv/project/a", {"uri": "file:///srv/project/b", "name": "b"}]
ELICIT_PARAMS = {
    "message": "Who are you?",
    "requestedSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "default": 42}},
        "required": ["name"],
    },
}
SAMPLE_PARAMS = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
SAMPLE_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "test-model"}


async def elicit(params: dict[str, Any]) -> dict[str, Any]:
    assert params == ELICIT_PARAMS
    return {"action": "accept", "content": {"name": "bob"}}


async def sample(params: dict[str, Any]) -> dict[str, Any]:
    assert params == SAMPLE_PARAMS
    return SAMPLE_ANSWER


async def broken_sample(params: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("handler bug")


HANDLERS = {"roots": ROOTS, "elicitation": elicit, "sampling": sample}
NOT_HANDLED = "the client does not handle '{}'"


@pytest.mark.parametrize(
    ("method", "params", "handlers", "answer"),
    [
        pytest.param(
            "roots/list",
            None,
            HANDLERS,
            {"result": {"roots": [{"uri": "file:///srv/project/a"}, ROOTS[1]]}},
            id="roots",
        ),
        pytest.param(
            "elicitation/create",
            ELICIT_PARAMS,
            HANDLERS,
            {"result": {"action": "accept", "content": {"name": "bob", "age": 42}}},
            id="elicitation-defaults-filled",
        ),
        pytest.param("sampling/createMessage", SAMPLE_PARAMS, HANDLERS, {"result": SAMPLE_ANSWER}, id="sampling"),
        pytest.param("ping", None, {}, {"result": {}}, id="ping"),
        pytest.param(
            "roots/list",
            None,
            {},
            {"error": {"code": -32601, "message": NOT_HANDLED.format("roots/list")}},
            id="roots-undeclared",
        ),
        pytest.param(
            "elicitation/create",
            ELICIT_PARAMS,
            {},
            {"error": {"code": -32601, "message": NOT_HANDLED.format("elicitation/create")}},
            id="elicitation-undeclared",
        ),
        pytest.param(
            "sampling/createMessage",
            SAMPLE_PARAMS,
            {"roots": ROOTS},
            {"error": {"code": -32601, "message": NOT_HANDLED.format("sampling/createMessage")}},
            id="sampling-undeclared",
        ),
        pytest.param(
            "tasks/list",
            None,
            HANDLERS,
            {"error": {"code": -32601, "message": NOT_HANDLED.format("tasks/list")}},
            id="unknown",
        ),
        pytest.param(
            "sampling/createMessage",
            SAMPLE_PARAMS,
            {"sampling": broken_sample},
            {"error": {"code": -32603, "message": "client handler failed: ValueError"}},
            id="handler-raises",
        ),
    ],
)
async def test_a_server_request_in_the_middle_of_a_call_is_answered(
    method: str, params: dict[str, Any] | None, handlers: dict[str, Any], answer: dict[str, Any]
) -> None:
    """JR-12, LC-05, UT-P01, CF-R02, CF-S08: while ``tools/call`` is pending the legacy server sends a request; the
    client answers it exactly once with the same id through its handlers (elicitation answers get
    the schema's defaults, SEP-1034), with -32601 for anything it did not declare and -32603 when a
    handler fails; then the call completes."""
    arguments: dict[str, Any] = {"method": method} | ({"params": params} if params is not None else {})
    with trio.fail_after(10):
        async with open_faulty(**handlers) as client:
            result = await client.call_tool("ask", arguments)
            stats = client.statistics()
    assert result.structured_content == {"id": "srv-1", **answer}
    assert stats.server_requests == 1


@pytest.mark.parametrize(
    ("handlers", "declared"),
    [
        pytest.param({}, {}, id="none"),
        pytest.param(
            HANDLERS, {"roots": {"listChanged": False}, "sampling": {}, "elicitation": {"form": {}}}, id="all"
        ),
    ],
)
async def test_initialize_declares_exactly_the_handlers_given(
    record: Record, handlers: dict[str, Any], declared: dict[str, Any]
) -> None:
    """LC-15, LC-02, LC-03, CF-R01, CF-S01, CF-E01: ``initialize`` declares exactly the client capabilities that have
    handlers, and ``notifications/initialized`` follows."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, **handlers):
            pass
    messages = record.messages()
    assert [m.get("method") for m in messages] == ["server/discover", "initialize", "notifications/initialized"]
    assert messages[1]["params"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": declared,
        "clientInfo": {"name": "mcpwire", "version": "0.1.0"},
    }


# -- UT-N07: pagination ---------------------------------------------------------------------------------


async def test_a_cycling_cursor_is_refused(record: Record) -> None:
    """UT-N07, UT-N01: cursors a -> b -> a; ``list_tools`` stops at the repeated cursor
    with RemoteProtocolError instead of looping, after exactly three requests."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, "--cycle-cursor") as client:
            with pytest.raises(
                RemoteProtocolError,
                match=r"^server 'faulty' repeated the cursor 'a' while paginating 'tools/list' \(a cycle\)$",
            ):
                await client.list_tools()
            assert (await client.call_tool("echo", {"text": "ok"})).text() == "ok"
    cursors = [(m.get("params") or {}).get("cursor") for m in record.messages() if m.get("method") == "tools/list"]
    assert cursors == [None, "a", "b"]


# -- answers that cannot be read --------------------------------------------------------------------

DEEP = "[" * 200_000 + "]" * 200_000


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"jsonrpc":"2.0","id":%ID%,"result":' + DEEP + "}", "nested too deeply"),
        ('{"jsonrpc":"2.0","result":{"content":' + DEEP + '},"id":%ID%}', "nested too deeply"),
        ('{"jsonrpc":"2.0","id":%ID%,"error":{"code":"x"}}', r"a malformed error object: .*"),
        (
            '{"jsonrpc":"2.0","id":%ID%,"result":{},"error":{"code":1,"message":"m"}}',
            "a response with both result and error",
        ),
    ],
    ids=["deep-id-first", "deep-id-last", "malformed-error", "result-and-error"],
)
async def test_an_unreadable_answer_fails_its_call_at_once(line: str, reason: str) -> None:
    """An answer to a call in flight that cannot be decoded (200,000 levels of nesting, a
    malformed error object, both result and error) fails that call at once with an error naming
    server, method and id, instead of being dropped as noise while the call waits out its
    timeout. The connection stays usable."""
    with trio.fail_after(20):
        async with open_faulty() as client:
            start = trio.current_time()
            with pytest.raises(
                RemoteProtocolError,
                match=rf"^server 'faulty' answered 'tools/call' \(id {FIRST_CALL_ID}\) "
                rf"with a message that cannot be read: {reason}$",
            ):
                await client.call_tool("raw", {"lines": [line]}, timeout=30)
            assert trio.current_time() - start < 10
            assert (await client.call_tool("echo", {"text": "still here"})).text() == "still here"
            stats = client.statistics()
    assert stats.protocol_violations == 1
    assert stats.non_protocol_lines == 0
