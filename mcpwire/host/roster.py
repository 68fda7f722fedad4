"""The host's servers: added, replaced, restarted, enabled, disabled and removed while the host
runs, each with its policy stack (a part of :class:`~mcpwire.host.Host`).

Theory of operation: a server is a :class:`~mcpwire.host.servers.ServerInfo` (what it is and how
it is doing) and a :class:`~mcpwire.host.servers.Runtime` (its policy stack, cache and breaker,
made again when its configuration is replaced). Changes that stop a server shield the stop, which
is bounded; starting one hands it to its supervisor (:mod:`mcpwire.host.supervisor`).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import msgspec
import trio

from ..errors import HostError
from .approvals import ApprovalQueue
from .config import HostConfig, ServerConfig, parse_server
from .events import EventKind, HostEvents
from .policies import (
    ApprovalPolicy,
    Approver,
    ArgumentsMode,
    AuditLog,
    AuditRecord,
    CircuitBreaker,
    Decision,
    Metrics,
    PolicyStack,
    ResultCache,
    RetryPolicy,
    Risk,
)
from .servers import Runtime, ServerInfo, ServerStatus
from .supervisor import Supervision

__all__ = ["Roster"]

log = logging.getLogger("mcpwire.host")


class Roster(Supervision):
    """The registered servers and changes to them (part of the host)."""

    # set by Host.__init__
    config: HostConfig
    metrics: Metrics
    approvals: ApprovalQueue | None
    _approver: Approver | None
    _ask_at: Risk
    _critical_confirmations: int
    _approval_rules: builtins.list[tuple[str, str, Decision]]
    _approval_timeout: float
    _audit_mode: ArgumentsMode
    _start_timeout: float
    _state: Literal["new", "running", "closed"]

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

    def events(self, *, buffer: int = 100, kinds: Iterable[EventKind] | None = None) -> HostEvents:
        """Every change from now on (see :class:`~mcpwire.host.events.HostEvent`), until the
        host closes; ``kinds``: only events of those kinds."""
        return HostEvents(self._hub, buffer, kinds)

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
        return self.audit is not None or self._hub.wants("audit")

    def _add(self, config: ServerConfig) -> ServerInfo:
        info = ServerInfo(name=config.name, config=config)
        self._servers[config.name] = info
        self._runtime[config.name] = self._make_runtime(config)
        if not config.enabled:
            info._started.set()
            info._finished.set()
        return info


class _Tap:
    """The stacks' audit sink: the host's sink, and the event listeners."""

    __slots__ = ("_host",)

    def __init__(self, host: Supervision) -> None:
        self._host = host

    def write(self, record: AuditRecord) -> None:
        self._host._record(record)

    def __repr__(self) -> str:
        return repr(self._host.audit)
