"""Targets for the checker tests: the reference server and the broken fixtures, stdio or HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from mcpwire.conformance.context import Target

FIXTURES = Path(__file__).parent / "fixtures"
START_TIMEOUT_S = 20.0


def fixture_target(name: str, *, eof_grace: float = 2.0) -> Target:
    """A broken fixture server on stdio, run with this interpreter."""
    return Target((sys.executable, "-u", str(FIXTURES / f"{name}.py")), name=name, eof_grace=eof_grace)


def fixture_argv(name: str) -> list[str]:
    return [sys.executable, "-u", str(FIXTURES / f"{name}.py")]


@asynccontextmanager
async def http_server(argv: list[str]) -> AsyncIterator[str]:
    """Start ``argv`` (a server taking ``--http 127.0.0.1:0``) and yield its URL; the process is
    terminated and reaped on exit."""
    process = await trio.lowlevel.open_process(
        [*argv, "--http", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(START_TIMEOUT_S):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                if not chunk:
                    raise RuntimeError(f"{argv} exited before listening (status {process.returncode})")
                line += chunk
        text = line.decode().strip()
        assert text.startswith("listening on "), text
        yield text.removeprefix("listening on ")
    finally:
        with trio.CancelScope(shield=True):
            process.terminate()
            with trio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


def reference_argv() -> list[str]:
    return [sys.executable, "-u", "-m", "mcpwire.testing.everything"]
