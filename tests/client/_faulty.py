"""Helpers for the fault tests: start ``fixtures/faulty_server.py`` and read what it received.

Imported as ``from _faulty import ...`` (pytest puts this directory on ``sys.path``, as for
``tests/real/_paths.py``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import trio

import mcpwire
from mcpwire.client import Client

FAULTY = Path(__file__).resolve().parent / "fixtures" / "faulty_server.py"
#: how many tools the faulty server lists
TOOLS_LISTED = 10


def faulty_argv(*flags: str) -> list[str]:
    return [sys.executable, "-u", str(FAULTY), *flags]


def open_faulty(*flags: str, **options: Any) -> AbstractAsyncContextManager[Client]:
    """``open_client`` on the faulty server, labelled ``faulty``, without the process-wide era cache
    (so a test's era detection never depends on which tests ran before it)."""
    options.setdefault("name", "faulty")
    options.setdefault("era_cache", False)
    return mcpwire.open_client(faulty_argv(*flags), **options)


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer exists (it exited *and* was reaped: a zombie still exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def gone_or_zombie(pid: int) -> bool:
    """For a grandchild we cannot reap: gone, or dead and waiting for init to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


class Record:
    """What the faulty server received, from its ``--record`` file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def flags(self) -> tuple[str, str]:
        return ("--record", str(self.path))

    def items(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def messages(self) -> list[dict[str, Any]]:
        return [item for item in self.items() if "event" not in item]

    def methods(self) -> list[str]:
        return [m.get("method", "<response>") for m in self.messages()]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [item for item in self.items() if item.get("event") == name]

    def pids(self) -> list[int]:
        return [item["pid"] for item in self.events("start")]

    async def wait_for(self, predicate: Callable[[Record], bool], timeout: float = 5.0) -> None:
        """Polls the file until ``predicate(self)`` holds (the server writes it from another process)."""
        await wait_until(lambda: predicate(self), timeout)


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Polls ``condition`` every 10 ms; fails the test after ``timeout`` seconds.

    For facts no trio event reports: another process's files, /proc, counters bumped by the
    client's reader task.
    """
    with trio.fail_after(timeout):
        while not condition():  # noqa: ASYNC110 - nothing to wait on: the state is outside trio
            await trio.sleep(0.01)
