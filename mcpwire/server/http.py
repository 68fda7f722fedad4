"""Serving an ASGI application (a :class:`~mcpwire.server.asgi.StreamableHTTPApp`) over HTTP.

Theory of operation: :func:`serve_http` binds, serves in the caller's trio run and reports the
bound URLs through ``task_status`` (``await nursery.start(serve_http, app)``), so port 0 works
and the caller learns the port. The app's lifespan runs with the server: a
:class:`~mcpwire.server.asgi.StreamableHTTPApp` hosts its sessions in it.

Two servers can do it. The default, ``"builtin"``, is :mod:`mcpwire.server.h11server` (HTTP/1.1
on trio and h11, one task per connection), which costs well under half the CPU per request of
hypercorn's trio worker; MCP clients speak HTTP/1.1. ``"hypercorn"`` is for operators who need
what hypercorn has and the built-in server has not (HTTP/2); it is imported only when chosen.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

import trio

__all__ = ["HTTP_SERVERS", "HttpServerName", "serve_http"]

log = logging.getLogger("mcpwire.server.http")

HttpServerName = Literal["builtin", "hypercorn"]
#: the names :func:`serve_http` accepts as ``server``
HTTP_SERVERS: Final[tuple[HttpServerName, ...]] = ("builtin", "hypercorn")


async def serve_http(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    keep_alive_s: float = 30.0,
    drain_timeout_s: float = 1.0,
    server: HttpServerName = "builtin",
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` (any ASGI 3 application) on ``host:port`` until cancelled or shut down.

    ``task_status.started`` receives the bound URLs (``http://127.0.0.1:54321``).

    Args:
        keep_alive_s: an idle keep-alive connection is closed after this long.
        drain_timeout_s: at a graceful shutdown, how long requests in flight may take.
        server: ``"builtin"`` (:mod:`mcpwire.server.h11server`) or ``"hypercorn"``.
        shutdown_trigger: when it returns, stop accepting, drain, and return.

    Cancellation: cancelling it closes the listening socket and every connection.

    Raises:
        OSError: the address cannot be bound.
        ValueError: ``server`` names no server.
    """
    if server == "builtin":
        from .h11server import ServerOptions, serve_h11

        options = ServerOptions(keep_alive_s=keep_alive_s, drain_timeout_s=drain_timeout_s)
        await serve_h11(
            app, host=host, port=port, options=options, shutdown_trigger=shutdown_trigger, task_status=task_status
        )
    elif server == "hypercorn":
        await _serve_hypercorn(app, host, port, keep_alive_s, drain_timeout_s, shutdown_trigger, task_status)
    else:
        raise ValueError(f"unknown HTTP server {server!r}: expected one of {', '.join(HTTP_SERVERS)}")


async def _serve_hypercorn(
    app: Any,
    host: str,
    port: int,
    keep_alive_s: float,
    drain_timeout_s: float,
    shutdown_trigger: Callable[[], Awaitable[object]] | None,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("mcpwire.server.http.hypercorn")
    config.include_server_header = False
    config.keep_alive_timeout = keep_alive_s
    config.graceful_timeout = drain_timeout_s
    await serve(app, config, shutdown_trigger=shutdown_trigger, task_status=task_status)  # type: ignore[arg-type]
