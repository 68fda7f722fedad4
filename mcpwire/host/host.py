"""The multi-server host: supervised clients, a live registry and routed, policed tool calls.

Theory of operation: each enabled server gets a supervisor task in the host's nursery. The
supervisor connects, lists tools into the :class:`~mcpwire.host.registry.ToolRegistry`, then
watches the connection (notifications, periodic health checks) until it ends; it then marks the
server ``error``, waits a jittered exponential backoff and connects again. A failing server is
data (its status and error text), never an exception in the host nursery.
"""

from __future__ import annotations

import builtins
import enum
import logging
import math
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import msgspec
import trio

from ..client import Client, open_client
from ..errors import HostError, MCPWireError, ToolExecutionError, UnknownTool
from ..protocol.types import ReadResourceResult, ToolResult
from .config import HostConfig, ServerConfig, load_config
from .policies import (
    ApprovalPolicy,
    Approver,
    AuditLog,
    CallContext,
    CircuitBreaker,
    Metrics,
    PolicyStack,
    ResultCache,
    RetryPolicy,
    Risk,
)
from .registry import DEFAULT_NAME_FORMAT, RegisteredTool, ToolRegistry

__all__ = ["Host", "HostEvent", "ServerInfo", "ServerStatus"]

log = logging.getLogger("mcpwire.host")

DEFAULT_HEALTH_INTERVAL: Final = 30.0
DEFAULT_START_TIMEOUT: Final = 30.0
HEALTH_TIMEOUT: Final = 10.0


class ServerStatus(enum.Enum):
    DISCONNECTED = "disconnected"  #: not started, stopped or disabled
    CONNECTING = "connecting"  #: starting or reconnecting
    CONNECTED = "connected"  #: ready; tools registered
    ERROR = "error"  #: the last attempt failed; a retry is scheduled


@dataclass(slots=True)
class ServerInfo:
    """Live state of one configured server."""

    name: str
    config: ServerConfig
    status: ServerStatus = ServerStatus.DISCONNECTED
    error: str | None = None
    tool_count: int = 0
    era: str | None = None
    protocol_version: str | None = None
    last_health_check: float | None = None
    restart_count: int = 0
    client: Client | None = field(default=None, repr=False)
    scope: trio.CancelScope | None = field(default=None, repr=False)
    started: trio.Event = field(default_factory=trio.Event, repr=False)
    finished: trio.Event = field(default_factory=trio.Event, repr=False)


class HostEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A status change of one server."""

    server: str
    status: str
    error: str | None = None
    restart_count: int = 0


@dataclass(slots=True)
class _Backoff:
    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        ceiling = min(self.cap, self.base * float(2 ** min(attempt, 30)))
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)


class Host:
    """Many servers behind one tool namespace.

    Use ``async with Host.from_config(path) as host:``; leaving the block stops every server.

    Args:
        config: the servers (see :func:`~mcpwire.host.config.load_config`).
        name_format: how tool names are namespaced (``{server}`` and ``{tool}``).
        approver: called for calls whose risk is at least ``ask_at`` (or matching an ``ask``
            rule); without one, such calls are denied.
        audit_path: a JSONL audit file, one line per call.
        health_interval: seconds between health checks; 0 disables them.
        start_timeout: how long entering the block waits for the first connections.
        backoff_base, backoff_cap: reconnection backoff (exponential, jittered), in seconds.
        client_options: extra :class:`~mcpwire.client.Client` options for every server.
        client_factory: replaces :func:`~mcpwire.open_client` (tests use fakes).
    """

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        name_format: str = DEFAULT_NAME_FORMAT,
        approver: Approver | None = None,
        ask_at: Risk = Risk.CRITICAL,
        audit_path: str | os.PathLike[str] | None = None,
        health_interval: float = DEFAULT_HEALTH_INTERVAL,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        client_options: Mapping[str, Any] | None = None,
        client_factory: Callable[[ServerConfig], Any] | None = None,
    ) -> None:
        self.config = config or HostConfig()
        self.registry = ToolRegistry(name_format=name_format)
        self.metrics = Metrics()
        self.cache: ResultCache[object] = ResultCache()
        self._approver = approver
        self._ask_at = ask_at
        self._audit = AuditLog(Path(audit_path)) if audit_path is not None else None
        self._health_interval = health_interval
        self._start_timeout = start_timeout
        self._backoff = _Backoff(base=backoff_base, cap=backoff_cap)
        self._client_options = dict(client_options or {})
        self._client_factory = client_factory
        self._servers: dict[str, ServerInfo] = {}
        self._stacks: dict[str, PolicyStack[object]] = {}
        self._listeners: list[trio.MemorySendChannel[HostEvent]] = []
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._changed = trio.Event()

    @classmethod
    def from_config(cls, path: str | os.PathLike[str] | None = None, *, strict: bool = False, **options: Any) -> Host:
        """A host for the config found by the search order (see :func:`find_config`)."""
        return cls(load_config(path, strict=strict), **options)

    # -- lifetime ---------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Starts every enabled server concurrently and waits (bounded by ``start_timeout``)
        until each has connected or failed once."""
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        try:
            for server in self.config.servers:
                self._add(server)
            with trio.move_on_after(self._start_timeout):
                for info in list(self._servers.values()):
                    if info.config.enabled:
                        await info.started.wait()
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Stops the servers in reverse order of registration, then the nursery."""
        for name in reversed(list(self._servers)):
            await self._stop(name)
        for channel in self._listeners:
            channel.close()
        self._listeners.clear()
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        cm, self._nursery, self._nursery_cm = self._nursery_cm, None, None
        try:
            result: bool | None = await cm.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            # the body's own exception propagates as itself, not wrapped in a group
            if exc is not None and len(group.exceptions) == 1 and group.exceptions[0] is exc:
                return False
            raise
        return result

    # -- registry of servers -------------------------------------------------------------------

    def register(self, name: str, config: ServerConfig) -> ServerInfo:
        """Adds a server at run time and starts it (if enabled)."""
        if name in self._servers:
            raise HostError(f"a server named {name!r} is already registered; remove it first")
        if config.name != name:
            config = msgspec.structs.replace(config, name=name)
        return self._add(config)

    def get(self, name: str) -> ServerInfo:
        try:
            return self._servers[name]
        except KeyError:
            raise HostError(f"no server named {name!r}; known: {', '.join(self._servers) or 'none'}") from None

    def list(self) -> list[ServerInfo]:
        return list(self._servers.values())

    async def remove(self, name: str) -> None:
        """Stops a server and forgets it. Cancellation: the stop is shielded and bounded."""
        self.get(name)
        await self._stop(name)
        del self._servers[name]
        self._stacks.pop(name, None)

    async def reset(self) -> None:
        """Stops and forgets every server."""
        for name in reversed(list(self._servers)):
            await self.remove(name)

    async def wait_status(self, name: str, status: ServerStatus, *, timeout: float = 30.0) -> ServerInfo:
        """Waits until server ``name`` reaches ``status``. Raises TimeoutError (trio.TooSlowError)."""
        with trio.fail_after(timeout):
            while self.get(name).status is not status:
                await self._changed.wait()
        return self.get(name)

    async def events(self) -> AsyncIterator[HostEvent]:
        """Status changes from now on, until the host closes (100 buffered, newer dropped)."""
        send, recv = trio.open_memory_channel[HostEvent](100)
        self._listeners.append(send)
        try:
            async with recv:
                async for event in recv:
                    yield event
        finally:
            if send in self._listeners:
                self._listeners.remove(send)

    def _add(self, config: ServerConfig) -> ServerInfo:
        info = ServerInfo(name=config.name, config=config)
        self._servers[config.name] = info
        policy = config.policy
        self._stacks[config.name] = PolicyStack(
            breaker=CircuitBreaker(config.name, policy.breaker_failures, policy.breaker_cooldown_seconds),
            retry=RetryPolicy(retries=policy.retries, retryable=policy.retryable_tools),
            cache=self.cache,
            approval=ApprovalPolicy(
                rules=[("*", glob, d) for glob, d in policy.approval], approver=self._approver, ask_at=self._ask_at
            ),
            audit=self._audit,
            metrics=self.metrics,
        )
        if not config.enabled:
            info.started.set()
            info.finished.set()
            return info
        assert self._nursery is not None, "the host is not running: use 'async with host:'"
        info.scope = trio.CancelScope()
        self._nursery.start_soon(self._supervise, info)
        return info

    async def _stop(self, name: str) -> None:
        info = self._servers[name]
        if info.scope is not None:
            info.scope.cancel()
            with trio.move_on_after(10) as scope:
                scope.shield = True
                await info.finished.wait()
        self.registry.remove_server(name)
        self.cache.invalidate(name)
        info.client = None
        info.tool_count = 0
        self._set(info, ServerStatus.DISCONNECTED, None)

    def _set(self, info: ServerInfo, status: ServerStatus, error: str | None) -> None:
        if info.status is status and info.error == error:
            return
        info.status = status
        info.error = error
        if error:
            log.warning("%s: %s: %s", info.name, status.value, error)
        else:
            log.info("%s: %s", info.name, status.value)
        self._changed.set()
        self._changed = trio.Event()
        event = HostEvent(server=info.name, status=status.value, error=error, restart_count=info.restart_count)
        for channel in list(self._listeners):
            try:
                channel.send_nowait(event)
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._listeners.remove(channel)

    # -- supervision -----------------------------------------------------------------------------

    async def _supervise(self, info: ServerInfo) -> None:
        assert info.scope is not None
        attempt = 0
        try:
            with info.scope:
                while True:
                    self._set(info, ServerStatus.CONNECTING, None)
                    connected = False
                    try:
                        connected = await self._run_once(info)
                        error = "the connection closed"
                    except (MCPWireError, OSError, ValueError) as exc:
                        error = f"{type(exc).__name__}: {exc}".splitlines()[0]
                    finally:
                        info.client = None
                        self.registry.remove_server(info.name)
                        self.cache.invalidate(info.name)
                        info.tool_count = 0
                    attempt = 0 if connected else attempt + 1
                    self._set(info, ServerStatus.ERROR, error)
                    info.started.set()
                    delay = self._backoff.delay(attempt)
                    log.info("%s: reconnecting in %.2fs", info.name, delay)
                    await trio.sleep(delay)
                    info.restart_count += 1
        finally:
            info.started.set()
            info.finished.set()

    def _open(self, config: ServerConfig) -> Any:
        if self._client_factory is not None:
            return self._client_factory(config)
        options = {"timeout": config.policy.timeout_seconds, **self._client_options}
        return open_client(config.to_spec(), **options)

    async def _run_once(self, info: ServerInfo) -> bool:
        """One connection's lifetime; returns True if it got connected."""
        async with self._open(info.config) as client:
            info.client = client
            await self._refresh_tools(info, client)
            era = client.era
            info.era = None if era is None else str(getattr(era, "value", era))
            info.protocol_version = client.protocol_version
            self._set(info, ServerStatus.CONNECTED, None)
            info.started.set()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch_notifications, info, client)
                nursery.start_soon(self._health, info, client, nursery.cancel_scope)
                await client.wait_closed()
                nursery.cancel_scope.cancel()
        return True

    async def _refresh_tools(self, info: ServerInfo, client: Client) -> None:
        tools = await client.list_tools()
        cfg = info.config
        self.registry.set_tools(
            info.name, tools, prefix=cfg.prefix, allowed=cfg.allowed_tools, disabled=cfg.disabled_tools
        )
        info.tool_count = self.registry.count(info.name)

    async def _watch_notifications(self, info: ServerInfo, client: Client) -> None:
        try:
            if info.era == "modern":
                # 2026-07-28: list changes arrive only on a subscriptions/listen stream
                async with client.subscribe(tools_list_changed=True, resources_list_changed=True) as sub:
                    async for note in sub:
                        await self._handle(info, client, note.method, note.params)
            else:
                async for note in client.notifications():
                    await self._handle(info, client, note.method, note.params)
        except MCPWireError as exc:
            log.debug("%s: notification stream ended: %s", info.name, exc)

    async def _handle(self, info: ServerInfo, client: Client, method: str, params: Mapping[str, object]) -> None:
        if method == "notifications/tools/list_changed":
            self.cache.invalidate(info.name, kind="tool")
            try:
                await self._refresh_tools(info, client)
            except MCPWireError as exc:
                log.warning("%s: cannot refresh tools: %s", info.name, exc)
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            self.cache.invalidate(info.name, kind="resource", name=uri if isinstance(uri, str) else None)
        elif method == "notifications/resources/list_changed":
            self.cache.invalidate(info.name, kind="resource")

    async def _health(self, info: ServerInfo, client: Client, scope: trio.CancelScope) -> None:
        if not math.isfinite(self._health_interval) or self._health_interval <= 0:
            return
        while True:
            await trio.sleep(self._health_interval)
            try:
                if str(getattr(client.era, "value", client.era)) == "modern":
                    await client.discover(timeout=HEALTH_TIMEOUT)
                else:
                    await client.ping(timeout=HEALTH_TIMEOUT)
            except MCPWireError as exc:
                log.warning("%s: health check failed: %s; reconnecting", info.name, exc)
                await client.aclose()
                scope.cancel()
                return
            info.last_health_check = trio.current_time()

    # -- calls ----------------------------------------------------------------------------------------

    def tools(self) -> builtins.list[RegisteredTool]:
        return self.registry.tools()

    def _client_for(self, server: str) -> Client:
        info = self.get(server)
        if info.client is None or info.status is not ServerStatus.CONNECTED:
            raise ToolExecutionError(f"server {server!r} is {info.status.value}: {info.error or 'not connected'}")
        return info.client

    async def call_tool(self, name: str, arguments: Mapping[str, object] | None = None) -> ToolResult:
        """Calls a namespaced tool through the server's policies.

        Raises:
            UnknownTool: no such namespaced tool.
            ApprovalDenied, CircuitOpen: a policy refused the call.
            ToolExecutionError: the call failed (names server, tool and cause).

        Cancellation: the call is cancelled on the wire by the client.
        """
        reg = self.registry.resolve(name)
        ann = reg.tool.annotations
        client = self._client_for(reg.server)
        stack = self._stacks[reg.server]
        ctx = CallContext(
            server=reg.server,
            tool=reg.tool.name,
            arguments=dict(arguments or {}),
            read_only=reg.read_only,
            idempotent=reg.idempotent,
            destructive=None if ann is None else ann.destructive_hint,
            timeout=self.get(reg.server).config.policy.timeout_seconds,
        )

        async def invoke(args: Mapping[str, object]) -> object:
            return await client.call_tool(reg.tool.name, args)

        return await self._guard(ctx, stack.run(ctx, invoke))  # type: ignore[return-value]

    async def read_resource(self, server: str, uri: str) -> ReadResourceResult:
        """Reads a resource through the server's policies (cached, retried)."""
        client = self._client_for(server)
        ctx = CallContext(server=server, tool=uri, arguments={}, kind="resource", read_only=True, idempotent=True)

        async def invoke(args: Mapping[str, object]) -> object:
            return await client.read_resource(uri)

        return await self._guard(ctx, self._stacks[server].run(ctx, invoke))  # type: ignore[return-value]

    async def _guard(self, ctx: CallContext, call: Awaitable[object]) -> object:
        try:
            return await call
        except (HostError, UnknownTool):
            raise
        except MCPWireError as exc:
            raise ToolExecutionError(
                f"{ctx.kind} {ctx.tool!r} on server {ctx.server!r} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def statistics(self) -> dict[str, object]:
        """Servers, breaker states, cache counters and per-tool metrics (a snapshot)."""
        return {
            "servers": {
                i.name: {
                    "status": i.status.value,
                    "error": i.error,
                    "tools": i.tool_count,
                    "era": i.era,
                    "protocol_version": i.protocol_version,
                    "restarts": i.restart_count,
                    "breaker": self._stacks[i.name].breaker.current().value,
                }
                for i in self._servers.values()
            },
            "cache": {"hits": self.cache.hits, "misses": self.cache.misses, "hit_rate": self.cache.hit_rate},
            "calls": self.metrics.snapshot(),
        }
