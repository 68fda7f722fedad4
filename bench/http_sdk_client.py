"""The HTTP workload on the official MCP Python SDK (PyPI ``mcp``, 2.x): ``mcp.Client(url)``.

Run with the SDK venv's python; it must not import mcpwire or trio. ``mcp.Client`` given a URL
string connects with the SDK's Streamable HTTP client. Variants: ``auto`` (``server/discover``
probe, then 2026-07-28 or ``initialize``) and ``legacy`` (``initialize`` only).

    <sdk-venv>/bin/python bench/http_sdk_client.py [--variant auto|legacy] [--quick] [--cold]
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
from _common import http_server, workload_main
from mcp import Client
from sdk_client import SDKSession, run_concurrently


@asynccontextmanager
async def connect(argv: Sequence[str], variant: str) -> AsyncIterator[SDKSession]:
    with http_server(argv) as url:
        async with Client(url, mode=variant) as client:
            yield SDKSession(client)


if __name__ == "__main__":
    workload_main(
        client="sdk",
        variants=("auto", "legacy"),
        connect=connect,
        run_concurrently=run_concurrently,
        run=anyio.run,
        versions={name: importlib.metadata.version(name) for name in ("mcp", "anyio", "pydantic", "httpx2")},
    )
