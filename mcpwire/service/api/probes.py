"""Probes, metrics, events and the OpenAPI document: ``/healthz``, ``/readyz``, ``/metrics``,
``/events`` and ``/api/v1/openapi.json``."""

from __future__ import annotations

import functools
import time
from typing import Any

from starlette.responses import Response, StreamingResponse

from ..events import sse_stream
from .core import API, PREFIX, service_of
from .routing import JSON, Ctx, Reply, ResponseSpec
from .types import Health, Readiness

__all__: list[str] = []


@API.operation(
    "GET",
    "/healthz",
    summary="Liveness: the process is up",
    tags=("probes",),
    public=True,
    responses={200: ResponseSpec("Up.", Health)},
)
async def healthz(ctx: Ctx) -> Health:
    service = service_of(ctx)
    return Health(status="ok", version=service.version, uptime_seconds=round(time.time() - service.started_at, 3))


@API.operation(
    "GET",
    "/readyz",
    summary="Readiness: the API serves and every enabled server has been tried once",
    tags=("probes",),
    public=True,
    responses={
        200: ResponseSpec("Ready.", Readiness),
        503: ResponseSpec("Not ready yet: waitingFor names the servers not yet tried.", Readiness),
    },
)
async def readyz(ctx: Ctx) -> Reply:
    service = service_of(ctx)
    waiting = service.waiting_for()
    store_ok = await service.check_store()
    ready = service.running and not waiting and store_ok
    body = Readiness(ready=ready, waiting_for=waiting, store="ok" if store_ok else "failing")
    return Reply(body, status=200 if ready else 503)


@API.operation(
    "GET",
    "/metrics",
    summary="Prometheus metrics",
    tags=("probes",),
    responses={200: ResponseSpec("Prometheus text exposition format 0.0.4.", None, media="text/plain")},
)
async def metrics(ctx: Ctx) -> Response:
    """Calls, errors, latency per server and tool, cache hits, breaker states, restarts (the host);
    HTTP requests and latency histograms per route, events, audit queue, rate limiting (the
    service)."""
    text = service_of(ctx).prometheus()
    return Response(text, media_type="text/plain; version=0.0.4; charset=utf-8")


@API.operation(
    "GET",
    "/events",
    summary="Server-sent events: status, list changes, approvals, pins, audit records",
    tags=("events",),
    responses={
        200: ResponseSpec(
            "An endless text/event-stream; send Last-Event-ID to resume after a disconnection.",
            None,
            media="text/event-stream",
        )
    },
)
async def events(ctx: Ctx) -> StreamingResponse:
    """Each event has an id (``<boot>-<n>``), a kind (``status``, ``tools``, ``approval``, ``pin``,
    ``prompts``, ``resources``, ``audit``, ``reset``) and JSON data. A client that reconnects with
    ``Last-Event-ID`` gets what it missed; a ``reset`` event says some may be lost (a restart)."""
    service = service_of(ctx)
    last = ctx.request.headers.get("last-event-id")
    return StreamingResponse(
        sse_stream(service.hub, last),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@API.operation(
    "GET",
    f"{PREFIX}/openapi.json",
    summary="This API's OpenAPI 3.1 document",
    tags=("probes",),
    public=True,
    responses={200: ResponseSpec("The document.", dict[str, Any], media=JSON)},
)
async def openapi(ctx: Ctx) -> dict[str, Any]:
    return _document(secured=service_of(ctx).settings.token is not None)


@functools.cache
def _document(*, secured: bool) -> dict[str, Any]:
    """The API's document, made once (every operation is registered when the package is imported)."""
    return API.openapi(secured=secured)
