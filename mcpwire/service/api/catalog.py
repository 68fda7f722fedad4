"""``/api/v1/prompts`` and ``/api/v1/resources``: every server's prompts and resources, namespaced."""

from __future__ import annotations

import msgspec

from ...host import RegisteredResource
from ..identity import Role
from ..problems import ProblemError
from .core import API, PREFIX, named, service_of
from .routing import Ctx, ResponseSpec
from .types import (
    PromptGetIn,
    PromptGetOut,
    PromptList,
    PromptOut,
    ResourceList,
    ResourceOut,
    ResourceReadOut,
    ResourceReadQuery,
    ResourceTemplateOut,
    ServerQuery,
)

__all__: list[str] = []


@API.operation(
    "GET",
    f"{PREFIX}/prompts",
    summary="List the prompts of every server",
    tags=("prompts",),
    query=ServerQuery,
    responses={200: ResponseSpec("Prompts by namespaced name.", PromptList)},
)
async def list_prompts(ctx: Ctx) -> PromptList:
    query = ctx.query_as(ServerQuery)
    items = [
        PromptOut(
            name=reg.name,
            server=reg.server,
            prompt=reg.prompt.name,
            title=reg.prompt.title,
            description=reg.prompt.description,
            arguments=[msgspec.to_builtins(a) for a in reg.prompt.arguments],
        )
        for reg in service_of(ctx).host.prompts()
        if query.server is None or reg.server == query.server
    ]
    return PromptList(items=items)


@API.operation(
    "POST",
    f"{PREFIX}/prompts/{{name}}/get",
    role=Role.CALLER,
    summary="Render a prompt",
    tags=("prompts",),
    body=PromptGetIn,
    responses={200: ResponseSpec("The prompt's messages.", PromptGetOut)},
)
async def get_prompt(ctx: Ctx) -> PromptGetOut:
    body = ctx.body_as(PromptGetIn)
    service = service_of(ctx)
    name = ctx.path["name"]
    reg = named(service.host.prompts(), name, "prompt", listing="prompts")
    await service.ready_server(reg.server)
    context = {"trace_id": ctx.trace_id or "", "caller": f"api {ctx.caller or 'unknown'}"}
    result = await service.host.get_prompt(name, body.arguments, context=context)
    return PromptGetOut(
        name=reg.name,
        server=reg.server,
        prompt=reg.prompt.name,
        description=result.description,
        messages=[msgspec.to_builtins(m) for m in result.messages],
    )


@API.operation(
    "GET",
    f"{PREFIX}/resources",
    summary="List the resources and resource templates of every server",
    tags=("resources",),
    query=ServerQuery,
    responses={200: ResponseSpec("Resources and templates, by server.", ResourceList)},
)
async def list_resources(ctx: Ctx) -> ResourceList:
    query = ctx.query_as(ServerQuery)
    host = service_of(ctx).host
    resources = [
        ResourceOut(
            name=reg.name,
            server=reg.server,
            uri=reg.uri,
            title=reg.resource.title,
            description=reg.resource.description,
            mime_type=reg.resource.mime_type,
        )
        for reg in host.resources(query.server)
    ]
    templates = [
        ResourceTemplateOut(
            name=reg.name,
            server=reg.server,
            uri_template=reg.uri_template,
            description=reg.template.description,
            mime_type=reg.template.mime_type,
        )
        for reg in host.resource_templates(query.server)
    ]
    return ResourceList(items=resources, templates=templates)


def _server_for(resources: list[RegisteredResource], uri: str, server: str | None, known: set[str]) -> str:
    if server is not None:
        if server not in known:
            raise ProblemError(404, f"no server named {server!r}")
        return server
    owners = sorted({r.server for r in resources if r.uri == uri})
    if len(owners) == 1:
        return owners[0]
    if not owners:
        raise ProblemError(
            404, f"no server lists the resource {uri!r}; give server= to read it from one (e.g. a template's URI)"
        )
    raise ProblemError(409, f"servers {', '.join(owners)} all list {uri!r}; give server= to choose one")


@API.operation(
    "GET",
    f"{PREFIX}/resources/read",
    role=Role.CALLER,
    summary="Read a resource",
    tags=("resources",),
    query=ResourceReadQuery,
    responses={200: ResponseSpec("The resource's contents (text, or base64 in blob).", ResourceReadOut)},
)
async def read_resource(ctx: Ctx) -> ResourceReadOut:
    """``uri`` is read from the server that lists it, or from ``server`` (for a URI made from a
    template, or listed by several servers)."""
    query = ctx.query_as(ResourceReadQuery)
    service = service_of(ctx)
    host = service.host
    server = _server_for(host.resources(), query.uri, query.server, {i.name for i in host.list()})
    await service.ready_server(server)
    context = {"trace_id": ctx.trace_id or "", "caller": f"api {ctx.caller or 'unknown'}"}
    result = await host.read_resource(server, query.uri, context=context)
    return ResourceReadOut(server=server, uri=query.uri, contents=[msgspec.to_builtins(c) for c in result.contents])
