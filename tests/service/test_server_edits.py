"""PATCH /api/v1/servers/{name}: a JSON merge patch of any field of a server's entry, for a server
added through the API and for one of the config file alike (whose file is never rewritten: its
edits live in the store, laid over the file's entry)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from _harness import demo_entry, running_service, write_config

from mcpwire.host import ServerStatus
from mcpwire.service.servers import merge_patch, patch_between


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    # "x-other-tool" is another tool's key: the loader ignores it, and so does an edit
    filed = {**demo_entry(), "env": {"KEEP": "1", "DROP": "2"}, "description": "from the file", "x-other-tool": 1}
    return write_config(tmp_path / "mcp.json", {"filed": filed})


def test_merge_patch_and_the_least_patch_between_two_entries() -> None:
    entry: dict[str, Any] = {"command": "a", "env": {"A": "1", "B": "2"}, "policy": {"retries": 1}}
    patch = {"env": {"B": None, "C": "3"}, "policy": None, "url": "http://h/"}
    edited = merge_patch(entry, patch)
    assert edited == {"command": "a", "env": {"A": "1", "C": "3"}, "url": "http://h/"}
    assert entry["env"] == {"A": "1", "B": "2"}  # not changed in place
    assert patch_between(entry, edited) == {"env": {"B": None, "C": "3"}, "policy": None, "url": "http://h/"}
    assert merge_patch(entry, patch_between(entry, edited)) == edited
    assert patch_between(entry, entry) == {}
    # an object removed and then given again is the new object, not the old one merged with it
    again = merge_patch(merge_patch(entry, {"policy": None}), {"policy": {"cache_size": 3}})
    assert again == {"command": "a", "env": {"A": "1", "B": "2"}, "policy": {"cache_size": 3}}
    assert merge_patch(entry, patch_between(entry, again)) == again
    # (RFC 7396's own example)
    assert merge_patch({"a": "b", "c": {"d": "e", "f": "g"}}, {"a": "z", "c": {"f": None}}) == {
        "a": "z",
        "c": {"d": "e"},
    }


async def _connected(svc: Any, name: str) -> None:
    await svc.host.wait_status(name, ServerStatus.CONNECTED, timeout=30)


async def test_any_field_of_a_config_server_changes_and_the_file_stays_as_it_was(
    db: str, config: Path, tmp_path: Path
) -> None:
    before = await trio.Path(config).read_text()
    other = tmp_path / "elsewhere"
    await trio.Path(other).mkdir()
    async with running_service(db, config) as svc:
        c = svc.client
        await _connected(svc, "filed")
        patch = {
            "args": ["-m", "mcpwire.testing.demo_server", "--era", "legacy"],
            "env": {"DROP": None, "NEW": "${env:HOME}"},
            "cwd": str(other),
            "description": "edited",
            "policy": {"retries": 0, "tools": {"add": {"approval": "deny"}}},
            "timeout_seconds": 0.5,
            "disabled_tools": ["slow"],
        }
        edited = await c.patch("/api/v1/servers/filed", json=patch)
        assert edited.status_code == 200, edited.text
        assert edited.json()["description"] == "edited" and edited.json()["source"] == "config"
        await _connected(svc, "filed")
        server = svc.host.get("filed")
        assert server.era == "legacy"  # it runs with its new arguments
        assert dict(server.config.env) == {"KEEP": "1", "NEW": str(Path.home())}
        assert server.config.cwd == str(other)
        assert server.config.policy.retries == 0 and server.config.policy.timeout_seconds == 0.5
        denied = await c.post("/api/v1/tools/filed__add/call", json={"arguments": {"a": 1, "b": 2}})
        assert denied.status_code == 403, denied.text
        # the store keeps the least patch over the file's entry, placeholders as given
        (row,) = await svc.store.servers()
        assert row.patch is not None and row.entry is None
        assert row.patch["env"] == {"DROP": None, "NEW": "${env:HOME}"}
        # null removes a key, the file's own too
        again = await c.patch("/api/v1/servers/filed", json={"description": None, "cwd": None})
        assert again.status_code == 200, again.text
        assert again.json()["description"] is None
        # a bad edit is refused whole, in the loader's words, and changes nothing
        bad = await c.patch("/api/v1/servers/filed", json={"command": 7, "env": {"X": [1]}, "tiemout": 3})
        assert bad.status_code == 422, bad.text
        assert sorted((e["path"], e["message"]) for e in bad.json()["errors"]) == [
            ("$.command", "expected a string or a non-empty list of strings, got a number"),
            ("$.env.X", "expected a string, a number or a boolean, got a list"),
            ("$.tiemout", "unknown key; did you mean 'timeout'?"),
        ]
        assert svc.host.get("filed").config.description is None
        # an unknown key is refused even as null (removing what cannot be there)
        unknown = await c.patch("/api/v1/servers/filed", json={"tiemout": None, "allowed_tools": []})
        assert unknown.status_code == 422, unknown.text
        assert [(e["path"], e["message"]) for e in unknown.json()["errors"]] == [
            ("$.tiemout", "unknown key; did you mean 'timeout'?")
        ]
        name_change = await c.patch("/api/v1/servers/filed", json={"name": "other"})
        assert name_change.status_code == 422 and name_change.json()["errors"][0]["path"] == "$.name"
    assert await trio.Path(config).read_text() == before
    async with running_service(db, config) as svc:
        server = svc.host.get("filed")
        assert dict(server.config.env) == {"KEEP": "1", "NEW": str(Path.home())}
        assert server.config.description is None and server.config.cwd is None
        assert server.config.disabled_tools == ("slow",)
        # edited back to what the file says: nothing is left in the store
        reverted = await svc.client.patch(
            "/api/v1/servers/filed",
            json={
                "args": demo_entry()["args"],
                "env": {"DROP": "2", "NEW": None},
                "policy": None,
                "timeout_seconds": None,
                "disabled_tools": None,
                "description": "from the file",
            },
        )
        assert reverted.status_code == 200, reverted.text
        assert await svc.store.servers() == []


async def test_an_api_server_moves_from_stdio_to_http_and_back(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        added = await c.post("/api/v1/servers", json={"name": "moving", **demo_entry()})
        assert added.status_code == 201, added.text
        await _connected(svc, "moving")
        patch = {"command": None, "args": None, "url": "http://127.0.0.1:9/mcp", "headers": {"X-Team": "ops"},
                 "auth": {"type": "bearer", "token": "${env:MOVING_TOKEN}"}}  # fmt: skip
        refused = await c.patch("/api/v1/servers/moving", json=patch)
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"] == [{
            "in": "body", "path": "$.auth.token",
            "message": "environment variable 'MOVING_TOKEN' is not set (used as ${env:MOVING_TOKEN})",
        }]  # fmt: skip
        patch["auth"] = {"type": "api_key", "token": "k-123", "header_name": "X-Key"}
        moved = await c.patch("/api/v1/servers/moving", json=patch)
        assert moved.status_code == 200, moved.text
        assert moved.json()["transport"] == "http" and moved.json()["target"] == "http://127.0.0.1:9/mcp"
        config_now = svc.host.get("moving").config
        assert (config_now.auth_type, config_now.auth_header, dict(config_now.headers)) == (
            "api_key",
            "X-Key",
            {"X-Team": "ops"},
        )
        assert "k-123" not in moved.text
        back = await c.patch(
            "/api/v1/servers/moving", json={**demo_entry(), "url": None, "auth": None, "headers": None}
        )
        assert back.status_code == 200, back.text
        await _connected(svc, "moving")
        (row,) = [r for r in await svc.store.servers() if r.name == "moving"]
        assert row.entry == demo_entry()


async def test_an_edit_that_changes_nothing_restarts_nothing(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        await _connected(svc, "filed")
        since = svc.host.get("filed").connected_since
        same = await svc.client.patch("/api/v1/servers/filed", json={"description": "from the file"})
        assert same.status_code == 200, same.text
        await trio.sleep(0.2)
        assert svc.host.get("filed").connected_since == since
        assert svc.host.get("filed").restart_count == 0
