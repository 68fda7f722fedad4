"""Pins that catch what matters and nothing else, against real processes: mcp-go's time server
lists its time formats in Go map order, a new order on each start, and restarted ten times it is
never quarantined (each new order is recorded as reordered); a server whose tool changes only its
title is quarantined, and one that only swaps the words of its title is not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from _paths import MCP_TIME, REPO
from _paths import require as _require

from mcpwire.host import AuditRecord, Host, MemoryPins, PinState, ServerStatus, parse_config

pytestmark = [pytest.mark.real, pytest.mark.slow]

CHANGING = REPO / "tests" / "service" / "fixtures" / "changing_server.py"


class Records:
    """An audit sink keeping what it is given."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)

    def pins(self, tool: str) -> list[str]:
        return [r.decision or "" for r in self.records if r.kind == "pin" and r.tool == tool]


async def _restart(host: Host, name: str) -> None:
    await host.restart(name)
    await host.wait_status(name, ServerStatus.CONNECTED, timeout=60)


async def test_mcp_gos_time_server_restarted_ten_times_is_never_quarantined() -> None:
    config = parse_config({"mcpServers": {"time": {"command": _require(MCP_TIME)}}})
    pins, sink = MemoryPins(), Records()
    async with Host(config, pins=pins, audit=sink, health_interval=0, start_timeout=60) as host:
        await host.wait_status("time", ServerStatus.CONNECTED, timeout=60)
        first = await pins.get("time", "current_time")
        assert first is not None and "`RFC3339`" in str(first.definition["inputSchema"])
        orders = {first.hash}
        for _ in range(10):
            await _restart(host, "time")
            pin = await pins.get("time", "current_time")
            assert pin is not None
            orders.add(pin.reordered_hash or pin.hash)
            assert pin.state is PinState.PINNED and pin.hash == first.hash  # the pinned definition stays
            assert not any(t.quarantined for t in host.tools(include_quarantined=True))
            result = await host.call_tool("time__current_time", {"timezone": "UTC"})
            assert not result.is_error
        assert len(orders) > 1  # the server did list its formats in other orders
        pin = await pins.get("time", "current_time")
        assert pin is not None and pin.reorders >= 1 and pin.reordered_at is not None
        # each new order is in the audit log as reordered, with the old and new text
        decisions = sink.pins("current_time")
        assert decisions[0] == "pinned" and "reordered" in decisions and "changed" not in decisions
        reordered = next(r for r in sink.records if r.kind == "pin" and r.decision == "reordered")
        assert reordered.outcome == "pinned" and reordered.diff is not None and "`RFC3339`" in reordered.diff


async def test_a_changed_title_quarantines_and_swapped_words_do_not(tmp_path: Path) -> None:
    (tmp_path / "description").write_text("Reports the weather.")
    (tmp_path / "title").write_text("Weather report")
    entry = {"command": sys.executable, "args": [str(CHANGING), str(tmp_path)]}
    config = parse_config({"mcpServers": {"chg": entry}})
    pins, sink = MemoryPins(), Records()
    async with Host(config, pins=pins, audit=sink, health_interval=0, start_timeout=60) as host:
        await host.wait_status("chg", ServerStatus.CONNECTED, timeout=60)
        await trio.Path(tmp_path / "title").write_text("report Weather")  # the same words, swapped
        await _restart(host, "chg")
        assert "chg__report" in {t.name for t in host.tools()}
        assert sink.pins("report") == ["pinned", "reordered"]
        await trio.Path(tmp_path / "title").write_text("Weather report (and your SSH keys)")  # a word added
        await _restart(host, "chg")
        assert "chg__report" not in {t.name for t in host.tools()}
        pin = await pins.get("chg", "report")
        assert pin is not None and pin.state is PinState.QUARANTINED
        assert pin.pending_definition is not None and pin.pending_definition["title"].endswith("SSH keys)")
        assert sink.pins("report") == ["pinned", "reordered", "changed"]
