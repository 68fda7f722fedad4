"""HTTP metrics of the service: requests and latency histograms per route, in Prometheus text;
and the process's garbage collector (:func:`collector_lines`).

Paths are reduced to their route templates (``/api/v1/servers/{name}``) so a caller cannot grow
the label set; unknown paths count as ``other``.
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ..host.policies.metrics import escape_label

__all__ = ["BUCKETS", "MAX_SERIES", "CallMetrics", "HttpMetrics", "RouteNamer", "collector_lines"]

#: (server, tool) series kept in the call histograms; later ones are counted under tool="other"
MAX_SERIES: Final = 2000

#: histogram bucket bounds, seconds
BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_PARAM: Final = re.compile(r"\{[^}]+\}")


class RouteNamer:
    """Maps a request path to the route template it matched."""

    def __init__(self, templates: Iterable[str], prefixes: Iterable[str] = ()) -> None:
        self._exact: dict[str, str] = {}
        self._patterns: list[tuple[re.Pattern[str], str]] = []
        for template in templates:
            if "{" in template:
                regex = "^" + _PARAM.sub("[^/]+", re.escape(template).replace(r"\{", "{").replace(r"\}", "}")) + "$"
                self._patterns.append((re.compile(regex), template))
            else:
                self._exact[template] = template
        self._prefixes = tuple(prefixes)

    def __call__(self, path: str) -> str:
        hit = self._exact.get(path)
        if hit is not None:
            return hit
        for pattern, template in self._patterns:
            if pattern.match(path):
                return template
        for prefix in self._prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return prefix
        return "other"


@dataclass(slots=True)
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds
        self.count += 1

    def lines(self, metric: str, labels: str) -> list[str]:
        """The histogram's series in the exposition format: cumulative buckets, sum and count."""
        out: list[str] = []
        running = 0
        for bound, count in zip((*BUCKETS, float("inf")), self.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(bound)
            out.append(f'{metric}_bucket{{{labels},le="{le}"}} {running}')
        out.append(f"{metric}_sum{{{labels}}} {self.total!r}")
        out.append(f"{metric}_count{{{labels}}} {self.count}")
        return out


@dataclass(slots=True)
class HttpMetrics:
    namer: RouteNamer
    requests: dict[tuple[str, str, int], int] = field(default_factory=dict)
    latency: dict[str, _Histogram] = field(default_factory=dict)

    def observe(self, method: str, path: str, status: int, seconds: float) -> None:
        route = self.namer(path)
        key = (route, method if method in _METHODS else "OTHER", status)
        self.requests[key] = self.requests.get(key, 0) + 1
        hist = self.latency.get(route)
        if hist is None:
            hist = self.latency[route] = _Histogram()
        hist.observe(seconds)

    def prometheus(self) -> list[str]:
        lines = [
            "# HELP mcpwire_http_requests_total HTTP requests answered, by route, method and status.",
            "# TYPE mcpwire_http_requests_total counter",
        ]
        for (route, method, status), n in sorted(self.requests.items()):
            lines.append(
                f'mcpwire_http_requests_total{{route="{escape_label(route)}",method="{method}",code="{status}"}} {n}'
            )
        lines += [
            "# HELP mcpwire_http_request_duration_seconds Time until the response started, by route.",
            "# TYPE mcpwire_http_request_duration_seconds histogram",
        ]
        for route, hist in sorted(self.latency.items()):
            lines += hist.lines("mcpwire_http_request_duration_seconds", f'route="{escape_label(route)}"')
        return lines


@dataclass(slots=True)
class CallMetrics:
    """Latency histograms of calls per server and tool, the waits of calls for a decision, and
    approval decisions by outcome, fed by the audit records the host writes (one per call, read
    and prompt, one per decision). A call's latency is its own: the time it waited for a person
    is the wait's figure, not the call's."""

    latency: dict[tuple[str, str, str], _Histogram] = field(default_factory=dict)
    waits: dict[str, _Histogram] = field(default_factory=dict)
    decisions: dict[str, int] = field(default_factory=dict)

    def observe(
        self,
        kind: str,
        server: str,
        tool: str,
        outcome: str,
        latency_ms: float | None,
        approval_wait_ms: float | None = None,
    ) -> None:
        if kind == "approval":
            self.decisions[outcome] = self.decisions.get(outcome, 0) + 1
            return
        if approval_wait_ms is not None:
            wait = self.waits.get(server)
            if wait is None and len(self.waits) < MAX_SERIES:
                wait = self.waits[server] = _Histogram()
            if wait is not None:
                wait.observe(approval_wait_ms / 1000)
        if latency_ms is None:
            return
        key = (server, tool if kind == "tool" else kind, kind)
        hist = self.latency.get(key)
        if hist is None:
            if len(self.latency) >= MAX_SERIES:
                key = (server, "other", kind)
                hist = self.latency.get(key)
            if hist is None:
                hist = self.latency[key] = _Histogram()
        hist.observe(latency_ms / 1000)

    def prometheus(self) -> list[str]:
        lines = [
            "# HELP mcpwire_call_duration_seconds Calls through the host's policies, by server and tool "
            "(reads and prompts as tool=resource, prompt).",
            "# TYPE mcpwire_call_duration_seconds histogram",
        ]
        for (server, tool, _kind), hist in sorted(self.latency.items()):
            label = f'server="{escape_label(server)}",tool="{escape_label(tool)}"'
            lines += hist.lines("mcpwire_call_duration_seconds", label)
        lines += [
            "# HELP mcpwire_approval_wait_seconds How long calls waited for a decision, by server.",
            "# TYPE mcpwire_approval_wait_seconds histogram",
        ]
        for server, hist in sorted(self.waits.items()):
            lines += hist.lines("mcpwire_approval_wait_seconds", f'server="{escape_label(server)}"')
        lines += [
            "# HELP mcpwire_approval_decisions_total Approvals decided, by outcome (approved, denied, expired, "
            "abandoned).",
            "# TYPE mcpwire_approval_decisions_total counter",
        ]
        lines += [
            f'mcpwire_approval_decisions_total{{outcome="{escape_label(o)}"}} {n}'
            for o, n in sorted(self.decisions.items())
        ]
        return lines


_METHODS: Final = frozenset({"GET", "POST", "PATCH", "DELETE", "PUT", "OPTIONS", "HEAD"})


def collector_lines() -> list[str]:
    """The garbage collector's counts: collections and objects freed by generation, and the
    objects frozen out of collections (``mcpwire serve`` freezes what lives once started)."""
    stats = gc.get_stats()
    collections = [
        "# HELP mcpwire_python_gc_collections_total Garbage collections, by generation.",
        "# TYPE mcpwire_python_gc_collections_total counter",
    ]
    collected = [
        "# HELP mcpwire_python_gc_collected_total Objects the garbage collector freed, by generation.",
        "# TYPE mcpwire_python_gc_collected_total counter",
    ]
    for generation, counts in enumerate(stats):
        collections.append(f'mcpwire_python_gc_collections_total{{generation="{generation}"}} {counts["collections"]}')
        collected.append(f'mcpwire_python_gc_collected_total{{generation="{generation}"}} {counts["collected"]}')
    return [
        *collections,
        *collected,
        "# HELP mcpwire_python_gc_frozen_objects Objects frozen out of garbage collections.",
        "# TYPE mcpwire_python_gc_frozen_objects gauge",
        f"mcpwire_python_gc_frozen_objects {gc.get_freeze_count()}",
    ]
