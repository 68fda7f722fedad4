"""The service under test, for real: a store, a host with real servers, the app under the service's
HTTP server (:func:`mcpwire.server.http.serve_http`, the built-in one) on a loopback port, and an
httpx client speaking HTTP to it."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trio
from starlette.routing import BaseRoute

from mcpwire.host import Host
from mcpwire.server.http import serve_http
from mcpwire.service.app import build_app
from mcpwire.service.runner import load_servers
from mcpwire.service.settings import Settings
from mcpwire.service.state import Service
from mcpwire.service.store import Store, open_store
from mcpwire.service.store_bridge import service_host


def demo_entry(*flags: str) -> dict[str, Any]:
    """An mcp.json entry for the bundled demo server (stdio, this interpreter)."""
    return {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server", *flags]}


def write_config(path: Path, servers: Mapping[str, Mapping[str, Any]]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


@dataclass
class Running:
    url: str
    client: httpx.AsyncClient
    service: Service
    host: Host
    store: Store


@asynccontextmanager
async def running_service(
    db_url: str,
    config: Path | None,
    *,
    settings: Settings | None = None,
    host_options: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    wait_ready: bool = True,
    routes: Callable[[Host, Store], Sequence[BaseRoute]] | None = None,
) -> AsyncIterator[Running]:
    """The service over the database at ``db_url`` and the servers of ``config``, serving on a
    loopback port, ready (unless ``wait_ready`` is False); ``routes`` adds routes made from its
    host and store (the agent's)."""
    settings = settings or Settings(port=0, rate_limit=0)
    store = await open_store(db_url)
    try:
        rows = await store.servers()
        loaded = load_servers(str(config) if config is not None else None, rows)
        host = service_host(loaded.config, store, settings, **dict(host_options or {}))
        extra = routes(host, store) if routes is not None else ()
        app = build_app(
            host,
            store,
            settings,
            sources=loaded.sources,
            rows=rows,
            base_path=loaded.base_path,
            file=loaded.file,
            extra_routes=extra,
        )
        service: Service = app.state.service
        async with host, trio.open_nursery() as nursery:
            shutdown = trio.Event()
            where = {"host": settings.host, "port": settings.port}
            options = dataclasses.replace(settings.server_options(), drain_timeout_s=2.0)
            serve = functools.partial(serve_http, app, **where, options=options, shutdown_trigger=shutdown.wait)
            binds = await nursery.start(serve)
            url = binds[0]
            async with httpx.AsyncClient(base_url=url, headers=dict(headers or {}), timeout=30) as client:
                if wait_ready:
                    with trio.fail_after(60):
                        # polling the HTTP endpoint under test is the point here
                        while (await client.get("/readyz")).status_code != 200:  # noqa: ASYNC110
                            await trio.sleep(0.05)
                try:
                    yield Running(url=url, client=client, service=service, host=host, store=store)
                finally:
                    service.begin_shutdown()
                    shutdown.set()
    finally:
        await store.aclose()
