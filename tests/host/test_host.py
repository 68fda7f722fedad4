from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
import trio.lowlevel

from mcpwire.errors import ToolExecutionError, UnknownTool
from mcpwire.host import Host, ServerStatus


def _config(tmp_path: Path, servers: dict[str, object]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _demo(name: str) -> dict[str, object]:
    return {"command": sys.executable, "args": ["-u", "-m", "mcpwire.testing.demo_server", "--name", name]}


async def test_two_servers_routing_and_a_broken_one(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        {"a": _demo("a"), "b": _demo("b"), "broken": {"command": str(tmp_path / "no-such-program")}},
    )
    async with Host.from_config(path, backoff_base=5.0, health_interval=0) as host:
        assert host.get("a").status is ServerStatus.CONNECTED
        assert host.get("b").status is ServerStatus.CONNECTED
        assert host.get("broken").status is ServerStatus.ERROR
        assert host.get("broken").error
        names = {t.name for t in host.tools()}
        assert {"a__echo", "b__echo", "a__add"} <= names
        result = await host.call_tool("b__echo", {"text": "hi"})
        assert "hi" in result.text()
        assert result.server == "b"
        with pytest.raises(UnknownTool):
            await host.call_tool("c__echo", {})
        stats = host.statistics()
        assert stats["servers"]["a"]["status"] == "connected"  # type: ignore[index]
    assert host.get("a").status is ServerStatus.DISCONNECTED


async def test_crash_and_restart(tmp_path: Path) -> None:
    path = _config(tmp_path, {"a": _demo("a")})
    async with Host.from_config(path, backoff_base=0.05, backoff_cap=0.1, health_interval=0) as host:
        statuses: list[str] = []

        async def watch() -> None:
            async for event in host.events():
                statuses.append(event.status)
                if event.status == "connected":
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            await trio.lowlevel.checkpoint()
            with pytest.raises(ToolExecutionError, match="'crash' on server 'a'"):
                await host.call_tool("a__crash", {})
        info = await host.wait_status("a", ServerStatus.CONNECTED, timeout=20)
        assert info.restart_count >= 1
        assert statuses[-1] == "connected"
        assert "error" in statuses
        result = await host.call_tool("a__echo", {"text": "back"})
        assert "back" in result.text()


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_resource_cache_and_list_changed_invalidation(tmp_path: Path, era: str) -> None:
    demo = _demo("a")
    demo["args"] = [*demo["args"], "--era", era]  # type: ignore[misc]
    path = _config(tmp_path, {"a": demo})
    async with Host.from_config(path, health_interval=0) as host:
        first = await host.read_resource("a", "demo://static/hello")
        second = await host.read_resource("a", "demo://static/hello")
        assert first == second
        assert (host.cache.hits, host.cache.misses) == (1, 1)
        # a read-only tool result is cached under kind "tool"; list_changed must drop it
        host.cache.put(("a", "tool", "echo", "{}"), "stale")
        await host.call_tool("a__notify", {})
        for _ in range(1000):  # at most 10 s
            if len(host.cache) <= 1:
                break
            await trio.sleep(0.01)
        assert host.cache.get(("a", "tool", "echo", "{}")) == (False, None)
        assert host.get("a").era == era
