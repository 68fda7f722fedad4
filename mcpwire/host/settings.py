"""The host's configuration as values: a server entry (:class:`ServerConfig`), its policy settings
(:class:`PolicyConfig`, :class:`ToolPolicy`) and a whole file (:class:`HostConfig`).

Policy settings live in an entry's ``policy`` object; ``policy.tools`` maps tool-name globs to
per-tool overrides. :meth:`PolicyConfig.for_tool` resolves what applies to one tool: for each
setting, the first matching glob that sets it wins, then the server's value.
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Mapping
from typing import Final, Literal

import msgspec

from ..errors import ConfigError
from ..transports import HttpServer, StdioServer

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "Decision",
    "HostConfig",
    "PolicyConfig",
    "RiskName",
    "ServerConfig",
    "ToolPolicy",
    "ToolSettings",
    "Transport",
]

DEFAULT_TIMEOUT_SECONDS: Final = 30.0

Transport = Literal["stdio", "http", "sse"]
#: ``ask-caller``: as ``ask``, and the calling client's user may decide too (never for CRITICAL calls)
Decision = Literal["allow", "deny", "ask", "ask-caller"]
#: the cached results a call drops: ``server`` (all of its server's), ``none``, or globs of cached
#: tool names and resource URIs of its server
Invalidates = str | tuple[str, ...]
RiskName = Literal["low", "medium", "high", "critical"]


class ToolPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """Per-tool overrides (``policy.tools.<glob>``); ``None`` means "as the server says"."""

    timeout_seconds: float | None = None
    retries: int | None = None
    #: retry on transient failures even without an idempotent annotation (or never, if false)
    retryable: bool | None = None
    #: cache results even without a read-only or idempotent annotation (or never, if false)
    cacheable: bool | None = None
    cache_ttl_seconds: float | None = None
    approval: Decision | None = None
    #: the risk level, instead of the one inferred from annotations and the name
    risk: RiskName | None = None
    #: ask for approval at or above this risk (instead of the server's or the host's threshold)
    ask_at: RiskName | None = None
    #: the cached results a call of it drops (``None``: the server's rule)
    invalidates: Invalidates | None = None


class ToolSettings(msgspec.Struct, frozen=True, kw_only=True):
    """What applies to one tool of one server (see :meth:`PolicyConfig.for_tool`)."""

    timeout_seconds: float
    retries: int
    retryable: bool | None
    cacheable: bool | None
    cache_ttl_seconds: float
    approval: Decision | None
    risk: RiskName | None
    #: ``None``: the host's threshold
    ask_at: RiskName | None = None
    #: ``None``: ``server`` for a tool that is not read-only, ``none`` for one that is
    invalidates: Invalidates | None = None


class PolicyConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Per-server policy settings (the ``policy`` object of an entry)."""

    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    retries: int = 2
    retryable_tools: tuple[str, ...] = ()
    cacheable_tools: tuple[str, ...] = ()
    cache_ttl_seconds: float = 60.0
    cache_size: int = 256
    #: consecutive failures that open the breaker; 0 disables it
    breaker_failures: int = 5
    breaker_cooldown_seconds: float = 30.0
    #: tool glob -> decision; the first matching glob wins
    approval: tuple[tuple[str, Decision], ...] = ()
    #: believe the server's annotations even when they lower a tool's risk below its name's
    trust_annotations: bool = False
    #: ask for approval at or above this risk (``None``: the host's threshold, HIGH by default)
    ask_at: RiskName | None = None
    #: the cached results a tool call drops (``None``: ``server`` for a tool that is not read-only)
    invalidates: Invalidates | None = None
    #: tool glob -> overrides, first match wins per setting
    tools: tuple[tuple[str, ToolPolicy], ...] = ()

    def for_tool(self, tool: str) -> ToolSettings:
        """The settings for ``tool``: per-tool overrides first, then this server's values."""
        matching = [p for glob, p in self.tools if fnmatch.fnmatchcase(tool, glob)]
        timeout = next((p.timeout_seconds for p in matching if p.timeout_seconds is not None), self.timeout_seconds)
        retries = next((p.retries for p in matching if p.retries is not None), self.retries)
        ttl = next((p.cache_ttl_seconds for p in matching if p.cache_ttl_seconds is not None), self.cache_ttl_seconds)
        retryable = next((p.retryable for p in matching if p.retryable is not None), None)
        if retryable is None and any(fnmatch.fnmatchcase(tool, g) for g in self.retryable_tools):
            retryable = True
        cacheable = next((p.cacheable for p in matching if p.cacheable is not None), None)
        if cacheable is None and any(fnmatch.fnmatchcase(tool, g) for g in self.cacheable_tools):
            cacheable = True
        approval = next((p.approval for p in matching if p.approval is not None), None)
        if approval is None:
            approval = next((d for glob, d in self.approval if fnmatch.fnmatchcase(tool, glob)), None)
        return ToolSettings(
            timeout_seconds=timeout,
            retries=retries,
            retryable=retryable,
            cacheable=cacheable,
            cache_ttl_seconds=ttl,
            approval=approval,
            risk=next((p.risk for p in matching if p.risk is not None), None),
            ask_at=next((p.ask_at for p in matching if p.ask_at is not None), self.ask_at),
            invalidates=next((p.invalidates for p in matching if p.invalidates is not None), self.invalidates),
        )


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One server entry, validated and with placeholders expanded.

    Secrets (``env`` values, ``headers``, ``auth_token``) are never shown by ``repr``.
    """

    name: str
    type: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    auth_type: Literal["bearer", "api_key"] | None = None
    auth_token: str | None = None
    auth_header: str = "Authorization"
    enabled: bool = True
    description: str | None = None
    allowed_tools: tuple[str, ...] | None = None
    disabled_tools: tuple[str, ...] = ()
    namespace: str | None = None
    #: seconds between health checks; ``None``: the host's default; 0: none
    health_interval_seconds: float | None = None
    #: most seconds one connection attempt may take (start, handshake, first lists);
    #: ``None``: the host's default. The call timeout is ``policy.timeout_seconds``.
    connect_timeout_seconds: float | None = None
    #: pin the protocol era (``legacy``: ``initialize`` sessions; ``modern``: 2026-07-28);
    #: ``None`` detects it
    era: Literal["legacy", "modern"] | None = None
    #: ask for this protocol revision instead of the newest of the era
    protocol_version: str | None = None
    policy: PolicyConfig = msgspec.field(default_factory=PolicyConfig)

    @property
    def prefix(self) -> str:
        """The namespace used in tool names (``namespace`` or the server's name)."""
        return self.namespace or self.name

    @property
    def target(self) -> str:
        """The command line or URL, for display (no secrets: env and headers are not part of it)."""
        if self.type == "stdio":
            return shlex.join([self.command or "", *self.args])
        return self.url or ""

    def to_spec(self) -> StdioServer | HttpServer:
        """The transport spec :func:`mcpwire.open_client` connects to."""
        if self.type == "stdio":
            if self.command is None:  # pragma: no cover - parse_config never builds one
                raise ConfigError(f"server {self.name!r}: a stdio server needs a command")
            return StdioServer(command=self.command, args=self.args, env=dict(self.env), cwd=self.cwd, name=self.name)
        if self.url is None:  # pragma: no cover - parse_config never builds one
            raise ConfigError(f"server {self.name!r}: an HTTP server needs a url")
        bearer = self.auth_token if self.auth_type == "bearer" else None
        api_key = self.auth_token if self.auth_type == "api_key" else None
        return HttpServer(
            url=self.url,
            transport="sse" if self.type == "sse" else "auto",
            headers=dict(self.headers),
            bearer_token=bearer,
            api_key=api_key,
            api_key_header=self.auth_header,
            name=self.name,
        )

    def __repr__(self) -> str:
        return (
            f"ServerConfig({self.name!r}, type={self.type!r}, target={self.target!r}, env keys={sorted(self.env)}, "
            f"header keys={sorted(self.headers)}, auth={self.auth_type!r}, enabled={self.enabled})"
        )

    __str__ = __repr__


class HostConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Every valid server entry of a file, plus the problems found in the others.

    ``entries`` keeps each valid server's entry as the file has it (JSON values, placeholders
    unexpanded), so that an edit can be laid over it and checked again (the service's API does);
    ``repr`` shows only their names, as they may hold secrets."""

    servers: tuple[ServerConfig, ...] = ()
    path: str | None = None
    problems: tuple[str, ...] = ()
    entries: Mapping[str, Mapping[str, object]] = msgspec.field(default_factory=dict)

    def __repr__(self) -> str:
        return f"HostConfig(servers={list(self.servers)!r}, path={self.path!r}, problems={list(self.problems)!r})"

    __str__ = __repr__
