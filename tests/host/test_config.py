from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mcpwire.errors import ConfigError
from mcpwire.host.config import (
    DEFAULT_TIMEOUT_SECONDS,
    ToolPolicy,
    find_config,
    load_config,
    parse_config,
    parse_server,
)
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


def test_streamable_http_type() -> None:
    cfg = parse_config(
        {
            "servers": {
                "a": {"type": "streamable-http", "url": "https://h/mcp"},
                "b": {"type": "streamableHttp", "url": "https://h/mcp"},
                "c": {"transport": "streamable-http", "url": "https://h/mcp"},
            }
        }
    )
    assert cfg.problems == ()
    assert [s.type for s in cfg.servers] == ["http"] * 3
    spec = cfg.servers[0].to_spec()
    assert isinstance(spec, HttpServer) and spec.transport == "auto" and spec.url == "https://h/mcp"


def test_api_key_auth_defaults_to_the_authorization_header() -> None:
    (s,) = parse_config(
        {"mcpServers": {"k": {"url": "https://h/mcp", "auth": {"type": "api_key", "token": "${TOKEN}"}}}}, environ=ENV
    ).servers
    assert (s.auth_type, s.auth_header) == ("api_key", "Authorization")
    spec = s.to_spec()
    assert isinstance(spec, HttpServer) and spec.auth_headers() == {"Authorization": "s3cret"}
    assert "s3cret" not in repr(s)


def test_the_default_timeout_is_30_seconds() -> None:
    assert DEFAULT_TIMEOUT_SECONDS == 30.0
    cfg = parse_config({"mcpServers": {"a": {"command": "x"}, "h": {"url": "https://h/mcp", "policy": {"retries": 1}}}})
    for s in cfg.servers:
        assert s.policy.timeout_seconds == 30.0
        assert s.policy.for_tool("anything").timeout_seconds == 30.0


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
        "$.mcpServers.kind.type: expected 'stdio', 'http', 'streamable-http', 'sse', 'local' or 'remote', "
        "got 'carrier-pigeon'",
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
    with pytest.raises(
        ConfigError,
        match=r"^config file '.*bad\.json' is not valid JSON: line 1, column 2: "
        r"Expecting property name enclosed in double quotes$",
    ):
        load_config(tmp_path / "bad.json")


def test_per_tool_policies_resolve_first_match_per_setting() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "s": {
                    "command": "x",
                    "timeout_seconds": 20,
                    "policy": {
                        "retries": 1,
                        "retryable_tools": ["sync_*"],
                        "cacheable_tools": ["lookup"],
                        "cache_ttl_seconds": 10,
                        "approval": {"delete_*": "ask", "*": "allow"},
                        "trust_annotations": True,
                        "tools": {
                            "delete_tmp": {"approval": "allow", "risk": "LOW"},
                            "delete_*": {"timeout_seconds": 5, "retryable": False},
                            "*": {"timeout_seconds": 9, "cacheable": False},
                        },
                    },
                }
            }
        }
    )
    (s,) = cfg.servers
    assert s.policy.trust_annotations is True
    assert s.policy.tools[0] == ("delete_tmp", ToolPolicy(approval="allow", risk="low"))
    tmp = s.policy.for_tool("delete_tmp")
    assert (tmp.timeout_seconds, tmp.approval, tmp.risk, tmp.retryable) == (5.0, "allow", "low", False)
    other = s.policy.for_tool("delete_all")
    assert (other.timeout_seconds, other.approval, other.risk) == (5.0, "ask", None)
    sync = s.policy.for_tool("sync_now")
    assert (sync.timeout_seconds, sync.retryable, sync.retries, sync.approval) == (9.0, True, 1, "allow")
    assert (sync.cacheable, sync.cache_ttl_seconds) == (False, 10.0)  # the "*" override wins
    bare = parse_config({"mcpServers": {"b": {"command": "x", "timeout": 2500}}}).servers[0].policy.for_tool("t")
    assert (bare.timeout_seconds, bare.retries, bare.retryable, bare.cacheable, bare.approval) == (
        2.5, 2, None, None, None
    )  # fmt: skip


def test_policy_problems_name_their_paths() -> None:
    data = {
        "mcpServers": {
            "p": {
                "command": "x",
                "policy": {
                    "retries": 1.5,
                    "timeout_seconds": 0,
                    "cache_size": -1,
                    "retryable_tools": "all",
                    "trust_annotations": "yes",
                    "approval": {"x": "maybe"},
                    "tools": {"t": {"retries": -2, "risk": "extreme", "cacheable": 1, "approval": "sure"}, "u": 3},
                },
                "health_interval_seconds": -1,
            },
            "ok": {"command": "y"},
        }
    }
    assert parse_config(data).problems == (
        "$.mcpServers.p.policy.retries: expected a non-negative integer, got 1.5",
        "$.mcpServers.p.policy.timeout_seconds: expected a positive number, got 0",
        "$.mcpServers.p.policy.cache_size: expected a non-negative integer, got -1",
        "$.mcpServers.p.policy.retryable_tools: expected a list of tool names or globs, got a string",
        "$.mcpServers.p.policy.trust_annotations: expected true or false, got a string",
        "$.mcpServers.p.policy.approval.x: expected 'allow', 'deny', 'ask' or 'ask-caller', got 'maybe'",
        "$.mcpServers.p.policy.tools.t.retries: expected a non-negative integer, got -2",
        "$.mcpServers.p.policy.tools.t.risk: expected 'low', 'medium', 'high' or 'critical', got 'extreme'",
        "$.mcpServers.p.policy.tools.t.cacheable: expected true or false, got a number",
        "$.mcpServers.p.policy.tools.t.approval: expected 'allow', 'deny', 'ask' or 'ask-caller', got 'sure'",
        "$.mcpServers.p.policy.tools.u: expected an object, got a number",
        "$.mcpServers.p.health_interval_seconds: expected a non-negative number, got -1",
    )


def test_vscode_placeholders(tmp_path: Path) -> None:
    vscode = tmp_path / "proj" / ".vscode"
    cfg = parse_config(
        {"servers": {"s": {"command": "${workspaceFolder}/bin/s", "args": ["${userHome}"], "cwd": "{BASE_PATH}"}}},
        base_path=vscode,
    )
    (s,) = cfg.servers
    assert (s.command, s.args, s.cwd) == (f"{tmp_path}/proj/bin/s", (str(Path.home()),), str(vscode))
    bad = parse_config(
        {
            "servers": {
                "s": {"type": "http", "url": "https://h/mcp", "headers": {"K": "${input:key}"}},
                "ok": {"command": "y"},
            }
        }
    )
    assert bad.problems == (
        "$.servers.s.headers.K: the placeholder ${input:key} is not supported; use ${env:NAME}, ${NAME} or {BASE_PATH}",
    )


def test_parse_server_lists_every_problem() -> None:
    server = parse_server(
        "gh", {"url": "https://api.example.com/mcp", "auth": {"type": "bearer", "token": "${T}"}}, environ={"T": "x"}
    )
    assert server.type == "http" and server.auth_token == "x"
    with pytest.raises(ConfigError) as err:
        parse_server("bad", {"command": ["", "x"], "env": {"A": 1, "B": ["x"]}, "auth": {"type": "basic"}})
    assert err.value.problems == (
        "$.bad.command[0]: expected a program, got an empty string",
        "$.bad.auth.type: expected 'bearer' or 'api_key', got 'basic'",
        "$.bad.env.B: expected a string, a number or a boolean, got a list",
    )
    assert str(err.value).startswith("server 'bad': $.bad.command[0]: expected a program")


def test_strict_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"ok": {"command": "x"}, "missing": {"args": ["y"]}}}))
    assert [s.name for s in load_config(path).servers] == ["ok"]
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: 1 problem\(s\) in the configuration:\n") as err:
        load_config(path, strict=True)
    assert err.value.problems == (
        "$.mcpServers.missing: expected a 'command' (stdio server) or a 'url' (HTTP server); it has neither",
    )
    path.write_text(json.dumps({"mcpServers": []}))
    with pytest.raises(ConfigError, match=r": the server list is invalid:\n") as err:
        load_config(path)
    assert err.value.problems == ("$.mcpServers: expected an object mapping server names to entries, got a list",)


def test_spec07_local_and_remote_entries() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "local": {
                    "type": "local",
                    "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
                    "environment": {"MEMORY_FILE_PATH": "/tmp/m.json", "DEBUG": True, "PORT": 8080, "RATIO": 0.5},
                    "enabled": True,
                },
                "remote": {"type": "remote", "url": "https://mcp.example.com/mcp", "headers": {"X-Team": 7}},
            }
        },
        environ={},
    )
    local, remote = cfg.servers
    assert (local.type, local.command, local.args) == ("stdio", "npx", ("-y", "@modelcontextprotocol/server-memory"))
    # numbers and booleans become their JSON text, as a shell would pass them
    assert dict(local.env) == {"MEMORY_FILE_PATH": "/tmp/m.json", "DEBUG": "true", "PORT": "8080", "RATIO": "0.5"}
    spec = local.to_spec()
    assert isinstance(spec, StdioServer) and spec.env["PORT"] == "8080"
    assert (remote.type, remote.url, dict(remote.headers)) == ("http", "https://mcp.example.com/mcp", {"X-Team": "7"})
    assert cfg.problems == ()


def test_misspelt_keys_get_a_did_you_mean() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "typo": {"comand": "npx", "args": ["x"]},
                "policy": {"command": "x", "policy": {"retrys": 1, "tools": {"t": {"aproval": "ask"}}}},
                "timeout": {"command": "x", "timeout_second": 5},
                "vendor": {"command": "x", "x-vendor-extension": {"anything": 1}},
            }
        }
    )
    assert [s.name for s in cfg.servers] == ["vendor"]  # keys of other tools are ignored
    assert cfg.problems == (
        "$.mcpServers.typo.comand: unknown key; did you mean 'command'?",
        "$.mcpServers.typo: expected a 'command' (stdio server) or a 'url' (HTTP server); it has neither",
        "$.mcpServers.policy.policy.retrys: unknown key; did you mean 'retries'?",
        "$.mcpServers.policy.policy.tools.t.aproval: unknown key; did you mean 'approval'?",
        "$.mcpServers.timeout.timeout_second: unknown key; did you mean 'timeout_seconds'?",
    )


def test_truncated_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text('{\n  "mcpServers": {\n    "a": {"command": "x"')
    with pytest.raises(
        ConfigError,
        match=r"^config file '.*mcp\.json' is not valid JSON: line 3, column 25: Expecting ',' delimiter "
        r"\(the file ends early; is it truncated\?\)$",
    ):
        load_config(path)
    text = '{"mcpServers": {"a": {"command": "x",}}}'
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError) as parsed:  # Python 3.13 words a trailing comma its own way
        json.loads(text)
    said = f"line 1, column {parsed.value.colno}: {parsed.value.msg}"
    assert parsed.value.colno in (37, 38)
    with pytest.raises(ConfigError, match=re.escape(said) + "$"):
        load_config(path)


def test_every_entry_invalid_is_an_error_not_an_empty_host(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"url": "ftp://x"}, "b": {"command": 3}}}))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == (
        f"{path}: every server entry (2) is invalid:\n"
        "  $.mcpServers.a.url: expected an http:// or https:// URL, got 'ftp://x'\n"
        "  $.mcpServers.b.command: expected a string or a non-empty list of strings, got a number"
    )
    path.write_text(json.dumps({"mcpServers": {}}))
    assert load_config(path).servers == ()  # no entries is not an error


def test_connect_timeout_and_approval_thresholds() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "a": {
                    "command": "x",
                    "connect_timeout_seconds": 90,
                    "timeout_seconds": 10,
                    "policy": {"ask_at": "Medium", "tools": {"read_*": {"ask_at": "critical"}}},
                },
                "b": {"command": "x", "startup_timeout_seconds": 15},
                "c": {"command": "x", "connect_timeout_seconds": 0},
                "d": {"command": "x", "policy": {"ask_at": "sometimes"}},
            }
        }
    )
    a, b = cfg.servers
    assert (a.connect_timeout_seconds, a.policy.timeout_seconds, b.connect_timeout_seconds) == (90.0, 10.0, 15.0)
    assert (a.policy.ask_at, a.policy.for_tool("write").ask_at, a.policy.for_tool("read_x").ask_at) == (
        "medium",
        "medium",
        "critical",
    )
    assert b.policy.for_tool("t").ask_at is None
    assert cfg.problems == (
        "$.mcpServers.c.connect_timeout_seconds: expected a positive number of seconds, got 0",
        "$.mcpServers.d.policy.ask_at: expected 'low', 'medium', 'high' or 'critical', got 'sometimes'",
    )


def test_era_and_revision_pins() -> None:
    cfg = parse_config(
        {
            "mcpServers": {
                "a": {"command": "x", "era": "legacy", "protocol_version": "2025-06-18"},
                "b": {"command": "x", "era": "auto"},
                "c": {"command": "x", "era": "ancient"},
                "d": {"command": "x", "protocol_version": "2023-01-01"},
            }
        }
    )
    a, b = cfg.servers
    assert (a.era, a.protocol_version, b.era, b.protocol_version) == ("legacy", "2025-06-18", None, None)
    assert cfg.problems[0] == "$.mcpServers.c.era: expected 'auto', 'legacy' or 'modern', got 'ancient'"
    assert cfg.problems[1].startswith("$.mcpServers.d.protocol_version: expected one of 2026-07-28, 2025-11-25,")


def test_a_url_the_http_client_cannot_use_is_refused_with_its_reason() -> None:
    data = {
        "mcpServers": {
            "ok": {"command": "x"},
            "idna": {"url": "http://\u0133/mcp"},
            "port": {"url": "http://h:abc/mcp"},
        }
    }
    cfg = parse_config(data, environ={})
    assert [s.name for s in cfg.servers] == ["ok"]
    assert cfg.problems == (
        "$.mcpServers.idna.url: invalid IDNA hostname: '\u0133', got 'http://\u0133/mcp'",
        "$.mcpServers.port.url: invalid port: 'abc', got 'http://h:abc/mcp'",
    )


def test_a_remote_servers_args_are_checked_though_unused() -> None:
    with pytest.raises(ConfigError) as err:
        parse_server("remote", {"url": "https://api.example.com/mcp", "args": 5})
    assert err.value.problems == ("$.remote.args: expected a list of strings, got a number",)
    assert parse_server("remote", {"url": "https://api.example.com/mcp", "args": ["--x"]}).type == "http"
    with pytest.raises(ConfigError) as err:
        parse_server("remote", {"type": "http", "url": "https://api.example.com/mcp", "command": [{"a": 1}]})
    assert err.value.problems == ("$.remote.command: expected a string or a non-empty list of strings, got a list",)
    with pytest.raises(ConfigError) as err:
        parse_server("local", {"command": "python", "url": "\x07"})
    assert err.value.problems == ("$.local.url: expected an http:// or https:// URL, got '\\x07'",)


def test_a_key_another_overrides_is_still_checked() -> None:
    entry = {
        "command": "python", "type": "stdio", "transport": 5, "enabled": True, "disabled": 5,
        "timeout_seconds": 3, "timeout": False, "connect_timeout_seconds": 3, "startup_timeout_seconds": False,
    }  # fmt: skip
    with pytest.raises(ConfigError) as err:
        parse_server("x", entry)
    assert sorted(err.value.problems) == [
        "$.x.disabled: expected true or false, got a number",
        "$.x.startup_timeout_seconds: expected a positive number of seconds, got False",
        "$.x.timeout: expected a positive number, got False",
        "$.x.transport: expected a transport such as 'stdio' or 'http', got 5",
    ]
