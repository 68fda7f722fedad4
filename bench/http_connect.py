"""Connecting over HTTP: ``mcpwire.open_client(url)`` against a bare httpx handshake.

What a command such as ``mcpwire tools URL`` pays before its first request: from nothing to a
ready connection, against an HTTP echo server that is already running. The bare client (the
floor) builds an ``httpx.AsyncClient`` around a TLS context made once for the process, sends
``initialize`` and ``notifications/initialized``, and closes (DELETE). mcpwire connects to the URL
as a user would: the transport and the era are detected (``server/discover`` first), with no
cached verdict from earlier connections (``era_cache=False``), and the connection is closed.

Two servers: ``--legacy-only`` (the probe is refused, so detection has to fall back: the slow
case) and the dual-era one (the probe answers: 2026-07-28). Rounds are interleaved across the
clients; each figure is the median of ``--rounds`` connects, after two untimed warm-up connects.
Target: mcpwire <= 3 x the floor on both servers.

    python bench/http_connect.py [--rounds N] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import msgspec
import trio
from _common import HTTP_ECHO_SERVER, http_server, median

import mcpwire

# Resolved before anything is timed: mcpwire imports its client module lazily.
from mcpwire import open_client

TARGET_RATIO = 3.0
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
_TLS = ssl.create_default_context()  # once per process, as a careful bare client would


async def floor_connect(url: str) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(verify=_TLS, timeout=None) as http:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}
        body = _encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        response = await http.post(url, content=body, headers=headers)
        result = _decode(response.content)["result"]
        headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        headers["MCP-Protocol-Version"] = result["protocolVersion"]
        notification = _encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await http.post(url, content=notification, headers=headers)
        await http.delete(url, headers=headers)


async def mcpwire_connect(url: str) -> None:
    async with open_client(url, era_cache=False) as client:
        assert client.protocol_version is not None


async def _timed(fn: Callable[[str], Awaitable[None]], url: str) -> float:
    start = time.perf_counter_ns()
    await fn(url)
    return (time.perf_counter_ns() - start) / 1e6


async def measure(url: str, rounds: int) -> dict[str, float]:
    clients: dict[str, Callable[[str], Awaitable[None]]] = {"floor": floor_connect, "mcpwire": mcpwire_connect}
    samples: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(2):
        for fn in clients.values():
            await fn(url)
    for _ in range(rounds):
        for name, fn in clients.items():
            samples[name].append(await _timed(fn, url))
    return {name: median(values) for name, values in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    results: dict[str, Any] = {"mcpwire": mcpwire.__version__, "python": sys.version.split()[0], "servers": {}}
    print(f"{'server':<22}{'floor (ms)':>12}{'mcpwire (ms)':>14}{'ratio':>8}  target <= {TARGET_RATIO:g}x")
    failed = False
    for label, flags in (("legacy-only", ["--legacy-only"]), ("dual-era", [])):
        with http_server([sys.executable, "-u", str(HTTP_ECHO_SERVER), *flags]) as url:
            figures = trio.run(measure, url, args.rounds)
        ratio = figures["mcpwire"] / figures["floor"]
        ok = ratio <= TARGET_RATIO
        failed |= not ok
        results["servers"][label] = {**figures, "ratio": ratio, "pass": ok}
        verdict = "PASS" if ok else "FAIL"
        print(f"{label:<22}{figures['floor']:>12.2f}{figures['mcpwire']:>14.2f}{ratio:>7.2f}x  {verdict}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
