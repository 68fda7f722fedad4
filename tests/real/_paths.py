"""Where tests/real/install_servers.sh puts the third-party servers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"
#: mcp-proxy 0.13 (Python SDK 1.x streamable HTTP) and FastMCP 4.1.2 (its proxy), each in its own venv
PROXY_BIN = SERVERS / "proxy" / "bin"
FASTMCP_BIN = SERVERS / "fastmcp" / "bin"
CRON = SERVERS / "npm" / "node_modules" / "mcp-cron-linux-amd64" / "bin" / "mcp-cron"
#: mcp-go's time server: its tool descriptions list a Go map, in a new order on each start
MCP_TIME = SERVERS / "npm" / "node_modules" / "mcp-time-linux-x64" / "bin" / "mcp-time"


def fastmcp_config(folder: Path) -> Path:
    """An ``mcp.json`` naming server-everything, for ``fastmcp run`` (its proxy serves it)."""
    path = folder / "mcp.json"
    everything = require(NPM_BIN / "mcp-server-everything")
    path.write_text(json.dumps({"mcpServers": {"everything": {"command": everything, "args": ["stdio"]}}}))
    return path


def require(path: Path) -> str:
    """The path as a string; skips the test when missing (fails it under CI)."""
    if not path.exists():
        message = f"{path} is missing: run tests/real/install_servers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)
