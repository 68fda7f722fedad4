"""Serving an ASGI application (a :class:`~mcpwire.server.asgi.StreamableHTTPApp`) with hypercorn's
trio worker.

Theory of operation: :func:`serve_http` binds, starts hypercorn in the caller's trio run and
reports the bound URLs through ``task_status`` (``await nursery.start(serve_http, app)``), so
port 0 works and the caller learns the port. The app's lifespan runs with the server: a
:class:`~mcpwire.server.asgi.StreamableHTTPApp` hosts its sessions in it. hypercorn is imported
here only (the ``serve`` extra); nothing else in :mod:`mcpwire.server` needs it.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

__all__ = ["serve_http"]

log = logging.getLogger("mcpwire.server.http")


async def serve_http(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    keep_alive_s: float = 30.0,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` (any ASGI 3 application) on ``host:port`` until cancelled.

    ``task_status.started`` receives the bound URLs (``http://127.0.0.1:54321``).

    Cancellation: cancelling it closes the listening socket and every connection.

    Raises:
        OSError: the address cannot be bound.
    """
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("mcpwire.server.http.hypercorn")
    config.keep_alive_timeout = keep_alive_s
    config.graceful_timeout = 1.0
    await serve(app, config, task_status=task_status)
