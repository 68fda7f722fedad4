"""The multi-server host: supervised clients, a live registry and routed, policed calls.

Theory of operation: the host keeps one :class:`~mcpwire.host.servers.ServerInfo` per configured
server and runs each enabled one under a supervisor (:mod:`mcpwire.host.supervisor`), which keeps
its tools in the :class:`~mcpwire.host.registry.ToolRegistry` and its prompts and resources in the
:class:`~mcpwire.host.catalog.Catalog`. Calls (:mod:`mcpwire.host.calls`) resolve the namespaced
name and run through the server's :class:`~mcpwire.host.policies.PolicyStack`. Calls that need a
decision become :class:`~mcpwire.host.approvals.Approval` objects in ``host.approvals`` when the
host has a queue (:mod:`mcpwire.host.oversight`). Servers can be added, replaced, restarted,
enabled and disabled while the host runs (:mod:`mcpwire.host.roster`); every change is a
:class:`~mcpwire.host.events.HostEvent`. This module holds the :class:`Host` itself: its options
and its lifetime; each concern above is a part of it in its own module.

Every server's client gets one :class:`~mcpwire.client.ClientOptions` value: the host's
``client_options`` with, on top, the server's request timeout (its policy's
``timeout_seconds``), what ``client_options_for`` gives for it, and its entry's connect timeout,
era and revision where the entry names them.
"""

from __future__ import annotations

import builtins
import os
import warnings
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self, TypedDict, Unpack

import trio

from ..client import ClientOptions, require_trio
from ..errors import HostError
from .approvals import ApprovalQueue
from .calls import Calls
from .catalog import Catalog
from .config import HostConfig, ServerConfig, load_config
from .events import EventHub, HostEvent, HostEvents
from .oversight import Oversight
from .pins import PinStore
from .policies import (
    DEFAULT_APPROVAL_TIMEOUT,
    DEFAULT_ASK_AT,
    Approver,
    ArgumentsMode,
    AuditLog,
    AuditSink,
    Decision,
    Metrics,
    Risk,
)
from .registry import DEFAULT_NAME_FORMAT, Provider, ToolRegistry
from .reporting import Reporting
from .results import HostToolResult, ToolQuarantined, ToolResultError
from .servers import Backoff, HostStatistics, Runtime, ServerInfo, ServerStatistics, ServerStatus
from .supervisor import DEFAULT_CONNECT_TIMEOUT, ClientFactory

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


class Host(Calls, Oversight, Reporting):
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
        self._client_options = _client_options(client_options)
        self._client_factory = client_factory
        #: more client options per server (a gateway's forwarding handlers), by name, asked for
        #: each time a server is connected and set on the host's ``client_options``
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
        interrupted: BaseException | None = None
        try:
            with trio.CancelScope(shield=True):
                for name in reversed(builtins.list(self._servers)):
                    await self._stop(self._servers[name])
        except BaseException as error:  # a KeyboardInterrupt while stopping: the nursery still exits
            interrupted = error
        for stop in self._unlisten:
            stop()
        self._hub.close()
        if isinstance(self.audit, AuditLog):
            self.audit.close()
        assert self._nursery is not None and self._exit_stack is not None
        self._nursery.cancel_scope.cancel()
        stack, self._exit_stack, self._nursery = self._exit_stack, None, None
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
        return self._state == "running"


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
