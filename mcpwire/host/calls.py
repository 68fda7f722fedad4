"""Calls through the host: a namespaced tool, prompt or resource resolved to its server and run
through that server's policy stack (a part of :class:`~mcpwire.host.Host`).

Theory of operation: a call resolves the namespaced name, builds a
:class:`~mcpwire.host.policies.CallContext` from the tool's annotations, the server's settings and
the caller's context (trace id, run id, caller), and runs through the server's
:class:`~mcpwire.host.policies.PolicyStack`. A proxy's call (the gateway's, for an MCP client of
its own) names that client explicitly (``relay=``): the context carries it through the policies
down to the connection's request (:mod:`mcpwire.client.relay`). Each attempt looks up the server's
current connection, so a retry after a restart uses the new one; a call that finds the server gone
records why its connection ended. What fails below the host is raised once, as a
:class:`~mcpwire.errors.ToolExecutionError` naming server, tool and cause. :class:`Calls` is given
the host's shared state (:mod:`mcpwire.host.state`) and reads the servers, the registry and the
catalog there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, TypeVar

from ..client import Client, ProgressCallback
from ..client.relay import Relay
from ..errors import HostError, MCPWireError, RequestTimeout, ServerGone, ToolExecutionError, UnknownTool
from ..protocol.types import GetPromptResult, ReadResourceResult, ToolResult
from .policies import (
    Approver,
    CallContext,
    Caller,
    ResultCache,
    Risk,
    classify_risk,
    summarize_arguments,
)
from .registry import RegisteredTool
from .render import first_line, render_result
from .results import HostToolResult, ToolQuarantined, ToolResultError
from .servers import ServerInfo, ServerStatus
from .state import HostState, describe

__all__ = ["Calls", "not_connected"]

log = logging.getLogger("mcpwire.host")
T = TypeVar("T")


class Calls:
    """Calls of the servers' tools, prompts and resources, and the risk of a tool (part of the host)."""

    def __init__(self, state: HostState, *, raise_tool_errors: bool) -> None:
        self._state = state
        self._raise_tool_errors = raise_tool_errors

    def tool_risk(self, name: str) -> Risk:
        """The risk a call of this namespaced tool is judged at (see :meth:`Host.tool_risk`)."""
        reg = self._state.registry.resolve(name)
        info = self._state.get(reg.server)
        configured = info.config.policy.for_tool(reg.tool.name).risk
        if configured is not None:
            return Risk[configured.upper()]
        return classify_risk(
            reg.tool.name,
            read_only=reg.read_only,
            destructive=reg.destructive,
            idempotent=reg.idempotent,
            open_world=reg.open_world,
            trust_annotations=info.config.policy.trust_annotations,
        )

    async def _on_client(self, info: ServerInfo, call: Callable[[Client], Awaitable[T]]) -> T:
        """``call`` on the server's current connection. A call that finds the server gone says
        why the connection ended (e.g. its exit status)."""
        client = info.client
        if client is None or info.status is not ServerStatus.CONNECTED:
            raise ServerGone(not_connected(info), server=info.name)
        try:
            return await call(client)
        except ServerGone as exc:
            if info.client is client and info._end_reason is None:
                info._end_reason = describe(exc)
            raise

    def _unknown(self, name: str, exc: UnknownTool) -> UnknownTool:
        head = self._state.registry.name_format.split("{tool}")[0]
        for info in self._state.servers.values():
            if info.status is ServerStatus.CONNECTED:
                continue
            prefix = head.format(server=info.config.prefix)
            if prefix and name.startswith(prefix):
                return UnknownTool(f"no tool named {name!r}: {not_connected(info)}, so its tools are not registered")
        return exc

    def _context(
        self,
        reg: RegisteredTool,
        info: ServerInfo,
        arguments: Mapping[str, object] | None,
        timeout: float | None,
        approver: Approver | None,
        context: Mapping[str, str] | None,
    ) -> CallContext:
        """The call's context from the tool's annotations and settings (the caller's parts are
        set by :meth:`call_tool`)."""
        settings = self._state.runtime[reg.server].for_tool(info.config.policy, reg.tool.name)
        ask_at = settings.ask_at
        return CallContext(
            server=reg.server,
            tool=reg.tool.name,
            arguments=dict(arguments or {}),
            name=reg.name,
            read_only=reg.read_only,
            idempotent=reg.idempotent,
            destructive=reg.destructive,
            open_world=reg.open_world,
            timeout=settings.timeout_seconds if timeout is None else timeout,
            retries=settings.retries,
            retryable=settings.retryable,
            cacheable=settings.cacheable,
            cache_ttl=settings.cache_ttl_seconds,
            invalidates=settings.invalidates,
            decision=settings.approval,
            risk=None if settings.risk is None else Risk[settings.risk.upper()],
            ask_at=None if ask_at is None else Risk[ask_at.upper()],
            era=info.era,
            approver=approver,
            context=dict(context or {}),
        )

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, object] | None = None,
        *,
        timeout: float | None = None,
        approver: Approver | None = None,
        context: Mapping[str, str] | None = None,
        on_progress: ProgressCallback | None = None,
        caller_approver: Approver | None = None,
        caller: Caller | None = None,
        fresh: bool = False,
        relay: Relay | None = None,
    ) -> HostToolResult:
        """Calls a namespaced tool through its server's policies (see :meth:`Host.call_tool`)."""
        try:
            reg = self._state.registry.resolve(name)
        except UnknownTool as exc:
            raise self._unknown(name, exc) from None
        if reg.quarantined:
            raise ToolQuarantined(
                f"tool {reg.tool.name!r} on server {reg.server!r} is quarantined: its definition changed since it "
                f"was pinned; review the change and approve it (host.approve_pin({reg.server!r}, {reg.tool.name!r}))",
                server=reg.server,
                tool=reg.tool.name,
            )
        info = self._state.get(reg.server)
        ctx = self._context(reg, info, arguments, timeout, approver, context)
        ctx.caller_approver, ctx.caller, ctx.fresh, ctx.relay = caller_approver, caller, fresh, relay
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: calling %s with %s", reg.server, reg.tool.name, summarize_arguments(ctx.arguments))

        async def invoke(args: Mapping[str, object]) -> object:
            return await self._on_client(
                info,
                lambda client: client.call_tool(
                    reg.tool.name,
                    args,
                    timeout=ctx.timeout,
                    on_progress=on_progress,
                    relay=ctx.relay,
                    deadline=ctx.deadline,
                ),
            )

        started = time.perf_counter()
        try:
            result = await self._guard(ctx, self._state.runtime[reg.server].stack.run(ctx, invoke, bounded=True))
        except BaseException as exc:
            log_call(reg.server, reg.tool.name, ctx.outcome, exc)
            raise
        assert isinstance(result, ToolResult)
        latency = time.perf_counter() - started - ctx.approval_wait
        log_call(reg.server, reg.tool.name, ctx.outcome)
        out = HostToolResult(
            name=reg.name,
            server=reg.server,
            tool=reg.tool.name,
            result=result,
            text=render_result(result),
            cached=ctx.outcome == "cache_hit",
            risk=ctx.risk,
            approval=ctx.approval,
            approval_id=ctx.approval_id,
            latency=max(0.0, latency),
            approval_wait=ctx.approval_wait,
        )
        if self._raise_tool_errors and out.is_error:
            said = first_line(result.text(), 200) or "(no text)"
            raise ToolResultError(
                f"tool {reg.tool.name!r} on server {reg.server!r} reported an error: {said}",
                result=out,
            )
        return out

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        relay: Relay | None = None,
    ) -> GetPromptResult:
        """Renders a namespaced prompt on its server (see :meth:`Host.get_prompt`)."""
        reg = self._state.catalog.resolve_prompt(name)
        info = self._state.get(reg.server)
        ctx = CallContext(
            server=reg.server,
            tool=reg.prompt.name,
            arguments=dict(arguments or {}),
            name=reg.name,
            kind="prompt",
            read_only=True,
            idempotent=True,
            timeout=info.config.policy.timeout_seconds if timeout is None else timeout,
            era=info.era,
            context=dict(context or {}),
            relay=relay,
        )

        async def invoke(args: Mapping[str, object]) -> object:
            return await self._on_client(
                info, lambda client: client.get_prompt(reg.prompt.name, arguments, timeout=ctx.timeout, relay=ctx.relay)
            )

        result = await self._guard(ctx, self._state.runtime[reg.server].stack.run(ctx, invoke))
        assert isinstance(result, GetPromptResult)
        return result

    async def read_resource(
        self,
        server: str,
        uri: str,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        relay: Relay | None = None,
    ) -> ReadResourceResult:
        """Reads a resource through the server's policies (see :meth:`Host.read_resource`)."""
        info = self._state.get(server)
        policy = info.config.policy
        ctx = CallContext(
            server=server,
            tool=uri,
            arguments={},
            kind="resource",
            read_only=True,
            idempotent=True,
            timeout=policy.timeout_seconds if timeout is None else timeout,
            era=info.era,
            context=dict(context or {}),
            relay=relay,
        )

        async def invoke(args: Mapping[str, object]) -> object:
            return await self._on_client(
                info, lambda client: client.read_resource(uri, timeout=ctx.timeout, relay=ctx.relay)
            )

        result = await self._guard(ctx, self._state.runtime[server].stack.run(ctx, invoke))
        assert isinstance(result, ReadResourceResult)
        cache = self._state.runtime[server].cache
        if (
            ctx.outcome == "ok"
            and uri not in info._uris
            and len(info._uris) < cache.size
            and ResultCache.key(ctx) in cache
        ):
            info._uris.add(uri)
            info._uris_changed.set()
        return result

    async def _guard(self, ctx: CallContext, call: Awaitable[T]) -> T:
        try:
            return await call
        except HostError:
            raise
        except MCPWireError as exc:
            what = {"tool": "tool", "resource": "resource", "prompt": "prompt"}.get(ctx.kind, ctx.kind)
            raise ToolExecutionError(
                f"{what} {ctx.tool!r} on server {ctx.server!r} failed: {describe(exc)}",
                tool=ctx.tool,
                server=ctx.server,
            ) from exc


#: outcomes of a call that failed (the tool said so, or it could not be carried out): ERROR
FAILED_OUTCOMES: Final = frozenset({"tool_error", "error"})


def log_call(server: str, tool: str, outcome: str, exc: BaseException | None = None) -> None:
    """The one line a host call logs: ``server: tool -> outcome``, at ERROR when the call
    failed (a tool error, a timeout, any other failure; the kind of failure is named, the error's
    words are the caller's to report), else at INFO."""
    if outcome not in FAILED_OUTCOMES:
        log.info("%s: %s -> %s", server, tool, outcome)
        return
    cause = exc.__cause__ if isinstance(exc, ToolExecutionError) and exc.__cause__ is not None else exc
    if cause is None:
        log.error("%s: %s -> %s", server, tool, outcome)
    else:
        kind = "timeout" if isinstance(cause, RequestTimeout) else type(cause).__name__
        log.error("%s: %s -> %s (%s)", server, tool, outcome, kind)


def not_connected(info: ServerInfo) -> str:
    """Why a server cannot take calls, as a sentence about it."""
    name = info.name
    if info.status is ServerStatus.CONNECTING:
        since = f"; its last attempt failed: {info.last_error}" if info.restart_count and info.last_error else ""
        return f"server {name!r} is still connecting{since}"
    if info.status is ServerStatus.ERROR:
        return f"server {name!r} is not connected ({info.error}); the host keeps retrying in the background"
    if not info.config.enabled:
        return f"server {name!r} is disabled"
    if info.status is ServerStatus.CONNECTED:  # connected, but its connection is gone this instant
        return f"server {name!r} lost its connection; the host is reconnecting"
    return f"server {name!r} is not running (the host was not started, or the server was stopped)"
