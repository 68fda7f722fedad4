"""The multi-server host: supervised clients, a live registry and routed, policed calls.

Theory of operation: the host keeps one :class:`~mcpwire.host.servers.ServerInfo` per configured
server and runs each enabled one under a supervisor (:mod:`mcpwire.host.supervisor`), which keeps
its tools in the :class:`~mcpwire.host.registry.ToolRegistry` and its prompts and resources in the
:class:`~mcpwire.host.catalog.Catalog`. Calls (:mod:`mcpwire.host.calls`) resolve the namespaced
name and run through the server's :class:`~mcpwire.host.policies.PolicyStack`. Calls that need a
decision become :class:`~mcpwire.host.approvals.Approval` objects in ``host.approvals`` when the
host has a queue (:mod:`mcpwire.host.oversight`). Servers can be added, replaced, restarted,
enabled and disabled while the host runs (:mod:`mcpwire.host.roster`); every change is a
:class:`~mcpwire.host.events.HostEvent`. What the host reports is :mod:`mcpwire.host.reporting`.

The :class:`Host` is composed of those parts: it makes one
:class:`~mcpwire.host.state.HostState` (the servers and their runtimes, the registry, the catalog,
the listeners and the audit sink), gives it to each part with what that part alone needs, holds the
parts, and answers each public method through the part that owns it. This module holds the host's
options, its lifetime (the nursery the supervisor runs in) and that public face.

Every server's client gets one :class:`~mcpwire.client.ClientOptions` value: the host's
``client_options`` with, on top, the server's request timeout (its policy's
``timeout_seconds``), what ``client_options_for`` gives for it, and its entry's connect timeout,
era and revision where the entry names them.
"""

from __future__ import annotations

import builtins
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Final, Self, TypedDict, Unpack

import trio

from ..client import ClientOptions, ProgressCallback, require_trio
from ..client.relay import Relay
from ..errors import HostError
from ..protocol.types import GetPromptResult, ReadResourceResult
from .approvals import ApprovalQueue
from .calls import Calls
from .catalog import Catalog, RegisteredPrompt, RegisteredResource, RegisteredTemplate
from .config import HostConfig, ServerConfig, load_config
from .events import EventKind, HostEvent, HostEvents
from .oversight import Oversight
from .pins import Pin, PinStore
from .policies import (
    DEFAULT_APPROVAL_TIMEOUT,
    DEFAULT_ASK_AT,
    Approver,
    ArgumentsMode,
    AuditLog,
    AuditSink,
    Caller,
    CircuitBreaker,
    Decision,
    Metrics,
    ResultCache,
    Risk,
)
from .registry import DEFAULT_NAME_FORMAT, Provider, RegisteredTool, ToolRegistry
from .reporting import Reporting
from .results import HostToolResult, ToolQuarantined, ToolResultError
from .roster import Roster
from .servers import Backoff, HostStatistics, ServerInfo, ServerStatistics, ServerStatus
from .state import HostState
from .supervisor import DEFAULT_CONNECT_TIMEOUT, ClientFactory, Supervisor

__all__ = [
    "Host",
    "HostEvent",
    "HostEvents",
    "HostOptions",
    "HostStatistics",
    "HostToolResult",
    "ServerInfo",
    "ServerStatistics",
    "ServerStatus",
    "ToolQuarantined",
    "ToolResultError",
]

DEFAULT_HEALTH_INTERVAL: Final = 30.0
DEFAULT_START_TIMEOUT: Final = 30.0

# kept for code that imported them from here
_Backoff = Backoff


class HostOptions(TypedDict, total=False):
    """The keyword arguments of :class:`Host` (and :meth:`Host.from_config`), for type checkers."""

    name_format: str
    provider: Provider
    approver: Approver | None
    approvals: ApprovalQueue | None
    ask_at: Risk
    critical_confirmations: int
    approval_rules: builtins.list[tuple[str, str, Decision]] | None
    approval_timeout: float
    audit: str | os.PathLike[str] | AuditSink | None
    audit_arguments: ArgumentsMode
    pins: PinStore | None
    describe_server: bool
    raise_tool_errors: bool
    health_interval: float
    start_timeout: float
    connect_timeout: float
    backoff_base: float
    backoff_cap: float
    client_options: ClientOptions | Mapping[str, object] | None
    client_factory: ClientFactory | None


class Host:
    """Many servers behind one namespace of tools, prompts and resources.

    Use ``async with Host.from_config(path) as host:``; leaving the block stops every server.
    The host is composed of parts that each own one concern (see :mod:`mcpwire.host.host`); its
    methods answer through them.

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
        client_options: the :class:`~mcpwire.client.ClientOptions` of every server's client (a
            server's entry sets its own timeout, and its connect timeout, era and revision
            where it names them). A mapping of option names is deprecated (it warns).
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
        client_options: ClientOptions | Mapping[str, object] | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        config = config or HostConfig()
        registry = ToolRegistry(name_format=name_format, provider=provider, describe_server=describe_server)
        metrics = Metrics()
        sink = audit if isinstance(audit, AuditSink) or audit is None else AuditLog(Path(audit))
        audit_mode: ArgumentsMode = sink.arguments if isinstance(sink, AuditLog) else audit_arguments
        self._start_timeout = start_timeout
        self._exit_stack: AsyncExitStack | None = None
        self._state = HostState(registry, Catalog(name_format=registry.name_format), sink)
        self._oversight = Oversight(self._state, pins=pins, approvals=approvals, audit_mode=audit_mode)
        self._supervisor = Supervisor(
            self._state,
            self._oversight,
            backoff=Backoff(base=backoff_base, cap=backoff_cap),
            health_interval=health_interval,
            connect_timeout=connect_timeout,
            client_factory=client_factory,
            client_options=_client_options(client_options),
        )
        self._roster = Roster(
            self._state,
            self._supervisor,
            config=config,
            metrics=metrics,
            start_timeout=start_timeout,
            approver=approver,
            approvals=approvals,
            ask_at=ask_at,
            critical_confirmations=critical_confirmations,
            approval_rules=list(approval_rules or []),
            approval_timeout=approval_timeout,
            audit_mode=audit_mode,
        )
        self._calls = Calls(self._state, raise_tool_errors=raise_tool_errors)
        self._reporting = Reporting(self._state, metrics)
        for server in config.servers:
            self._roster.add(server)

    @property
    def config(self) -> HostConfig:
        """The configuration the host was made with (servers added later are not in it)."""
        return self._roster.config

    @property
    def registry(self) -> ToolRegistry:
        """The namespaced tools of every connected server."""
        return self._state.registry

    @property
    def catalog(self) -> Catalog:
        """The namespaced prompts, resources and resource templates of every connected server."""
        return self._state.catalog

    @property
    def metrics(self) -> Metrics:
        """The calls' counts and latencies, per server and tool."""
        return self._reporting.metrics

    @property
    def approvals(self) -> ApprovalQueue | None:
        """The queue calls that need a decision wait in, when the host has one."""
        return self._oversight.approvals

    @property
    def audit(self) -> AuditSink | None:
        """Where audit records go: the sink given, an :class:`AuditLog` for a path, or None."""
        return self._state.audit

    @property
    def pins(self) -> PinStore | None:
        """The store of tool-definition pins, when the host pins them."""
        return self._oversight.pins

    @property
    def client_options_for(self) -> Callable[[ServerConfig], Mapping[str, object]] | None:
        """More client options per server (a gateway's forwarding handlers), by name, asked for
        each time a server is connected and set on the host's ``client_options``."""
        return self._supervisor.client_options_for

    @client_options_for.setter
    def client_options_for(self, value: Callable[[ServerConfig], Mapping[str, object]] | None) -> None:
        self._supervisor.client_options_for = value

    @property
    def on_notification(self) -> Callable[[str, str, Mapping[str, object]], None] | None:
        """Called with (server, method, params) for every notification a server sends (sync, fast)."""
        return self._supervisor.on_notification

    @on_notification.setter
    def on_notification(self, value: Callable[[str, str, Mapping[str, object]], None] | None) -> None:
        self._supervisor.on_notification = value

    @classmethod
    def from_config(
        cls, path: str | os.PathLike[str] | None = None, *, strict: bool = False, **options: Unpack[HostOptions]
    ) -> Host:
        """A host for the config at ``path``, or found by the search order (see
        :func:`~mcpwire.host.config.find_config`); no file gives an empty host. The options are
        those of :class:`Host`.

        Raises:
            ConfigError: the file is unreadable, every entry in it is invalid, or (``strict``)
                it has any problem.
        """
        if "client_options" in options:  # here, so that a deprecation names the caller's line
            options["client_options"] = _client_options(options["client_options"])
        return cls(load_config(path, strict=strict), **options)

    # -- lifetime ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Starts every enabled server concurrently and waits (at most ``start_timeout``
        seconds) until each has connected or failed once.

        Cancellation: stops what was started, then propagates.
        """
        require_trio("mcpwire.Host", "Host")
        state = self._state
        if state.phase != "new":
            raise HostError(f"a host can be entered once; this one is {state.phase}")
        stack = AsyncExitStack()
        self._supervisor.nursery = await stack.enter_async_context(trio.open_nursery())
        self._exit_stack = stack
        state.phase = "running"
        try:
            for info in state.servers.values():
                self._supervisor.start(info)
            with trio.move_on_after(self._start_timeout):
                for info in builtins.list(state.servers.values()):
                    await info._started.wait()
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Stops the servers in reverse order of registration, then the nursery."""
        state = self._state
        if state.phase != "running":
            return None
        state.phase = "closed"
        interrupted: BaseException | None = None
        try:
            with trio.CancelScope(shield=True):
                for name in reversed(builtins.list(state.servers)):
                    await self._supervisor.stop(state.servers[name])
        except BaseException as error:  # a KeyboardInterrupt while stopping: the nursery still exits
            interrupted = error
        self._oversight.close()
        state.hub.close()
        if isinstance(state.audit, AuditLog):
            state.audit.close()
        nursery, stack = self._supervisor.nursery, self._exit_stack
        assert nursery is not None and stack is not None
        nursery.cancel_scope.cancel()
        self._exit_stack = self._supervisor.nursery = None
        if interrupted is not None:
            # the servers not stopped yet are cancelled with the nursery (their processes end),
            # so no task outlives the block; then the interrupt goes on
            await stack.__aexit__(type(interrupted), interrupted, interrupted.__traceback__)
            raise interrupted
        try:
            return await stack.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # the body's own exception propagates as itself, not wrapped in a group
            if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                return False
            raise

    @property
    def running(self) -> bool:
        return self._state.phase == "running"

    # -- the servers (the roster) -----------------------------------------------------------------

    def register(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerInfo:
        """Adds a server at run time and starts it (if enabled and the host is running).

        ``config`` is a :class:`ServerConfig` or an entry as in ``mcp.json`` (placeholders are
        expanded; ``{BASE_PATH}`` is the config file's folder).

        Raises:
            HostError: the name is taken, or the host is closed.
            ConfigError: the entry is invalid (every problem is listed).
        """
        return self._roster.register(name, config)

    def get(self, name: str) -> ServerInfo:
        """Raises HostError naming the known servers when there is no such server."""
        return self._state.get(name)

    def list(self) -> builtins.list[ServerInfo]:
        """Every registered server, in registration order."""
        return builtins.list(self._state.servers.values())

    async def remove(self, name: str) -> None:
        """Stops a server and forgets it. Cancellation: the stop is shielded and bounded."""
        await self._roster.remove(name)

    async def reset(self) -> None:
        """Stops and forgets every server."""
        await self._roster.reset()

    async def restart(self, name: str) -> ServerInfo:
        """Stops a server and starts it again; returns once the new attempt connected or failed
        (at most ``start_timeout`` seconds).

        Raises:
            HostError: no such server, it is disabled, or the host is not running.

        Cancellation: the stop is shielded and bounded; the wait for the new start is not.
        """
        return await self._roster.restart(name)

    async def update(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerInfo:
        """Replaces a server's configuration and restarts it with the new one (statistics are
        kept). Returns as :meth:`restart` does.

        Raises:
            HostError: no such server.
            ConfigError: the entry is invalid (every problem is listed).
        """
        return await self._roster.update(name, config)

    async def set_enabled(self, name: str, enabled: bool) -> ServerInfo:
        """Enables (and starts) or disables (and stops) a server. Enabling returns once the first
        attempt connected or failed (at most ``start_timeout`` seconds).

        Raises:
            HostError: no such server.
        """
        return await self._roster.set_enabled(name, enabled)

    async def wait_status(self, name: str, status: ServerStatus, *, timeout: float = 30.0) -> ServerInfo:
        """Waits until server ``name`` reaches ``status``.

        Raises:
            trio.TooSlowError: not within ``timeout`` seconds.
        """
        return await self._roster.wait_status(name, status, timeout=timeout)

    def update_status(self, name: str, status: ServerStatus | str, error: str | None = None) -> None:
        """Sets a server's status (and why it is not connected), logs it and tells listeners.

        ``status`` is a :class:`ServerStatus` or its value (``"connected"``), as APIs in other
        languages pass it; it is checked before anything is stored. The supervisor calls this on
        every transition; a repeated identical status is ignored.

        Raises:
            ValueError: ``status`` names no status.
        """
        self._state.update_status(name, status, error)

    def events(self, *, buffer: int = 100, kinds: Iterable[EventKind] | None = None) -> HostEvents:
        """Every change from now on (see :class:`~mcpwire.host.events.HostEvent`), until the
        host closes; ``kinds``: only events of those kinds."""
        return HostEvents(self._state.hub, buffer, kinds)

    def cache_for(self, server: str) -> ResultCache[object]:
        """The result cache of one server."""
        return self._roster.cache_for(server)

    def breaker_for(self, server: str) -> CircuitBreaker:
        return self._roster.breaker_for(server)

    # -- what the servers offer, and calls of it --------------------------------------------------

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
        return self._calls.tool_risk(name)

    def prompts(self, server: str | None = None) -> builtins.list[RegisteredPrompt]:
        """Prompts of every connected server (or of one), by namespaced name."""
        return self.catalog.prompts(server)

    def resources(self, server: str | None = None) -> builtins.list[RegisteredResource]:
        """Resources of every connected server (or of one)."""
        return self.catalog.resources(server)

    def resource_templates(self, server: str | None = None) -> builtins.list[RegisteredTemplate]:
        """Resource templates of every connected server (or of one)."""
        return self.catalog.templates(server)

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
        """Calls a namespaced tool through its server's policies.

        Args:
            name: the namespaced name (as exported), e.g. ``github__create_issue``.
            arguments: the tool's arguments.
            timeout: seconds for each attempt, instead of the configured timeout.
            approver: decides this call if it needs approval, instead of the host's approver
                (someone other than the caller: a person at a prompt, an agent's run).
            context: where the call comes from (``trace_id``, ``run_id``, ``caller``...): kept
                in its approval and its audit record.
            on_progress: called with each progress notification of the call (a gateway passes
                them on); a cached result has none.
            caller_approver: asks the caller itself (a gateway asks its client's user this way);
                used only where the tool's approval setting is ``ask-caller``, and never alone
                for a CRITICAL call.
            caller: follows whoever waits for the answer while the call waits for a decision;
                once it is gone the approval is abandoned and the call is never sent.
            fresh: ask the server even when the cache holds a fresh result (which it replaces).
            relay: the MCP client a proxy makes the call for (its 2026-07-28 round, who answers
                the server's questions; see :mod:`mcpwire.client.relay`); a relayed round's
                result is never cached.

        Raises:
            UnknownTool: no such namespaced tool (the closest names are suggested).
            ToolQuarantined: its definition changed since it was pinned.
            ApprovalAbandoned: its caller went away while it waited for a decision.
            ApprovalDenied, CircuitOpen: a policy refused the call.
            ToolExecutionError: the call failed; names server, tool and cause (``__cause__``).
            ToolResultError: the tool reported failure and the host raises those.
            ToolExecutionError: with a :class:`~mcpwire.client.relay.RelayedAnswer` as its cause
                when a relayed round was answered with what its asker follows (questions, a task).

        ``isError`` results are returned (``is_error`` is true), not raised, unless the host was
        made with ``raise_tool_errors=True``.

        Cancellation: the call is cancelled on the wire by the client; an approval it waits for
        is marked abandoned.
        """
        return await self._calls.call_tool(
            name,
            arguments,
            timeout=timeout,
            approver=approver,
            context=context,
            on_progress=on_progress,
            caller_approver=caller_approver,
            caller=caller,
            fresh=fresh,
            relay=relay,
        )

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        relay: Relay | None = None,
    ) -> GetPromptResult:
        """Renders a namespaced prompt on its server (timed out, retried, behind the breaker);
        ``relay`` as for :meth:`call_tool`.

        Raises:
            UnknownPrompt: no such namespaced prompt (the closest names are suggested).
            CircuitOpen: the server's breaker is open.
            ToolExecutionError: the request failed (names server, prompt and cause).
        """
        return await self._calls.get_prompt(name, arguments, timeout=timeout, context=context, relay=relay)

    async def read_resource(
        self,
        server: str,
        uri: str,
        *,
        timeout: float | None = None,
        context: Mapping[str, str] | None = None,
        relay: Relay | None = None,
    ) -> ReadResourceResult:
        """Reads a resource through the server's policies (cached, retried, timed out);
        ``relay`` as for :meth:`call_tool`.

        Raises:
            HostError: no such server.
            CircuitOpen: the server's breaker is open.
            ToolExecutionError: the read failed (names server, URI and cause).
        """
        return await self._calls.read_resource(server, uri, timeout=timeout, context=context, relay=relay)

    # -- approvals and pins (oversight) -----------------------------------------------------------

    async def pinned(self) -> builtins.list[Pin]:
        """Every pin of the host's store (empty when the host does not pin)."""
        return await self._oversight.pinned()

    async def follow_pins(self) -> None:
        """Brings the tools' quarantine into line with the pins as stored, when another process on
        the same store quarantined a tool or approved its new definition. It reads and writes
        nothing else: whether this process's own server agrees with a pin is checked, as ever,
        when it lists its tools again (so two processes cannot undo each other's pins in a loop)."""
        await self._oversight.follow_pins()

    async def approve_pin(self, server: str, tool: str, *, by: str | None = None) -> Pin:
        """Accepts the changed definition of a quarantined tool: it becomes the pinned one and
        the tool is listed and callable again.

        Raises:
            HostError: the host does not pin definitions, or has no pin for that tool.
        """
        return await self._oversight.approve_pin(server, tool, by=by)

    # -- what the host reports --------------------------------------------------------------------

    def server_statistics(self, name: str) -> ServerStatistics:
        """One server's figures, as an API shows them (a snapshot).

        Raises:
            HostError: no such server.
        """
        return self._reporting.server_statistics(name)

    def statistics(self) -> HostStatistics:
        """Every server's figures, and the host's totals (a snapshot)."""
        return self._reporting.statistics()

    def prometheus(self) -> str:
        """Every metric in the Prometheus text exposition format."""
        return self._reporting.prometheus()


def _client_options(value: ClientOptions | Mapping[str, object] | None) -> ClientOptions:
    if value is None:
        return ClientOptions()
    if isinstance(value, ClientOptions):
        return value
    warnings.warn(
        "Host(client_options=...) as a mapping is deprecated; pass a mcpwire.ClientOptions value "
        "(e.g. client_options=ClientOptions(era='legacy'))",
        DeprecationWarning,
        stacklevel=3,
    )
    return ClientOptions.from_mapping(value)
