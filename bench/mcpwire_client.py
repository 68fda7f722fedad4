"""The workload on mcpwire, through its public API (``mcpwire.open_client``).

Variants: ``auto`` (the default: mcpwire detects the era with its ``server/discover`` probe;
against the echo server that chooses the 2026-07-28 era) and ``legacy`` (``era="legacy"``: the
``initialize`` handshake only, like the floor).

    python bench/mcpwire_client.py [--variant auto|legacy] [--quick] [--cold]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import msgspec
import trio
from _common import workload_main

import mcpwire

# Resolved here, before anything is timed: mcpwire imports its client module lazily.
from mcpwire import Client, open_client


class MCPWireSession:
    """An mcpwire client, as the workload sees it."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self.protocol_version = client.protocol_version or ""

    async def list_tools(self) -> list[str]:
        return [tool.name for tool in await self._client.list_tools()]

    async def echo(self, text: str) -> str:
        result = await self._client.call_tool("echo", {"text": text})
        return result.text()


@asynccontextmanager
async def connect(argv: Sequence[str], variant: str) -> AsyncIterator[MCPWireSession]:
    era: Literal["legacy"] | None = "legacy" if variant == "legacy" else None
    async with open_client(list(argv), era=era) as client:
        yield MCPWireSession(client)


async def run_concurrently(count: int, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(fn)


if __name__ == "__main__":
    workload_main(
        client="mcpwire",
        variants=("auto", "legacy"),
        connect=connect,
        run_concurrently=run_concurrently,
        run=trio.run,
        versions={"mcpwire": mcpwire.__version__, "trio": trio.__version__, "msgspec": msgspec.__version__},
    )
