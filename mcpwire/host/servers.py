"""What the host knows of each server: its live state (:class:`ServerInfo`) and the statistics an
API shows (:class:`ServerStatistics`, :class:`HostStatistics`)."""

from __future__ import annotations

import enum
import random
import time
from dataclasses import dataclass, field
from typing import Final

import msgspec
import trio

from ..client import Client
from ..protocol.types import Implementation, ServerCapabilities
from .config import PolicyConfig, ServerConfig, ToolSettings
from .policies import CircuitBreaker, PolicyStack, ResultCache, ToolStatistics

__all__ = ["HostStatistics", "ServerInfo", "ServerStatistics", "ServerStatus"]

#: tools whose settings a server's runtime remembers
MAX_SETTINGS: Final = 4096


class ServerStatus(enum.Enum):
    DISCONNECTED = "disconnected"  #: not started, stopped or disabled
    CONNECTING = "connecting"  #: starting or reconnecting
    CONNECTED = "connected"  #: ready; its tools, prompts and resources are registered
    ERROR = "error"  #: the last attempt failed or the connection was lost; a retry is scheduled


@dataclass(slots=True)
class ServerInfo:
    """Live state of one configured server (the host updates it in place).

    Attributes:
        error: why the server is not connected now (``None`` while connected).
        last_error: the most recent failure, kept after the server recovers.
        connected_since: wall-clock time (``time.time()``) of the current connection.
        status_changed_at: wall-clock time of the last status change.
        last_health_check: wall-clock time of the last successful check.
        restart_count: connection attempts after the first (restarts and reconnects).
        capabilities: what the server advertised on its current connection.
        implementation: the server's name and version, as it reported them.
        client: the live connection while ``connected`` (for calls the host does not wrap).
    """

    name: str
    config: ServerConfig
    status: ServerStatus = ServerStatus.DISCONNECTED
    error: str | None = None
    last_error: str | None = None
    tool_count: int = 0
    prompt_count: int = 0
    resource_count: int = 0
    template_count: int = 0
    era: str | None = None
    protocol_version: str | None = None
    connected_since: float | None = None
    status_changed_at: float = field(default_factory=time.time)
    last_health_check: float | None = None
    health_failures: int = 0
    restart_count: int = 0
    capabilities: ServerCapabilities | None = None
    implementation: Implementation | None = None
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
    #: failures in a row with the same error (to log a repeated failure once at ERROR)
    _same_failures: int = field(default=0, repr=False)

    @property
    def revision(self) -> str | None:
        """The negotiated protocol revision (same as ``protocol_version``)."""
        return self.protocol_version

    @property
    def transport(self) -> str:
        return self.config.type

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def uptime(self) -> float | None:
        """Seconds connected, while connected."""
        if self.status is not ServerStatus.CONNECTED or self.connected_since is None:
            return None
        return max(0.0, time.time() - self.connected_since)


class ServerStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """One server, as an API shows it (latencies in seconds, times in epoch seconds)."""

    status: str
    enabled: bool
    error: str | None
    last_error: str | None
    transport: str
    tools: int
    prompts: int
    resources: int
    resource_templates: int
    era: str | None
    protocol_version: str | None
    connected_since: float | None
    uptime: float | None
    restarts: int
    health_failures: int
    last_health_check: float | None
    breaker: str
    cache_hits: int
    cache_misses: int
    cache_entries: int
    #: calls and errors of every tool, read and prompt since the server was registered
    calls_total: int
    errors_total: int
    #: latency percentiles over each tool's recent window, all tools together
    p50: float
    p95: float
    calls: dict[str, ToolStatistics]


class HostStatistics(msgspec.Struct, frozen=True, kw_only=True):
    servers: dict[str, ServerStatistics]
    tools: int
    prompts: int
    resources: int
    cache_hits: int
    cache_misses: int
    cache_hit_rate: float


@dataclass(slots=True)
class Backoff:
    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int) -> float:
        """Exponential with "equal jitter": uniform in [ceiling/2, ceiling]."""
        ceiling = min(self.cap, self.base * float(2 ** min(attempt, 30)))
        return ceiling / 2 + self.rng.uniform(0, ceiling / 2)


@dataclass(slots=True)
class Runtime:
    """The policies of one server."""

    stack: PolicyStack[object]
    cache: ResultCache[object]
    breaker: CircuitBreaker
    #: what applies to each tool, resolved once per configuration
    settings: dict[str, ToolSettings] = field(default_factory=dict)

    def for_tool(self, policy: PolicyConfig, tool: str) -> ToolSettings:
        found = self.settings.get(tool)
        if found is None:
            if len(self.settings) >= MAX_SETTINGS:
                self.settings.clear()
            found = self.settings[tool] = policy.for_tool(tool)
        return found
