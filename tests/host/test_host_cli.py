from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from mcpwire.host.cli import main


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "mcp.json"
    demo = {"command": sys.executable, "args": ["-u", "-m", "mcpwire.testing.demo_server", "--name", "d"]}
    path.write_text(json.dumps({"mcpServers": {"d": demo}}))
    return str(path)


def test_cli_commands(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main("servers", ["--config", config, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["name"] == "d" and row["status"] == "connected" and row["tools"] > 0
    assert main("tools", ["--config", config]) == 0
    assert "d__echo" in capsys.readouterr().out
    assert main("call", ["--config", config, "d__echo", '{"text": "yo"}']) == 0
    assert capsys.readouterr().out == "yo\n"
    assert main("export", ["--config", config, "--format", "openai", "--strict-schema"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert all(t["function"]["strict"] for t in exported)
    assert main("call", ["--config", config, "nope__x"]) == 1
    assert "no tool named 'nope__x'" in capsys.readouterr().err
    assert main("call", ["--config", config, "d__echo", "[1]"]) == 2
    assert main("call", ["--config", config, "d__crash"]) == 1
    assert "tool 'crash' on server 'd' failed: ServerGone" in capsys.readouterr().err
