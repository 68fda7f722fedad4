"""A bounded ``mcpwire fuzz`` run against a real server (server-memory, on a temporary file).

The full runs against server-everything, -filesystem, -memory and mcp-server-time, and what they
found, are in ``docs/fuzz-findings.md``; this one stays small (a few tools, the protocol kinds
that do not meet those findings, the stateful machine) and must report nothing: no false
positive of the fuzzer on a real peer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _support import SERVERS, run_json

pytestmark = pytest.mark.real


def _require(path: Path) -> str:
    if not path.exists():
        message = f"{path} is missing: run tests/real/install_servers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def test_bounded_run_on_server_memory_reports_nothing(tmp_path: Path) -> None:
    memory = _require(SERVERS / "npm" / "node_modules" / ".bin" / "mcp-server-memory")
    status, report = run_json(
        ["--seed", "11", "--max-examples", "10", "--machine-runs", "2", "--deadline", "5",
         "--allow", "create_entities", "--allow", "search_nodes", "--allow", "read_graph",
         "--phase", "tools", "--phase", "protocol", "--phase", "stateful", "--phase", "lists",
         "--protocol-kind", "notifications", "--protocol-kind", "malformed",
         "--env", f"MEMORY_FILE_PATH={tmp_path / 'memory.jsonl'}", "--out", str(tmp_path / "out"), "--", memory]
    )  # fmt: skip
    assert report["server"]["info"]["name"] == "memory-server" and report["server"]["era"] == "legacy"
    assert report["server"]["env"] == ["MEMORY_FILE_PATH"]  # the name only, never the value
    assert (status, report["findings"]) == (0, [])
    assert [u["unit"] for u in report["units"]] == [
        "lists", "tools:create_entities", "tools:read_graph", "tools:search_nodes",
        "protocol-notifications", "protocol-malformed", "stateful",
    ]  # fmt: skip
