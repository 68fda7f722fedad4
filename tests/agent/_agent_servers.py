"""Host configurations that name real MCP servers (server-everything, server-memory,
mcp-server-time, mcpwire's reference server); a test is skipped with the reason when one is not
installed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real"))

from _paths import NPM_BIN, PY_BIN, require

from mcpwire.host import HostConfig, parse_server


def time_server() -> dict[str, object]:
    return {"command": require(PY_BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}


def memory_server(folder: Path) -> dict[str, object]:
    return {
        "command": require(NPM_BIN / "mcp-server-memory"),
        "env": {"MEMORY_FILE_PATH": str(folder / "memory.jsonl")},
    }


def everything_server() -> dict[str, object]:
    return {"command": require(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]}


def reference_server() -> dict[str, object]:
    """mcpwire's own reference server (both eras; 2026-07-28 input requests)."""
    return {"command": sys.executable, "args": ["-m", "mcpwire.testing.everything"]}


def config(**servers: dict[str, object]) -> HostConfig:
    return HostConfig(servers=tuple(parse_server(name, entry) for name, entry in servers.items()))
