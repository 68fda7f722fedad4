"""The ``mcpwire`` command line, run as a subprocess against the bundled demo server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TIMEOUT = 60


def mcpwire(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpwire", *args], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


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
        (("call", "echo", "{not json"), "mcpwire: the arguments are not valid JSON"),
        (("call", "echo", "[1]"), "mcpwire: the arguments must be a JSON object"),
        (("tools", "--"), "mcpwire: nothing after '--'"),
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
