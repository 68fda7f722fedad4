from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpwire.errors import ConfigError
from mcpwire.host.config import find_config, load_config, parse_config
from mcpwire.transports import HttpServer, StdioServer

ENV = {"TOKEN": "s3cret", "HOME_DIR": "/home/x"}


def test_every_field_of_a_stdio_entry() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "fs": {
                    "command": "npx",
                    "args": ["-y", "server", "{BASE_PATH}/data"],
                    "env": {"KEY": "${env:TOKEN}", "H": "${HOME_DIR}"},
                    "cwd": "{BASE_PATH}",
                    "enabled": False,
                    "timeout": 1500,
                    "description": "files",
                    "allowed_tools": ["read_*"],
                    "disabled_tools": ["read_secret"],
                    "namespace": "files",
                    "policy": {"retries": 4, "retryable_tools": ["x"], "approval": {"delete_*": "deny"}},
                }
            }
        },
        base_path="/cfg",
        environ=ENV,
    )
    (s,) = cfg.servers
    assert s.type == "stdio" and s.command == "npx" and s.args == ("-y", "server", "/cfg/data")
    assert dict(s.env) == {"KEY": "s3cret", "H": "/home/x"}
    assert s.cwd == "/cfg" and s.enabled is False and s.description == "files"
    assert s.policy.timeout_seconds == 1.5 and s.policy.retries == 4
    assert s.policy.approval == (("delete_*", "deny"),)
    assert s.allowed_tools == ("read_*",) and s.disabled_tools == ("read_secret",) and s.prefix == "files"
    spec = s.to_spec()
    assert isinstance(spec, StdioServer) and spec.env["KEY"] == "s3cret"
    assert "s3cret" not in repr(s)


def test_command_as_string_and_as_argv() -> None:
    cfg = parse_config(
        {"mcpServers": {"a": {"command": "uvx mcp-server-time --x"}, "b": {"command": ["node", "s.js"]}}}
    )
    a, b = cfg.servers
    assert (a.command, a.args) == ("uvx", ("mcp-server-time", "--x"))
    assert (b.command, b.args) == ("node", ("s.js",))


def test_vscode_http_entries_with_auth() -> None:
    cfg = parse_config(
        {
            "servers": {
                "gh": {
                    "type": "http",
                    "url": "https://api.example.com/mcp",
                    "auth": {"type": "bearer", "token": "${TOKEN}"},
                },
                "k": {
                    "type": "sse",
                    "url": "http://localhost:1/sse",
                    "timeout_seconds": 5,
                    "auth": {"type": "api_key", "token": "abc", "header_name": "X-Api-Key"},
                    "headers": {"X-Team": "t"},
                },
                "inferred": {"url": "http://h/mcp"},
            }
        },
        environ=ENV,
    )
    gh, k, inferred = cfg.servers
    spec = gh.to_spec()
    assert isinstance(spec, HttpServer) and spec.auth_headers()["Authorization"] == "Bearer s3cret"
    kspec = k.to_spec()
    assert isinstance(kspec, HttpServer) and kspec.transport == "sse"
    assert kspec.auth_headers() == {"X-Team": "t", "X-Api-Key": "abc"}
    assert k.policy.timeout_seconds == 5.0
    assert inferred.type == "http"
    assert "s3cret" not in repr(gh)


def test_bad_entries_are_skipped_with_their_paths(caplog: pytest.LogCaptureFixture) -> None:
    data = {
        "mcpServers": {
            "good": {"command": "x"},
            "nothing": {},
            "badurl": {"type": "http", "url": "ftp://x"},
            "shape": [1, 2],
            "missing": {"command": "${env:NOPE}"},
            "kind": {"type": "carrier-pigeon", "command": "x"},
            "timeout": {"command": "x", "timeout_seconds": -1},
        }
    }
    cfg = parse_config(data, environ={})
    assert [s.name for s in cfg.servers] == ["good"]
    assert cfg.problems == (
        "$.mcpServers.nothing: expected a 'command' (stdio server) or a 'url' (HTTP server); it has neither",
        "$.mcpServers.badurl.url: expected an http:// or https:// URL, got 'ftp://x'",
        "$.mcpServers.shape: expected an object, got a list",
        "$.mcpServers.missing.command: environment variable 'NOPE' is not set (used as ${env:NOPE})",
        "$.mcpServers.missing.command: expected a program, got an empty string",
        "$.mcpServers.kind.type: expected 'stdio', 'http', 'streamable-http' or 'sse', got 'carrier-pigeon'",
        "$.mcpServers.timeout.timeout_seconds: expected a positive number, got -1",
    )
    assert "$.mcpServers.badurl.url" in caplog.text
    with pytest.raises(ConfigError, match=r"^7 problem\(s\) in the configuration:") as info:
        parse_config(data, environ={}, strict=True)
    assert len(info.value.problems) == 7


def test_top_level_shape() -> None:
    with pytest.raises(ConfigError, match=r"^\$: expected a key 'mcpServers'"):
        parse_config({"other": 1})
    with pytest.raises(ConfigError, match=r"^\$: expected a JSON object"):
        parse_config([])
    assert parse_config({}).servers == ()


def test_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MCPWIRE_CONFIG", raising=False)
    assert find_config() is None
    assert load_config().servers == ()
    home = tmp_path / "home" / ".config" / "mcpwire"
    home.mkdir(parents=True)
    (home / "mcp.json").write_text(json.dumps({"mcpServers": {"h": {"command": "x"}}}))
    assert find_config() == home / "mcp.json"
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"c": {"command": "x"}}}))
    assert find_config() == tmp_path / "mcp.json"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"mcpServers": {"o": {"command": "{BASE_PATH}/bin"}}}))
    monkeypatch.setenv("MCPWIRE_CONFIG", str(other))
    loaded = load_config()
    assert loaded.servers[0].command == f"{tmp_path}/bin"
    assert find_config(tmp_path / "mcp.json") == tmp_path / "mcp.json"
    with pytest.raises(ConfigError, match="does not exist"):
        find_config(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"^cannot read config file"):
        load_config(tmp_path / "bad.json")
