"""``mcpwire servers | tools | call | export`` through ``mcpwire.host.cli.main``, with the
demo server configured in a file: output, ``--json``, messages and exit statuses."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from mcpwire.host.cli import main


def _write(path: Path, servers: dict[str, object]) -> str:
    path.write_text(json.dumps({"mcpServers": servers}))
    return str(path)


def _demo(name: str, **entry: object) -> dict[str, object]:
    return {"command": sys.executable, "args": ["-u", "-m", "mcpwire.testing.demo_server", "--name", name], **entry}


@pytest.fixture
def config(tmp_path: Path) -> str:
    return _write(tmp_path / "mcp.json", {"d": _demo("d", description="the demo")})


def test_servers(config: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main("servers", ["--config", config, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["status"], row["transport"], row["era"]) == ("d", "connected", "stdio", "modern")
    assert row["tools"] > 0 and row["protocolVersion"] == "2026-07-28" and row["error"] is None
    mixed = _write(
        tmp_path / "mixed.json",
        {"d": _demo("d"), "gone": {"command": str(tmp_path / "nope")}, "off": {"command": "x", "enabled": False}},
    )
    assert main("servers", ["--config", mixed, "--start-timeout", "10"]) == 0
    header, d, gone, off = capsys.readouterr().out.splitlines()
    assert header.split() == ["NAME", "TRANSPORT", "STATUS", "ERA", "REVISION", "TOOLS", "DETAIL"]
    assert d.split()[:6] == ["d", "stdio", "connected", "modern", "2026-07-28", str(row["tools"])]
    assert gone.split()[:3] == ["gone", "stdio", "error"] and "ServerNotFound" in gone
    assert off.split()[:3] == ["off", "stdio", "disabled"]
    assert main("servers", ["--config", mixed, "--strict", "--server", "gone"]) == 2  # --strict: unreachable


def test_tools_and_export(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main("tools", ["--config", config]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["d__echo", "LOW"] and "Return the text unchanged." in line for line in lines)
    assert main("tools", ["--config", config, "--json", "--name-format", "mcp_{server}_{tool}"]) == 0
    tools = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert tools["mcp_d_echo"]["tool"] == "echo" and tools["mcp_d_echo"]["inputSchema"]["required"] == ["text"]
    assert main("export", ["--config", config, "--format", "openai", "--strict-schema"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert all(
        t["function"]["strict"] and t["function"]["parameters"]["additionalProperties"] is False for t in exported
    )
    assert main("export", ["--config", config, "--format", "openai", "--api", "responses"]) == 0
    assert all("function" not in t for t in json.loads(capsys.readouterr().out))
    assert main("export", ["--config", config, "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("## Tools\n\n### `d__add`\n")
    assert main("export", ["--config", config, "--format", "markdown", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "markdown"


def test_call(config: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main("call", ["--config", config, "d__echo", '{"text": "yo"}']) == 0
    assert capsys.readouterr().out == "yo\n"
    assert main("call", ["--config", config, "d__add", '{"a": 1, "b": 2}', "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["name"], out["server"], out["tool"], out["isError"]) == ("d__add", "d", "add", False)
    assert out["result"]["structuredContent"] == {"sum": 3}
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"text": "from stdin"}'))
    assert main("call", ["--config", config, "d__echo", "-"]) == 0
    assert capsys.readouterr().out == "from stdin\n"
    # an isError result is printed, and exits 1
    assert main("call", ["--config", config, "d__fail", '{"message": "boom"}']) == 1
    assert capsys.readouterr().out == "Error: boom\n"
    # a failed call: 1, naming server, tool and cause
    assert main("call", ["--config", config, "d__crash"]) == 1
    assert capsys.readouterr().err.startswith("mcpwire call: tool 'crash' on server 'd' failed: ServerGone: ")


def test_call_approval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _write(tmp_path / "mcp.json", {"d": _demo("d", policy={"approval": {"echo": "ask", "add": "deny"}})})
    assert main("call", ["--config", config, "d__echo", '{"text": "x"}']) == 1
    err = capsys.readouterr().err
    assert "needs approval" in err and err.rstrip().endswith("(use --approve to approve it)")
    assert main("call", ["--config", config, "d__echo", '{"text": "x"}', "--approve"]) == 0
    assert capsys.readouterr().out == "x\n"
    assert main("call", ["--config", config, "d__add", '{"a": 1, "b": 2}', "--approve", "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["type"] == "ApprovalDenied"
    assert "is denied by the server's approval setting for 'add'" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["call", "d__echo", "[1]"], "the arguments must be a JSON object"),
        (["call", "d__echo", "{nope"], "the arguments are not valid JSON (Expecting property name"),
        (["call"], "the following arguments are required: name"),
        (["export", "--format", "yaml"], "argument --format: invalid choice: 'yaml'"),
        (["tools", "--name-format", "{server}"], "--name-format: name_format must contain '{tool}'"),
        (["call", "nope__x"], "no tool named 'nope__x' on the servers of the configuration; known tools: d__add"),
        (["tools", "--server", "zzz"], "no server named zzz in the configuration; known: d"),
    ],
)
def test_usage_errors_exit_2(config: str, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    command, *rest = argv
    assert main(command, ["--config", config, *rest]) == 2
    assert message in capsys.readouterr().err


def test_configuration_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("MCPWIRE_CONFIG", raising=False)
    assert main("tools", ["--json"]) == 2
    captured = capsys.readouterr()
    assert "no configuration file found (searched $MCPWIRE_CONFIG, " in captured.err
    assert json.loads(captured.out)["error"]["type"] == "UsageError"
    assert main("tools", ["--config", str(tmp_path / "missing.json")]) == 2
    assert capsys.readouterr().err == f"mcpwire tools: config file '{tmp_path / 'missing.json'}' does not exist\n"
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert main("servers", ["--config", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"mcpwire servers: config file '{bad}' is not valid JSON: line 1, column 2: "
        "Expecting property name enclosed in double quotes\n"
    )
    partly = _write(tmp_path / "partly.json", {"ok": {"command": "x", "enabled": False}, "bad": {"url": "ftp://x"}})
    assert main("servers", ["--config", partly]) == 0
    assert (
        "warning: $.mcpServers.bad.url: expected an http:// or https:// URL, got 'ftp://x'; the server is skipped"
        in (capsys.readouterr().err)
    )
    assert main("servers", ["--config", partly, "--strict"]) == 2
    assert "1 problem(s) in the configuration:\n  $.mcpServers.bad.url" in capsys.readouterr().err
    monkeypatch.setenv("MCPWIRE_CONFIG", partly)
    assert main("servers", ["--json"]) == 0  # the search order: $MCPWIRE_CONFIG
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["ok"]
    assert main("bogus", []) == 2
    assert main("tools", ["--help"]) == 0
    assert "usage: mcpwire tools" in capsys.readouterr().out
