"""Serving an ASGI application (a :class:`~mcpwire.server.streamable_app.StreamableHTTPApp`) over HTTP.

Theory of operation: :func:`serve_http` binds, serves in the caller's trio run and reports the
bound URLs through ``task_status`` (``await nursery.start(serve_http, app)``), so port 0 works
and the caller learns the port. The app's lifespan runs with the server: a
:class:`~mcpwire.server.streamable_app.StreamableHTTPApp` hosts its sessions in it.

Two servers can do it, under one listening loop (:mod:`.listen`: the same limits per client
address, the same TLS certificate, the same trusted proxies and the same drain). The default,
``"builtin"``, is :mod:`mcpwire.server.http1server` (HTTP/1.1 on trio and mcpwire's codec, one task per
connection), which costs well under half the CPU per request of hypercorn's; MCP clients speak
HTTP/1.1. ``"hypercorn"`` (:mod:`.hyper`) adds HTTP/2, offered by ALPN over TLS; it is imported
only when chosen.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

import trio

from .listen import ServerOptions

__all__ = ["HTTP_SERVERS", "HttpServerName", "ServerOptions", "serve_http"]

HttpServerName = Literal["builtin", "hypercorn"]
#: the names :func:`serve_http` accepts as ``server``
HTTP_SERVERS: Final[tuple[HttpServerName, ...]] = ("builtin", "hypercorn")


async def serve_http(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    options: ServerOptions | None = None,
    server: HttpServerName = "builtin",
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` (any ASGI 3 application) on ``host:port`` until cancelled or shut down.

    ``task_status.started`` receives the bound URLs (``http://127.0.0.1:54321``, or ``https://``
    with a certificate in ``options``).

    Args:
        options: the bounds, limits, certificate and trusted proxies (:class:`ServerOptions`).
        server: ``"builtin"`` (:mod:`mcpwire.server.http1server`) or ``"hypercorn"``.
        shutdown_trigger: when it returns, stop accepting, drain, and return.

    Cancellation: cancelling it closes the listening socket and every connection.

    Raises:
        OSError: the address cannot be bound.
        ValueError: ``server`` names no server, or the certificate cannot be loaded.
    """
    options = options or ServerOptions()
    if server == "builtin":
        from .http1server import serve_http1

        await serve_http1(
            app, host=host, port=port, options=options, shutdown_trigger=shutdown_trigger, task_status=task_status
        )
    elif server == "hypercorn":
        from .hyper import serve_hypercorn

        await serve_hypercorn(
            app, host=host, port=port, options=options, shutdown_trigger=shutdown_trigger, task_status=task_status
        )
    else:
        raise ValueError(f"unknown HTTP server {server!r}: expected one of {', '.join(HTTP_SERVERS)}")
