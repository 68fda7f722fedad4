"""SIGTERM and SIGINT while a call is in flight: the command shuts its servers down and exits 143 or
130 without a traceback, leaving no server process behind (one server, and the servers of mcp.json)."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _cli_run import MCPWIRE, environment

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0


def _read_until(proc: subprocess.Popen[str], *patterns: str) -> tuple[str, list[int]]:
    """Reads stderr until every pattern matched; returns what was read and the server pids it names."""
    assert proc.stderr is not None
    seen = ""
    selector = selectors.DefaultSelector()
    selector.register(proc.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + DEADLINE_S
    while not all(re.search(p, seen) for p in patterns):
        left = deadline - time.monotonic()
        assert left > 0, f"no {patterns!r} in: {seen}"
        if selector.select(left):
            line = proc.stderr.readline()
            assert line, f"mcpwire ended before {patterns!r}: {seen}"
            seen += line
    return seen, [int(pid) for pid in re.findall(r"started pid (\d+)", seen)]


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie has ended; nothing is left running


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_a_call_shuts_the_server_down(signum: int, status: int, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [MCPWIRE, "-vv", "call", "slow", '{"seconds": 120}'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=environment(tmp_path),
    )
    try:
        _, pids = _read_until(proc, r"connected, era")
        assert pids and all(_running(pid) for pid in pids)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the test fails
            proc.kill()
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert not [pid for pid in pids if _running(pid)]


def test_sigterm_under_mcp_json_shuts_every_server_down(tmp_path: Path) -> None:
    """One server connected, one still starting (it never answers): both are ended."""
    demo = {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server"]}
    silent = {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"]}
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"one": demo, "two": silent}}))
    proc = subprocess.Popen(
        [MCPWIRE, "-vv", "tools", "--config", str(config), "--connect-timeout", "100"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=environment(tmp_path),
    )
    try:
        _, pids = _read_until(proc, r"one: connected, era", r"two: started pid")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:  # pragma: no cover - only when the test fails
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert len(pids) == 2
    assert not [pid for pid in pids if _running(pid)]


def test_without_a_handler_the_process_would_be_killed(tmp_path: Path) -> None:
    """The check above can fail: a bare SIGTERM handler-less Python leaves its child running."""
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=DEADLINE_S)
        assert proc.returncode == -signal.SIGTERM
        assert _running(child)
    finally:
        os.kill(child, signal.SIGKILL)
