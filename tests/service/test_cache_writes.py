"""Caches that follow writes, against server-memory through the API: a read after a delete is
fresh; a tool configured not to invalidate leaves the cache as it was, and a call that asks for a
fresh answer gets one (which then serves later reads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _gateway import NPM_BIN, require
from _harness import Running, running_service, write_config

pytestmark = [pytest.mark.real]

ADA = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["writes programs"]}]}
BOB = {"entities": [{"name": "Bob", "entityType": "person", "observations": ["reads them"]}]}


def _config(tmp_path: Path, **policy: Any) -> Path:
    tools = {"*": {"approval": "allow"}, **policy}
    memory = {
        "command": require(NPM_BIN / "mcp-server-memory"),
        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        "policy": {"tools": tools},
    }
    return write_config(tmp_path / "mcp.json", {"memory": memory})


async def _call(svc: Running, tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    reply = await svc.client.post(f"/api/v1/tools/memory__{tool}/call", json={"arguments": arguments, **extra})
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def test_a_read_after_a_delete_is_fresh(tmp_path: Path) -> None:
    async with running_service(f"sqlite:///{tmp_path / 'service.db'}", _config(tmp_path)) as svc:
        await _call(svc, "create_entities", ADA)
        first = await _call(svc, "read_graph", {})
        again = await _call(svc, "read_graph", {})
        assert "Ada" in first["text"] and (first["cached"], again["cached"]) == (False, True)  # a read-only tool
        await _call(svc, "delete_entities", {"entityNames": ["Ada"]})
        after = await _call(svc, "read_graph", {})
        assert (after["cached"], "Ada" in after["text"]) == (False, False)
        # a failed write drops the cache too: the server may have done part of it
        assert (await _call(svc, "read_graph", {}))["cached"] is True
        await _call(svc, "add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]})
        assert (await _call(svc, "read_graph", {}))["cached"] is False


async def test_a_narrowed_write_leaves_the_cache_and_a_fresh_call_replaces_it(tmp_path: Path) -> None:
    config = _config(tmp_path, create_entities={"approval": "allow", "invalidates": "none"})
    async with running_service(f"sqlite:///{tmp_path / 'service.db'}", config) as svc:
        await _call(svc, "create_entities", ADA)
        assert "Ada" in (await _call(svc, "read_graph", {}))["text"]
        await _call(svc, "create_entities", BOB)  # configured to drop nothing
        stale = await _call(svc, "read_graph", {})
        assert (stale["cached"], "Bob" in stale["text"]) == (True, False)
        fresh = await _call(svc, "read_graph", {}, fresh=True)
        assert (fresh["cached"], "Bob" in fresh["text"]) == (False, True)
        later = await _call(svc, "read_graph", {})
        assert (later["cached"], "Bob" in later["text"]) == (True, True)  # the fresh answer serves the next read
