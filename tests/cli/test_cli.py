"""The ``mcpwire`` command line, run as a subprocess against the bundled demo server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _cli_run import DEMO_COMMAND, mcpwire


def test_call_on_the_demo_server() -> None:
    """The README's first command: no server given, the bundled demo server answers."""
    proc = mcpwire("call", "echo", '{"text": "hello from mcpwire"}')
    assert proc.returncode == 0, proc.stderr
    assert "hello from mcpwire" in proc.stdout


def test_tools_as_json_with_a_server_command() -> None:
    proc = mcpwire("tools", "--json", "--", sys.executable, "-m", "mcpwire.testing.demo_server")
    assert proc.returncode == 0, proc.stderr
    names = {tool["name"] for tool in json.loads(proc.stdout)}
    assert {"echo", "add"} <= names


def test_a_tool_error_exits_1() -> None:
    proc = mcpwire("call", "fail", "{}")
    assert proc.returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("call", "echo", "{not json"), "mcpwire call: the arguments are not valid JSON"),
        (("call", "echo", "[1]"), "mcpwire call: the arguments must be a JSON object"),
        (("tools", "--"), "mcpwire tools: nothing after '--'"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args: tuple[str, ...], message: str) -> None:
    proc = mcpwire(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message), proc.stderr


def test_a_missing_command_is_named() -> None:
    proc = mcpwire("tools", "--", "no-such-mcp-server-command")
    assert proc.returncode == 2
    assert "no-such-mcp-server-command" in proc.stderr


def test_login_is_dispatched() -> None:
    """``mcpwire login`` belongs to :mod:`mcpwire.auth.cli`; a bad URL is a usage error there."""
    proc = mcpwire("login", "--help")
    assert proc.returncode == 0
    assert "usage: mcpwire login" in proc.stdout
    proc = mcpwire("login", "not-a-url")
    assert proc.returncode == 2
    assert proc.stderr == "mcpwire login: not an http(s) URL: 'not-a-url'\n"


def test_check_is_dispatched() -> None:
    """``mcpwire check`` belongs to :mod:`conformance.cli`: the catalogue lists the seed checks."""
    proc = mcpwire("check", "--list")
    assert proc.returncode == 0, proc.stderr
    assert "SV-01" in proc.stdout and "SV-12" in proc.stdout


def test_check_runs_on_the_reference_server_by_default() -> None:
    proc = mcpwire("check", "-q", "--only", "SV-01,SV-12", "--revision", "2025-11-25", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report, "an empty report"
    assert "SV-01" in proc.stdout and "SV-12" in proc.stdout


def test_fuzz_is_dispatched() -> None:
    proc = mcpwire("fuzz", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: mcpwire fuzz")
    assert "--seed" in proc.stdout


@pytest.fixture
def demo_config(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    config = {"mcpServers": {"demo": {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server"]}}}
    (work / "mcp.json").write_text(json.dumps(config))
    return work


def test_tools_and_call_use_mcp_json_when_one_is_found(demo_config: Path) -> None:
    """In a folder with mcp.json, ``tools`` lists namespaced tools and ``call`` takes their names
    (once the project config is trusted: ``--yes``)."""
    proc = mcpwire("tools", "--json", "--yes", cwd=demo_config, home=demo_config.parent)
    assert proc.returncode == 0, proc.stderr
    names = {row["name"] for row in json.loads(proc.stdout)}
    assert {"demo__echo", "demo__add"} <= names
    proc = mcpwire("call", "demo__echo", '{"text": "through the host"}', cwd=demo_config, home=demo_config.parent)
    assert proc.returncode == 0, proc.stderr
    assert "through the host" in proc.stdout
    proc = mcpwire("servers", "--json", cwd=demo_config, home=demo_config.parent)
    assert proc.returncode == 0, proc.stderr
    [row] = json.loads(proc.stdout)
    assert (row["name"], row["status"]) == ("demo", "connected")


def test_a_server_command_wins_over_mcp_json(demo_config: Path) -> None:
    proc = mcpwire(
        "tools",
        "--json",
        "--",
        sys.executable,
        "-m",
        "mcpwire.testing.demo_server",
        cwd=demo_config,
        home=demo_config.parent,
    )
    assert proc.returncode == 0, proc.stderr
    names = {tool["name"] for tool in json.loads(proc.stdout)}
    assert "echo" in names and "demo__echo" not in names


def test_without_mcp_json_tools_lists_the_demo_server(tmp_path: Path) -> None:
    proc = mcpwire("tools", "--json", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "echo" in {tool["name"] for tool in json.loads(proc.stdout)}


def test_an_explicit_config_that_does_not_exist_is_named(tmp_path: Path) -> None:
    proc = mcpwire("tools", "--config", str(tmp_path / "missing.json"), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "missing.json" in proc.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer a=b:c", ("Authorization", "Bearer a=b:c")),
        ("X-Api-Key=abc:def=", ("X-Api-Key", "abc:def=")),
        ("X-Empty:", ("X-Empty", "")),
    ],
)
def test_headers_take_either_separator(text: str, expected: tuple[str, str]) -> None:
    from mcpwire.transports import split_header

    assert split_header(text) == expected


@pytest.mark.parametrize("command", ["info", "check", "fuzz"])
def test_a_malformed_header_is_refused_without_echoing_it(command: str) -> None:
    """A token given without its header name must not end up on the terminal or in logs."""
    secret = "sk-live-0123456789"
    args = [command, "--header", secret]
    args += ["--", "http://127.0.0.1:9/mcp"] if command == "info" else ["http://127.0.0.1:9/mcp"]
    proc = mcpwire(*args)
    assert proc.returncode == 2, proc.stderr
    assert "--header: expected NAME: VALUE or NAME=VALUE" in proc.stderr
    assert secret not in proc.stderr + proc.stdout


# -- info and call against a server command ----------------------------------------------------------

DEMO_CAPABILITIES = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "logging": {},
    "completions": {},
}


def test_info_prints_the_era_revision_and_capabilities(tmp_path: Path) -> None:
    """``mcpwire info`` with no command: the bundled demo server, detected as 2026-07-28."""
    proc = mcpwire("info", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "server:       mcpwire-demo 1.0.0",
        "era:          modern",
        "revision:     2026-07-28",
        "capabilities: completions, logging, prompts, resources, tools",
        "instructions: Demo server bundled with mcpwire. Tools: echo, add, fail, slow, big, ask, sample, roots, "
        "notify, to…",
    ]
    assert proc.stderr == ""


@pytest.mark.parametrize(
    ("flags", "era", "revision"),
    [
        pytest.param((), "modern", "2026-07-28", id="detected"),
        pytest.param(("--era", "legacy"), "legacy", "2025-11-25", id="legacy"),
        pytest.param(("--protocol-version", "2025-03-26"), "legacy", "2025-03-26", id="revision"),
    ],
)
def test_info_json_with_a_server_command(tmp_path: Path, flags: tuple[str, ...], era: str, revision: str) -> None:
    proc = mcpwire("info", "--json", *flags, "--", *DEMO_COMMAND, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info == {
        "server": f"{sys.executable} -m mcpwire.testing.demo_server",
        "era": era,
        "protocolVersion": revision,
        "serverInfo": {"name": "mcpwire-demo", "version": "1.0.0"},
        "capabilities": DEMO_CAPABILITIES,
        "instructions": info["instructions"],
    }
    assert info["instructions"].startswith("Demo server bundled with mcpwire.")


def test_call_with_a_server_command_takes_the_last_two_words(tmp_path: Path) -> None:
    """``mcpwire call -- CMD ARGS... TOOL '{json}'``: the server command keeps its own arguments."""
    proc = mcpwire(
        "call", "--", *DEMO_COMMAND, "--name", "other-demo", "add", '{"a": 2, "b": 3}', cwd=tmp_path, home=tmp_path
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "5\n", "")
    proc = mcpwire("info", "--json", "--", *DEMO_COMMAND, "--name", "other-demo", cwd=tmp_path, home=tmp_path)
    assert json.loads(proc.stdout)["serverInfo"] == {"name": "other-demo", "version": "1.0.0"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_call_json_prints_the_whole_result(tmp_path: Path, era: str) -> None:
    """``call --json``: content, isError and (when present) structuredContent, in both eras."""
    proc = mcpwire(
        "call", "--json", "--era", era, "--", *DEMO_COMMAND, "add", '{"a": 2, "b": 3}', cwd=tmp_path, home=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "content": [{"type": "text", "text": "5"}],
        "isError": False,
        "structuredContent": {"sum": 5},
    }
    proc = mcpwire(
        "call", "--json", "--era", era, "--", *DEMO_COMMAND, "echo", '{"text": "hi"}', cwd=tmp_path, home=tmp_path
    )
    assert (proc.returncode, json.loads(proc.stdout)) == (
        0,
        {"content": [{"type": "text", "text": "hi"}], "isError": False},
    )


def test_call_json_of_a_tool_error_exits_1(tmp_path: Path) -> None:
    proc = mcpwire("call", "--json", "--", *DEMO_COMMAND, "fail", '{"message": "nope"}', cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout) == {"content": [{"type": "text", "text": "nope"}], "isError": True}


def test_call_with_a_server_command_but_no_tool_is_a_usage_error(tmp_path: Path) -> None:
    proc = mcpwire("call", "--", *DEMO_COMMAND[:1], "echo", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "mcpwire call: give the tool's name before '--': mcpwire call TOOL ['{json}'] -- CMD ARGS...\n"
    )
