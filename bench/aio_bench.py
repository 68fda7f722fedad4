"""The cost of the asyncio face: a call through ``mcpwire.aio`` against the same call on trio.

    python bench/aio_bench.py [--calls N] [--concurrency C] [--json]

Both sides talk to the bench's echo server (``bench/echo_server.py``) over stdio, each with its
own server process, in the same run:

- ``trio``: ``mcpwire.open_client`` under ``trio.run``, ``client.call_tool("echo")``.
- ``asyncio``: ``mcpwire.aio.open_client`` under ``asyncio.run``: the same client in a trio run
  beside the asyncio loop (its default mode, a dedicated thread; ``MCPWIRE_AIO_MODE=guest`` for
  trio's guest mode); every call crosses into trio and its result back into asyncio.

Measured: the median latency of ``--calls`` sequential calls (after a warm-up), and calls per
second with ``--concurrency`` calls in flight. Printed as ratios asyncio/trio and as the absolute
overhead per call; the target is an overhead per call well under the round trip itself (ratio
≤ 1.5 at one in flight). A missed target is reported, not an error. The echo server answers in
about 0.1 ms, so the ratio shows the two thread hand-offs of a call at their largest: against a
server whose calls take milliseconds the same overhead (about 0.2 ms here) is a few per cent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import mcpwire
import mcpwire.aio

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, "-u", str(HERE / "echo_server.py")]
TARGET_RATIO = 1.5


async def _sequential(n: int, call: Callable[[], Awaitable[object]]) -> float:
    for _ in range(min(200, n)):
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def _trio_side(calls: int, concurrency: int) -> dict[str, float]:
    async with mcpwire.open_client(SERVER) as client:

        async def one() -> object:
            return await client.call_tool("echo", {"text": "x"})

        p50 = await _sequential(calls, one)
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):

                async def worker() -> None:
                    for _ in range(calls // concurrency):
                        await one()

                nursery.start_soon(worker)
        elapsed = time.perf_counter() - start
    return {"p50_s": p50, "calls_per_s": (calls // concurrency) * concurrency / elapsed}


async def _asyncio_side(calls: int, concurrency: int) -> dict[str, float]:
    async with mcpwire.aio.open_client(SERVER) as client:

        async def one() -> object:
            return await client.call_tool("echo", {"text": "x"})

        p50 = await _sequential(calls, one)

        async def worker() -> None:
            for _ in range(calls // concurrency):
                await one()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    return {"p50_s": p50, "calls_per_s": (calls // concurrency) * concurrency / elapsed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per measurement (default 2000)")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight for the throughput figure")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the median is reported")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    rounds: dict[str, list[dict[str, float]]] = {"trio": [], "asyncio": []}
    for _ in range(args.rounds):
        rounds["trio"].append(trio.run(_trio_side, args.calls, args.concurrency))
        rounds["asyncio"].append(asyncio.run(_asyncio_side(args.calls, args.concurrency)))
    figures: dict[str, Any] = {
        side: {key: statistics.median(r[key] for r in results) for key in ("p50_s", "calls_per_s")}
        for side, results in rounds.items()
    }
    ratio = figures["asyncio"]["p50_s"] / figures["trio"]["p50_s"]
    figures["p50_ratio"] = ratio
    figures["overhead_us"] = (figures["asyncio"]["p50_s"] - figures["trio"]["p50_s"]) * 1e6
    figures["throughput_ratio"] = figures["asyncio"]["calls_per_s"] / figures["trio"]["calls_per_s"]
    figures["verdict"] = "PASS" if ratio <= TARGET_RATIO else "FAIL"
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    t, a = figures["trio"], figures["asyncio"]
    print(f"{'':10} {'p50':>10} {'calls/s @' + str(args.concurrency):>14}")
    print(f"{'trio':10} {t['p50_s'] * 1e6:8.0f}µs {t['calls_per_s']:14.0f}")
    print(f"{'asyncio':10} {a['p50_s'] * 1e6:8.0f}µs {a['calls_per_s']:14.0f}")
    print(
        f"asyncio/trio: p50 {ratio:.2f}x (+{figures['overhead_us']:.0f} µs per call), "
        f"throughput {figures['throughput_ratio']:.2f}x; target p50 ≤ {TARGET_RATIO}x: {figures['verdict']} "
        f"(mode: {os.environ.get('MCPWIRE_AIO_MODE') or 'thread'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
