"""The multi-server host: supervised clients, a live registry and routed, policed calls.

Theory of operation: each enabled server gets a supervisor task in the host's nursery. The
supervisor connects, lists tools into the :class:`~mcpwire.host.registry.ToolRegistry` (a list is
idempotent, so it runs under the server's retry policy), then watches the connection
(notifications, resource subscriptions, periodic health checks) until it ends; it then marks the
server ``error``, waits a jittered exponential backoff and connects again (a stdio server is
restarted, an HTTP one reconnected). A failing server is data (its status and error text), never
an exception in the host nursery; so is an unexpected error raised while serving one server
(logged with its traceback), since it must not take the other servers down; cancellation and
``KeyboardInterrupt`` still propagate. Calls resolve the namespaced name, build a
:class:`~mcpwire.host.policies.CallContext` from the tool's annotations and the server's
settings, and run through the server's :class:`~mcpwire.host.policies.PolicyStack`; each attempt
looks up the server's current connection, so a retry after a restart uses the new one.
"""

from __future__ import annotations

import builtins
import enum
import logging
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, Self, TypeVar

import msgspec
import trio

from ..client import Client, open_client
from ..errors import HostError, MCPWireError, ServerGone, ToolExecutionError, UnknownTool
from ..protocol.types import ReadResourceResult, ToolResult
from .config import HostConfig, ServerConfig, load_config, parse_server
from .policies import (
    DEFAULT_APPROVAL_TIMEOUT,
    ApprovalPolicy,
    Approver,
    AuditLog,
    BreakerState,
    CallContext,
    CircuitBreaker,
    Decision,
    Metrics,
    PolicyStack,
    ResultCache,
    RetryPolicy,
    Risk,
    ToolStatistics,
)
from .policies.metrics import escape_label
from .registry import DEFAULT_NAME_FORMAT, Provider, RegisteredTool, ToolRegistry
from .render import render_result

__all__ = [
    "Host",
    "HostEvent",
    "HostEvents",
    "HostStatistics",
    "HostToolResult",
    "ServerInfo",
    "ServerStatistics",
    "ServerStatus",
]

log = logging.getLogger("mcpwire.host")
T = TypeVar("T")

DEFAULT_HEALTH_INTERVAL: Final = 30.0
DEFAULT_START_TIMEOUT: Final = 30.0
#: most seconds one health check may take
HEALTH_TIMEOUT: Final = 10.0
#: a connection that lived this long resets the reconnection backoff
STABLE_AFTER: Final = 30.0
#: seconds the shutdown of one server may take before it is abandoned
STOP_TIMEOUT: Final = 10.0

ClientFactory = Callable[[ServerConfig], AbstractAsyncContextManager[Client]]


class ServerStatus(enum.Enum):
    DISCONNECTED = "disconnected"  #: not started, stopped or disabled
    CONNECTING = "connecting"  #: starting or reconnecting
    CONNECTED = "connected"  #: ready; tools registered
    ERROR = "error"  #: the last attempt failed or the connection was lost; a retry is scheduled


@dataclass(slots=True)
class ServerInfo:
    """Live state of one configured server (the host updates it in place).

    Attributes:
        last_health_check: wall-clock time (``time.time()``) of the last successful check.
        restart_count: connection attempts after the first (restarts and reconnects).
        client: the live connection while ``connected`` (for calls the host does not wrap).
    """

    name: str
    config: ServerConfig
    status: ServerStatus = ServerStatus.DISCONNECTED
    error: str | None = None
    tool_count: int = 0
    era: str | None = None
    protocol_version: str | None = None
    last_health_check: float | None = None
    health_failures: int = 0
    restart_count: int = 0
    client: Client | None = field(default=None, repr=False)
    _scope: trio.CancelScope | None = field(default=None, repr=False)
    _started: trio.Event = field(default_factory=trio.Event, repr=False)
    _finished: trio.Event = field(default_factory=trio.Event, repr=False)
    _end_reason: str | None = field(default=None, repr=False)
    #: set while connected: ends the connection in order
    _lost: trio.Event | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, repr=False)
    _uris: set[str] = field(default_factory=set, repr=False)
    _uris_changed: trio.Event = field(default_factory=trio.Event, repr=False)
    _refresh_lock: trio.Lock = field(default_factory=trio.Lock, repr=False)

    @property
    def revision(self) -> str | None:
        """The negotiated protocol revision (same as ``protocol_version``)."""
        return self.protocol_version

    @property
    def transport(self) -> str:
        return self.config.type


class HostEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A change of one server: its status (``kind="status"``) or its tool list (``"tools"``)."""

    server: str
    kind: Literal["status", "tools"]
    status: str
    previous: str | None = None
    error: str | None = None
    restart_count: int = 0
    tool_count: int = 0


class HostEvents:
    """Events of a host from the moment this object is created, until the host closes.

    Iterate it (``async for event in host.events()``) or use it as an async context manager to
    stop listening early. The buffer is bounded; when it is full, new events are dropped and
    counted in ``dropped``.
    """

    def __init__(self, host: Host, buffer: int) -> None:
        self._host = host
        self._send, self._recv = trio.open_memory_channel[HostEvent](buffer)
        self.dropped = 0
        if host._state == "closed":
            self._send.close()  # nothing more will happen
        else:
            host._listeners.append(self)

    def _offer(self, event: HostEvent) -> None:
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.dropped += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def close(self) -> None:
        """Stops listening; iteration ends after the buffered events."""
        if self in self._host._listeners:
            self._host._listeners.remove(self)
        self._send.close()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> HostEvent:
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
        self._recv.close()


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

    @property
    def is_error(self) -> bool:
        """The tool reported failure (``isError``): a value for the model, not an exception."""
        return self.result.is_error


class ServerStatistics(msgspec.Struct, frozen=True, kw_only=True):
    status: str
    error: str | None
    transport: str
    tools: int
    era: str | None
    protocol_version: str | None
    restarts: int
    health_failures: int
    last_health_check: float | None
    breaker: str
    cache_hits: int
    cache_misses: int
    cache_entries: int
    calls: dict[str, ToolStatistics]


class HostStatistics(msgspec.Struct, frozen=True, kw_only=True):
    servers: dict[str, ServerStatistics]
    tools: int
    cache_hits: int
    cache_misses: int
    cache_hit_rate: float


@dataclass(slots=True)
class _Backoff:
    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        """Exponential with "equal jitter": uniform in [ceiling/2, ceiling]."""
        ceiling = min(self.cap, self.base * float(2 ** min(attempt, 30)))
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)


@dataclass(slots=True)
class _Runtime:
    stack: PolicyStack[object]
    cache: ResultCache[object]
    breaker: CircuitBreaker


#: how a server's connection is expected to fail; anything else is logged with its traceback
_EXPECTED: Final = (MCPWireError, OSError, ValueError, ImportError)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _sole(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (a nursery wraps what it raises)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class Host:
    """Many servers behind one tool namespace.

    Use ``async with Host.from_config(path) as host:``; leaving the block stops every server.

    Args:
        config: the servers (see :func:`~mcpwire.host.config.load_config`).
        name_format: how tool names are namespaced (``{server}`` and ``{tool}``).
        provider: whose tool-name rules apply: ``openai`` (default), ``anthropic`` or ``mcp``.
        approver: asked for calls whose decision is ``ask``; without one they are denied.
        ask_at: calls without a matching rule are asked at or above this risk.
        approval_rules: host-wide ``(server glob, tool glob, allow|deny|ask)``, after each
            server's own ``approval`` settings.
        approval_timeout: seconds the approver has; silence denies (default 5 minutes).
        audit: a JSONL audit file (path) or a configured :class:`AuditLog`.
        health_interval: seconds between health checks; 0 disables them (a server's
            ``health_interval_seconds`` overrides it).
        start_timeout: how long entering the block waits for the first connections.
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
        ask_at: Risk = Risk.CRITICAL,
        approval_rules: builtins.list[tuple[str, str, Decision]] | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        audit: str | os.PathLike[str] | AuditLog | None = None,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        client_options: Mapping[str, object] | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.config = config or HostConfig()
        self.registry = ToolRegistry(name_format=name_format, provider=provider)
        self.metrics = Metrics()
        self.audit = audit if isinstance(audit, AuditLog) or audit is None else AuditLog(Path(audit))
        self._approver = approver
        self._ask_at = ask_at
        self._approval_rules = list(approval_rules or [])
        self._approval_timeout = approval_timeout
        self._health_interval = health_interval
        self._start_timeout = start_timeout
        self._backoff = _Backoff(base=backoff_base, cap=backoff_cap)
        self._client_options = dict(client_options or {})
        self._client_factory = client_factory
        self._servers: dict[str, ServerInfo] = {}
        self._runtime: dict[str, _Runtime] = {}
        self._listeners: builtins.list[HostEvents] = []
        self._nursery: trio.Nursery | None = None
        self._exit_stack: AsyncExitStack | None = None
        self._state: Literal["new", "running", "closed"] = "new"
        self._changed = trio.Event()
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
        ask_at: Risk = Risk.CRITICAL,
        approval_rules: builtins.list[tuple[str, str, Decision]] | None = None,
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        audit: str | os.PathLike[str] | AuditLog | None = None,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        client_options: Mapping[str, object] | None = None,
        client_factory: ClientFactory | None = None,
    ) -> Host:
        """A host for the config at ``path``, or found by the search order (see
        :func:`~mcpwire.host.config.find_config`); no file gives an empty host.

        Raises:
            ConfigError: the file is unreadable, or (``strict``) has any problem.
        """
        return cls(
            load_config(path, strict=strict),
            name_format=name_format,
            provider=provider,
            approver=approver,
            ask_at=ask_at,
            approval_rules=approval_rules,
            approval_timeout=approval_timeout,
            audit=audit,
            health_interval=health_interval,
            start_timeout=start_timeout,
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
        for listener in builtins.list(self._listeners):
            listener.close()
        if self.audit is not None:
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
        if not isinstance(config, ServerConfig):
            base = Path(self.config.path).resolve().parent if self.config.path else None
            config = parse_server(name, config, base_path=base)
        elif config.name != name:
            config = msgspec.structs.replace(config, name=name)
        info = self._add(config)
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
        """Status and tool-list changes from now on, until the host closes."""
        return HostEvents(self, buffer)

    def _add(self, config: ServerConfig) -> ServerInfo:
        info = ServerInfo(name=config.name, config=config)
        self._servers[config.name] = info
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
            ),
            audit=self.audit,
            metrics=self.metrics,
        )
        self._runtime[config.name] = _Runtime(stack=stack, cache=cache, breaker=breaker)
        if not config.enabled:
            info._started.set()
            info._finished.set()
        return info

    def _start(self, info: ServerInfo) -> None:
        if not info.config.enabled:
            return
        assert self._nursery is not None
        info._scope = trio.CancelScope()
        self._nursery.start_soon(self._supervise, info)

    async def _stop(self, info: ServerInfo) -> None:
        if info._scope is not None and not info._finished.is_set():
            info._stopping = True
            if info._lost is not None:
                # connected: end the connection in order (the client closes its streams itself)
                info._lost.set()
                with trio.move_on_after(STOP_TIMEOUT):
                    await info._finished.wait()
            # connecting, backing off, or not done in time: cancel
            info._scope.cancel()
            with trio.move_on_after(STOP_TIMEOUT):
                await info._finished.wait()
        self._forget_connection(info)
        self._set(info, ServerStatus.DISCONNECTED, None)

    def _forget_connection(self, info: ServerInfo) -> None:
        info.client = None
        self.registry.remove_server(info.name)
        runtime = self._runtime.get(info.name)
        if runtime is not None:
            runtime.cache.clear()
        info._uris.clear()
        if info.tool_count:
            info.tool_count = 0
            self._emit(info, "tools", None)

    def _emit(self, info: ServerInfo, kind: Literal["status", "tools"], previous: ServerStatus | None) -> None:
        event = HostEvent(
            server=info.name,
            kind=kind,
            status=info.status.value,
            previous=None if previous is None else previous.value,
            error=info.error,
            restart_count=info.restart_count,
            tool_count=info.tool_count,
        )
        for listener in builtins.list(self._listeners):
            listener._offer(event)

    def _set(self, info: ServerInfo, status: ServerStatus, error: str | None) -> None:
        if info.status is status and info.error == error:
            return
        previous = info.status
        info.status = status
        info.error = error
        if error:
            log.warning("%s: %s: %s", info.name, status.value, error)
        else:
            log.info("%s: %s", info.name, status.value)
        self._changed.set()
        self._changed = trio.Event()
        self._emit(info, "status", previous)

    # -- supervision -----------------------------------------------------------------------------

    async def _supervise(self, info: ServerInfo) -> None:
        assert info._scope is not None
        attempt = 0
        verb = "restarting" if info.config.type == "stdio" else "reconnecting"
        try:
            with info._scope:
                while True:
                    self._set(info, ServerStatus.CONNECTING, None)
                    info._end_reason = None
                    began = trio.current_time()
                    connected = False
                    try:
                        connected = await self._run_once(info)
                        error = info._end_reason or "the server closed the connection"
                    except Exception as exc:
                        # anything else is a bug, but one that ends this server's connection
                        # only: the host and its other servers keep running. BaseExceptions
                        # (cancellation, KeyboardInterrupt) are not caught.
                        cause = _sole(exc)
                        if not isinstance(cause, _EXPECTED):
                            log.error("%s: unexpected error; %s", info.name, verb, exc_info=exc)
                        error = info._end_reason or _describe(cause)
                    finally:
                        info._lost = None
                        self._forget_connection(info)
                    if info._stopping:
                        return
                    stable = connected and trio.current_time() - began >= STABLE_AFTER
                    attempt = 0 if stable else attempt + 1
                    self._set(info, ServerStatus.ERROR, error)
                    info._started.set()
                    delay = self._backoff.delay(attempt - 1 if attempt else 0)
                    log.info("%s: %s in %.2fs", info.name, verb, delay)
                    await trio.sleep(delay)
                    info.restart_count += 1
        finally:
            info._started.set()
            info._finished.set()

    def _open(self, config: ServerConfig) -> AbstractAsyncContextManager[Client]:
        if self._client_factory is not None:
            return self._client_factory(config)
        options: dict[str, Any] = {"timeout": config.policy.timeout_seconds, **self._client_options}
        return open_client(config.to_spec(), **options)

    async def _run_once(self, info: ServerInfo) -> bool:
        """One connection's lifetime; returns True once it got connected."""
        async with self._open(info.config) as client:
            await self._refresh_tools(info, client)
            era = client.era
            info.era = None if era is None else str(getattr(era, "value", era))
            info.protocol_version = client.protocol_version
            info.client = client
            # a fresh connection starts with a closed circuit
            self._runtime[info.name].breaker.success()
            self._set(info, ServerStatus.CONNECTED, None)
            info._started.set()
            lost = info._lost = trio.Event()
            if info._stopping:
                return True

            async def closed() -> None:
                await client.wait_closed()
                lost.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(closed)
                nursery.start_soon(self._watch_notifications, info, client)
                nursery.start_soon(self._watch_resources, info, client)
                nursery.start_soon(self._health, info, client, lost)
                await lost.wait()
                nursery.cancel_scope.cancel()
        return True

    async def _refresh_tools(self, info: ServerInfo, client: Client) -> None:
        async with info._refresh_lock:
            # listing is idempotent: a transient failure is retried under the server's policy
            ctx = CallContext(server=info.name, tool="tools/list", arguments={}, kind="list")
            tools = await self._runtime[info.name].stack.retry.run(ctx, client.list_tools)
            # SEC-10: a tool whose description or schema changes under the same name deserves a look
            before = {r.tool.name: r.tool for r in self.registry.tools(info.name)}
            for new in tools:
                old = before.get(new.name)
                if old is not None and (old.description, old.input_schema) != (new.description, new.input_schema):
                    log.warning("%s: tool %r changed its description or inputSchema", info.name, new.name)
            cfg = info.config
            self.registry.set_tools(
                info.name, tools, prefix=cfg.prefix, allowed=cfg.allowed_tools, disabled=cfg.disabled_tools
            )
            info.tool_count = self.registry.count(info.name)
        self._emit(info, "tools", None)

    async def _watch_notifications(self, info: ServerInfo, client: Client) -> None:
        async with AsyncExitStack() as stack:
            if info.era == "modern":
                # 2026-07-28: list changes arrive only on a subscriptions/listen stream; they are
                # also delivered to the client's notification stream read below
                try:
                    await stack.enter_async_context(
                        client.subscribe(tools_list_changed=True, resources_list_changed=True, timeout=HEALTH_TIMEOUT)
                    )
                except MCPWireError as exc:
                    log.info("%s: no list-change subscription: %s", info.name, _describe(exc))
            try:
                await self._read_notifications(info, client)
            except MCPWireError as exc:
                log.info("%s: notification stream ended: %s", info.name, _describe(exc))

    async def _read_notifications(self, info: ServerInfo, client: Client) -> None:
        async for note in client.notifications():
            await self._handle(info, client, note.method, note.params)

    async def _handle(self, info: ServerInfo, client: Client, method: str, params: Mapping[str, object]) -> None:
        cache = self._runtime[info.name].cache
        if method == "notifications/tools/list_changed":
            dropped = cache.invalidate(info.name, kind="tool")
            log.info("%s: tool list changed; %d cached results dropped", info.name, dropped)
            try:
                await self._refresh_tools(info, client)
            except MCPWireError as exc:
                log.warning("%s: cannot refresh tools: %s", info.name, _describe(exc))
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str):
                cache.invalidate(info.name, kind="resource", name=uri)
        elif method == "notifications/resources/list_changed":
            cache.invalidate(info.name, kind="resource")

    async def _watch_resources(self, info: ServerInfo, client: Client) -> None:
        """Subscribes to the URIs of cached reads, so ``resources/updated`` can invalidate them."""
        if not client.server_capabilities.flag("resources", "subscribe"):
            return
        subscribed: set[str] = set()
        async with AsyncExitStack() as current:
            while True:
                await info._uris_changed.wait()
                info._uris_changed = trio.Event()
                wanted = set(info._uris)
                if wanted <= subscribed:
                    continue
                try:
                    if info.era == "modern":
                        # LC-30: no resources/subscribe on 2026-07-28; one listen stream carries
                        # every URI: open the new one, then end the old
                        fresh = AsyncExitStack()
                        await fresh.enter_async_context(client.subscribe(sorted(wanted), timeout=HEALTH_TIMEOUT))
                        await current.aclose()
                        current.push_async_exit(fresh)
                        subscribed = wanted
                    else:
                        for uri in sorted(wanted - subscribed):
                            await client.request("resources/subscribe", {"uri": uri}, timeout=HEALTH_TIMEOUT)
                            subscribed.add(uri)
                except MCPWireError as exc:
                    log.info("%s: cannot subscribe to resources: %s", info.name, _describe(exc))
                    subscribed |= wanted  # do not ask again; entries expire by their TTL

    async def _health(self, info: ServerInfo, client: Client, lost: trio.Event) -> None:
        # UT-P02: "Implementations SHOULD periodically issue pings to detect connection health";
        # UT-P03: 2026-07-28 has no ping, so modern servers get server/discover instead
        interval = info.config.health_interval_seconds
        if interval is None:
            interval = self._health_interval
        if not math.isfinite(interval) or interval <= 0:
            return
        method = "server/discover" if info.era == "modern" else "ping"
        while True:
            await trio.sleep(interval)
            try:
                if info.era == "modern":
                    await client.discover(timeout=min(HEALTH_TIMEOUT, interval))
                else:
                    await client.ping(timeout=min(HEALTH_TIMEOUT, interval))
            except MCPWireError as exc:
                info.health_failures += 1
                info._end_reason = f"health check ({method}) failed: {_describe(exc)}"
                log.warning("%s: %s; reconnecting", info.name, info._end_reason)
                lost.set()
                return
            info.last_health_check = time.time()

    # -- calls ----------------------------------------------------------------------------------------

    def tools(self) -> builtins.list[RegisteredTool]:
        """Every registered tool, sorted by namespaced name."""
        return self.registry.tools()

    def cache_for(self, server: str) -> ResultCache[object]:
        """The result cache of one server."""
        self.get(server)
        return self._runtime[server].cache

    def breaker_for(self, server: str) -> CircuitBreaker:
        self.get(server)
        return self._runtime[server].breaker

    def _live_client(self, info: ServerInfo) -> Client:
        if info.client is None or info.status is not ServerStatus.CONNECTED:
            detail = f": {info.error}" if info.error else ""
            raise ServerGone(f"server {info.name!r} is {info.status.value}{detail}", server=info.name)
        return info.client

    @contextmanager
    def _noting_loss(self, info: ServerInfo, client: Client) -> Iterator[None]:
        """A call that finds the server gone says why the connection ended (e.g. its exit status)."""
        try:
            yield
        except ServerGone as exc:
            if info.client is client and info._end_reason is None:
                info._end_reason = _describe(exc)
            raise

    def _unknown(self, name: str, exc: UnknownTool) -> UnknownTool:
        head = self.registry.name_format.split("{tool}")[0]
        for info in self._servers.values():
            if info.status is ServerStatus.CONNECTED:
                continue
            prefix = head.format(server=info.config.prefix)
            if prefix and name.startswith(prefix):
                state = info.status.value + (f" ({info.error})" if info.error else "")
                return UnknownTool(f"{exc}; server {info.name!r} is {state}, so its tools are not registered")
        return exc

    async def call_tool(
        self, name: str, arguments: Mapping[str, object] | None = None, *, timeout: float | None = None
    ) -> HostToolResult:
        """Calls a namespaced tool through its server's policies.

        Args:
            name: the namespaced name (as exported), e.g. ``github__create_issue``.
            arguments: the tool's arguments.
            timeout: seconds for each attempt, instead of the configured timeout.

        Raises:
            UnknownTool: no such namespaced tool.
            ApprovalDenied, CircuitOpen: a policy refused the call.
            ToolExecutionError: the call failed; names server, tool and cause (``__cause__``).

        ``isError`` results are returned (``is_error`` is true), not raised.

        Cancellation: the call is cancelled on the wire by the client.
        """
        try:
            reg = self.registry.resolve(name)
        except UnknownTool as exc:
            raise self._unknown(name, exc) from None
        info = self.get(reg.server)
        settings = info.config.policy.for_tool(reg.tool.name)
        ctx = CallContext(
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
            era=info.era,
        )

        async def invoke(args: Mapping[str, object]) -> object:
            client = self._live_client(info)
            with self._noting_loss(info, client):
                return await client.call_tool(reg.tool.name, args, timeout=ctx.timeout)

        result = await self._guard(ctx, self._runtime[reg.server].stack.run(ctx, invoke))
        assert isinstance(result, ToolResult)
        log.info("%s: %s -> %s", reg.server, reg.tool.name, ctx.outcome)
        return HostToolResult(
            name=reg.name,
            server=reg.server,
            tool=reg.tool.name,
            result=result,
            text=render_result(result),
            cached=ctx.outcome == "cache_hit",
            risk=ctx.risk,
            approval=ctx.approval,
        )

    async def read_resource(self, server: str, uri: str, *, timeout: float | None = None) -> ReadResourceResult:
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
            what = "tool" if ctx.kind == "tool" else "resource"
            raise ToolExecutionError(
                f"{what} {ctx.tool!r} on server {ctx.server!r} failed: {_describe(exc)}",
                tool=ctx.tool,
                server=ctx.server,
            ) from exc

    # -- statistics ---------------------------------------------------------------------------------

    def statistics(self) -> HostStatistics:
        """Servers, breaker states, cache counters and per-tool metrics (a snapshot)."""
        servers: dict[str, ServerStatistics] = {}
        hits = misses = 0
        calls = self.metrics.snapshot()
        for info in self._servers.values():
            runtime = self._runtime[info.name]
            hits += runtime.cache.hits
            misses += runtime.cache.misses
            servers[info.name] = ServerStatistics(
                status=info.status.value,
                error=info.error,
                transport=info.config.type,
                tools=info.tool_count,
                era=info.era,
                protocol_version=info.protocol_version,
                restarts=info.restart_count,
                health_failures=info.health_failures,
                last_health_check=info.last_health_check,
                breaker=runtime.breaker.current().value,
                cache_hits=runtime.cache.hits,
                cache_misses=runtime.cache.misses,
                cache_entries=len(runtime.cache),
                calls=calls.get(info.name, {}),
            )
        total = hits + misses
        return HostStatistics(
            servers=servers,
            tools=len(self.registry),
            cache_hits=hits,
            cache_misses=misses,
            cache_hit_rate=hits / total if total else 0.0,
        )

    def prometheus(self) -> str:
        """Every metric in the Prometheus text exposition format."""
        states = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}
        extra = [
            "# HELP mcpwire_host_server_up 1 when the server is connected.",
            "# TYPE mcpwire_host_server_up gauge",
        ]
        rows = [(escape_label(i.name), i, self._runtime[i.name]) for i in self._servers.values()]
        extra += [
            f'mcpwire_host_server_up{{server="{n}"}} {int(i.status is ServerStatus.CONNECTED)}' for n, i, _ in rows
        ]
        extra += [
            "# HELP mcpwire_host_breaker_state Circuit breaker: 0 closed, 1 half-open, 2 open.",
            "# TYPE mcpwire_host_breaker_state gauge",
        ]
        extra += [f'mcpwire_host_breaker_state{{server="{n}"}} {states[r.breaker.current()]}' for n, _, r in rows]
        extra += [
            "# HELP mcpwire_host_restarts_total Restarts and reconnects of the server.",
            "# TYPE mcpwire_host_restarts_total counter",
        ]
        extra += [f'mcpwire_host_restarts_total{{server="{n}"}} {i.restart_count}' for n, i, _ in rows]
        extra += [
            "# HELP mcpwire_host_cache_lookups_total Result cache lookups by result.",
            "# TYPE mcpwire_host_cache_lookups_total counter",
        ]
        for n, _, r in rows:
            extra.append(f'mcpwire_host_cache_lookups_total{{server="{n}",result="hit"}} {r.cache.hits}')
            extra.append(f'mcpwire_host_cache_lookups_total{{server="{n}",result="miss"}} {r.cache.misses}')
        return self.metrics.prometheus(extra)
