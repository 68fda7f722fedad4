"""Wiring: the starlette app of the service.

``build_app(host, store, settings)`` mounts the management API (``/api/v1``), the MCP gateway
(``/mcp``), ``/events``, ``/metrics``, ``/healthz`` and ``/readyz`` behind one middleware (trace ids,
Host/Origin checks, the token, limits; see :mod:`mcpwire.service.middleware`). With an identity
provider configured (:mod:`mcpwire.service.oauth`), its JWTs are accepted too, the gateway's
protected resource metadata is served at the well-known URLs, and the console signs people in
through the provider (:mod:`mcpwire.service.oidc`). Its lifespan runs
the service's own tasks (:meth:`Service.run`) in the trio run that serves it, beside the host's
actors. Later rooms (the console at ``/``, the agent's endpoints) come in as ``extra_routes``,
placed after the API's, behind the same middleware.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._version import install_hint
from ..host import Host, HostConfig
from .api import API, PREFIX, map_error
from .audit import AuditWriter
from .events import EventHub
from .identity import Authenticator, Role
from .metrics import CallMetrics, HttpMetrics, RouteNamer
from .middleware import RateLimiter, ServiceMiddleware
from .oauth import IdentityProvider, resource_url
from .problems import ProblemError
from .servers import ServerManager, Source
from .settings import Settings
from .state import Service
from .store import ServerRow, Store
from .store_bridge import StoreAudit

__all__ = ["MCP_PATH", "MESSAGES_PATH", "SSE_PATH", "build_app"]

log = logging.getLogger("mcpwire.service")

MCP_PATH: Final = "/mcp"
#: the 2024-11-05 HTTP+SSE transport's event stream and POSTs, for clients that speak nothing newer
SSE_PATH: Final = "/sse"
MESSAGES_PATH: Final = "/messages"
_CALL_PATHS: Final = (f"{PREFIX}/tools/", f"{PREFIX}/prompts/", f"{PREFIX}/resources/read")


class _Asgi:
    """Marks an ASGI callable for starlette's Route (which would take a function for an endpoint)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


async def _gateway_missing(scope: Any, receive: Any, send: Any) -> None:
    request = Request(scope, receive)
    exc = ProblemError(
        503,
        "the MCP gateway is not part of this build of mcpwire; the management API is at /api/v1",
        title="Gateway unavailable",
    )
    response = _problem(exc, request)
    await response(scope, receive, send)


def _problem(exc: ProblemError, request: Request) -> Response:
    from .api.routing import problem_response

    return problem_response(exc, request)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    detail = {
        404: f"nothing at {request.url.path}; the API is under {PREFIX} (see {PREFIX}/openapi.json)",
        405: f"{request.method} is not allowed on {request.url.path}",
    }.get(exc.status_code, str(exc.detail))
    return _problem(ProblemError(exc.status_code, detail, headers=exc.headers), request)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _problem(ProblemError(500, "an unexpected error; the service log has the details"), request)


def _gateway_app(host: Host, settings: Settings) -> Any:
    try:
        from .gateway import Gateway  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        log.warning("the MCP gateway is not available; /mcp answers 503")
        return None
    gateway = Gateway(host, namespacing=settings.namespacing, caller_grace=settings.caller_grace)
    return gateway


def _console() -> Any:
    """The web console's module, or ``None`` when its dependencies (jinja2) are missing."""
    try:
        from . import console
    except ImportError:
        log.warning("the web console is not available (%s)", install_hint("serve"))
        return None
    return console


def build_app(
    host: Host,
    store: Store,
    settings: Settings,
    *,
    sources: Mapping[str, Source] | None = None,
    rows: list[ServerRow] | None = None,
    base_path: Path | None = None,
    file: HostConfig | None = None,
    gateway: Any = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The service's app for ``host`` and ``store`` (both opened by the caller, who closes them).

    Make the host with :func:`~mcpwire.service.store_bridge.service_host`, so that its approvals, pins
    and audit records live in the store.

    Args:
        sources: where each server came from (``config`` or ``api``); all ``config`` by default.
        rows: what the store held about servers when the host was built.
        base_path: the config file's folder (for ``{BASE_PATH}`` in entries added through the API).
        file: the config file's own servers: with it, servers another process changes through the
            API on the same store are followed here (:class:`~mcpwire.service.changes.ChangeFeed`).
        gateway: the MCP gateway to mount (made from ``host`` when ``None``, if available).
        extra_routes: more routes (the console, the agent), after the API's; the agent's
            (:func:`~mcpwire.service.agent_runs.agent_routes`) bring the runs the API starts.
    """
    service = _service(host, store, settings, sources=sources, rows=rows, base_path=base_path)
    service.servers.file = file
    service.agent = getattr(extra_routes, "runs", None)  # (agent_runs.AgentRoutes)
    provider = IdentityProvider(settings.oauth, resource_url(settings)) if settings.oauth is not None else None
    if provider is not None:
        service.authenticator = Authenticator(
            settings.token, store, jwt=provider.verify_access_token, challenger=provider.challenge
        )
    else:
        service.authenticator = Authenticator(settings.token, store)
    service.gateway = gateway if gateway is not None else _gateway_app(host, settings)
    if service.gateway is not None:
        # the gateway keeps its own bound as well (INTERFACES: it refuses bodies over it)
        limiter = service.limiter

        def admit_batch(state: Mapping[str, Any], calls: int) -> float | None:
            # the middleware took one token for the HTTP request; a batch pays for the rest
            if not limiter.enabled or calls <= 1:
                return None
            return limiter.take(str(state.get("address", "unknown")), calls - 1)

        endpoint = service.gateway.asgi_app(
            max_body_bytes=settings.max_body_bytes,
            admit_batch=admit_batch,
            mcp_path=MCP_PATH,
            sse_path=SSE_PATH,
            messages_path=MESSAGES_PATH,
        )
        mcp = _Asgi(endpoint)
    else:
        endpoint = None
        mcp = _Asgi(_gateway_missing)
    console = _console()
    legacy = [Route(SSE_PATH, mcp, methods=["GET"]), Route(MESSAGES_PATH, mcp, methods=["POST"])]
    # the gateway first: the router tries routes in order, and most requests are the gateway's
    routes: list[BaseRoute] = [Route(MCP_PATH, mcp), *API.routes(service, map_error), *legacy, *extra_routes]
    metadata_paths = provider.metadata_paths() if provider is not None else ()
    if provider is not None:
        routes += [Route(path, _resource_metadata(provider), methods=["GET"]) for path in metadata_paths]
    if console is not None:
        routes += console.routes()  # the console checks its own session cookie (not the bearer token)
        if provider is not None:
            routes += console.signin.sign_in_routes()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    def is_public(method: str, path: str) -> bool:
        return (
            API.is_public(method, path)
            or (console is not None and console.handles(path))
            or (method in ("GET", "HEAD") and path in metadata_paths)
        )

    guard: dict[str, Any] = {
        "settings": settings,
        "is_public": is_public,
        "is_call": _is_call,
        "limiter": service.limiter,
        "authenticator": service.authenticator,
        "path_role": _path_role,
        "barrier": service.audit.barrier,
        "observe": service.http.observe,
    }
    app = _ServiceApp(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(ServiceMiddleware, **guard)],
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
    )
    if endpoint is not None:
        app.direct = {MCP_PATH: ServiceMiddleware(endpoint, **guard)}
    app.state.service = service
    app.state.oidc = _console_sign_in(provider)
    return app


class _ServiceApp(Starlette):
    """The service's app: the service's middleware in front of Starlette or, on a
    :attr:`direct` path, in front of that path's app alone.

    Every method of the gateway's path is the gateway's, and the gateway answers its own errors:
    an MCP request goes from the middleware straight to it, without Starlette's error handler,
    router and route. An exception it lets out reaches the HTTP server, which answers 500 or
    closes the connection."""

    #: path -> the service's middleware in front of that path's app
    direct: Mapping[str, ServiceMiddleware] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        served = self.direct.get(scope["path"]) if scope["type"] == "http" else None
        if served is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        await served(scope, receive, send)


def _resource_metadata(provider: IdentityProvider) -> Any:
    """The gateway's Protected Resource Metadata (RFC 9728 §3.2: ``application/json``, 200)."""
    document = provider.metadata_document()

    async def answer(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=300"})

    return answer


def _console_sign_in(provider: IdentityProvider | None) -> Any:
    """The console's OpenID Connect client, when the provider and a client id are configured."""
    if provider is None or not provider.settings.client_id:
        return None
    from .oidc import ConsoleSignIn, redirect_uri_for

    oauth = provider.settings
    assert oauth.client_id is not None
    return ConsoleSignIn(provider, oauth.client_id, oauth.client_secret, redirect_uri_for(provider.resource))


def _service(
    host: Host,
    store: Store,
    settings: Settings,
    *,
    sources: Mapping[str, Source] | None,
    rows: list[ServerRow] | None,
    base_path: Path | None,
) -> Service:
    """What the handlers share: the host and store, with the event hub, audit writer, metrics,
    rate limiter and server manager wired to them."""
    hub = EventHub(kept=settings.events_kept, buffer=settings.sse_buffer)
    audit = host.audit.writer if isinstance(host.audit, StoreAudit) else AuditWriter(store, journal=True)
    audit.hub = hub
    calls = CallMetrics()
    if isinstance(host.audit, StoreAudit):
        host.audit.metrics = calls
    limiter = RateLimiter(rate=settings.rate_limit, burst=settings.rate_burst)
    manager = ServerManager(
        host=host,
        store=store,
        sources=dict(sources) if sources is not None else {i.name: "config" for i in host.list()},
        base_path=base_path,
        rows={r.name: r for r in rows or []},
    )
    namer = RouteNamer([op.path for op in API.operations] + [MCP_PATH, SSE_PATH, MESSAGES_PATH], prefixes=[PREFIX])
    return Service(
        host=host,
        store=store,
        settings=settings,
        servers=manager,
        hub=hub,
        audit=audit,
        limiter=limiter,
        http=HttpMetrics(namer=namer),
        calls=calls,
    )


def _path_role(method: str, path: str) -> Role | None:
    """The role a path outside the API's operations needs (those check their own): the gateway
    calls tools."""
    if path in (MCP_PATH, SSE_PATH, MESSAGES_PATH):
        return Role.CALLER
    return None


def _is_call(method: str, path: str) -> bool:
    """Whether a request is a call (tools, prompts, resources, the gateway's POSTs): calls count
    against the rate limit."""
    if path in (MCP_PATH, MESSAGES_PATH):
        return method == "POST"
    return (method == "POST" and path.startswith(_CALL_PATHS)) or path.startswith(f"{PREFIX}/resources/read")
