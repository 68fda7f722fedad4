"""Host overhead: a cache hit, and the policy stack around a call, against a bare client call.

    python bench/host_bench.py [--calls N]

Everything is measured in the same run against the bundled demo server, so the printed
ratios compare like with like.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import trio

import mcpwire
from mcpwire.host import Host
from mcpwire.host.policies import CallContext, CircuitBreaker, PolicyStack, ResultCache


async def _median(n: int, call: Callable[[], Awaitable[object]]) -> float:
    for _ in range(min(20, n)):
        await call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


async def main(calls: int) -> None:
    demo = [sys.executable, "-u", "-m", "mcpwire.testing.demo_server", "--name", "bench"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mcp.json"
        path.write_text(json.dumps({"mcpServers": {"bench": {"command": demo}}}))
        async with mcpwire.open_client(demo) as client:
            bare = await _median(calls, lambda: client.call_tool("echo", {"text": "x"}))
        async with Host.from_config(path, health_interval=0) as host:
            hosted = await _median(calls, lambda: host.call_tool("bench__echo", {"text": "x"}))

    async def noop(args: Mapping[str, object]) -> str:
        return "v"

    stack: PolicyStack[str] = PolicyStack(breaker=CircuitBreaker("s"), cache=ResultCache())
    ctx = CallContext(server="s", tool="t", arguments={"q": "x"}, read_only=True)
    await stack.run(ctx, noop)
    hit = await _median(calls * 10, lambda: stack.run(ctx, noop))
    plain = PolicyStack[str](breaker=CircuitBreaker("s"))
    uncached = CallContext(server="s", tool="t", arguments={"q": "x"})
    stack_only = await _median(calls * 10, lambda: plain.run(uncached, noop))

    print(f"bare client call        {bare * 1e6:9.1f} us")
    print(f"host.call_tool          {hosted * 1e6:9.1f} us   ratio {hosted / bare:5.2f}x bare")
    print(f"policy stack (no I/O)   {stack_only * 1e6:9.1f} us   {stack_only / bare:6.1%} of a bare call")
    print(f"cache hit (full stack)  {hit * 1e6:9.1f} us   {bare / hit:5.0f}x faster than a bare call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    trio.run(main, parser.parse_args().calls)
