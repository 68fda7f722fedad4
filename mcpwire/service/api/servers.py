"""``/api/v1/servers``: list, inspect, add, edit, remove and restart servers."""

from __future__ import annotations

import urllib.parse

import msgspec

from ...host import ServerInfo
from ...redaction import redact_argv, redact_url
from ..problems import FieldError, ProblemError
from .core import API, NO_CONTENT, PREFIX, named, service_of
from .routing import Ctx, Reply, ResponseSpec
from .types import COMMAND_LINE, Latency, NewServer, ServerEntry, ServerList, ServerOut, ServerPatch

__all__ = ["server_out"]

TAGS = ("servers",)


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


def _check_entry(body: ServerEntry) -> None:
    """What the schema says but msgspec cannot check here (see ``CommandLine``), and URLs whose
    bracketed host is not an IP address."""
    error: FieldError | None = None
    if isinstance(body.command, str) and not COMMAND_LINE.match(body.command):
        message = "expected a program, or words without quotes or backslashes (give a list for those)"
        error = FieldError(location="body", path="$.command", message=message)
    elif isinstance(body.url, str):
        try:
            urllib.parse.urlsplit(body.url)
        except ValueError as exc:
            error = FieldError(location="body", path="$.url", message=f"not a URL: {exc}")
    if error is not None:
        raise ProblemError(422, f"the request body is invalid: {error.message}", errors=[error])


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
    body=NewServer,
    responses={
        201: ResponseSpec("Added and starting; Location names it.", ServerOut, headers={"Location": "The server."})
    },
)
async def add_server(ctx: Ctx) -> Reply:
    """The body is one mcp.json entry plus its name. It is stored (surviving a restart; the
    config file is not touched) and the server starts at once. 422 names each bad field."""
    body = ctx.body_as(ServerEntry)
    _check_entry(body)
    entry = msgspec.to_builtins(body)
    name = entry.pop("name")
    service = service_of(ctx)
    await service.servers.add(name, entry)
    info = service.host.get(name)
    return Reply(server_out(ctx, info), status=201, headers={"Location": f"{PREFIX}/servers/{name}"})


@API.operation(
    "PATCH",
    f"{PREFIX}/servers/{{name}}",
    summary="Edit a server",
    tags=TAGS,
    body=ServerPatch,
    responses={200: ResponseSpec("The server, restarted with its new settings.", ServerOut)},
)
async def edit_server(ctx: Ctx) -> ServerOut:
    """Enable or disable it, change its timeout, its allowed or blocked tools, or its era pin.
    An empty patch changes nothing (and restarts nothing)."""
    info = _info(ctx)
    patch = msgspec.to_builtins(ctx.body_as(ServerPatch))
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
