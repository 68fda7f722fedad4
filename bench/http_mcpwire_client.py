"""The HTTP workload on mcpwire: ``mcpwire.open_client(HttpServer(url, transport="streamable-http"))``.

Variants: ``auto`` (era detected with ``server/discover``: 2026-07-28 against the echo server)
and ``legacy`` (``era="legacy"``: ``initialize`` and a session id, like the floor).

    python bench/http_mcpwire_client.py [--variant auto|legacy] [--quick] [--cold]
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx
import msgspec
import trio
from _common import http_server, workload_main
from mcpwire_client import MCPWireSession

import mcpwire

# Resolved here, before anything is timed: mcpwire imports its client module lazily.
from mcpwire import open_client
from mcpwire.transports import HttpServer


@asynccontextmanager
async def connect(argv: Sequence[str], variant: str) -> AsyncIterator[MCPWireSession]:
    era: Literal["legacy"] | None = "legacy" if variant == "legacy" else None
    with http_server(argv) as url:
        async with open_client(HttpServer(url=url, transport="streamable-http"), era=era) as client:
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
        versions={
            "mcpwire": mcpwire.__version__,
            "httpx": httpx.__version__,
            "trio": trio.__version__,
            "msgspec": msgspec.__version__,
        },
    )
