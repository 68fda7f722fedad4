"""``/api/v1/tools``: the namespaced tools of every server, and calls through the host's policies.

A call runs in the service's nursery, not in the request's task: when the policy asks for a
decision, the caller gets ``202`` with the approval's id and a ``Location`` at once, and the call
goes on waiting for the decision (here or in another replica) after the HTTP request has ended.
Its outcome is then read from ``GET /api/v1/approvals/{id}``.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping
from typing import Any

import msgspec

from ...host import Host, RegisteredTool, ServerInfo, ServerStatus
from ...host.calls import not_connected
from ..identity import Role
from ..problems import ProblemError
from ..state import CallOutcome, Service
from .core import API, PREFIX, map_error, named, service_of
from .routing import Ctx, Reply, ResponseSpec
from .types import CallAccepted, ToolCallIn, ToolCallOut, ToolList, ToolOut, ToolQuery

__all__ = ["run_call", "tool_out"]

TAGS = ("tools",)


def tool_out(host: Host, reg: RegisteredTool) -> ToolOut:
    tool = reg.tool
    annotations = None if tool.annotations is None else msgspec.to_builtins(tool.annotations)
    risk = host.tool_risk(reg.name)
    return ToolOut(
        name=reg.name,
        server=reg.server,
        tool=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=dict(tool.input_schema),
        output_schema=None if tool.output_schema is None else dict(tool.output_schema),
        annotations=annotations,
        risk=risk.name.lower(),
        quarantined=reg.quarantined,
    )


@API.operation(
    "GET",
    f"{PREFIX}/tools",
    summary="List the tools of every server",
    tags=TAGS,
    query=ToolQuery,
    responses={200: ResponseSpec("Tools by namespaced name.", ToolList)},
)
async def list_tools(ctx: Ctx) -> ToolList:
    """``server`` keeps one server's tools; ``q`` keeps those whose name, title or description
    contains it (case-insensitive)."""
    query = ctx.query_as(ToolQuery)
    host = service_of(ctx).host
    tools = host.tools()
    if query.server is not None:
        tools = [t for t in tools if t.server == query.server]
    if query.q:
        needle = query.q.lower()
        tools = [
            t
            for t in tools
            if needle in t.name.lower()
            or needle in (t.tool.title or "").lower()
            or needle in (t.tool.description or "").lower()
        ]
    return ToolList(items=[tool_out(host, t) for t in tools])


def _registered(ctx: Ctx) -> RegisteredTool:
    return named(service_of(ctx).host.tools(include_quarantined=True), ctx.path["name"], "tool", listing="tools")


#: how soon a caller told that the tool's server is reconnecting may try again
RETRY_RECONNECTING_S = 5


def _server_of(host: Host, name: str) -> ServerInfo | None:
    """The server whose tools ``name`` would be one of, by its namespace (the longest that fits)."""
    head = host.registry.name_format.split("{tool}")[0]
    fits = [
        (len(p), info) for info in host.list() if (p := head.format(server=info.config.prefix)) and name.startswith(p)
    ]
    return max(fits, key=lambda fit: fit[0])[1] if fits else None


async def _callable(ctx: Ctx) -> RegisteredTool:
    """The tool to call. One of a server that is (re)connecting is waited for briefly, then a
    503 with Retry-After says so; one of a disabled server is a 409; only a name no server could
    have is a 404."""
    service = service_of(ctx)
    name = ctx.path["name"]
    tools = {t.name: t for t in service.host.tools(include_quarantined=True)}
    if name in tools:
        return tools[name]
    info = _server_of(service.host, name)
    if info is None or info.status is ServerStatus.CONNECTED:
        return _registered(ctx)  # the 404
    await service.ready_server(info.name)
    tools = {t.name: t for t in service.host.tools(include_quarantined=True)}
    if name in tools:
        return tools[name]
    info = service.host.get(info.name)  # (as it is after the wait)
    if info.status is ServerStatus.CONNECTED:
        return _registered(ctx)
    raise ProblemError(
        503,
        f"{not_connected(info)}: its tools, {name!r} among them if it has it, come back once it is connected; "
        f"try again in {RETRY_RECONNECTING_S} s",
        headers={"Retry-After": str(RETRY_RECONNECTING_S)},
        title="Server not connected",
    )


@API.operation(
    "GET",
    f"{PREFIX}/tools/{{name}}",
    summary="One tool (also a quarantined one, flagged)",
    tags=TAGS,
    responses={200: ResponseSpec("The tool.", ToolOut)},
)
async def get_tool(ctx: Ctx) -> ToolOut:
    return tool_out(service_of(ctx).host, _registered(ctx))


def result_out(result: Any, trace_id: str | None) -> ToolCallOut:
    """A host tool result as the API shows it."""
    tool_result = result.result
    structured = tool_result.structured_content
    return ToolCallOut(
        name=result.name,
        server=result.server,
        tool=result.tool,
        is_error=tool_result.is_error,
        content=[msgspec.to_builtins(block) for block in tool_result.content],
        structured_content=None if structured is msgspec.UNSET else structured,
        text=result.text,
        cached=result.cached,
        risk=None if result.risk is None else result.risk.name.lower(),
        approval=result.approval,
        trace_id=trace_id,
    )


async def run_call(
    service: Service,
    name: str,
    arguments: Mapping[str, object],
    *,
    timeout: float | None,
    context: dict[str, str],
    outcome: CallOutcome,
    fresh: bool = False,
) -> None:
    """Runs one call to its end and records its outcome (never raises but for cancellation)."""
    try:
        result = await service.host.call_tool(name, arguments, timeout=timeout, context=context, fresh=fresh)
        outcome.result = result_out(result, context.get("trace_id"))
    except Exception as exc:
        mapped = map_error(exc)
        if mapped is None:
            service.log_unexpected(exc, f"the call of {name!r}")
            mapped = ProblemError(500, "the call failed unexpectedly; the service log has the details")
        outcome.error = mapped.detail
        outcome.problem = mapped
    finally:
        outcome.done.set()
        outcome.first.set()


@API.operation(
    "POST",
    f"{PREFIX}/tools/{{name}}/call",
    role=Role.CALLER,
    summary="Call a tool",
    tags=TAGS,
    body=ToolCallIn,
    responses={
        200: ResponseSpec("The tool's result (isError results are results too).", ToolCallOut),
        202: ResponseSpec(
            "The call waits for an approval; poll or wait on Location.",
            CallAccepted,
            headers={"Location": "The approval: GET it (with ?wait=S) for the decision and the result."},
        ),
    },
)
async def call_tool(ctx: Ctx) -> Reply:
    """Runs the call through the host's policies (filters, approval, cache, breaker, retry,
    timeout, audit). When the policy asks for a decision, answers 202 at once with the approval;
    the call goes on waiting for the decision. ``fresh`` skips the cache (its result replaces the
    cached one); a call of a tool that is not read-only drops its server's cached results."""
    body = ctx.body_as(ToolCallIn)
    service = service_of(ctx)
    reg = await _callable(ctx)
    await service.ready_server(reg.server)
    run_id = "run_" + secrets.token_hex(8)
    context = {"trace_id": ctx.trace_id or "", "run_id": run_id, "caller": f"api {ctx.caller or 'unknown'}"}
    outcome = service.outcome(run_id)
    opened = service.watch_approvals(run_id, outcome.first)
    try:
        service.start_soon(
            functools.partial(
                run_call,
                service,
                reg.name,
                body.arguments,
                timeout=body.timeout_seconds,
                context=context,
                outcome=outcome,
                fresh=body.fresh,
            )
        )
        await outcome.first.wait()  # the call ended, or asked for a decision
    finally:
        approval = opened.approval
        opened.close()
    service.outcomes.pop(run_id, None)  # kept (by approval id) only for a caller told to poll
    if outcome.done.is_set():
        if outcome.problem is not None:
            raise outcome.problem
        return Reply(outcome.result)
    assert approval is not None
    service.outcomes[approval.id] = outcome
    location = f"{PREFIX}/approvals/{approval.id}"
    accepted = CallAccepted(
        approval_id=approval.id, state=approval.state.value, location=location, expires_at=approval.expires_at
    )
    return Reply(accepted, status=202, headers={"Location": location})
