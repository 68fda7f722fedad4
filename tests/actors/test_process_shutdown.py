"""The shared escalating shutdown (close stdin, then SIGTERM, then SIGKILL to the process group),
in both forms, against real processes that stop at each step; children left in the group go too."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from mcpwire.actors.shutdown import ExitStep, end_process, end_process_sync

# A process that exits at the step named by argv[1] (eof, sigterm, never) and writes its
# child's pid to argv[2] first (the child sleeps in the same process group).
SCRIPT = """
import os, signal, subprocess, sys, time
stop, pidfile = sys.argv[1], sys.argv[2]
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(pidfile, "w").write(str(child.pid))
if stop != "sigterm":
    signal.signal(signal.SIGTERM, lambda *a: None)
if stop == "eof":
    sys.stdin.read()
    sys.exit(0)
while True:
    time.sleep(1)
"""

STEPS = [("eof", ExitStep.EOF), ("sigterm", ExitStep.SIGTERM), ("never", ExitStep.SIGKILL)]


def _gone(pid: int, within: float = 5.0) -> bool:
    """The process is gone or dead (a zombie waiting for init), within a bound: a signal takes
    effect when the process is next scheduled."""
    deadline = time.monotonic() + within
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _read_pid(path: Path) -> str:
    return path.read_text() if path.exists() else ""


async def _child_pid(path: Path) -> int:
    with trio.fail_after(10):
        while not (text := _read_pid(path)):  # noqa: ASYNC110 - written by another process
            await trio.sleep(0.02)
    return int(text)


@pytest.mark.parametrize(("stop", "expected"), STEPS)
async def test_the_trio_form_escalates_step_by_step(tmp_path: Path, stop: str, expected: ExitStep) -> None:
    pidfile = tmp_path / "child"
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", SCRIPT, stop, str(pidfile)],
        stdin=subprocess.PIPE,
        start_new_session=True,
    )
    child = await _child_pid(pidfile)
    assert process.stdin is not None
    stdin = process.stdin
    with trio.fail_after(10):
        step = await end_process(process, close_stdin=stdin.aclose, eof_grace=0.5, term_grace=0.5, label="test")
    assert step is expected
    assert process.returncode is not None
    assert _gone(child), "a child left in the group outlived its server"


@pytest.mark.parametrize(("stop", "expected"), STEPS)
def test_the_sync_form_escalates_step_by_step(tmp_path: Path, stop: str, expected: ExitStep) -> None:
    pidfile = tmp_path / "child"
    process = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, stop, str(pidfile)], stdin=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 10
    while (not pidfile.exists() or not pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pidfile.read_text())
    assert end_process_sync(process, eof_grace=0.5, term_grace=0.5) is expected
    assert process.returncode is not None
    assert _gone(child)


async def test_a_process_already_gone_is_reaped_and_its_group_cleared(tmp_path: Path) -> None:
    process = await trio.lowlevel.open_process([sys.executable, "-c", "pass"], start_new_session=True)
    await process.wait()
    assert await end_process(process, close_stdin=None, eof_grace=0.5, term_grace=0.5) is ExitStep.GONE
