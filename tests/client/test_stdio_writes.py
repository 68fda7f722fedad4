"""Writes to a real subprocess's stdin: no lock, no torn lines, bounded back-pressure.

The stdio actor writes a message at once when nothing is queued and leaves whatever the pipe
does not take to its writer task. These tests use ``fixtures/faulty_server.py``, whose ``pause``
tool makes it stop reading stdin for a while, so the pipe (64 KiB on Linux) really fills up.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from _faulty import Record, open_faulty

from mcpwire import RequestTimeout
from mcpwire.actors import stdio
from mcpwire.client import Client

KIB = 1024
MIB = 1024 * KIB


def text_of(tag: int, size: int) -> str:
    head = f"<{tag}>"
    return head + "x" * (size - len(head))


async def test_concurrent_large_requests_arrive_whole_and_in_order(tmp_path: Path) -> None:
    """24 calls at once, each far larger than the pipe: every one is echoed back intact (a torn
    or interleaved line would be a parse error on the server and a missing answer here)."""
    record = Record(tmp_path / "received.jsonl")
    results: dict[int, str] = {}

    async def call(client: Client, tag: int) -> None:
        result = await client.call_tool("echo", {"text": text_of(tag, 200 * KIB)})
        results[tag] = result.text()

    with trio.fail_after(30):
        async with open_faulty(*record.flags) as client:
            async with trio.open_nursery() as nursery:
                for tag in range(24):
                    nursery.start_soon(call, client, tag)
            assert client.statistics().pending == 0
    assert results == {tag: text_of(tag, 200 * KIB) for tag in range(24)}
    calls = [m for m in record.messages() if m.get("method") == "tools/call"]
    assert len(calls) == 24


async def test_a_call_that_times_out_while_queued_leaves_the_stream_whole(tmp_path: Path) -> None:
    """LC-60: a 2 MiB request is still queued when its call times out. The request goes out whole,
    followed by its ``notifications/cancelled``; the next call on the same connection works."""
    record = Record(tmp_path / "received.jsonl")
    with trio.fail_after(30):
        async with open_faulty(*record.flags) as client:
            assert (await client.call_tool("pause", {"seconds": 1.0})).text() == "paused"
            with pytest.raises(RequestTimeout) as timed_out:
                await client.call_tool("echo", {"text": text_of(1, 2 * MIB)}, timeout=0.2)
            assert timed_out.value.method == "tools/call"
            assert (await client.call_tool("echo", {"text": "after"})).text() == "after"
            await record.wait_for(lambda r: "notifications/cancelled" in r.methods())
    big = [m for m in record.messages() if m.get("method") == "tools/call" and m["params"]["name"] == "echo"]
    assert big[0]["params"]["arguments"]["text"] == text_of(1, 2 * MIB)
    [cancel] = [m["params"] for m in record.messages() if m.get("method") == "notifications/cancelled"]
    assert cancel["requestId"] == big[0]["id"]


async def test_senders_wait_for_room_past_the_backlog_bound_and_can_be_cancelled(tmp_path: Path) -> None:
    """Past ``MAX_BACKLOG_BYTES`` queued, a sender waits before anything of its own is queued: if
    it is cancelled there, the server never sees its request nor a cancellation for it (UT-C01),
    and the queued calls still complete once the server reads again."""
    record = Record(tmp_path / "received.jsonl")
    size = stdio.MAX_BACKLOG_BYTES // 2 + 64 * KIB  # two of them fill the backlog
    done: list[int] = []
    stuck: list[bool] = []

    async def call(client: Client, tag: int) -> None:
        result = await client.call_tool("echo", {"text": text_of(tag, size)}, timeout=20)
        assert result.text() == text_of(tag, size)
        done.append(tag)

    with trio.fail_after(40):
        async with open_faulty(*record.flags) as client:
            assert (await client.call_tool("pause", {"seconds": 1.5})).text() == "paused"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(call, client, 1)
                nursery.start_soon(call, client, 2)
                await trio.testing.wait_all_tasks_blocked()
                with trio.move_on_after(0.3) as scope:
                    await client.call_tool("echo", {"text": "never sent"})
                stuck.append(scope.cancelled_caught)
            assert (await client.call_tool("echo", {"text": "later"})).text() == "later"
    assert stuck == [True]
    assert sorted(done) == [1, 2]
    texts = [m["params"]["arguments"].get("text") for m in record.messages() if m.get("method") == "tools/call"]
    assert "later" in texts and "never sent" not in texts
    ids = {m["id"] for m in record.messages() if m.get("method") == "tools/call"}
    cancelled = {m["params"]["requestId"] for m in record.messages() if m.get("method") == "notifications/cancelled"}
    assert cancelled <= ids, "a cancellation referenced a request the server never received"


async def test_notifications_queued_just_before_closing_still_reach_the_server(tmp_path: Path) -> None:
    """Two notifications sent back to back and the block left at once: the second waits in the
    backlog (it shares the first one's write batch) when shutdown begins; it still goes out before
    stdin is closed, so the server reads both."""
    record = Record(tmp_path / "received.jsonl")
    with trio.fail_after(10):
        async with open_faulty(*record.flags) as client:
            await client.notify("notifications/first", {})
            await client.notify("notifications/second", {})
            transport = client._link.transport
            assert transport is not None
            queued = len(transport._backlog)  # type: ignore[attr-defined]
    received = [m.get("method") for m in record.messages()]
    assert queued >= 1  # the case under test: something was still queued when closing began
    assert received[-2:] == ["notifications/first", "notifications/second"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_aclose_ends_every_task_in_the_callers_nursery(era: str) -> None:
    """connect_client over stdio: after aclose() the writer task ends with the process too, so
    the caller's nursery exits by itself, not cancelled (it used to wait forever for a write)."""
    import mcpwire

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            client = await mcpwire.connect_client(nursery, None, era=era, era_cache=False)
            assert (await client.call_tool("echo", {"text": "x"})).text() == "x"
            await client.aclose()
        assert not nursery.cancel_scope.cancel_called


async def test_calls_one_at_a_time_write_directly_and_calls_sent_together_share_a_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One call at a time: one ``write`` each, straight from the caller (no writer task in
    between). Calls sent in the same moment: the first is written at once, the rest queue behind
    it and leave together in one ``writev``."""
    writes: list[int] = []
    with trio.fail_after(30):
        async with open_faulty() as client:
            transport = client._link.transport
            assert isinstance(transport, stdio.StdioTransport)
            fd, real_write, real_writev = transport._stdin_fd, stdio.os.write, stdio.os.writev

            def write(to: int, data: bytes) -> int:
                if to == fd:
                    writes.append(1)
                return real_write(to, data)

            def writev(to: int, buffers: list[bytes]) -> int:
                if to == fd:
                    writes.append(len(buffers))
                return real_writev(to, buffers)

            monkeypatch.setattr(stdio.os, "write", write)
            monkeypatch.setattr(stdio.os, "writev", writev)
            for tag in range(5):
                assert (await client.call_tool("echo", {"text": str(tag)})).text() == str(tag)
            assert writes == [1] * 5
            writes.clear()
            async with trio.open_nursery() as nursery:
                for tag in range(20):
                    nursery.start_soon(client.call_tool, "echo", {"text": str(tag)})
            assert writes == [1, 19]
