"""A hostile server cannot control the terminal: every string it sends (names, instructions,
descriptions, results, errors, resources, prompts, stderr) is shown with its control characters,
C1 codes and bidi overrides as visible escapes, in text and in JSON output."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from _cli_run import mcpwire

HOSTILE = Path(__file__).parent / "fixtures" / "hostile_server.py"
SERVER = ("--", sys.executable, str(HOSTILE))
EVIL = "\x1b[2J\x1b]0;owned\x07\x00\rX\x08\x9b31m\u202egnp.exe\u2066"
#: What a terminal must never receive from a server (newlines are ours).
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _safe(text: str) -> None:
    found = UNSAFE.search(text)
    assert found is None, f"raw {found.group()!r} in output: {text!r}"


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["tools"],
        ["tools", "--schema"],
        ["call", "safe"],
        ["call", "boom"],
        ["call", "evl"],  # "did you mean" lists the hostile name
        ["resources"],
        ["read", "evil://x"],
        ["prompts"],
    ],
    ids=lambda c: "-".join(c),
)
def test_text_output_is_terminal_safe(command: list[str], tmp_path: Path) -> None:
    proc = mcpwire(*command, *SERVER, cwd=tmp_path, home=tmp_path)
    _safe(proc.stdout)
    _safe(proc.stderr)
    assert "\\x1b[2J" in proc.stdout + proc.stderr  # shown, not dropped


def test_what_each_command_shows(tmp_path: Path) -> None:
    info = mcpwire("info", *SERVER, cwd=tmp_path, home=tmp_path)
    assert info.stdout.splitlines()[0] == (
        "server:       hostile\\x1b[2J\\x1b]0;owned\\x07\\x00\\x0dX\\x08\\x9b31m\\u202egnp.exe\\u2066 "
        "6.6\\x1b[2J\\x1b]0;owned\\x07\\x00\\x0dX\\x08\\x9b31m\\u202egnp.exe\\u2066"
    )
    call = mcpwire("call", "safe", *SERVER, cwd=tmp_path, home=tmp_path)
    assert (call.returncode, call.stdout) == (
        0,
        "result\\x1b[2J\\x1b]0;owned\\x07\\x00\\x0dX\\x08\\x9b31m\\u202egnp.exe\\u2066\n",
    )
    boom = mcpwire("call", "boom", *SERVER, cwd=tmp_path, home=tmp_path)
    assert boom.returncode == 2
    assert boom.stderr.startswith("mcpwire call: ")
    assert "failure\\x1b[2J\\x1b]0;owned\\x07\\x00\\x0dX\\x08\\x9b31m\\u202egnp.exe\\u2066" in boom.stderr
    missing = mcpwire("call", "evl", *SERVER, cwd=tmp_path, home=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.endswith(
        "known tools: boom, evil\\x1b[2J\\x1b]0;owned\\x07\\x00\\x0dX\\x08\\x9b31m\\u202egnp.exe\\u2066, safe\n"
    )


@pytest.mark.parametrize("command", [["info"], ["tools"], ["call", "safe"], ["resources"], ["prompts"]])
def test_json_output_is_terminal_safe_and_keeps_the_text(command: list[str], tmp_path: Path) -> None:
    proc = mcpwire(*command, "--json", *SERVER, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _safe(proc.stdout)
    assert any(EVIL in text for text in _strings(json.loads(proc.stdout)))  # the same text, escaped


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_a_crash_at_start_shows_its_stderr_escaped(tmp_path: Path) -> None:
    proc = mcpwire("tools", *SERVER, "--crash", cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    _safe(proc.stderr)
    assert "fatal\\x1b[2J" in proc.stderr


def test_servers_under_a_config_show_a_crash_cause_escaped(tmp_path: Path) -> None:
    config = tmp_path / "servers.json"
    entry = {"command": sys.executable, "args": [str(HOSTILE), "--crash"]}
    config.write_text(
        json.dumps({"mcpServers": {"crashy": entry, "fine": {"command": sys.executable, "args": [str(HOSTILE)]}}})
    )
    proc = mcpwire("servers", "--config", str(config), cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 0, proc.stderr
    _safe(proc.stdout + proc.stderr)
    crashy = next(line for line in proc.stdout.splitlines() if line.startswith("crashy"))
    assert crashy.split()[:3] == ["crashy", "stdio", "error"]
    assert "(stderr: fatal\\x1b[2J\\x1b]0;owned\\x07\\x00\\x0dX\\x08\\x9b31m\\u202egnp.exe\\u2066)" in crashy
    rows = json.loads(mcpwire("servers", "--json", "--config", str(config), cwd=tmp_path, home=tmp_path).stdout)
    assert "fatal\x1b[2J" in next(r for r in rows if r["name"] == "crashy")["error"]


SECRET = "k-0123456789abcdef"


def test_a_server_repeating_its_secrets_has_them_masked(tmp_path: Path) -> None:
    """Credentials given on the command line or in the config never come back through a
    server's stderr or error messages."""
    proc = mcpwire("tools", *SERVER, "--crash", "--api-key", SECRET, cwd=tmp_path, home=tmp_path)
    assert proc.returncode == 2
    assert "started as --crash --api-key ***" in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    env_secret = "e-fedcba9876543210"
    proc = mcpwire("tools", "--env", f"TOKEN={env_secret}", *SERVER, "--crash", env_secret, cwd=tmp_path, home=tmp_path)
    assert "started as --crash ***" in proc.stderr and env_secret not in proc.stderr
    config = tmp_path / "servers.json"
    entry = {"command": sys.executable, "args": [str(HOSTILE), "--crash", "--token", SECRET]}
    config.write_text(json.dumps({"mcpServers": {"leaky": entry}}))
    for command in (["servers"], ["servers", "--json"], ["tools"], ["tools", "-v"]):
        proc = mcpwire(*command, "--config", str(config), cwd=tmp_path, home=tmp_path)
        assert SECRET not in proc.stdout + proc.stderr
    rows = json.loads(mcpwire("servers", "--json", "--config", str(config), cwd=tmp_path, home=tmp_path).stdout)
    assert rows[0]["target"] == f"{sys.executable} {HOSTILE} --crash --token ***"


def test_credentials_in_a_url_are_never_shown(tmp_path: Path) -> None:
    url = "http://user:pw-0123456789@127.0.0.1:9/mcp?api_key=k-0123456789&x=1"
    for flags in ([], ["-vv"], ["--json"]):
        proc = mcpwire("info", url, "--connect-timeout", "5", *flags, cwd=tmp_path, home=tmp_path)
        assert proc.returncode == 2
        assert "0123456789" not in proc.stdout + proc.stderr
    assert "http://***@127.0.0.1:9/mcp?api_key=***&x=1" in proc.stderr
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"remote": {"url": url}}}))
    proc = mcpwire("servers", "--json", "--config", str(config), "--connect-timeout", "5", cwd=tmp_path, home=tmp_path)
    assert "0123456789" not in proc.stdout + proc.stderr
    assert json.loads(proc.stdout)[0]["target"] == "http://***@127.0.0.1:9/mcp?api_key=***&x=1"
