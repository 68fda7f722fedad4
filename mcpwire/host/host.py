"""The multi-server host: supervised clients, a live registry and routed, policed calls.

Theory of operation: the host keeps one :class:`~mcpwire.host.servers.ServerInfo` per configured
server and runs each enabled one under a supervisor (:mod:`mcpwire.host.supervisor`), which keeps
its tools in the :class:`~mcpwire.host.registry.ToolRegistry` and its prompts and resources in the
:class:`~mcpwire.host.catalog.Catalog`. Calls resolve the namespaced name, build a
:class:`~mcpwire.host.policies.CallContext` from the tool's annotations, the server's settings and
the caller's context (trace id, run id, caller), and run through the server's
:class:`~mcpwire.host.policies.PolicyStack`; each attempt looks up the server's current
connection, so a retry after a restart uses the new one. Calls that need a decision become
:class:`~mcpwire.host.approvals.Approval` objects in ``host.approvals`` when the host has a queue.
Servers can be added, replaced, restarted, enabled and disabled while the host runs; every change
is a :class:`~mcpwire.host.events.HostEvent`.
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar

import msgspec
import trio

from ..client import ProgressCallback, require_trio
from ..errors import HostError, MCPWireError, ServerGone, ToolExecutionError, UnknownTool
from ..protocol.types import GetPromptResult, ReadResourceResult, ToolResult
from .approvals import ApprovalQueue
from .catalog import Catalog, RegisteredPrompt, RegisteredResource, RegisteredTemplate
from .config import HostConfig, ServerConfig, load_config, parse_server
from .events import EventHub, HostEvent, HostEvents
from .oversight import Oversight
from .pins import PinStore
from .policies import (
    DEFAULT_APPROVAL_TIMEOUT,
    DEFAULT_ASK_AT,
    ApprovalPolicy,
    Approver,
    ArgumentsMode,
    AuditLog,
    AuditRecord,
    AuditSink,
    CallContext,
    CircuitBreaker,
    Decision,
    Metrics,
    PolicyStack,
    ResultCache,
    RetryPolicy,
    Risk,
    classify_risk,
    summarize_arguments,
)
from .registry import DEFAULT_NAME_FORMAT, Provider, RegisteredTool, ToolRegistry
from .render import render_result
from .reporting import Reporting
from .servers import Backoff, HostStatistics, Runtime, ServerInfo, ServerStatistics, ServerStatus
from .supervisor import DEFAULT_CONNECT_TIMEOUT, ClientFactory, describe

__all__ = [
    "Host",
    "HostEvent",
    "HostEvents",
    "HostStatistics",
    "HostToolResult",
    "ServerInfo",
    "ServerStatistics",
    "ServerStatus",
    "ToolQuarantined",
    "ToolResultError",
]

log = logging.getLogger("mcpwire.host")
T = TypeVar("T")

DEFAULT_HEALTH_INTERVAL: Final = 30.0
DEFAULT_START_TIMEOUT: Final = 30.0

# kept for code that imported them from here
_Backoff = Backoff


class ToolQuarantined(HostError):
    """The tool's definition changed since it was pinned; approve it with ``Host.approve_pin``."""

    def __init__(self, message: str, *, server: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


@dataclass(frozen=True, slots=True)
class HostToolResult:
    """What :meth:`Host.call_tool` returns: the tool's result and its text for a model."""

    name: str  #: the namespaced name called
    server: str
    tool: str  #: the tool's name on its server
    result: ToolResult
    text: str  #: :func:`~mcpwire.host.render.render_result` of ``result``
    cached: bool = False
    risk: Risk | None = None
    approval: str = "allow"
    approval_id: str | None = None

    @property
    def is_error(self) -> bool:
        """The tool reported failure (``isError``): a value for the model, not an exception."""
        return self.result.is_error


class ToolResultError(ToolExecutionError):
    """The tool reported failure (``isError``) and the host raises those (``raise_tool_errors``).

    ``result`` is what :meth:`Host.call_tool` would have returned.
    """

    def __init__(self, message: str, *, result: HostToolResult) -> None:
        super().__init__(message, tool=result.tool, server=result.server)
        self.result = result


class Host(Oversight, Reporting):
    """Many servers behind one namespace of tools, prompts and resources.

    Use ``async with Host.from_config(path) as host:``; leaving the block stops every server.

    Args:
        config: the servers (see :func:`~mcpwire.host.config.load_config`).
        name_format: how names are namespaced (``{server}`` and ``{tool}``).
        provider: whose tool-name rules apply: ``openai`` (default), ``anthropic`` or ``mcp``.
        approver: asked for calls whose decision is ``ask`` (a call's own approver comes first).
        approvals: a queue: calls that need a decision become approvals there (listed and
            decided by anyone), and without an approver they wait in it. Without a queue or an
            approver, such calls are denied at once.
        ask_at: calls without a matching rule are asked at or above this risk (HIGH; a server's
            ``policy.ask_at`` overrides it).
        critical_confirmations: approvals a CRITICAL call needs (2).
        approval_rules: host-wide ``(server glob, tool glob, allow|deny|ask)``, after each
            server's own ``approval`` settings.
        approval_timeout: seconds a decision may take; silence denies (default 5 minutes).
        audit: a JSONL audit file (path), a configured :class:`AuditLog`, or any
            :class:`~mcpwire.host.policies.AuditSink`.
        audit_arguments: how records show arguments for a sink that is not an :class:`AuditLog`.
        pins: pin tool definitions there; a changed definition quarantines the tool.
        describe_server: exported tool descriptions start with ``[server]``.
        raise_tool_errors: ``isError`` results raise :class:`ToolResultError` instead of being
            returned.
        health_interval: seconds between health checks; 0 disables them (a server's
            ``health_interval_seconds`` overrides it).
        start_timeout: how long entering the block waits for the first connections.
        connect_timeout: most seconds one connection attempt may take, lists included (a
            server's ``connect_timeout_seconds`` overrides it).
        backoff_base, backoff_cap: reconnection backoff (exponential, jittered), in seconds.
        client_options: extra :func:`~mcpwire.open_client` options for every server.
        client_factory: replaces :func:`~mcpwire.open_client` (tests use fakes).
    """

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        name_format: str = DEFAULT_NAME_FORMAT,
        provider: Provider = "openai",
        approver: Approver | None = None,
        approvals: ApprovalQueue | None = None,
        ask_at: Risk = DEFAULT_ASK_AT,
        critical_confirmations: int = 2,
        approval_rules: builtins.list[tuple[str, str, Decision]] | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        audit: str | os.PathLike[str] | AuditSink | None = None,
        audit_arguments: ArgumentsMode = "redact",
        pins: PinStore | None = None,
        describe_server: bool = False,
        raise_tool_errors: bool = False,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        client_options: Mapping[str, object] | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.config = config or HostConfig()
        self.registry = ToolRegistry(name_format=name_format, provider=provider, describe_server=describe_server)
        self.catalog = Catalog(name_format=self.registry.name_format)
        self.metrics = Metrics()
        self.audit = audit if isinstance(audit, AuditSink) or audit is None else AuditLog(Path(audit))
        self._audit_mode: ArgumentsMode = self.audit.arguments if isinstance(self.audit, AuditLog) else audit_arguments
        self.approvals = approvals
        self.pins = pins
        self._approver = approver
        self._ask_at = ask_at
        self._critical_confirmations = critical_confirmations
        self._approval_rules = list(approval_rules or [])
        self._approval_timeout = approval_timeout
        self._raise_tool_errors = raise_tool_errors
        self._health_interval = health_interval
        self._start_timeout = start_timeout
        self._connect_timeout = connect_timeout
        self._backoff = Backoff(base=backoff_base, cap=backoff_cap)
        self._client_options = dict(client_options or {})
        self._client_factory = client_factory
        #: more :func:`~mcpwire.open_client` options per server (a gateway's forwarding handlers),
        #: asked for each time a server is connected
        self.client_options_for: Callable[[ServerConfig], Mapping[str, object]] | None = None
        #: called with (server, method, params) for every notification a server sends (sync, fast)
        self.on_notification: Callable[[str, str, Mapping[str, object]], None] | None = None
        self._servers: dict[str, ServerInfo] = {}
        self._runtime: dict[str, Runtime] = {}
        self._hub = EventHub()
        self._nursery: trio.Nursery | None = None
        self._exit_stack: AsyncExitStack | None = None
        self._state: Literal["new", "running", "closed"] = "new"
        self._changed = trio.Event()
        self._unlisten: builtins.list[Any] = []
        if approvals is not None:
            self._unlisten.append(approvals.on_change(self._approval_event))
            self._unlisten.append(approvals.on_change(self._approval_record, local_only=True))
        for server in self.config.servers:
            self._add(server)

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        strict: bool = False,
        name_format: str = DEFAULT_NAME_FORMAT,
        provider: Provider = "openai",
        approver: Approver | None = None,
        approvals: ApprovalQueue | None = None,
        ask_at: Risk = DEFAULT_ASK_AT,
        critical_confirmations: int = 2,
        approval_rules: builtins.list[tuple[str, str, Decision]] | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        audit: str | os.PathLike[str] | AuditSink | None = None,
        audit_arguments: ArgumentsMode = "redact",
        pins: PinStore | None = None,
        describe_server: bool = False,
        raise_tool_errors: bool = False,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        client_options: Mapping[str, object] | None = None,
        client_factory: ClientFactory | None = None,
    ) -> Host:
        """A host for the config at ``path``, or found by the search order (see
        :func:`~mcpwire.host.config.find_config`); no file gives an empty host. The options are
        those of :class:`Host`.

        Raises:
            ConfigError: the file is unreadable, every entry in it is invalid, or (``strict``)
                it has any problem.
        """
        return cls(
            load_config(path, strict=strict),
            name_format=name_format,
            provider=provider,
            approver=approver,
            approvals=approvals,
            ask_at=ask_at,
            critical_confirmations=critical_confirmations,
            approval_rules=approval_rules,
            approval_timeout=approval_timeout,
            audit=audit,
            audit_arguments=audit_arguments,
            pins=pins,
            describe_server=describe_server,
            raise_tool_errors=raise_tool_errors,
            health_interval=health_interval,
            start_timeout=start_timeout,
            connect_timeout=connect_timeout,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            client_options=client_options,
            client_factory=client_factory,
        )

    # -- lifetime ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Starts every enabled server concurrently and waits (at most ``start_timeout``
        seconds) until each has connected or failed once.

        Cancellation: stops what was started, then propagates.
        """
        require_trio("mcpwire.Host", "Host")
        if self._state != "new":
            raise HostError(f"a host can be entered once; this one is {self._state}")
        stack = AsyncExitStack()
        self._nursery = await stack.enter_async_context(trio.open_nursery())
        self._exit_stack = stack
        self._state = "running"
        try:
            for info in self._servers.values():
                self._start(info)
            with trio.move_on_after(self._start_timeout):
                for info in builtins.list(self._servers.values()):
                    await info._started.wait()
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Stops the servers in reverse order of registration, then the nursery."""
        if self._state != "running":
            return None
        self._state = "closed"
        with trio.CancelScope(shield=True):
            for name in reversed(builtins.list(self._servers)):
                await self._stop(self._servers[name])
        for stop in self._unlisten:
            stop()
        self._hub.close()
        if isinstance(self.audit, AuditLog):
            self.audit.close()
        assert self._nursery is not None and self._exit_stack is not None
        self._nursery.cancel_scope.cancel()
        stack, self._exit_stack, self._nursery = self._exit_stack, None, None
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # the body's own exception propagates as itself, not wrapped in a group
            if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                return False
            raise

    @property
    def running(self) -> bool:
        return self._state == "running"

    # -- registry of servers -------------------------------------------------------------------

    def _parse(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerConfig:
        if not isinstance(config, ServerConfig):
            base = Path(self.config.path).resolve().parent if self.config.path else None
            return parse_server(name, config, base_path=base)
        if config.name != name:
            return msgspec.structs.replace(config, name=name)
        return config

    def register(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerInfo:
        """Adds a server at run time and starts it (if enabled and the host is running).

        ``config`` is a :class:`ServerConfig` or an entry as in ``mcp.json`` (placeholders are
        expanded; ``{BASE_PATH}`` is the config file's folder).

        Raises:
            HostError: the name is taken, or the host is closed.
            ConfigError: the entry is invalid (every problem is listed).
        """
        if self._state == "closed":
            raise HostError(f"cannot register server {name!r}: the host is closed")
        if name in self._servers:
            raise HostError(f"a server named {name!r} is already registered; remove it first")
        info = self._add(self._parse(name, config))
        if self._state == "running":
            self._start(info)
        return info

    def get(self, name: str) -> ServerInfo:
        """Raises HostError naming the known servers when there is no such server."""
        try:
            return self._servers[name]
        except KeyError:
            raise HostError(f"no server named {name!r}; known: {', '.join(self._servers) or 'none'}") from None

    def list(self) -> builtins.list[ServerInfo]:
        """Every registered server, in registration order."""
        return builtins.list(self._servers.values())

    async def remove(self, name: str) -> None:
        """Stops a server and forgets it. Cancellation: the stop is shielded and bounded."""
        info = self.get(name)
        with trio.CancelScope(shield=True):
            await self._stop(info)
        del self._servers[name]
        self._runtime.pop(name, None)
        self.metrics.forget(name)

    async def reset(self) -> None:
        """Stops and forgets every server."""
        for name in reversed(builtins.list(self._servers)):
            await self.remove(name)

    def _require_running(self, what: str, name: str) -> None:
        if self._state != "running":
            state = "not started" if self._state == "new" else "closed"
            raise HostError(f"cannot {what} server {name!r}: the host is {state} (use 'async with host:')")

    async def _restart(self, info: ServerInfo) -> ServerInfo:
        with trio.CancelScope(shield=True):
            await self._stop(info)
        if info.config.enabled:
            self._start(info)
            with trio.move_on_after(self._start_timeout):
                await info._started.wait()
        return info

    async def restart(self, name: str) -> ServerInfo:
        """Stops a server and starts it again; returns once the new attempt connected or failed
        (at most ``start_timeout`` seconds).

        Raises:
            HostError: no such server, it is disabled, or the host is not running.

        Cancellation: the stop is shielded and bounded; the wait for the new start is not.
        """
        info = self.get(name)
        self._require_running("restart", name)
        if not info.config.enabled:
            raise HostError(f"cannot restart server {name!r}: it is disabled; enable it first")
        info.restart_count += 1
        log.info("%s: restarting on request", name)
        return await self._restart(info)

    async def update(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerInfo:
        """Replaces a server's configuration and restarts it with the new one (statistics are
        kept). Returns as :meth:`restart` does.

        Raises:
            HostError: no such server.
            ConfigError: the entry is invalid (every problem is listed).
        """
        info = self.get(name)
        new = self._parse(name, config)
        with trio.CancelScope(shield=True):
            await self._stop(info)
        info.config = new
        self._runtime[name] = self._make_runtime(new)
        log.info("%s: configuration replaced", name)
        if self._state == "running":
            return await self._restart(info)
        return info

    async def set_enabled(self, name: str, enabled: bool) -> ServerInfo:
        """Enables (and starts) or disables (and stops) a server. Enabling returns once the first
        attempt connected or failed (at most ``start_timeout`` seconds).

        Raises:
            HostError: no such server.
        """
        info = self.get(name)
        if info.config.enabled == enabled:
            return info
        info.config = msgspec.structs.replace(info.config, enabled=enabled)
        log.info("%s: %s", name, "enabled" if enabled else "disabled")
        if self._state != "running":
            return info
        if not enabled:
            with trio.CancelScope(shield=True):
                await self._stop(info)
            return info
        return await self._restart(info)

    async def wait_status(self, name: str, status: ServerStatus, *, timeout: float = 30.0) -> ServerInfo:
        """Waits until server ``name`` reaches ``status``.

        Raises:
            trio.TooSlowError: not within ``timeout`` seconds.
        """
        with trio.fail_after(timeout):
            while self.get(name).status is not status:
                await self._changed.wait()
        return self.get(name)

    def events(self, *, buffer: int = 100) -> HostEvents:
        """Every change from now on (see :class:`~mcpwire.host.events.HostEvent`), until the
        host closes."""
        return HostEvents(self._hub, buffer)

    def _make_runtime(self, config: ServerConfig) -> Runtime:
        policy = config.policy
        cache: ResultCache[object] = ResultCache(ttl=policy.cache_ttl_seconds, size=policy.cache_size)
        breaker = CircuitBreaker(config.name, policy.breaker_failures, policy.breaker_cooldown_seconds)
        stack: PolicyStack[object] = PolicyStack(
            breaker=breaker,
            retry=RetryPolicy(retries=policy.retries),
            cache=cache,
            approval=ApprovalPolicy(
                rules=self._approval_rules,
                approver=self._approver,
                ask_at=self._ask_at,
                timeout=self._approval_timeout,
                trust_annotations=policy.trust_annotations,
                queue=self.approvals,
                critical_confirmations=self._critical_confirmations,
            ),
            audit=_Tap(self),
            metrics=self.metrics,
            audit_arguments=self._audit_mode,
            audit_patterns=self.audit.patterns if isinstance(self.audit, AuditLog) else None,
            audit_wanted=self._audit_wanted,
        )
        return Runtime(stack=stack, cache=cache, breaker=breaker)

    def _audit_wanted(self) -> bool:
        return self.audit is not None or bool(self._hub.listeners)

    def _add(self, config: ServerConfig) -> ServerInfo:
        info = ServerInfo(name=config.name, config=config)
        self._servers[config.name] = info
        self._runtime[config.name] = self._make_runtime(config)
        if not config.enabled:
            info._started.set()
            info._finished.set()
        return info

    # -- calls ----------------------------------------------------------------------------------------

    def tools(self, server: str | None = None, *, include_quarantined: bool = False) -> builtins.list[RegisteredTool]:
        """Registered tools sorted by namespaced name, of every server or of one. Quarantined
        tools (changed since pinned) are left out unless asked for."""
        return self.registry.tools(server, include_quarantined=include_quarantined)

    def tool_risk(self, name: str) -> Risk:
        """The risk a call of this namespaced tool is judged at: its configured ``risk``, else
        its annotations and name (see :mod:`mcpwire.host.policies.approval`).

        Raises:
            UnknownTool: no such namespaced tool.
        """
        reg = self.registry.resolve(name)
        info = self.get(reg.server)
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

    def prompts(self, server: str | None = None) -> builtins.list[RegisteredPrompt]:
        """Prompts of every connected server (or of one), by namespaced name."""
        return self.catalog.prompts(server)

    def resources(self, server: str | None = None) -> builtins.list[RegisteredResource]:
        """Resources of every connected server (or of one)."""
        return self.catalog.resources(server)

    def resource_templates(self, server: str | None = None) -> builtins.list[RegisteredTemplate]:
        """Resource templates of every connected server (or of one)."""
        return self.catalog.templates(server)

    def cache_for(self, server: str) -> ResultCache[object]:
        """The result cache of one server."""
        self.get(server)
        return self._runtime[server].cache

    def breaker_for(self, server: str) -> CircuitBreaker:
        self.get(server)
        return self._runtime[server].breaker

    def _live_client(self, info: ServerInfo) -> Any:
        if info.client is not None and info.status is ServerStatus.CONNECTED:
            return info.client
        raise ServerGone(_not_connected(info), server=info.name)

    @contextmanager
    def _noting_loss(self, info: ServerInfo, client: object) -> Iterator[None]:
        """A call that finds the server gone says why the connection ended (e.g. its exit status)."""
        try:
            yield
        except ServerGone as exc:
            if info.client is client and info._end_reason is None:
                info._end_reason = describe(exc)
            raise

    def _unknown(self, name: str, exc: UnknownTool) -> UnknownTool:
        head = self.registry.name_format.split("{tool}")[0]
        for info in self._servers.values():
            if info.status is ServerStatus.CONNECTED:
                continue
            prefix = head.format(server=info.config.prefix)
            if prefix and name.startswith(prefix):
                return UnknownTool(f"no tool named {name!r}: {_not_connected(info)}, so its tools are not registered")
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
        settings = self._runtime[reg.server].for_tool(info.config.policy, reg.tool.name)
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
    ) -> HostToolResult:
        """Calls a namespaced tool through its server's policies.

        Args:
            name: the namespaced name (as exported), e.g. ``github__create_issue``.
            arguments: the tool's arguments.
            timeout: seconds for each attempt, instead of the configured timeout.
            approver: decides this call if it needs approval, instead of the host's approver
                (a gateway asks its client this way).
            context: where the call comes from (``trace_id``, ``run_id``, ``caller``...): kept
                in its approval and its audit record.
            on_progress: called with each progress notification of the call (a gateway passes
                them on); a cached result has none.

        Raises:
            UnknownTool: no such namespaced tool (the closest names are suggested).
            ToolQuarantined: its definition changed since it was pinned.
            ApprovalDenied, CircuitOpen: a policy refused the call.
            ToolExecutionError: the call failed; names server, tool and cause (``__cause__``).
            ToolResultError: the tool reported failure and the host raises those.

        ``isError`` results are returned (``is_error`` is true), not raised, unless the host was
        made with ``raise_tool_errors=True``.

        Cancellation: the call is cancelled on the wire by the client; an approval it waits for
        is marked expired.
        """
        try:
            reg = self.registry.resolve(name)
        except UnknownTool as exc:
            raise self._unknown(name, exc) from None
        if reg.quarantined:
            raise ToolQuarantined(
                f"tool {reg.tool.name!r} on server {reg.server!r} is quarantined: its definition changed since it "
                f"was pinned; review the change and approve it (host.approve_pin({reg.server!r}, {reg.tool.name!r}))",
                server=reg.server,
                tool=reg.tool.name,
            )
        info = self.get(reg.server)
        ctx = self._context(reg, info, arguments, timeout, approver, context)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s: calling %s with %s", reg.server, reg.tool.name, summarize_arguments(ctx.arguments))

        async def invoke(args: Mapping[str, object]) -> object:
            client = self._live_client(info)
            with self._noting_loss(info, client):
                return await client.call_tool(reg.tool.name, args, timeout=ctx.timeout, on_progress=on_progress)

        result = await self._guard(ctx, self._runtime[reg.server].stack.run(ctx, invoke))
        assert isinstance(result, ToolResult)
        log.info("%s: %s -> %s", reg.server, reg.tool.name, ctx.outcome)
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
        )
        if self._raise_tool_errors and out.is_error:
            raise ToolResultError(
                f"tool {reg.tool.name!r} on server {reg.server!r} reported an error: {_first_line(result.text())}",
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
    ) -> GetPromptResult:
        """Renders a namespaced prompt on its server (timed out, retried, behind the breaker).

        Raises:
            UnknownPrompt: no such namespaced prompt (the closest names are suggested).
            CircuitOpen: the server's breaker is open.
            ToolExecutionError: the request failed (names server, prompt and cause).
        """
        reg = self.catalog.resolve_prompt(name)
        info = self.get(reg.server)
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
        )

        async def invoke(args: Mapping[str, object]) -> object:
            client = self._live_client(info)
            with self._noting_loss(info, client):
                return await client.get_prompt(reg.prompt.name, arguments, timeout=ctx.timeout)

        result = await self._guard(ctx, self._runtime[reg.server].stack.run(ctx, invoke))
        assert isinstance(result, GetPromptResult)
        return result

    async def read_resource(
        self, server: str, uri: str, *, timeout: float | None = None, context: Mapping[str, str] | None = None
    ) -> ReadResourceResult:
        """Reads a resource through the server's policies (cached, retried, timed out).

        Raises:
            HostError: no such server.
            CircuitOpen: the server's breaker is open.
            ToolExecutionError: the read failed (names server, URI and cause).
        """
        info = self.get(server)
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
        )

        async def invoke(args: Mapping[str, object]) -> object:
            client = self._live_client(info)
            with self._noting_loss(info, client):
                return await client.read_resource(uri, timeout=ctx.timeout)

        result = await self._guard(ctx, self._runtime[server].stack.run(ctx, invoke))
        assert isinstance(result, ReadResourceResult)
        cache = self._runtime[server].cache
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


class _Tap:
    """The stacks' audit sink: the host's sink, and the event listeners."""

    __slots__ = ("_host",)

    def __init__(self, host: Host) -> None:
        self._host = host

    def write(self, record: AuditRecord) -> None:
        self._host._record(record)

    def __repr__(self) -> str:
        return repr(self._host.audit)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "(no text)"
    return line if len(line) <= 200 else line[:199] + "…"


def _not_connected(info: ServerInfo) -> str:
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
