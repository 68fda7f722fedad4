"""``call`` under mcp.json for tools that need approval: asked on a terminal (CRITICAL twice),
refused with a hint without one, approved with ``--approve``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import pytest
from _cli_run import MCPWIRE, environment, mcpwire

TIMEOUT_S = 60


@pytest.fixture
def config(tmp_path: Path) -> Path:
    demo = {
        "command": sys.executable,
        "args": ["-m", "mcpwire.testing.demo_server"],
        "policy": {"approval": {"echo": "ask"}, "tools": {"add": {"risk": "critical"}}},
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"d": demo}}))
    return path


def _spawn(config: Path, *args: str) -> pexpect.spawn:
    return pexpect.spawn(
        MCPWIRE,
        ["call", *args, "--config", str(config)],
        cwd=str(config.parent),
        env=environment(config.parent),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 200),
    )


@pytest.mark.slow
def test_a_terminal_is_asked(config: Path) -> None:
    child = _spawn(config, "d__echo", '{"text": "hi", "api_key": "k-0123456789"}')
    child.expect_exact("d__echo (tool 'echo' on server 'd') needs approval: risk ")
    child.expect_exact('"api_key": "***"')  # secret-looking arguments are not shown
    child.expect_exact("Run it? [y/N] ")
    child.sendline("y")
    child.expect_exact("hi")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


@pytest.mark.slow
def test_critical_calls_are_confirmed_twice_and_no_stops_them(config: Path) -> None:
    child = _spawn(config, "d__add", '{"a": 1, "b": 2}')
    child.expect_exact("needs approval: risk CRITICAL")
    child.expect_exact("Run it (1 of 2)? [y/N] ")
    child.sendline("y")
    child.expect_exact("Run it (2 of 2)? [y/N] ")
    child.sendline("y")
    child.expect_exact("3")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    child = _spawn(config, "d__add", '{"a": 1, "b": 2}')
    child.expect_exact("Run it (1 of 2)? [y/N] ")
    child.sendline("y")
    child.expect_exact("Run it (2 of 2)? [y/N] ")
    child.sendline("n")
    child.expect_exact("mcpwire call: not run: tool 'add' on server 'd' was not approved")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1


def test_without_a_terminal_it_is_refused_with_a_hint(config: Path) -> None:
    proc = mcpwire("call", "d__echo", '{"text": "hi"}', "--config", str(config), cwd=config.parent, home=config.parent)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.startswith("mcpwire call: tool 'echo' on server 'd' needs approval: ")
    assert proc.stderr.endswith("on a terminal you are asked (use --approve to approve it)\n")
    for flags in (["--approve"], ["--approve", "all"]):
        proc = mcpwire(
            "call", "d__add", '{"a": 1, "b": 2}', *flags, "--config", str(config), cwd=config.parent, home=config.parent
        )
        assert (proc.returncode, proc.stdout) == (0, "3\n"), proc.stderr
    proc = mcpwire(
        "call",
        "d__add",
        '{"a": 1, "b": 2}',
        "--approve",
        "deny",
        "--config",
        str(config),
        cwd=config.parent,
        home=config.parent,
    )
    assert proc.returncode == 1 and "needs approval" in proc.stderr
