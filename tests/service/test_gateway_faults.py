"""The gateway when backends misbehave: one dies mid-call, one hangs, one floods list changes, one
changes a tool's definition after it was pinned; and backend log messages reach the client."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from _gateway import fake, gateway, reference

import mcpwire
from mcpwire.host import ServerStatus
from mcpwire.host.pins import MemoryPins

pytestmark = pytest.mark.slow


async def test_a_backend_dying_mid_call_is_an_error_result_and_it_comes_back() -> None:
    async with gateway({"ref": reference()}, approval_rules=[("*", "*", "allow")], backoff_base=0.05) as running:
        with trio.fail_after(60):
            async with (
                mcpwire.open_client(running.url, era="legacy", era_cache=False) as client,
                running.host.events() as events,
            ):
                died = await client.call_tool("ref__crash", {})
                assert died.is_error
                assert "'crash' on server 'ref' failed" in died.text()
                async for event in events:  # the supervisor notices, then restarts it
                    if event.kind == "status" and event.status == ServerStatus.CONNECTED.value:
                        break
                back = await client.call_tool("ref__echo", {"text": "again"})
                assert back.text() == "again"


async def test_a_hanging_backend_is_cut_off_by_the_hosts_timeout() -> None:
    entry = {**reference(), "policy": {"timeout_seconds": 0.5, "retries": 0}}
    async with gateway({"ref": entry}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era="modern", era_cache=False) as client:
                hung = await client.call_tool("ref__slow", {"seconds": 600, "steps": 1})
                assert hung.is_error
                assert "timed out" in hung.text() or "timeout" in hung.text().lower(), hung.text()
                assert (await client.call_tool("ref__echo", {"text": "still here"})).text() == "still here"


async def test_a_flood_of_list_changes_reaches_clients_coalesced() -> None:
    async with gateway({"shifty": fake("shifty")}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era="legacy", era_cache=False) as client:
                changes = 0
                first = trio.Event()

                async def count() -> None:
                    nonlocal changes
                    async for note in client.notifications():
                        if note.method == "notifications/tools/list_changed":
                            changes += 1
                            first.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(count)
                    assert (await client.call_tool("shifty__flood", {"count": 500})).text() == "flooded"
                    await first.wait()
                    await trio.sleep(1.0)  # what a second of coalescing lets through
                    nursery.cancel_scope.cancel()
                assert 1 <= changes <= 15, changes
                assert (await client.call_tool("shifty__echo", {"text": "calm"})).text() == "calm"


async def test_a_changed_tool_definition_is_quarantined_until_approved() -> None:
    async with gateway({"shifty": fake("shifty")}, pins=MemoryPins()) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era="modern", era_cache=False) as client:
                assert "shifty__echo" in {t.name for t in await client.list_tools()}
                await client.call_tool("shifty__mutate", {})
                while "shifty__echo" in {t.name for t in running.host.tools()}:  # noqa: ASYNC110 - the host's registry
                    await trio.sleep(0.05)
                assert "shifty__echo" not in {t.name for t in await client.list_tools()}
                # a client that had the tool is told why it is refused, not that it does not exist
                held = await client.call_tool("shifty__echo", {"text": "x"})
                assert held.is_error
                assert held.text().startswith("tool 'shifty__echo' is quarantined: its definition changed since it")
                assert "awaits review" in held.text()
                with pytest.raises(mcpwire.RPCError) as unknown:
                    await client.call_tool("shifty__nothing", {})
                assert unknown.value.code == -32602
                await running.host.approve_pin("shifty", "echo")
                listed = {t.name: t for t in await client.list_tools()}
                assert listed["shifty__echo"].description.endswith("(changed since it was pinned).")  # type: ignore[union-attr]
                assert (await client.call_tool("shifty__echo", {"text": "ok"})).text() == "ok"


async def test_backend_log_messages_reach_clients_at_their_level() -> None:
    async with gateway({"shifty": fake("shifty")}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era="legacy", era_cache=False) as client:
                await client.set_logging_level("warning")
                got: list[Any] = []
                arrived = trio.Event()

                async def collect() -> None:
                    async for note in client.notifications():
                        if note.method == "notifications/message":
                            got.append(note.params)
                            arrived.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(collect)
                    await client.call_tool("shifty__say", {"level": "debug", "text": "too quiet"})
                    await client.call_tool("shifty__say", {"level": "error", "text": "loud enough"})
                    await arrived.wait()
                    nursery.cancel_scope.cancel()
                assert got == [{"level": "error", "logger": "shifty/shifty", "data": "loud enough"}]
