"""The host's servers: added, replaced, restarted, enabled, disabled and removed while the host
runs, each with its policy stack (a part of :class:`~mcpwire.host.Host`).

Theory of operation: a server is a :class:`~mcpwire.host.servers.ServerInfo` (what it is and how
it is doing) and a :class:`~mcpwire.host.servers.Runtime` (its policy stack, cache and breaker,
made again when its configuration is replaced). Changes that stop a server shield the stop, which
is bounded; starting one hands it to its supervisor (:mod:`mcpwire.host.supervisor`). The
:class:`Roster` is given the host's shared state (:mod:`mcpwire.host.state`), the supervisor, and
what every server's policy stack is made with.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from pathlib import Path

import msgspec
import trio

from ..errors import HostError
from .approvals import ApprovalQueue
from .config import HostConfig, ServerConfig, parse_server
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
from .state import HostState
from .supervisor import Supervisor

__all__ = ["Roster"]

log = logging.getLogger("mcpwire.host")


class Roster:
    """The registered servers and changes to them (part of the host)."""

    def __init__(
        self,
        state: HostState,
        supervisor: Supervisor,
        *,
        config: HostConfig,
        metrics: Metrics,
        start_timeout: float,
        approver: Approver | None,
        approvals: ApprovalQueue | None,
        ask_at: Risk,
        critical_confirmations: int,
        approval_rules: builtins.list[tuple[str, str, Decision]],
        approval_timeout: float,
        audit_mode: ArgumentsMode,
    ) -> None:
        self._state = state
        self._supervisor = supervisor
        self.config = config
        self._metrics = metrics
        self._start_timeout = start_timeout
        self._approver = approver
        self._approvals = approvals
        self._ask_at = ask_at
        self._critical_confirmations = critical_confirmations
        self._approval_rules = approval_rules
        self._approval_timeout = approval_timeout
        self._audit_mode = audit_mode
        self._tap = _Tap(state)

    def _parse(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerConfig:
        if not isinstance(config, ServerConfig):
            base = Path(self.config.path).resolve().parent if self.config.path else None
            return parse_server(name, config, base_path=base)
        if config.name != name:
            return msgspec.structs.replace(config, name=name)
        return config

    def register(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerInfo:
        """Adds a server, and starts it if the host runs (see :meth:`Host.register`)."""
        if self._state.phase == "closed":
            raise HostError(f"cannot register server {name!r}: the host is closed")
        if name in self._state.servers:
            raise HostError(f"a server named {name!r} is already registered; remove it first")
        info = self.add(self._parse(name, config))
        if self._state.phase == "running":
            self._supervisor.start(info)
        return info

    async def remove(self, name: str) -> None:
        """Stops a server and forgets it (the stop shielded and bounded)."""
        info = self._state.get(name)
        with trio.CancelScope(shield=True):
            await self._supervisor.stop(info)
        del self._state.servers[name]
        self._state.runtime.pop(name, None)
        self._metrics.forget(name)

    async def reset(self) -> None:
        """Stops and forgets every server."""
        for name in reversed(builtins.list(self._state.servers)):
            await self.remove(name)

    def cache_for(self, server: str) -> ResultCache[object]:
        """The result cache of one server."""
        self._state.get(server)
        return self._state.runtime[server].cache

    def breaker_for(self, server: str) -> CircuitBreaker:
        """The circuit breaker of one server."""
        self._state.get(server)
        return self._state.runtime[server].breaker

    def _require_running(self, what: str, name: str) -> None:
        if self._state.phase != "running":
            state = "not started" if self._state.phase == "new" else "closed"
            raise HostError(f"cannot {what} server {name!r}: the host is {state} (use 'async with host:')")

    async def _restart(self, info: ServerInfo) -> ServerInfo:
        with trio.CancelScope(shield=True):
            await self._supervisor.stop(info)
        if info.config.enabled:
            self._supervisor.start(info)
            with trio.move_on_after(self._start_timeout):
                await info._started.wait()
        return info

    async def restart(self, name: str) -> ServerInfo:
        """Stops a server and starts it again (see :meth:`Host.restart`)."""
        info = self._state.get(name)
        self._require_running("restart", name)
        if not info.config.enabled:
            raise HostError(f"cannot restart server {name!r}: it is disabled; enable it first")
        info.restart_count += 1
        log.info("%s: restarting on request", name)
        return await self._restart(info)

    async def update(self, name: str, config: ServerConfig | Mapping[str, object]) -> ServerInfo:
        """Replaces a server's configuration and restarts it (see :meth:`Host.update`)."""
        info = self._state.get(name)
        new = self._parse(name, config)
        with trio.CancelScope(shield=True):
            await self._supervisor.stop(info)
        info.config = new
        self._state.runtime[name] = self.make_runtime(new)
        log.info("%s: configuration replaced", name)
        if self._state.phase == "running":
            return await self._restart(info)
        return info

    async def set_enabled(self, name: str, enabled: bool) -> ServerInfo:
        """Enables and starts, or disables and stops, a server (see :meth:`Host.set_enabled`)."""
        info = self._state.get(name)
        if info.config.enabled == enabled:
            return info
        info.config = msgspec.structs.replace(info.config, enabled=enabled)
        log.info("%s: %s", name, "enabled" if enabled else "disabled")
        if self._state.phase != "running":
            return info
        if not enabled:
            with trio.CancelScope(shield=True):
                await self._supervisor.stop(info)
            return info
        return await self._restart(info)

    async def wait_status(self, name: str, status: ServerStatus, *, timeout: float = 30.0) -> ServerInfo:
        """Waits until server ``name`` reaches ``status`` (see :meth:`Host.wait_status`)."""
        with trio.fail_after(timeout):
            while self._state.get(name).status is not status:
                await self._state.changed.wait()
        return self._state.get(name)

    def make_runtime(self, config: ServerConfig) -> Runtime:
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
                queue=self._approvals,
                critical_confirmations=self._critical_confirmations,
            ),
            audit=self._tap,
            metrics=self._metrics,
            audit_arguments=self._audit_mode,
            audit_patterns=audit.patterns if isinstance(audit := self._state.audit, AuditLog) else None,
            audit_wanted=self._state.audit_wanted,
        )
        return Runtime(stack=stack, cache=cache, breaker=breaker)

    def add(self, config: ServerConfig) -> ServerInfo:
        info = ServerInfo(name=config.name, config=config)
        self._state.servers[config.name] = info
        self._state.runtime[config.name] = self.make_runtime(config)
        if not config.enabled:
            info._started.set()
            info._finished.set()
        return info


class _Tap:
    """The stacks' audit sink: the host's sink, and the event listeners."""

    __slots__ = ("_state",)

    def __init__(self, state: HostState) -> None:
        self._state = state

    def write(self, record: AuditRecord) -> None:
        self._state.record(record)

    def __repr__(self) -> str:
        return repr(self._state.audit)
