"""What the three benchmark workloads share: parameters, the measured workload, statistics.

Standard library only: ``sdk_client.py`` imports this module from the official SDK's own venv,
where neither mcpwire nor trio is installed.

Theory of operation: each workload script adapts one client library to the tiny
:class:`Session` interface (``list_tools`` and ``echo``), provides a way to run N copies of a
coroutine concurrently (a trio nursery or an anyio task group) and an event-loop runner, and
hands them to :func:`workload_main`. Every measurement is then performed by the same code here,
timed with :func:`time.perf_counter_ns`, so the clients differ only in what their libraries
force. A workload process prints one JSON object on stdout and nothing else.

Two modes, chosen by ``run.py``:

- ``--cold``: one connection in a fresh process: from launching the server to the tools list
  received, handshake (and era detection) included. ``run.py`` runs it several times.
- default: one connection, warm-up, then sequential latency, throughput at each concurrency and
  1 MiB echoes; the process reports its peak RSS at the end. Alongside wall-clock numbers it
  reports the client's own CPU time per call (``time.process_time_ns``), which does not depend
  on where the scheduler places the client and the server.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

__all__ = [
    "ECHO_SERVER",
    "HTTP_ECHO_SERVER",
    "Params",
    "RunConcurrently",
    "Session",
    "median",
    "percentile",
    "http_server",
    "workload_main",
]

T = TypeVar("T")

ECHO_SERVER = Path(__file__).resolve().parent / "echo_server.py"
HTTP_ECHO_SERVER = Path(__file__).resolve().parent / "http_echo_server.py"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Params:
    """The workload's size. Every client runs with the same instance."""

    server_argv: tuple[str, ...] = (sys.executable, "-u", str(ECHO_SERVER))
    warmup_calls: int = 100
    latency_calls: int = 2000
    throughput_calls: int = 2000
    concurrency: tuple[int, ...] = (1, 16, 64)
    big_calls: int = 50
    big_bytes: int = MIB
    small_text: str = "hello, benchmark"
    cold_runs: int = 10
    import_runs: int = 10
    #: workload runs per client (run.py reports the median of each metric)
    rounds: int = 5
    #: pin the workload process to this CPU (Linux); the server pins itself with ``--cpu``
    client_cpu: int | None = None

    @classmethod
    def quick(cls, **changes: Any) -> Params:
        """A smoke-test size: seconds, not minutes; the numbers are only indicative."""
        return cls(
            warmup_calls=20,
            latency_calls=200,
            throughput_calls=300,
            big_calls=5,
            cold_runs=3,
            import_runs=3,
            rounds=1,
            **changes,
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Params:
        data = json.loads(text)
        data["server_argv"] = tuple(data["server_argv"])
        data["concurrency"] = tuple(data["concurrency"])
        return cls(**data)


# -- statistics ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in [0, 100]) of a non-empty sample."""
    if not values:
        raise ValueError("percentile of an empty sample")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    if not values:
        raise ValueError("median of an empty sample")
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def peak_rss_kib() -> int:
    """This process's peak resident set size, in KiB (``ru_maxrss`` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


# -- the client interface ---------------------------------------------------------------------


class Session(Protocol):
    """One connected client, as the workload sees it."""

    protocol_version: str

    async def list_tools(self) -> list[str]:
        """The names of the server's tools."""
        ...

    async def echo(self, text: str) -> str:
        """Calls the ``echo`` tool and returns the text of its result."""
        ...


#: ``connect(server_argv, variant)``: launches the server and yields a ready session.
Connect = Callable[[Sequence[str], str], AbstractAsyncContextManager[Session]]
#: ``run_concurrently(n, fn)``: runs ``n`` concurrent calls of ``fn`` and returns when all have.
RunConcurrently = Callable[[int, Callable[[], Coroutine[Any, Any, None]]], Awaitable[None]]
#: ``run(async_fn)``: runs a coroutine function to completion on the library's event loop.
Runner = Callable[[Callable[[], Awaitable[dict[str, Any]]]], dict[str, Any]]


@contextmanager
def http_server(argv: Sequence[str]) -> Iterator[str]:
    """Starts an HTTP server process, yields the URL it prints first, and terminates it on exit.

    The URL is read with a blocking ``readline``: it is part of the cold start, and nothing else
    runs in the client before it is known.
    """
    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().decode().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the server printed {url!r} instead of its URL")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


# -- the workload -----------------------------------------------------------------------------


async def _echo_checked(session: Session, text: str) -> None:
    answer = await session.echo(text)
    if answer != text:
        raise AssertionError(f"echo returned {len(answer)} characters instead of the {len(text)} sent")


async def cold_start(connect: Connect, variant: str, params: Params) -> dict[str, Any]:
    """Launch to tools listed, once: the server's start and the client's handshake."""
    start = time.perf_counter_ns()
    async with connect(params.server_argv, variant) as session:
        tools = await session.list_tools()
        listed_at = time.perf_counter_ns()
        elapsed = listed_at - start
        version = session.protocol_version
    if "echo" not in tools:
        raise AssertionError(f"the echo tool is missing from {tools!r}")
    # listed_at lets run.py add the interpreter's start-up and imports (CLOCK_MONOTONIC is system-wide)
    return {"cold_start_ns": elapsed, "tools_listed_at_ns": listed_at, "protocol_version": version}


async def full_workload(
    connect: Connect, run_concurrently: RunConcurrently, variant: str, params: Params
) -> dict[str, Any]:
    """Latency, throughput at each concurrency, and large echoes, on one connection."""
    small = params.small_text
    big = _big_text(params.big_bytes)
    out: dict[str, Any] = {}
    async with connect(params.server_argv, variant) as session:
        out["protocol_version"] = session.protocol_version
        if "echo" not in await session.list_tools():
            raise AssertionError("the echo tool is missing")
        for _ in range(params.warmup_calls):
            await _echo_checked(session, small)

        cpu_per_call: dict[str, float] = {}
        samples: list[int] = []
        cpu_start = time.process_time_ns()
        for _ in range(params.latency_calls):
            start = time.perf_counter_ns()
            answer = await session.echo(small)
            samples.append(time.perf_counter_ns() - start)
            if answer != small:
                raise AssertionError("echo returned a different text")
        cpu_per_call["sequential"] = (time.process_time_ns() - cpu_start) / params.latency_calls / 1e3
        out["latency_p50_us"] = percentile(samples, 50) / 1e3
        out["latency_p99_us"] = percentile(samples, 99) / 1e3
        out["latency_mean_us"] = sum(samples) / len(samples) / 1e3

        throughput: dict[str, float] = {}
        for inflight in params.concurrency:
            remaining = params.throughput_calls

            async def worker() -> None:
                nonlocal remaining
                while remaining > 0:
                    remaining -= 1  # claimed before the await: tasks never interleave in between
                    await _echo_checked(session, small)

            cpu_start = time.process_time_ns()
            start = time.perf_counter_ns()
            await run_concurrently(min(inflight, params.throughput_calls), worker)
            elapsed = time.perf_counter_ns() - start
            throughput[str(inflight)] = params.throughput_calls / (elapsed / 1e9)
            cpu_per_call[str(inflight)] = (time.process_time_ns() - cpu_start) / params.throughput_calls / 1e3
        out["throughput_calls_per_s"] = throughput
        out["cpu_per_call_us"] = cpu_per_call

        for _ in range(min(2, params.big_calls)):
            await _echo_checked(session, big)
        start = time.perf_counter_ns()
        for _ in range(params.big_calls):
            await _echo_checked(session, big)
        elapsed = time.perf_counter_ns() - start
        out["big_echo_mib_per_s"] = params.big_calls * params.big_bytes / MIB / (elapsed / 1e9)
    return out


def _big_text(size: int) -> str:
    """``size`` bytes of plain ASCII prose-like text (no characters JSON must escape)."""
    unit = "The quick brown fox jumps over the lazy dog 0123456789. "
    return (unit * (size // len(unit) + 1))[:size]


# -- entry point ------------------------------------------------------------------------------


def workload_main(
    *,
    client: str,
    variants: Sequence[str],
    connect: Connect,
    run_concurrently: RunConcurrently,
    run: Runner,
    versions: dict[str, str] | None = None,
) -> None:
    """Command line of a workload script: runs one mode and prints its JSON result on stdout."""
    parser = argparse.ArgumentParser(description=f"MCP benchmark workload: {client}")
    parser.add_argument("--variant", choices=variants, default=variants[0])
    parser.add_argument("--params", default=None, help="Params as JSON (run.py passes them)")
    parser.add_argument("--quick", action="store_true", help="the quick size, when --params is not given")
    parser.add_argument("--cold", action="store_true", help="measure one cold start instead of the workload")
    parser.add_argument("--profile", metavar="FILE", help="run under cProfile and dump its stats to FILE")
    args = parser.parse_args()
    params = Params.quick() if args.quick else Params()
    if args.params is not None:
        params = Params.from_json(args.params)
    if params.client_cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {params.client_cpu})
    measure = (
        partial(cold_start, connect, args.variant, params)
        if args.cold
        else partial(full_workload, connect, run_concurrently, args.variant, params)
    )
    if args.profile:
        import cProfile

        with cProfile.Profile() as profiler:
            result = run(measure)
        profiler.dump_stats(args.profile)
    else:
        result = run(measure)
    if not args.cold:
        result["peak_rss_kib"] = peak_rss_kib()
    result.update(client=client, variant=args.variant, python=sys.version.split()[0], versions=versions or {})
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
