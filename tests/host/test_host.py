"""The host with the bundled demo server as real subprocesses: routing, a broken entry, a real
crash and restart, and cache invalidation by the server's own notifications in both eras."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

import mcpwire
from mcpwire.errors import ToolExecutionError, UnknownTool
from mcpwire.host import Host, HostEvents, ServerStatus


def _config(tmp_path: Path, servers: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _demo(name: str, *extra: str, **entry: object) -> dict[str, object]:
    args = ["-u", "-m", "mcpwire.testing.demo_server", "--name", name, *extra]
    return {"command": sys.executable, "args": args, **entry}


async def _next_tools_event(events: HostEvents, server: str) -> int:
    with trio.fail_after(10):
        async for event in events:
            if event.kind == "tools" and event.server == server:
                return event.tool_count
    raise AssertionError("the host closed")


async def test_two_servers_routing_and_a_broken_one(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {"a": _demo("a"), "b": _demo("b"), "broken": {"command": str(tmp_path / "no-such-program")}},
    )
    async with Host.from_config(path, backoff_base=30.0, health_interval=0) as host:
        assert host.get("a").status is ServerStatus.CONNECTED
        assert host.get("b").status is ServerStatus.CONNECTED
        broken = host.get("broken")
        assert broken.status is ServerStatus.ERROR
        assert broken.error is not None and broken.error.startswith("ServerNotFound: cannot start server 'broken'")
        names = {t.name for t in host.tools()}
        assert {"a__echo", "b__echo", "a__add"} <= names
        result = await host.call_tool("b__echo", {"text": "hi"})
        assert (result.text, result.server, result.tool, result.result.server) == ("hi", "b", "echo", "b")
        with pytest.raises(
            UnknownTool,
            match=r"^no tool named 'broken__echo': server 'broken' is not connected \(ServerNotFound: cannot start",
        ):
            await host.call_tool("broken__echo", {})
        added = await host.call_tool("a__add", {"a": 2, "b": 3})
        assert added.result.structured_content == {"sum": 5}
        stats = host.statistics()
        assert stats.servers["a"].status == "connected" and stats.servers["b"].calls["echo"].calls == 1
    assert host.get("a").status is ServerStatus.DISCONNECTED


async def test_crash_and_restart(tmp_path: Path) -> None:
    path = _config(tmp_path, {"a": _demo("a")})
    async with Host.from_config(path, backoff_base=0.05, backoff_cap=0.1, health_interval=0) as host:
        events = host.events()
        pid = host.get("a").client.pid  # type: ignore[union-attr]
        with pytest.raises(ToolExecutionError, match=r"^tool 'crash' on server 'a' failed: ServerGone") as failed:
            await host.call_tool("a__crash", {})
        assert (failed.value.server, failed.value.tool) == ("a", "crash")
        assert isinstance(failed.value.__cause__, mcpwire.ServerGone)
        statuses: list[str] = []
        with trio.fail_after(20):
            async for event in events:
                if event.kind == "status":
                    statuses.append(event.status)
                    if event.status == "connected":
                        break
                    if event.status == "error":
                        assert re.match(r"^ServerGone: server 'a' exited with status 3: ", event.error or "")
        assert statuses == ["error", "connecting", "connected"]
        info = host.get("a")
        assert info.restart_count == 1 and info.client is not None and info.client.pid != pid
        assert (await host.call_tool("a__echo", {"text": "back"})).text == "back"


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_list_changed_refreshes_tools_and_drops_cached_results(tmp_path: Path, era: str) -> None:
    path = _config(tmp_path, {"a": _demo("a", "--era", era, policy={"cacheable_tools": ["echo"]})})
    async with Host.from_config(path, health_interval=0) as host:
        assert host.get("a").era == era
        await host.call_tool("a__echo", {"text": "x"})
        assert (await host.call_tool("a__echo", {"text": "x"})).cached
        events = host.events()
        await host.call_tool("a__notify", {})
        assert await _next_tools_event(events, "a") == host.get("a").tool_count > 0
        assert not (await host.call_tool("a__echo", {"text": "x"})).cached
        assert len(host.cache_for("a")) == 1


async def test_resources_updated_invalidates_a_cached_read(tmp_path: Path) -> None:
    path = _config(tmp_path, {"a": _demo("a", "--era", "legacy")})
    async with Host.from_config(path, health_interval=0) as host:
        cache = host.cache_for("a")
        uri = "demo://items/1"
        await host.read_resource("a", uri)
        # the host sends resources/subscribe for the URI it cached; once every task waits, it
        # is on the wire ahead of the next call, and the server handles requests in order
        await trio.testing.wait_all_tasks_blocked()
        await host.call_tool("a__touch", {"uri": uri})
        # resources/updated arrived before the call's answer; let the host's reader handle it
        await trio.testing.wait_all_tasks_blocked()
        assert len(cache) == 0
        await host.read_resource("a", uri)
        assert (cache.hits, cache.misses) == (0, 2)


async def test_the_era_and_revision_pinned_in_the_config(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {
            "old": _demo("old", era="legacy", protocol_version="2025-06-18"),
            "new": _demo("new", era="modern"),
            "auto": _demo("auto"),
        },
    )
    async with Host.from_config(path, health_interval=0) as host:
        found = {i.name: (i.era, i.protocol_version) for i in host.list()}
    assert found == {"old": ("legacy", "2025-06-18"), "new": ("modern", "2026-07-28"), "auto": ("modern", "2026-07-28")}


async def test_progress_of_a_call_reaches_the_caller(tmp_path: Path) -> None:
    path = _config(tmp_path, {"a": _demo("a")})
    seen: list[tuple[float, float | None]] = []

    async def progress(update: mcpwire.Progress) -> None:
        seen.append((update.progress, update.total))

    async with Host.from_config(path, health_interval=0) as host:
        slow = next(t for t in host.tools() if t.tool.name == "slow")
        await host.call_tool(slow.name, {"seconds": 0.2, "steps": 2}, on_progress=progress)
    assert seen and seen[-1][1] is not None


async def test_the_timeout_policy_ends_a_call_that_keeps_reporting_progress(tmp_path: Path) -> None:
    """The server's ``timeout_seconds`` is a hard end for each attempt: progress every 0.25 s
    keeps the request's own clock from running out, yet the call ends 1 s in, with the policy's
    own words, and the server stays usable."""
    path = _config(tmp_path, {"a": _demo("a", policy={"timeout_seconds": 1, "retries": 0})})
    seen: list[object] = []

    async def progress(update: object) -> None:
        seen.append(update)

    with trio.fail_after(30):
        async with Host.from_config(path, backoff_base=30.0, health_interval=0) as host:
            start = trio.current_time()
            with pytest.raises(ToolExecutionError) as info:
                await host.call_tool("a__slow", {"seconds": 30, "steps": 120}, on_progress=progress)
            elapsed = trio.current_time() - start
            assert (await host.call_tool("a__echo", {"text": "still usable"})).text == "still usable"
    cause = info.value.__cause__
    assert isinstance(cause, mcpwire.RequestTimeout)
    assert str(cause) == "server 'a': tool 'slow' got no answer within 1s"
    assert 1.0 <= elapsed < 3.0, f"the timeout took {elapsed:.2f}s"
    assert len(seen) >= 2, seen  # progress did arrive: only the policy's deadline ended the call
