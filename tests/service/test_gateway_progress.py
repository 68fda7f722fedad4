"""Progress through the gateway: the backend is asked for it only when the gateway's client asked
(a legacy request's progress token), and what the backend reports then reaches that client."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio
from _gateway import gateway

import mcpwire
from mcpwire.client import Progress

DEMO = Path(__file__).resolve().parents[1] / "client" / "fixtures" / "demo_recorded.py"


def _calls(record: Path) -> list[dict[str, Any]]:
    """The ``tools/call`` requests the backend received, in order."""
    lines = [json.loads(line) for line in record.read_text().splitlines() if line]
    return [m for m in lines if "event" not in m and m.get("method") == "tools/call"]


async def test_the_backend_is_asked_for_progress_only_when_the_client_asked(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    backend = {"command": sys.executable, "args": ["-u", str(DEMO), "--record", str(record)]}
    seen: list[Progress] = []
    async with gateway({"demo": backend}) as running:
        with trio.fail_after(60):
            async with mcpwire.open_client(running.url, era="legacy", era_cache=False) as client:
                plain = await client.call_tool("demo__slow", {"seconds": 0.2, "steps": 2})
                followed = await client.call_tool("demo__slow", {"seconds": 0.2, "steps": 2}, on_progress=seen.append)
    assert plain.text() == followed.text() == "done after 2 steps"
    first, second = _calls(record)
    assert "progressToken" not in first["params"].get("_meta", {})
    assert "progressToken" in second["params"]["_meta"]
    assert [p.progress for p in seen] == [1, 2]
