"""The workload on the official MCP Python SDK (PyPI ``mcp``, 2.x), on anyio's asyncio backend.

Run with the SDK venv's python (``run.py`` creates it); it must not import mcpwire or trio.
It uses the SDK's high-level :class:`mcp.Client` over :class:`mcp.StdioServerParameters`, the
way the SDK's documentation connects to a stdio server. Variants: ``auto`` (the SDK's default:
a ``server/discover`` probe, then the 2026-07-28 era or a fallback to ``initialize``) and
``legacy`` (the ``initialize`` handshake only).

    <sdk-venv>/bin/python bench/sdk_client.py [--variant auto|legacy] [--quick] [--cold]
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from _common import workload_main
from mcp import Client, StdioServerParameters
from mcp.types import TextContent


class SDKSession:
    """The SDK's client, as the workload sees it."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self.protocol_version = client.protocol_version

    async def list_tools(self) -> list[str]:
        return [tool.name for tool in (await self._client.list_tools()).tools]

    async def echo(self, text: str) -> str:
        result = await self._client.call_tool("echo", {"text": text})
        block = result.content[0]
        assert isinstance(block, TextContent)
        shown: str = block.text
        return shown


@asynccontextmanager
async def connect(argv: Sequence[str], variant: str) -> AsyncIterator[SDKSession]:
    server = StdioServerParameters(command=argv[0], args=list(argv[1:]))
    async with Client(server, mode=variant) as client:
        yield SDKSession(client)


async def run_concurrently(count: int, fn: Callable[[], Coroutine[Any, Any, None]]) -> None:
    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(fn)


if __name__ == "__main__":
    workload_main(
        client="sdk",
        variants=("auto", "legacy"),
        connect=connect,
        run_concurrently=run_concurrently,
        run=anyio.run,
        versions={name: importlib.metadata.version(name) for name in ("mcp", "anyio", "pydantic")},
    )
