"""stdout framing faults of a real subprocess: noise, BOM, CRLF, odd characters, tiny and huge writes.

Each test starts ``fixtures/faulty_server.py`` with one fault switched on and asserts the exact
outcome through the public client (results, errors, ``statistics()``). Every test bounds itself
with ``trio.fail_after`` so a regression fails instead of hanging.
"""

from __future__ import annotations

import logging
import re
from contextlib import aclosing

import pytest
import trio
from _faulty import Record, open_faulty, process_gone

from mcpwire import FrameTooLarge, RemoteProtocolError, ServerGone

NOISE_WARNING = "faulty: ignoring a stdout line that is not JSON-RPC ({reason}): {line}"
NOT_OBJECT = "not a JSON object or array"
NO_JSONRPC = 'no "jsonrpc": "2.0" member'


def noise_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("mcpwire.client") and "stdout line" in r.getMessage()
    ]


# -- ST-08: lines that are not JSON-RPC ----------------------------------------------------------


async def test_noise_lines_are_counted_logged_and_handed_to_the_callback(caplog: pytest.LogCaptureFixture) -> None:
    """ST-08, AMB-05: a banner before the handshake and log lines between messages are skipped,
    counted in ``non_protocol_lines``, logged at WARNING and passed to ``on_stdout_noise``; blank
    lines are not noise. The call still gets its answer."""
    caplog.set_level(logging.WARNING, logger="mcpwire.client")
    seen: list[bytes] = []
    json_log = '{"level":"info","msg":"a JSON log record"}'
    with trio.fail_after(10):
        async with open_faulty("--banner", "Server v1.2 starting...", on_stdout_noise=seen.append) as client:
            result = await client.call_tool("raw", {"lines": ["DEBUG handling tools/call", "", json_log, ""]})
            stats = client.statistics()
    assert result.text() == "done"
    assert seen == [b"Server v1.2 starting...", b"DEBUG handling tools/call", json_log.encode()]
    assert stats.non_protocol_lines == 3
    assert stats.protocol_violations == 0
    assert noise_warnings(caplog) == [
        NOISE_WARNING.format(reason=NOT_OBJECT, line="Server v1.2 starting..."),
        NOISE_WARNING.format(reason=NOT_OBJECT, line="DEBUG handling tools/call"),
        NOISE_WARNING.format(reason=NO_JSONRPC, line=json_log),
    ]


async def test_noise_warnings_are_rate_limited_but_every_line_is_counted(caplog: pytest.LogCaptureFixture) -> None:
    """ST-08 and the house logging rule "WARNING: non-protocol stdout, rate-limited": five warnings
    a minute, the fifth saying so; the counter and the callback see all seven lines."""
    caplog.set_level(logging.WARNING, logger="mcpwire.client")
    seen: list[bytes] = []
    lines = [f"noise {i}" for i in range(7)]
    with trio.fail_after(10):
        async with open_faulty(on_stdout_noise=seen.append) as client:
            await client.call_tool("raw", {"lines": lines})
            stats = client.statistics()
    assert stats.non_protocol_lines == 7
    assert seen == [line.encode() for line in lines]
    expected = [NOISE_WARNING.format(reason=NOT_OBJECT, line=line) for line in lines[:5]]
    expected[4] += " (further lines this minute are counted, not logged)"
    assert noise_warnings(caplog) == expected


async def test_a_failing_noise_callback_does_not_break_the_connection(caplog: pytest.LogCaptureFixture) -> None:
    """ST-08: a bug in the user's ``on_stdout_noise`` is logged, never raised into the reader."""

    def broken(line: bytes) -> None:
        raise ValueError("callback bug")

    with trio.fail_after(10):
        async with open_faulty(on_stdout_noise=broken) as client:
            result = await client.call_tool("raw", {"lines": ["noise"]})
            assert (await client.call_tool("echo", {"text": "after"})).text() == "after"
            stats = client.statistics()
    assert result.text() == "done"
    assert stats.non_protocol_lines == 1
    assert [r.getMessage() for r in caplog.records if r.exc_info] == ["faulty: the on_stdout_noise callback failed"]


async def test_strict_mode_fails_the_pending_call_on_noise(record: Record) -> None:
    """ST-08 ("offer a strict mode that fails the connection"): with ``strict=True`` the pending
    call fails with RemoteProtocolError naming the line, and the connection is closed: the
    notification stream ends and the server process exits."""
    with trio.fail_after(10):
        async with open_faulty(*record.flags, strict=True) as client:
            with pytest.raises(
                RemoteProtocolError,
                match=r"^server 'faulty' wrote a line that is not JSON-RPC to stdout "
                r"\(not a JSON object or array\): DEBUG hello$",
            ):
                await client.call_tool("raw", {"lines": ["DEBUG hello"]})
            async for note in client.notifications():  # ends when the connection is gone
                pytest.fail(f"unexpected {note}")
            await client.wait_closed()
            stats = client.statistics()
    assert (stats.non_protocol_lines, stats.pending) == (1, 0)
    assert process_gone(client.pid or 0)
    assert record.events("eof")  # closed in order: stdin first (LC-50)


async def test_strict_mode_later_calls_name_the_protocol_error() -> None:
    """ST-08: after a strict-mode failure, later calls fail with the RemoteProtocolError that closed
    the connection ("the connection was closed after an earlier error: ..."), as
    ``Link.gone_error`` intends, not with a ServerGone blaming the server."""
    with trio.fail_after(10):
        async with open_faulty(strict=True) as client:
            with pytest.raises(RemoteProtocolError):
                await client.call_tool("raw", {"lines": ["DEBUG hello"]})
            async for _ in client.notifications():  # ends when the transport reported the loss
                pass
            with pytest.raises(
                RemoteProtocolError,
                match=r"^the connection was closed after an earlier error: server 'faulty' wrote a line that is "
                r"not JSON-RPC to stdout \(not a JSON object or array\): DEBUG hello$",
            ):
                await client.call_tool("echo", {"text": "x"})


# -- ST-02, ST-03: bytes on the wire ------------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(("--bom",), id="bom"),
        pytest.param(("--bom", "--chunk", "1"), id="bom-split-byte-by-byte"),
        pytest.param(("--crlf",), id="crlf"),
        pytest.param(("--bom", "--crlf", "--chunk", "2"), id="bom-crlf-split"),
    ],
)
async def test_bom_and_crlf_are_framing_not_content(flags: tuple[str, ...]) -> None:
    """ST-02, ST-03: a UTF-8 BOM at the start of the stream (even split across reads) and CRLF line
    ends are accepted: the handshake and a call succeed and nothing counts as noise."""
    with trio.fail_after(10):
        async with open_faulty(*flags) as client:
            result = await client.call_tool("echo", {"text": "crlf\r\nin the text stays"})
            stats = client.statistics()
    assert result.text() == "crlf\r\nin the text stays"
    assert (stats.non_protocol_lines, stats.protocol_violations, stats.unknown_responses) == (0, 0, 0)


UNICODE_SEPARATORS = "a\u2028b\u2029c\u0085d\x1ce\x1df\x1eg\x0bh\x0ci\rj"


async def test_unicode_line_separators_inside_strings_are_content() -> None:
    """ST-03: only ``\\n`` separates messages. U+2028, U+2029 and U+0085 arrive raw (unescaped) in
    the server's UTF-8 and ``\\x1c``..``\\x1e``, VT, FF, CR escaped; all are text, not line ends
    (``str.splitlines`` would split on every one of them)."""
    with trio.fail_after(10):
        async with open_faulty() as client:
            result = await client.call_tool("echo", {"text": UNICODE_SEPARATORS})
            stats = client.statistics()
    assert result.text() == UNICODE_SEPARATORS
    assert stats.non_protocol_lines == 0


async def test_raw_separators_in_a_notification_stay_in_one_message() -> None:
    """ST-03, ST-08: a notification with raw U+2028/U+0085 arrives whole; a line with a raw
    ``\\x1c`` inside a string (invalid JSON: RFC 8259 requires control characters escaped) is one
    noise line, not two, and the stream stays in sync."""
    good = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"x\u2028y\u0085z"}}'
    bad = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"p\x1cq"}}'
    seen: list[bytes] = []
    with trio.fail_after(10):
        async with open_faulty(on_stdout_noise=seen.append) as client:
            result = await client.call_tool("raw", {"lines": [good, bad]})
            async with aclosing(client.notifications()) as notes:
                note = await anext(notes)
            stats = client.statistics()
    assert result.text() == "done"
    assert (note.method, note.params) == ("notifications/message", {"level": "debug", "data": "x\u2028y\u0085z"})
    assert seen == [bad.encode()]
    assert stats.non_protocol_lines == 1
    assert stats.notifications_received == 1


async def test_writes_split_into_three_byte_pieces() -> None:
    """ST-03: messages written 3 bytes at a time with a flush and a pause between pieces (so
    multi-byte UTF-8 characters are split across reads) are reassembled exactly."""
    text = "héllo → wörld 🎉 " * 4
    with trio.fail_after(20):
        async with open_faulty("--chunk", "3", "--chunk-delay", "0.0005") as client:
            result = await client.call_tool("echo", {"text": text})
            tools = await client.list_tools()
            stats = client.statistics()
    assert result.text() == text
    assert [t.name for t in tools][:3] == ["echo", "raw", "burst"]
    assert stats.non_protocol_lines == 0


async def test_several_messages_in_one_write() -> None:
    """ST-03, UT-G01: three progress notifications and the answer in a single write are split
    into four messages; every progress update reaches the caller, before the result."""
    progress: list[tuple[float, float | None]] = []
    with trio.fail_after(10):
        async with open_faulty() as client:
            result = await client.call_tool(
                "burst", {"count": 3}, on_progress=lambda p: progress.append((p.progress, p.total))
            )
            stats = client.statistics()
    assert result.text() == "burst of 3"
    assert progress == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    assert (stats.non_protocol_lines, stats.unknown_responses) == (0, 0)


# -- ST-07: size limits ---------------------------------------------------------------------------

BIG = 32 * 1024 * 1024
PATTERN = "0123456789abcdef"


async def test_a_32_mib_result_arrives_intact() -> None:
    """ST-07: a single 32 MiB line (under the 64 MiB default limit) arrives whole and exact."""
    with trio.fail_after(30):
        async with open_faulty() as client:
            result = await client.call_tool("big", {"bytes": BIG})
            stats = client.statistics()
    text = result.text()
    assert len(text) == BIG
    assert text == PATTERN * (BIG // len(PATTERN))
    assert stats.bytes_received > BIG


async def test_a_message_over_max_message_bytes_fails_the_call_clearly() -> None:
    """ST-07: a 2 MiB answer with ``max_message_bytes`` of 1 MiB fails the pending call at once
    with ServerGone whose ``__cause__`` is FrameTooLarge (which says how to fix it); the
    connection is closed (framing cannot resynchronise) and leaving the block does not hang."""
    limit = 1024 * 1024
    with trio.fail_after(10):
        async with open_faulty(max_message_bytes=limit) as client:
            with pytest.raises(ServerGone) as info:
                await client.call_tool("big", {"bytes": 2 * limit})
            with pytest.raises(ServerGone, match=r"^server 'faulty' .*exceeds the limit of 1048576 bytes"):
                await client.call_tool("echo", {"text": "x"})
    error = info.value
    assert re.fullmatch(
        r"server 'faulty' is no longer reachable: message of at least \d+ bytes exceeds the limit of 1048576 "
        r"bytes; raise max_message_bytes if the server legitimately sends larger messages "
        r"while 'tools/call' \(id 3\) was pending",
        str(error),
    ), str(error)
    assert isinstance(error.__cause__, FrameTooLarge)
    assert error.__cause__.limit == limit
    assert error.__cause__.size > limit


@pytest.mark.parametrize(
    ("era", "limit"),
    [pytest.param("modern", 64, id="probe-answer"), pytest.param("legacy", 100, id="initialize-answer")],
)
async def test_a_handshake_answer_over_max_message_bytes_is_reported_as_such(
    record: Record, era: str, limit: int
) -> None:
    """ST-07, LC-45: when an answer during the handshake breaks the size limit, the error names the
    limit (``max_message_bytes``), and the server is not restarted as if it had exited on the probe."""
    with trio.fail_after(10), pytest.raises(ServerGone) as info:
        async with open_faulty(*record.flags, "--era", era, max_message_bytes=limit):
            pytest.fail("connected")
    assert "max_message_bytes" in str(info.value)
    assert len(record.pids()) == 1
