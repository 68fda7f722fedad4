"""Metrics: per server and tool call counts, errors, cache hits and latency percentiles.

Latencies are kept in a bounded window (the last 1024 calls per tool), so percentiles follow
recent behaviour and memory stays flat. :meth:`Metrics.prometheus` renders the Prometheus text
exposition format (version 0.0.4).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

import msgspec

__all__ = ["WINDOW", "Metrics", "ToolStatistics", "escape_label"]

#: latencies kept per (server, tool)
WINDOW: Final = 1024


class ToolStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one tool (or of resource reads) of one server; latencies in seconds."""

    calls: int
    errors: int
    cache_hits: int
    p50: float
    p95: float
    p99: float


@dataclass(slots=True)
class _Series:
    calls: int = 0
    errors: int = 0
    cache_hits: int = 0
    total_latency: float = 0.0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def snapshot(self) -> ToolStatistics:
        ordered = sorted(self.latencies)
        return ToolStatistics(
            calls=self.calls,
            errors=self.errors,
            cache_hits=self.cache_hits,
            p50=_rank(ordered, 0.5),
            p95=_rank(ordered, 0.95),
            p99=_rank(ordered, 0.99),
        )


def _rank(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted values (0.0 for none)."""
    return ordered[max(1, math.ceil(q * len(ordered))) - 1] if ordered else 0.0


@dataclass(slots=True)
class Metrics:
    """Per (server, tool) series. Resource reads are counted under ``resources/read``."""

    series: dict[tuple[str, str], _Series] = field(default_factory=dict)

    def observe(self, server: str, tool: str, latency: float, *, ok: bool, cache_hit: bool = False) -> None:
        s = self.series.get((server, tool))
        if s is None:
            s = self.series[(server, tool)] = _Series()
        s.calls += 1
        if not ok:
            s.errors += 1
        if cache_hit:
            s.cache_hits += 1
        s.latencies.append(latency)
        s.total_latency += latency

    def forget(self, server: str) -> None:
        for key in [k for k in self.series if k[0] == server]:
            del self.series[key]

    def summary(self, server: str) -> tuple[int, int, float, float]:
        """``(calls, errors, p50, p95)`` of one server, over every tool's recent window."""
        calls = errors = 0
        latencies: list[float] = []
        for (srv, _), s in self.series.items():
            if srv == server:
                calls += s.calls
                errors += s.errors
                latencies.extend(s.latencies)
        ordered = sorted(latencies)
        return calls, errors, _rank(ordered, 0.5), _rank(ordered, 0.95)

    def snapshot(self, server: str | None = None) -> dict[str, dict[str, ToolStatistics]]:
        """``{server: {tool: statistics}}``, optionally for one server."""
        out: dict[str, dict[str, ToolStatistics]] = {}
        for (srv, tool), s in sorted(self.series.items()):
            if server is None or srv == server:
                out.setdefault(srv, {})[tool] = s.snapshot()
        return out

    def prometheus(self, extra: Iterable[str] = ()) -> str:
        """The series as Prometheus text, followed by ``extra`` lines (already formatted)."""
        lines = [
            "# HELP mcpwire_host_calls_total Calls routed by the host.",
            "# TYPE mcpwire_host_calls_total counter",
        ]
        items = sorted(self.series.items())

        def labels(server: str, tool: str) -> str:
            return f'server="{escape_label(server)}",tool="{escape_label(tool)}"'

        lines += [f"mcpwire_host_calls_total{{{labels(*k)}}} {s.calls}" for k, s in items]
        lines += [
            "# HELP mcpwire_host_errors_total Calls that failed (exceptions and isError results).",
            "# TYPE mcpwire_host_errors_total counter",
        ]
        lines += [f"mcpwire_host_errors_total{{{labels(*k)}}} {s.errors}" for k, s in items]
        lines += [
            "# HELP mcpwire_host_cache_hits_total Calls answered from the result cache.",
            "# TYPE mcpwire_host_cache_hits_total counter",
        ]
        lines += [f"mcpwire_host_cache_hits_total{{{labels(*k)}}} {s.cache_hits}" for k, s in items]
        lines += [
            "# HELP mcpwire_host_latency_seconds Call latency over the recent window.",
            "# TYPE mcpwire_host_latency_seconds summary",
        ]
        for k, s in items:
            snap = s.snapshot()
            for q, v in (("0.5", snap.p50), ("0.95", snap.p95), ("0.99", snap.p99)):
                lines.append(f'mcpwire_host_latency_seconds{{{labels(*k)},quantile="{q}"}} {v!r}')
            lines.append(f"mcpwire_host_latency_seconds_sum{{{labels(*k)}}} {s.total_latency!r}")
            lines.append(f"mcpwire_host_latency_seconds_count{{{labels(*k)}}} {s.calls}")
        lines.extend(extra)
        return "\n".join(lines) + "\n"


def escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
