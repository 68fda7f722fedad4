"""The host against real third-party servers, configured through a file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpwire.host import Host, ServerStatus

REPO = Path(__file__).resolve().parents[2]
SERVERS = REPO / ".cache" / "servers"
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"


def _require(path: Path) -> str:
    if not path.exists():
        pytest.skip(f"{path} is missing: run tests/real/install_servers.sh")
    return str(path)


@pytest.mark.real
async def test_real_servers_through_a_config_file(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "hello.txt").write_text("hello from the host\n")
    config = {
        "mcpServers": {
            "everything": {"command": _require(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]},
            "fs": {"command": [_require(NPM_BIN / "mcp-server-filesystem"), "{BASE_PATH}/files"]},
            "memory": {"command": _require(NPM_BIN / "mcp-server-memory"), "env": {"MEMORY_FILE_PATH": "${MEM}"}},
            "time": {"command": _require(PY_BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]},
            "missing": {"command": str(tmp_path / "no-such-server")},
            "badurl": {"type": "http", "url": "not a url"},
            "shape": ["not", "an", "object"],
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config).replace("${MEM}", str(tmp_path / "memory.jsonl")))
    async with Host.from_config(path, health_interval=0, backoff_base=30.0) as host:
        assert host.config.problems[0].startswith("$.mcpServers.badurl.url: expected an http")
        assert {i.name: i.status for i in host.list()} == {
            "everything": ServerStatus.CONNECTED,
            "fs": ServerStatus.CONNECTED,
            "memory": ServerStatus.CONNECTED,
            "time": ServerStatus.CONNECTED,
            "missing": ServerStatus.ERROR,
        }
        names = {t.name for t in host.tools()}
        assert {"everything__echo", "fs__read_text_file", "memory__read_graph", "time__get_current_time"} <= names
        echoed = await host.call_tool("everything__echo", {"message": "hi"})
        assert "hi" in echoed.text()
        text = await host.call_tool("fs__read_text_file", {"path": str(files / "hello.txt")})
        assert "hello from the host" in text.text()
        now = await host.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert "UTC" in now.text()
        graph = await host.call_tool("memory__read_graph", {})
        assert not graph.is_error
        exported = host.registry.to_openai(strict=True)
        assert all(t["function"]["parameters"]["additionalProperties"] is False for t in exported)
