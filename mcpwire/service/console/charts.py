"""Small inline SVG charts of calls and latency per server over the last minutes.

Theory of operation: the figures come from the audit log the store keeps (every call through the
host's policies leaves a record with its latency), read newest first and cut at the window, so the
charts show what happened in every replica sharing the store, and survive a restart. Records are
counted into fixed buckets; each chart is a few numbers (bar heights, a polyline) that the template
draws as SVG, with no script and no external library. Only numbers computed here reach the SVG.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Final

from ..store import Store

__all__ = ["BUCKET_SECONDS", "BUCKETS", "ServerChart", "server_charts"]

#: the window: BUCKETS buckets of BUCKET_SECONDS
BUCKETS: Final = 20
BUCKET_SECONDS: Final = 30
#: records read per server (newest first) to fill the window
MAX_RECORDS: Final = 500
WIDTH: Final = 200
HEIGHT: Final = 40


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    width: float
    ok_height: float
    error_height: float
    calls: int
    errors: int
    start: float


@dataclass(frozen=True, slots=True)
class ServerChart:
    server: str
    calls: int
    errors: int
    bars: tuple[Bar, ...]
    #: the largest bucket's calls (the calls chart's scale)
    peak: int
    #: ``x,y`` points of the p50 latency line (buckets without calls are skipped)
    latency_points: str
    #: the same points, each drawn as a dot (a lone point makes no line)
    latency_dots: tuple[tuple[float, float], ...]
    #: the slowest bucket's p50, ms (the latency chart's scale)
    latency_peak_ms: float
    p50_ms: float | None
    truncated: bool


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


async def server_charts(store: Store, servers: list[str], *, now: float | None = None) -> list[ServerChart]:
    """One chart per server, from its audit records of the last ``BUCKETS * BUCKET_SECONDS`` s."""
    now = time.time() if now is None else now
    start = now - BUCKETS * BUCKET_SECONDS
    charts: list[ServerChart] = []
    for server in servers:
        page = await store.audit(server=server, limit=MAX_RECORDS)
        counts = [0] * BUCKETS
        errors = [0] * BUCKETS
        latencies: list[list[float]] = [[] for _ in range(BUCKETS)]
        every: list[float] = []
        for row in page.items:
            if row.time < start:
                break
            if row.kind != "tool":
                continue
            index = min(BUCKETS - 1, int((row.time - start) // BUCKET_SECONDS))
            counts[index] += 1
            if row.outcome not in ("ok", "cache_hit"):
                errors[index] += 1
            latency = row.record.get("latency_ms")
            if isinstance(latency, int | float) and math.isfinite(latency) and latency >= 0:
                latencies[index].append(float(latency))
                every.append(float(latency))
        truncated = page.next_cursor is not None and bool(page.items) and page.items[-1].time >= start
        charts.append(_chart(server, counts, errors, latencies, every, start, truncated))
    return charts


def _chart(
    server: str,
    counts: list[int],
    errors: list[int],
    latencies: list[list[float]],
    every: list[float],
    start: float,
    truncated: bool,
) -> ServerChart:
    peak = max(counts) or 1
    slot = WIDTH / BUCKETS
    bars = []
    for i, (n, bad) in enumerate(zip(counts, errors, strict=True)):
        height = HEIGHT * n / peak
        bad_height = HEIGHT * bad / peak
        bars.append(
            Bar(
                x=round(i * slot + 1, 2),
                width=round(slot - 2, 2),
                ok_height=round(height - bad_height, 2),
                error_height=round(bad_height, 2),
                calls=n,
                errors=bad,
                start=start + i * BUCKET_SECONDS,
            )
        )
    medians = [(i, _p50(values)) for i, values in enumerate(latencies) if values]
    latency_peak = max((m for _, m in medians), default=0.0) or 1.0
    dots = tuple(
        (round(i * slot + slot / 2, 2), round(HEIGHT - (HEIGHT - 4) * m / latency_peak - 2, 2)) for i, m in medians
    )
    points = " ".join(f"{x},{y}" for x, y in dots)
    return ServerChart(
        server=server,
        calls=sum(counts),
        errors=sum(errors),
        bars=tuple(bars),
        peak=max(counts),
        latency_points=points,
        latency_dots=dots,
        latency_peak_ms=round(latency_peak, 2) if medians else 0.0,
        p50_ms=round(_p50(every), 2) if every else None,
        truncated=truncated,
    )
