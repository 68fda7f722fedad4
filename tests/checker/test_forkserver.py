"""The fork server: a process forked from it is the server's process in all a check can see (its
pipes, exit status and signals), never outlives what stands for it, and a run on the bundled
reference server uses it."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from _targets import reference_argv
from mcpwire.conformance import forkserver
from mcpwire.conformance.pool import WirePool
from mcpwire.conformance.runner import run
from mcpwire.conformance.targets import reference_target

pytestmark = pytest.mark.skipif(not forkserver.available(), reason="no fork() with socket.send_fds here")

FIXTURES = Path(__file__).parent / "fixtures"
MODULE = "mcpwire.testing.everything"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@contextmanager
def zygote(tmp_path: Path, module: str = MODULE) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    path = str(tmp_path / "socket")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-u", "-m", "mcpwire.conformance.forkserver", "zygote", module, path]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == forkserver.READY
        yield process, path
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


def shim(path: str) -> subprocess.Popen[bytes]:
    argv = forkserver.shim_argv(path)
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def children(process: subprocess.Popen[bytes]) -> list[int]:
    text = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
    return [int(pid) for pid in text.split()]


def until(condition: object, what: str, limit: float = 30.0) -> None:
    """Wait (bounded) for something another process does."""
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def initialize(server: subprocess.Popen[bytes]) -> dict[str, object]:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    server.stdin.flush()
    answer: dict[str, object] = json.loads(server.stdout.readline())
    return answer


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs /proc to see the fork server's children")
def test_a_forked_server_answers_on_its_pipes_and_ends_as_the_command_would(tmp_path: Path) -> None:
    with zygote(tmp_path) as (zygote_process, path):
        # stdin closed: the server's own exit status, and its end of stdout closes
        server = shim(path)
        assert initialize(server)["result"]["serverInfo"]["name"] == "mcpwire-everything"  # type: ignore[index]
        assert server.stdin is not None and server.stdout is not None
        server.stdin.close()
        assert server.stdout.read() == b""
        assert server.wait(timeout=30) == 0
        # SIGTERM reaches the server, and its death by that signal is the shim's
        server = shim(path)
        initialize(server)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == -signal.SIGTERM
        until(lambda: not children(zygote_process), "the server outlived SIGTERM")
        # SIGINT: as in an interpreter of its own (KeyboardInterrupt, a clean exit or a status)
        server = shim(path)
        initialize(server)
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) not in (None, 70)
        until(lambda: not children(zygote_process), "the server outlived SIGINT")
        # SIGKILL cannot be passed on: the server sees its shim go and ends itself
        server = shim(path)
        initialize(server)
        assert len(children(zygote_process)) == 1
        server.kill()
        assert server.wait(timeout=30) == -signal.SIGKILL
        until(lambda: not children(zygote_process), "the server outlived its killed shim")


def test_a_module_that_exits_at_once_reports_its_status_every_time(tmp_path: Path) -> None:
    with zygote(tmp_path, "exits_with_three") as (_, path):
        for _ in range(20):  # the child may end before the fork server has registered it
            server = shim(path)
            _, err = server.communicate(timeout=30)
            assert server.returncode == 3, err


def test_a_shim_without_a_fork_server_says_so(tmp_path: Path) -> None:
    server = shim(str(tmp_path / "nothing-listens-here"))
    _, err = server.communicate(timeout=30)
    assert server.returncode == 70
    assert err.decode().startswith("mcpwire fork server unreachable: ")


async def test_the_pool_forks_the_reference_server_and_ends_its_fork_server() -> None:
    async with trio.open_nursery() as nursery:
        pool = WirePool(nursery, reference_argv(), env=None, eof_grace=2.0, cwd=None, fork_module=MODULE)
        lease = await pool.fresh()
        assert pool.forking
        assert lease.wire.process.args[:3] == [sys.executable, "-I", "-S"]
        answer = await lease.wire.request("initialize", INITIALIZE["params"], timeout=30)
        assert answer["result"]["protocolVersion"] == "2025-11-25"
        pool.give_back(lease, clean=False)
        pool.close_all()
    # the nursery is done: the fork server ended with the run


async def test_a_pool_whose_fork_server_cannot_start_runs_the_command() -> None:
    async with trio.open_nursery() as nursery:
        pool = WirePool(nursery, reference_argv(), env={"PATH": "/nonexistent"}, eof_grace=2.0, cwd=None)
        assert not pool.forking  # no fork_module: the command as given
        pool.close_all()
    async with trio.open_nursery() as nursery:
        argv = [sys.executable, "-u", "-m", "mcpwire.no_such_module"]
        pool = WirePool(nursery, argv, env=None, eof_grace=2.0, cwd=None, fork_module="mcpwire.no_such_module")
        lease = await pool.fresh()  # the fork server could not import it: the command itself ran
        assert not pool.forking
        assert lease.wire.process.args == argv
        pool.give_back(lease, clean=False)
        pool.close_all()


@pytest.mark.slow
async def test_a_run_on_the_reference_server_forks_and_finds_the_same() -> None:
    target = reference_target()
    only = ["SV-08", "SV-01", "SV-12", "LG-01", "PR-02"]
    forked = await run(target, revisions=["2025-11-25", "2024-11-05"], only=only)
    plain = await run(dataclasses.replace(target, fork_module=None), revisions=["2025-11-25", "2024-11-05"], only=only)
    assert [(r.id, r.revision, r.status) for r in forked.results] == [
        (r.id, r.revision, r.status) for r in plain.results
    ]
    assert {r.status for r in forked.results} == {"pass"}
