"""Shutdown of ``open_client`` over a real stdio subprocess: nothing outlives the block.

Uses ``tests/client/fixtures/faulty_server.py`` (a real subprocess, no mocks). Checked: no child
process and no trio task remain after the block; an exception raised in the block propagates as
itself; cancelling a pending call from an outer scope sends ``notifications/cancelled`` and keeps
the client usable; cancelling the whole block is prompt; ``aclose()`` is idempotent.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import mcpwire
from mcpwire import ClientClosed
from mcpwire.client import Client
from mcpwire.protocol.lifecycle import SessionState

FAULTY = Path(__file__).resolve().parents[1] / "client" / "fixtures" / "faulty_server.py"
FIRST_CALL_ID = 3  # 1: the server/discover probe, 2: initialize


class Server:
    """The faulty server's argv and its ``--record`` file (what it received)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def open(self, *flags: str, **options: Any) -> Any:
        argv = [sys.executable, "-u", str(FAULTY), "--record", str(self.path), *flags]
        return mcpwire.open_client(argv, name="faulty", era_cache=False, **options)

    def items(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def cancels(self) -> list[dict[str, Any]]:
        return [m["params"] for m in self.items() if m.get("method") == "notifications/cancelled"]

    def methods(self) -> list[str]:
        return [m.get("method", "<response>") for m in self.items() if "event" not in m]

    def pids(self) -> list[int]:
        return [item["pid"] for item in self.items() if item.get("event") == "start"]

    async def wait_for_cancels(self, count: int) -> None:
        await wait_until(lambda: len(self.cancels()) >= count)


@pytest.fixture
def server(tmp_path: Path) -> Server:
    return Server(tmp_path / "received.jsonl")


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Polls ``condition`` every 10 ms (another process's file, /proc, the client's counters)."""
    with trio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 - nothing to wait on: the state is outside trio
            await trio.sleep(0.01)


async def cancel_when(scope: trio.CancelScope, condition: Callable[[], bool]) -> None:
    """Cancels ``scope`` once ``condition`` holds (what the server recorded): the moment a test
    means, however slow the machine."""
    await wait_until(condition)
    scope.cancel()


def process_gone(pid: int) -> bool:
    """Exited and reaped (a zombie still answers ``kill(pid, 0)``)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def all_tasks() -> set[trio.lowlevel.Task]:
    """Every task in this trio run, walked from the root task."""
    found: set[trio.lowlevel.Task] = set()
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        found.add(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


async def test_leaving_the_block_leaves_no_process_and_no_task(server: Server) -> None:
    """LC-50, ST-18 and the open_client contract ("no task or process outlives it"): after the
    block the server process is gone (reaped), every task the client started has ended, and leaving
    was prompt (the server exits when its stdin closes)."""
    before = all_tasks()
    with trio.fail_after(10):
        async with server.open() as client:
            assert (await client.call_tool("echo", {"text": "hi"})).text() == "hi"
            assert len(all_tasks() - before) >= 3  # the client's tasks run: stdout, stderr, exit watch
            pid = client.pid
            start = trio.current_time()
        elapsed = trio.current_time() - start
    assert all_tasks() == before
    assert pid is not None and process_gone(pid)
    assert client.state is SessionState.CLOSED
    assert elapsed < 1.0, f"leaving took {elapsed:.2f}s"


async def test_an_exception_in_the_block_propagates_as_itself(server: Server) -> None:
    """open_client contract ("An exception raised in the block propagates as itself, not wrapped in
    an exception group"): the very object raised comes out, and the server is shut down."""
    error = KeyError("from the block")
    with trio.fail_after(10), pytest.raises(KeyError) as info:
        async with server.open() as client:
            pid = client.pid
            raise error
    assert info.value is error
    assert type(info.value) is KeyError
    assert pid is not None and process_gone(pid)


async def test_an_exception_in_the_block_keeps_its_cause_and_context(server: Server) -> None:
    """open_client contract ("propagates as itself"): the exception's chain is the user's, intact:
    an explicit ``raise ... from`` cause, and the implicit context of an ``except`` block."""
    with trio.fail_after(10), pytest.raises(KeyError) as info:
        async with server.open():
            try:
                raise ValueError("inner")
            except ValueError as inner:
                raise KeyError("outer") from inner
    assert isinstance(info.value.__cause__, ValueError)
    assert isinstance(info.value.__context__, ValueError)
    assert info.value.__suppress_context__ is True


async def test_cancelling_a_pending_call_from_an_outer_scope(server: Server) -> None:
    """UT-C02, ST-12, UT-C01: a call cancelled by the caller's own cancel scope is abandoned and
    ``notifications/cancelled`` (reason "cancelled by the client") reaches the server; the late
    answer the server then sends is dropped and counted (JR-06); the client stays usable."""
    with trio.fail_after(10):
        async with server.open() as client:
            with trio.move_on_after(0.2) as scope:
                await client.call_tool("slow", {"late": True})
            assert scope.cancelled_caught
            assert client.statistics().pending == 0
            await server.wait_for_cancels(1)
            await wait_until(lambda: client.statistics().late_responses >= 1)
            assert (await client.call_tool("echo", {"text": "still usable"})).text() == "still usable"
            stats = client.statistics()
    assert server.cancels() == [{"requestId": FIRST_CALL_ID, "reason": "cancelled by the client"}]
    assert (stats.pending, stats.late_responses, stats.unknown_responses) == (0, 1, 0)


async def test_cancelling_the_whole_block_is_prompt(server: Server) -> None:
    """LC-50, ST-18: an outer cancel scope around the whole block, while a call is pending: the
    server is shut down by closing its stdin (which also ends the call; the transport's own tasks
    are cancelled with the block, so no separate ``notifications/cancelled`` is required); it all
    takes well under a second and leaves no process."""
    pids: list[int | None] = []
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as scope:
                nursery.start_soon(cancel_when, scope, lambda: "tools/call" in server.methods())
                async with server.open() as client:
                    pids.append(client.pid)
                    await client.call_tool("slow")
            start = trio.current_time()
    assert scope.cancelled_caught
    assert trio.current_time() - start < 1.0
    (pid,) = pids
    assert pid is not None and process_gone(pid)
    seen = [item.get("event") or item["method"] for item in server.items()]
    # UT-C02 lets the client say why it stopped waiting (the fixture logs EOF from its reader
    # thread, so the notification may be listed after it): at most once, after the call
    if "notifications/cancelled" in seen:
        assert seen.count("notifications/cancelled") == 1
        assert seen.index("notifications/cancelled") > seen.index("tools/call")
        seen.remove("notifications/cancelled")
    assert seen == [
        "start",
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/call",
        "eof",
    ]


async def test_cancelling_during_the_handshake_leaves_nothing(server: Server) -> None:
    """LC-06 ("The initialize request MUST NOT be cancelled by clients"), LC-50: cancelled while
    ``initialize`` is pending, ``open_client`` returns promptly, sends no cancellation for
    ``initialize`` and leaves no process behind."""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as scope:
                nursery.start_soon(cancel_when, scope, lambda: "initialize" in server.methods())
                async with server.open("--initialize-delay", "30"):
                    pytest.fail("connected")
        assert scope.cancelled_caught
    methods = [m.get("method") for m in server.items() if "event" not in m]
    assert methods == ["server/discover", "initialize"]
    (pid,) = server.pids()
    await wait_until(lambda: process_gone(pid), timeout=2)


async def test_aclose_is_idempotent(server: Server) -> None:
    """``aclose()`` is idempotent (house style): called twice at once, again in sequence, and then
    by the block's exit; later calls fail with ClientClosed."""
    with trio.fail_after(10):
        async with server.open() as client:
            pid = client.pid
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.aclose)
                nursery.start_soon(client.aclose)
            await client.aclose()
            assert client.state is SessionState.CLOSED
            with pytest.raises(ClientClosed, match=r"^the client of server 'faulty' is closed$"):
                await client.call_tool("echo", {"text": "x"})
        await client.aclose()
    assert pid is not None and process_gone(pid)


async def test_closing_fails_pending_calls_with_client_closed(server: Server) -> None:
    """LC-54 (pending requests fail with a *local* error on shutdown): a call pending when the
    client closes fails with ClientClosed naming it, not with a peer error."""
    errors: list[BaseException] = []

    async def pending_call(client: Client, task_status: trio.TaskStatus[None]) -> None:
        task_status.started()
        try:
            await client.call_tool("slow")
        except ClientClosed as exc:
            errors.append(exc)

    with trio.fail_after(10):
        async with server.open() as client, trio.open_nursery() as nursery:
            await nursery.start(pending_call, client)
            # the request is on the wire: the server has it
            await wait_until(lambda: "tools/call" in [m.get("method") for m in server.items()])
            await client.aclose()
    assert [str(e) for e in errors] == [
        f"'tools/call' (id {FIRST_CALL_ID}) to server 'faulty' was pending when the client closed"
    ]


async def test_closing_during_a_blocked_write_fails_the_call_with_client_closed(server: Server) -> None:
    """LC-54: a call whose request is still being written (a 1 MiB argument to a server that has
    stopped reading) when the client closes fails with ClientClosed, a local error, not with
    ServerGone blaming the server."""
    errors: list[BaseException] = []

    async def big_call(client: Client) -> None:
        try:
            await client.call_tool("echo", {"text": "x" * (1024 * 1024)})
        except mcpwire.MCPWireError as exc:
            errors.append(exc)

    with trio.fail_after(10):
        async with server.open() as client:
            assert (await client.call_tool("pause", {"seconds": 1.0})).text() == "paused"
            async with trio.open_nursery() as nursery:
                nursery.start_soon(big_call, client)
                await trio.testing.wait_all_tasks_blocked()
                assert client.statistics().pending == 1  # registered, still being written
                await client.aclose()
    assert [type(e) for e in errors] == [ClientClosed], [str(e) for e in errors]
