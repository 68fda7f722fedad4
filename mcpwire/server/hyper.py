"""hypercorn's connection handling under mcpwire's listening loop (``--http-server hypercorn``).

Theory of operation: hypercorn speaks HTTP/1.1 and HTTP/2 (by ALPN, over TLS) on trio. Its own
``serve`` accepts every connection it is given, so it runs here under
:func:`~.listen.run_server` instead: the same lifespan, the same admission (a limit per client
address and in all), the same TLS certificate and the same drain as the built-in server, with
hypercorn's ``TCPServer`` serving each admitted stream. The lifespan is mcpwire's; hypercorn's
worker context carries the shutdown signal to its connections (idle ones close at once, requests
in flight finish within the drain).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .lifespan import ASGIApp
from .listen import NEVER, Accepted, ConnectionHandler, ServerOptions, run_server, tls_context
from .proxy import forwarded

__all__ = ["serve_hypercorn"]

log = logging.getLogger("mcpwire.server.http")


def _closing_after_ambiguous_framing(app: ASGIApp) -> ASGIApp:
    """``app``, answering a request that carries both ``Content-Length`` and
    ``Transfer-Encoding`` with ``Connection: close`` (hypercorn reads such a request by its
    chunks and would keep the connection: RFC 9112 §6.1 says the server MUST close it)."""

    async def closing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("http_version") in ("1.0", "1.1"):
            names = {name for name, _ in scope["headers"]}
            if b"content-length" in names and b"transfer-encoding" in names:

                async def send_closing(message: Any) -> None:
                    if message["type"] == "http.response.start":
                        headers = [(n, v) for n, v in message.get("headers", ()) if n.lower() != b"connection"]
                        message = {**message, "headers": [*headers, (b"connection", b"close")]}
                    await send(message)

                await app(scope, receive, send_closing)
                return
        await app(scope, receive, send)

    return closing


class _Served:
    """What the sweeper and the drain know of a hypercorn connection: no deadline of ours
    (hypercorn keeps its own), never idle to our eyes, cancelled when the server stops."""

    __slots__ = ("cancel_scope", "deadline", "idle_since")

    def __init__(self) -> None:
        self.cancel_scope = trio.CancelScope()
        self.deadline = NEVER
        self.idle_since = NEVER

    def expire(self) -> None:
        self.cancel_scope.cancel()

    def on_closing(self) -> None:
        pass  # the worker context's terminate event reaches hypercorn's connection


async def serve_hypercorn(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    options: ServerOptions,
    shutdown_trigger: Callable[[], Awaitable[object]] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` with hypercorn's HTTP/1.1 and HTTP/2 on ``host:port`` (HTTP/2 by ALPN when
    ``options`` has a certificate). Cancellation and errors as :func:`~.http1server.serve_http1`."""
    from hypercorn.config import Config
    from hypercorn.trio.tcp_server import TCPServer
    from hypercorn.trio.worker_context import WorkerContext
    from hypercorn.utils import wrap_app

    tls = tls_context(options, alpn=("h2", "http/1.1"))
    if tls is not None:
        tls.options |= ssl.OP_NO_COMPRESSION  # RFC 9113 §9.2.1: HTTP/2 MUST NOT use TLS compression
    config = Config()
    config.accesslog = None
    config.errorlog = logging.getLogger("mcpwire.server.http.hypercorn")
    config.include_server_header = False
    config.keep_alive_timeout = options.keep_alive_s
    config.graceful_timeout = options.drain_timeout_s
    config.ssl_handshake_timeout = options.header_timeout_s
    config.h11_max_incomplete_size = options.max_header_bytes
    config.root_path = options.root_path
    context = WorkerContext(None)
    served = forwarded(app, options.forwarded_allow_ips)
    wrapped = wrap_app(_closing_after_ambiguous_framing(served), config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]

    def make(state: dict[str, Any]) -> ConnectionHandler:
        async def handle(accepted: Accepted) -> None:
            handle = _Served()
            registry = accepted.connections
            registry.handles.add(handle)
            try:
                with handle.cancel_scope:
                    await TCPServer(wrapped, config, context, state, accepted.stream)  # type: ignore[arg-type]
            finally:
                registry.handles.discard(handle)

        return handle

    async def closing() -> None:
        await context.terminated.set()

    await run_server(
        served,
        make,
        host=host,
        port=port,
        options=options,
        tls=tls,
        on_closing=closing,
        shutdown_trigger=shutdown_trigger,
        task_status=task_status,
    )
