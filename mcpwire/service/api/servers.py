"""``/api/v1/servers``: list, inspect, add, edit, remove, restart and check servers.

A new entry and an edited one are checked by the config loader (see
:mod:`mcpwire.service.servers`): the body is decoded as any JSON object, and the loader names
every problem at its JSON path, in the words ``mcpwire`` uses for a config file.
"""

from __future__ import annotations

import re
import time
from typing import Any, Final

from ...errors import MCPWireError
from ...host import ServerInfo, ServerStatus
from ...host.calls import not_connected
from ...host.state import describe
from ...redaction import redact_argv, redact_url
from ..identity import Role
from ..problems import FieldError, ProblemError
from .core import API, NO_CONTENT, PREFIX, named, service_of
from .routing import Ctx, Reply, ResponseSpec
from .types import CheckOut, CheckQuery, Latency, NewServer, ServerEntryPatch, ServerList, ServerOut

__all__ = ["server_out"]

TAGS = ("servers",)
#: a JSON object, any: the loader checks it (``body_schema`` documents it)
JSONObject = dict[str, Any]
_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _target(info: ServerInfo) -> str:
    config = info.config
    if config.type == "stdio":
        return " ".join(redact_argv([config.command or "", *config.args]))
    return redact_url(config.url or "")


def server_out(ctx: Ctx, info: ServerInfo) -> ServerOut:
    service = service_of(ctx)
    stats = service.host.server_statistics(info.name)
    return ServerOut(
        name=info.name,
        source=service.servers.source(info.name),
        enabled=stats.enabled,
        transport=stats.transport,
        target=_target(info),
        status=stats.status,
        era=stats.era,
        revision=stats.protocol_version,
        tools=stats.tools,
        prompts=stats.prompts,
        resources=stats.resources,
        resource_templates=stats.resource_templates,
        error=stats.error,
        last_error=stats.last_error,
        connected_since=stats.connected_since,
        uptime_seconds=None if stats.uptime is None else round(stats.uptime, 3),
        restarts=stats.restarts,
        health_failures=stats.health_failures,
        last_health_check=stats.last_health_check,
        breaker=stats.breaker,
        calls=stats.calls_total,
        errors=stats.errors_total,
        latency=Latency(p50_ms=round(stats.p50 * 1000, 3), p95_ms=round(stats.p95 * 1000, 3)),
        cache_hits=stats.cache_hits,
        cache_misses=stats.cache_misses,
        description=info.config.description,
    )


def _info(ctx: Ctx) -> ServerInfo:
    return named(service_of(ctx).host.list(), ctx.path["name"], "server")


@API.operation(
    "GET",
    f"{PREFIX}/servers",
    summary="List the servers with their status",
    tags=TAGS,
    responses={200: ResponseSpec("Every server, in registration order.", ServerList)},
)
async def list_servers(ctx: Ctx) -> ServerList:
    """Status, transport, negotiated revision, counts, last error, uptime, health and breaker."""
    return ServerList(items=[server_out(ctx, info) for info in service_of(ctx).host.list()])


@API.operation(
    "GET",
    f"{PREFIX}/servers/{{name}}",
    summary="One server",
    tags=TAGS,
    responses={200: ResponseSpec("The server.", ServerOut)},
)
async def get_server(ctx: Ctx) -> ServerOut:
    return server_out(ctx, _info(ctx))


@API.operation(
    "POST",
    f"{PREFIX}/servers",
    summary="Add a server",
    tags=TAGS,
    body=JSONObject,
    body_schema=NewServer,
    responses={
        201: ResponseSpec("Added and starting; Location names it.", ServerOut, headers={"Location": "The server."})
    },
)
async def add_server(ctx: Ctx) -> Reply:
    """The body is one mcp.json entry, in any shape the config file takes, plus its name. It is
    checked as the config file's entries are (422 names every problem at its JSON path, and
    every unknown key), stored (surviving a restart; the config file is not touched), and the
    server starts at once."""
    entry = dict(ctx.body_as(dict))
    name = entry.pop("name", None)
    if not isinstance(name, str) or not _NAME.match(name):
        got = "it is missing" if name is None else f"got {name!r}"
        message = f"expected a server name of 1 to 64 letters, digits, '_', '-' or '.', {got}"
        error = FieldError(location="body", path="$.name", message=message)
        raise ProblemError(422, f"the server entry has a problem: $.name: {message}", errors=[error])
    nulls = [
        FieldError(location="body", path=f"$.{key}", message="expected a value; null removes a key only in a PATCH")
        for key, value in entry.items()
        if value is None
    ]
    if nulls:
        shown = "; ".join(f"{e.path}: {e.message}" for e in nulls)
        raise ProblemError(422, f"the server entry has a problem: {shown}", errors=nulls)
    service = service_of(ctx)
    await service.servers.add(name, entry)
    info = service.host.get(name)
    return Reply(server_out(ctx, info), status=201, headers={"Location": f"{PREFIX}/servers/{name}"})


@API.operation(
    "PATCH",
    f"{PREFIX}/servers/{{name}}",
    summary="Edit a server",
    tags=TAGS,
    body=JSONObject,
    body_schema=ServerEntryPatch,
    responses={200: ResponseSpec("The server, restarted with its new settings.", ServerOut)},
)
async def edit_server(ctx: Ctx) -> ServerOut:
    """The body is a JSON merge patch (RFC 7396) of the server's entry: any key may change (url,
    command, args, env, headers, auth, description, policy, enabled, timeouts, tools, era...),
    an object merges into the one there, and ``null`` removes a key. The edited entry is checked
    as a new one is. A server of the config file keeps its edits in the service's store, laid
    over the file's entry (the file is not rewritten). The server restarts only when its
    settings changed; an empty patch changes nothing."""
    info = _info(ctx)
    patch = ctx.body_as(dict)
    if "name" in patch:
        message = "the name cannot change; DELETE the server and POST it under the new name"
        raise ProblemError(422, f"the patch has a problem: $.name: {message}",
                           errors=[FieldError(location="body", path="$.name", message=message)])  # fmt: skip
    if patch:
        await service_of(ctx).servers.edit(info.name, patch)
    return server_out(ctx, service_of(ctx).host.get(info.name))


@API.operation(
    "DELETE",
    f"{PREFIX}/servers/{{name}}",
    summary="Remove a server",
    tags=TAGS,
    responses=NO_CONTENT,
)
async def remove_server(ctx: Ctx) -> Reply:
    """Stops the server and forgets it; a server of the config file stays removed after a restart
    (the file is not rewritten)."""
    info = _info(ctx)
    await service_of(ctx).servers.remove(info.name)
    return Reply(status=204)


@API.operation(
    "POST",
    f"{PREFIX}/servers/{{name}}/restart",
    summary="Restart a server",
    tags=TAGS,
    responses={202: ResponseSpec("Restarting; watch its status.", ServerOut)},
)
async def restart_server(ctx: Ctx) -> Reply:
    info = _info(ctx)
    await service_of(ctx).servers.restart(info.name)
    return Reply(server_out(ctx, service_of(ctx).host.get(info.name)), status=202)


@API.operation(
    "POST",
    f"{PREFIX}/servers/{{name}}/check",
    role=Role.VIEWER,
    summary="Check a server's health now",
    tags=TAGS,
    query=CheckQuery,
    responses={200: ResponseSpec("How the check went (a failed one too).", CheckOut)},
)
async def check_server(ctx: Ctx) -> CheckOut:
    """Asks the server for a sign of life now, as the periodic health check does (``ping``;
    ``server/discover`` in 2026-07-28), within ``timeout_seconds``. A server that is not
    connected, or does not answer in time, is a check that failed (``ok`` false, and why); a
    failed check is reported, not acted on (the periodic checks reconnect). Changes nothing, so
    a viewer may ask."""
    info = _info(ctx)
    timeout = ctx.query_as(CheckQuery).timeout_seconds
    method = "server/discover" if info.era == "modern" else "ping"
    client = info.client
    checked_at = time.time()
    if client is None or info.status is not ServerStatus.CONNECTED:
        return CheckOut(
            name=info.name, ok=False, status=info.status.value, method=None, latency_ms=None,
            error=not_connected(info), checked_at=checked_at,
        )  # fmt: skip
    started = time.perf_counter()
    try:
        if info.era == "modern":
            await client.discover(timeout=timeout)
        else:
            await client.ping(timeout=timeout)
    except MCPWireError as exc:
        error: str | None = f"{method} failed: {describe(exc)}"
    else:
        error = None
        info.last_health_check = time.time()
    latency = round((time.perf_counter() - started) * 1000, 3)
    return CheckOut(
        name=info.name, ok=error is None, status=info.status.value, method=method, latency_ms=latency,
        error=error, checked_at=checked_at,
    )  # fmt: skip
