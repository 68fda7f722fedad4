"""The gateway under test: a host of real (or fake) backends, the gateway's ASGI app under
hypercorn's trio worker on loopback, and where the third-party servers are."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from mcpwire.host import Host
from mcpwire.host.config import HostConfig, parse_server
from mcpwire.server import LOOPBACK_HOSTS
from mcpwire.server.http import serve_http
from mcpwire.service.gateway import Gateway

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"
CRON = SERVERS / "npm" / "node_modules" / "mcp-cron-linux-amd64" / "bin" / "mcp-cron"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODERN = "2026-07-28"


def require(path: Path) -> str:
    """The path as a string; skips the test when the peer is missing (fails it under CI)."""
    if not path.exists():
        message = f"{path} is missing: run tests/install_peers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def reference() -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcpwire.testing.everything"]}


def fake(name: str, *args: str) -> dict[str, Any]:
    """A fake backend from tests/service/fixtures (a fault real servers do not produce on demand)."""
    return {"command": sys.executable, "args": [str(FIXTURES / f"{name}.py"), *args]}


def everything() -> dict[str, Any]:
    return {"command": require(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]}


def memory() -> dict[str, Any]:
    return {"command": require(NPM_BIN / "mcp-server-memory")}


def time_server() -> dict[str, Any]:
    return {"command": require(PY_BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}


def cron(folder: Path) -> dict[str, Any]:
    return {"command": require(CRON), "args": ["-transport", "stdio", "-db-path", str(folder / "cron.db")]}


@dataclass
class Running:
    host: Host
    gateway: Gateway
    url: str


@asynccontextmanager
async def gateway(
    servers: Mapping[str, Mapping[str, Any]],
    *,
    namespacing: bool = True,
    gateway_options: Mapping[str, Any] | None = None,
    **host_options: Any,
) -> AsyncIterator[Running]:
    """A host of ``servers``, entered, behind a gateway served on a free loopback port."""
    config = HostConfig(servers=[parse_server(name, dict(entry)) for name, entry in servers.items()])
    host = Host(config, **{"start_timeout": 60.0, **host_options})
    front = Gateway(host, namespacing=namespacing, **(gateway_options or {}))
    async with host, trio.open_nursery() as nursery:
        app = front.asgi_app(allowed_hosts=LOOPBACK_HOSTS)
        [base] = await nursery.start(partial(serve_http, app, port=0))
        try:
            yield Running(host, front, f"{base}/mcp")
        finally:
            nursery.cancel_scope.cancel()
