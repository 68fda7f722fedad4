"""What the host reports about its servers: per-server statistics, host totals, and Prometheus
text (a part of :class:`~mcpwire.host.Host`, given its shared state and its metrics)."""

from __future__ import annotations

import builtins

from .policies import BreakerState, Metrics
from .policies.metrics import escape_label
from .servers import HostStatistics, ServerStatistics, ServerStatus
from .state import HostState

__all__ = ["Reporting"]


class Reporting:
    """Statistics and metrics of the host's servers (part of the host)."""

    def __init__(self, state: HostState, metrics: Metrics) -> None:
        self._state = state
        self.metrics = metrics

    def server_statistics(self, name: str) -> ServerStatistics:
        """One server's figures (see :meth:`Host.server_statistics`)."""
        info = self._state.get(name)
        runtime = self._state.runtime[name]
        calls = self.metrics.snapshot(name).get(name, {})
        total, errors, p50, p95 = self.metrics.summary(name)
        return ServerStatistics(
            status=info.status.value,
            enabled=info.config.enabled,
            error=info.error,
            last_error=info.last_error,
            transport=info.config.type,
            tools=info.tool_count,
            prompts=info.prompt_count,
            resources=info.resource_count,
            resource_templates=info.template_count,
            era=info.era,
            protocol_version=info.protocol_version,
            connected_since=info.connected_since,
            uptime=info.uptime,
            restarts=info.restart_count,
            health_failures=info.health_failures,
            last_health_check=info.last_health_check,
            breaker=runtime.breaker.current().value,
            cache_hits=runtime.cache.hits,
            cache_misses=runtime.cache.misses,
            cache_entries=len(runtime.cache),
            calls_total=total,
            errors_total=errors,
            p50=p50,
            p95=p95,
            calls=calls,
        )

    def statistics(self) -> HostStatistics:
        """Every server's figures, and the host's totals (a snapshot)."""
        servers = {name: self.server_statistics(name) for name in self._state.servers}
        hits = sum(s.cache_hits for s in servers.values())
        misses = sum(s.cache_misses for s in servers.values())
        total = hits + misses
        return HostStatistics(
            servers=servers,
            tools=len(self._state.registry),
            prompts=len(self._state.catalog.prompts()),
            resources=len(self._state.catalog.resources()),
            cache_hits=hits,
            cache_misses=misses,
            cache_hit_rate=hits / total if total else 0.0,
        )

    def prometheus(self) -> str:
        """Every metric in the Prometheus text exposition format."""
        states = {BreakerState.CLOSED: 0, BreakerState.HALF_OPEN: 1, BreakerState.OPEN: 2}
        rows = [(escape_label(i.name), i, self._state.runtime[i.name]) for i in self._state.servers.values()]

        def gauge(metric: str, kind: str, help_text: str, values: builtins.list[tuple[str, object]]) -> None:
            extra.append(f"# HELP {metric} {help_text}")
            extra.append(f"# TYPE {metric} {kind}")
            extra.extend(f"{metric}{{{labels}}} {value}" for labels, value in values)

        extra: builtins.list[str] = []
        gauge(
            "mcpwire_host_server_up",
            "gauge",
            "1 when the server is connected.",
            [(f'server="{n}"', int(i.status is ServerStatus.CONNECTED)) for n, i, _ in rows],
        )
        gauge(
            "mcpwire_host_breaker_state",
            "gauge",
            "Circuit breaker: 0 closed, 1 half-open, 2 open.",
            [(f'server="{n}"', states[r.breaker.current()]) for n, _, r in rows],
        )
        gauge(
            "mcpwire_host_restarts_total",
            "counter",
            "Restarts and reconnects of the server.",
            [(f'server="{n}"', i.restart_count) for n, i, _ in rows],
        )
        gauge(
            "mcpwire_host_tools",
            "gauge",
            "Tools the server exposes through the host.",
            [(f'server="{n}"', i.tool_count) for n, i, _ in rows],
        )
        cache_rows: builtins.list[tuple[str, object]] = []
        for n, _, r in rows:
            cache_rows.append((f'server="{n}",result="hit"', r.cache.hits))
            cache_rows.append((f'server="{n}",result="miss"', r.cache.misses))
        gauge("mcpwire_host_cache_lookups_total", "counter", "Result cache lookups by result.", cache_rows)
        return self.metrics.prometheus(extra)
