"""Starting ``fixtures/demo_recorded.py`` (the bundled demo server, which records what it receives
and sends and has a few tools of its own) and reading its record (a ``_faulty.Record`` file).

Imported as ``from _demo import ...`` (pytest puts this directory on ``sys.path``).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, aclosing
from pathlib import Path
from typing import Any

import trio
from _faulty import Record

import mcpwire
from mcpwire import StdioServer
from mcpwire.client import Client, ServerNotification

DEMO = Path(__file__).resolve().parent / "fixtures" / "demo_recorded.py"
#: ``tests/checker/fixtures/wrong_structured.py``: the reference server whose ``add`` breaks its outputSchema.
WRONG_STRUCTURED = Path(__file__).resolve().parents[1] / "checker" / "fixtures" / "wrong_structured.py"
#: Added to every spawned interpreter's environment: the tests leave no byte-code behind.
QUIET_ENV = {"PYTHONDONTWRITEBYTECODE": "1"}

ERAS = ("legacy", "modern")


def demo_spec(record: Record | None, *flags: str, name: str = "demo", **fields: Any) -> StdioServer:
    """The recording demo server as a spec (``record=None``: no record file)."""
    record_flags = record.flags if record is not None else ()
    env = {**QUIET_ENV, **fields.pop("env", {})}
    return StdioServer(
        command=sys.executable, args=("-u", str(DEMO), *record_flags, *flags), name=name, env=env, **fields
    )


def open_demo(record: Record | None, *flags: str, **options: Any) -> AbstractAsyncContextManager[Client]:
    """``open_client`` on the recording demo server, without the process-wide era cache."""
    options.setdefault("era_cache", False)
    return mcpwire.open_client(demo_spec(record, *flags), **options)


def sent(record: Record) -> list[dict[str, Any]]:
    """What the server wrote to the client, in order."""
    return [item["message"] for item in record.events("sent")]


def requests(record: Record, method: str) -> list[dict[str, Any]]:
    """The requests (or notifications) of ``method`` the server received, in order."""
    return [m for m in record.messages() if m.get("method") == method]


def without_meta(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "_meta"}


def per_process(record: Record) -> list[list[str]]:
    """The methods each started process received (responses as ``<response>``), one list per start."""
    runs: list[list[str]] = []
    for item in record.items():
        if item.get("event") == "start":
            runs.append([])
        elif "event" not in item:
            runs[-1].append(item.get("method", "<response>"))
    return runs


async def take(client: Client, count: int, timeout: float = 5.0) -> list[ServerNotification]:
    """The next ``count`` notifications of the client's stream (fails after ``timeout``)."""
    notes: list[ServerNotification] = []
    if count == 0:
        return notes
    with trio.fail_after(timeout):
        async with aclosing(client.notifications()) as stream:
            async for note in stream:
                notes.append(note)
                if len(notes) == count:
                    break
    return notes


async def next_of(iterator: AsyncIterator[ServerNotification], timeout: float = 5.0) -> ServerNotification:
    with trio.fail_after(timeout):
        return await iterator.__anext__()
