"""What the MCP gateway adds to a tool call, against a direct call and against other proxies.

    python bench/gateway_overhead.py [--quick] [--calls N] [--concurrent-calls N] [--rounds N] [--json OUT]

One client (mcpwire's), one backend (server-everything over stdio, from ``.cache/servers``), one
run. Each target is started in its own process (all of a round's side by side), then measured
with the same client and the same calls (``echo`` with a short message):

- ``direct``: the client starts server-everything itself (stdio), no proxy;
- ``gateway``: ``bench/gateway_serve.py``, mcpwire's gateway alone (Streamable HTTP, legacy era,
  namespaced ``everything__echo``), and ``gateway[2026]``: the same in the 2026-07-28 era;
- ``serve``: ``mcpwire serve`` as shipped (the gateway at ``/mcp`` behind the service's
  middleware, with a token, every call's audit record durable before the answer when the process
  dies: journaled, then moved into its SQLite store in batches), and ``serve[fsync]``: the same
  with every record committed to the store, synced to the disk, before the answer
  (``?synchronous=full``: durable when the machine loses power too);
  both in the legacy era, as the proxies are measured; and ``serve[2026]``: as shipped, with the
  era mcpwire's client speaks to it by default (2026-07-28);
- ``mcp-proxy`` (0.13, the Python SDK 1.x) and ``fastmcp`` (FastMCP 4.1.2's proxy), legacy era
  (FastMCP's proxy lists no tools in 2026-07-28, and mcp-proxy refuses its probe);
- ``floor``: ``bench/gateway_floor.py``, a bare hypercorn+starlette endpoint answering the call
  itself: what one MCP call over HTTP costs at the least on that stack;
- ``relay-floor``: ``bench/gateway_relay_floor.py``, the least a relay on the gateway's own stack
  (trio, its HTTP/1.1 codec, msgspec) does for the call: HTTP in, the backend over stdio, HTTP out,
  nothing else; and ``relay-floor[audit]``: the same with a row per call made durable before the
  answer as ``mcpwire serve`` makes it (appended to a journal, moved into SQLite every 20 ms). What the
  gateway and ``serve`` spend beyond them is what their features and structure cost.

For each: p50 and p99 of sequential calls (1 in flight), calls per second with 64 in flight,
and the CPU time the intermediary's own process spends per sequential call (from ``/proc``; the
backend's is not counted), a figure that depends little on how busy the machine is. Then the
ratios each is held to. The gateway (the audit off: no service, no store): its p50 against the
faster proxy's (target <= 0.6), its calls/s against the faster proxy's (target >= 2), and its
added latency (gateway p50 minus direct p50) against the floor's p50 (target <= 1.3).
``mcpwire serve`` as shipped (the audit on): its p50 against the faster proxy's (target <= 0.6)
and its calls/s (target >= 3); ``serve[fsync]``'s are reported beside them. A missed target is
printed, not an error. On a shared machine the absolute figures move from run to run; the
ratios, measured in the same run, move less, and the CPU figures least. In a round every target
is started first; the sequential calls are then taken in ``--slices`` slices (4), the targets
taking turns within each, so that the machine slowing down for a few seconds weighs on every
target's latency alike; the calls with 64 in flight follow, a target at a time. ``--rounds N``
measures every target N times and reports each ratio round by round with its median (and each
figure's median).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Final, Literal

import trio

import mcpwire
from mcpwire.transports import HttpServer, StdioServer

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
EVERYTHING = SERVERS / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
MCP_PROXY = SERVERS / "proxy" / "bin" / "mcp-proxy"
FASTMCP = SERVERS / "fastmcp" / "bin" / "fastmcp"
TARGETS = (
    "direct",
    "floor",
    "relay-floor",
    "relay-floor[audit]",
    "gateway",
    "gateway[2026]",
    "serve",
    "serve[2026]",
    "serve[fsync]",
    "mcp-proxy",
    "fastmcp",
)
#: the admin token the ``serve`` targets run with (they need one, as on every address)
SERVE_TOKEN = "gateway-bench-token-0123456789"
MESSAGE = "hello, gateway"
START_TIMEOUT_S = 90.0
#: failed calls after which a target counts as stalled (the phase under way stops)
MAX_ERRORS = 8
Era = Literal["legacy", "modern"]


@dataclass
class Figures:
    target: str
    p50_ms: float
    p99_ms: float
    calls_per_s: float
    errors: int
    #: CPU time of the intermediary's own process per sequential call (not the backend's); 0 for direct
    cpu_ms_per_call: float


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]


def _cpu_seconds(pid: int | None) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 without one)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _process(
    argv: Sequence[str], *, url: str | None = None, env: dict[str, str] | None = None
) -> Iterator[tuple[str, int]]:
    """Start a server process; yield its endpoint (``url``, or the first line it prints) and pid.

    Its output is read to the end by a thread, whatever it prints: a server writing an access line
    per request (uvicorn, under mcp-proxy) would otherwise fill the pipe after about a thousand
    calls and stop answering, blocked on its own log."""
    process = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        if url is None:
            assert process.stdout is not None
            line = process.stdout.readline().decode().strip()
            if not line.startswith("http://"):
                raise RuntimeError(f"{argv[0]} printed {line!r} instead of its URL")
            url = line
        threading.Thread(target=_drain, args=(process.stdout,), daemon=True).start()
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _drain(stream: IO[bytes] | None) -> None:
    """Reads ``stream`` to its end, discarding it."""
    if stream is None:
        return
    try:
        while stream.read(65536):
            pass
    except (OSError, ValueError):  # closed when the process is stopped
        pass


async def _wait_listening(url: str, *, ready: str | None = None) -> None:
    """Until ``url`` answers (``ready``: until that URL answers 200)."""
    import httpx

    with trio.fail_after(START_TIMEOUT_S):
        async with httpx.AsyncClient() as http:
            while True:
                try:
                    reply = await http.get(ready or url, timeout=2)
                    if ready is None or reply.status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await trio.sleep(0.1)


@contextmanager
def _serve_process(folder: Path, *, fsync: bool = False) -> Iterator[tuple[str, int]]:
    """``mcpwire serve`` with one backend; its URL from its start-up lines. Its store commits as
    shipped (durable when the process dies), or, with ``fsync``, synced to the disk at every
    commit (durable when the machine loses power too)."""
    home = folder / f"serve-{time.monotonic_ns()}"  # (a folder each: the targets of a round run side by side)
    home.mkdir()
    config = home / "mcp.json"
    entry = {"command": str(EVERYTHING), "args": ["stdio"], "policy": {"cache_ttl_seconds": 0}}
    config.write_text(json.dumps({"mcpServers": {"everything": entry}}))
    port = _free_port()
    database = f"sqlite:///{home / 'serve.db'}"
    argv = [sys.executable, "-m", "mcpwire", "serve", "--config", str(config), "--port", str(port)]
    argv += ["--db", database + ("?synchronous=full" if fsync else ""), "--rate-limit", "0"]
    env = {"XDG_DATA_HOME": str(home / "data"), "HOME": str(home), "MCPWIRE_TOKEN": SERVE_TOKEN}
    with _process(argv, url=f"http://127.0.0.1:{port}/mcp", env=env) as started:
        yield started


@asynccontextmanager
async def _target(name: str, folder: Path) -> AsyncIterator[tuple[StdioServer | HttpServer, Era, int | None]]:
    """The client's target and era for one benchmark target (its process running)."""
    everything = [str(EVERYTHING), "stdio"]
    if name == "direct":
        yield StdioServer(command=everything[0], args=tuple(everything[1:])), "legacy", None
        return
    if name == "floor":
        argv = [sys.executable, str(HERE / "gateway_floor.py")]
    elif name.startswith("relay-floor"):
        audit = ["--audit", str(folder / f"relay-floor-{time.monotonic_ns()}.db")] if name.endswith("[audit]") else []
        argv = [sys.executable, str(HERE / "gateway_relay_floor.py"), *audit, "--", *everything]
    elif name.startswith("gateway"):
        argv = [sys.executable, str(HERE / "gateway_serve.py"), "--", *everything]
    elif name == "mcp-proxy":
        port = _free_port()
        argv = [str(MCP_PROXY), "--port", str(port), "--", *everything]
    elif name == "fastmcp":
        port = _free_port()
        config = folder / "fastmcp.json"
        config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything[0], "args": ["stdio"]}}}))
        argv = [str(FASTMCP), "run", str(config), "--no-banner", "--transport", "http", "--port", str(port)]
    era: Era = "modern" if name.endswith("[2026]") else "legacy"
    if name.startswith("serve"):
        with _serve_process(folder, fsync=name == "serve[fsync]") as (url, pid):
            await _wait_listening(url, ready=url.removesuffix("/mcp") + "/readyz")
            yield HttpServer(url=url, transport="streamable-http", bearer_token=SERVE_TOKEN), era, pid
        return
    fixed = f"http://127.0.0.1:{port}/mcp" if name in ("mcp-proxy", "fastmcp") else None
    with _process(argv, url=fixed) as (url, pid):
        await _wait_listening(url)
        yield HttpServer(url=url, transport="streamable-http"), era, pid


class _Subject:
    """One target, its process running and mcpwire's client connected, measured a slice at a
    time (see :func:`measure_round`)."""

    def __init__(self, name: str, client: mcpwire.Client, tool: str, pid: int | None) -> None:
        self.name = name
        self.client = client
        self.tool = tool
        self.pid = pid
        self.errors = 0
        self.latencies: list[float] = []
        self.cpu_s = 0.0
        self.busy_calls = 0
        self.busy_s = 0.0

    async def call(self) -> float:
        start = time.perf_counter_ns()
        try:
            result = await self.client.call_tool(self.tool, {"message": MESSAGE})
        except mcpwire.MCPWireError as exc:  # a call lost by the target is counted, not fatal
            self.errors += 1
            print(f"{self.name}: {exc}", file=sys.stderr, flush=True)
        else:
            if result.is_error or MESSAGE not in result.text():
                self.errors += 1
        return (time.perf_counter_ns() - start) / 1e6

    async def sequential(self, calls: int) -> None:
        """``calls`` calls one at a time: their latencies, and the target's CPU time."""
        cpu_before = _cpu_seconds(self.pid)
        for _ in range(calls):
            if self.errors >= MAX_ERRORS:  # a stalled target ends the phase
                break
            self.latencies.append(await self.call())
        self.cpu_s += _cpu_seconds(self.pid) - cpu_before

    async def concurrent(self, calls: int, in_flight: int) -> None:
        """``calls`` calls, ``in_flight`` at a time: counted into the calls/s."""
        left = calls

        async def worker() -> None:
            nonlocal left
            while left > 0 and self.errors < MAX_ERRORS:  # a target that stopped answering ends the phase
                left -= 1
                await self.call()

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(in_flight):
                nursery.start_soon(worker)
        self.busy_s += time.perf_counter() - start
        self.busy_calls += calls - left

    def figures(self) -> Figures:
        measured = max(1, len(self.latencies))
        return Figures(
            self.name,
            _percentile(self.latencies, 50) if self.latencies else math.nan,
            _percentile(self.latencies, 99) if self.latencies else math.nan,
            self.busy_calls / self.busy_s if self.busy_s > 0 else 0.0,
            self.errors,
            self.cpu_s * 1000 / measured,
        )


async def _open_subject(stack: AsyncExitStack, name: str, folder: Path, warmup: int) -> _Subject:
    target, era, pid = await stack.enter_async_context(_target(name, folder))
    client = await stack.enter_async_context(
        mcpwire.open_client(target, era=era, era_cache=False, timeout=30, connect_timeout=START_TIMEOUT_S)
    )
    names = [t.name for t in await client.list_tools()]
    tool = next((n for n in names if n.endswith("echo")), None)
    if tool is None:
        raise RuntimeError(f"{name}: no echo tool among {names[:20]}")
    print(f"{name}: measuring {tool}", file=sys.stderr, flush=True)
    subject = _Subject(name, client, tool, pid)
    for _ in range(warmup):
        await subject.call()
    subject.errors = 0  # (what failed while warming up is not the measurement's)
    return subject


async def measure_round(
    names: Sequence[str], folder: Path, calls: int, concurrent_calls: int, warmup: int, slices: int
) -> dict[str, Figures]:
    """One round: every target started and warmed up, then its calls one at a time measured in
    ``slices`` slices, the targets taking turns within each (in an order that rotates from slice
    to slice), so that a slow spell of the machine falls on every target's latency alike, not on
    whichever target ran during it; then each target's calls with ``concurrent_calls`` in
    flight, in turn."""
    async with AsyncExitStack() as stack:
        subjects = [await _open_subject(stack, n, folder, warmup) for n in names]
        shares = [calls // slices + (1 if i < calls % slices else 0) for i in range(slices)]
        for number, share in enumerate(shares):
            turn = number % len(subjects)
            for subject in subjects[turn:] + subjects[:turn]:
                await subject.sequential(share)
        for subject in subjects:  # (a window of its own each: a burst at 64 in flight needs some length)
            await subject.concurrent(calls, concurrent_calls)
        figures = {s.name: s.figures() for s in subjects}
    for each in figures.values():
        print(f"{each.target}: {each}", file=sys.stderr, flush=True)
    return figures


#: the ratios each subject is held to against the faster proxy: (p50 at most, calls/s at least)
PROXY_TARGETS: Final[dict[str, tuple[float | None, float | None]]] = {
    "gateway": (0.6, 2.0),
    "serve": (0.6, 3.0),
    "serve[2026]": (0.6, 3.0),
    "serve[fsync]": (None, None),
    "relay-floor": (None, None),
    "relay-floor[audit]": (None, None),
}
#: each subject beside the relay floor that does what it does at the least (the audit, or not)
RELAY_FLOORS: Final = {"gateway": "relay-floor", "serve": "relay-floor[audit]"}


def _target_label(text: str, bound: str, value: float | None) -> str:
    return f"{text} (target {bound} {value:g})" if value is not None else text


def _ratios(by: dict[str, Figures]) -> dict[str, float]:
    out: dict[str, float] = {}
    proxies = [by[n] for n in ("mcp-proxy", "fastmcp") if n in by]
    if proxies:
        fastest = min(p.p50_ms for p in proxies)
        busiest = max(p.calls_per_s for p in proxies)
        for subject, (p50_at_most, rate_at_least) in PROXY_TARGETS.items():
            if subject in by:
                figures = by[subject]
                out[_target_label(f"{subject} p50 vs faster proxy", "<=", p50_at_most)] = figures.p50_ms / fastest
                label = _target_label(f"{subject} calls/s vs faster proxy", ">=", rate_at_least)
                out[label] = figures.calls_per_s / busiest
    for subject, floor in RELAY_FLOORS.items():
        if subject in by and floor in by:
            out[f"{subject} p50 / {floor} p50"] = by[subject].p50_ms / by[floor].p50_ms
            out[f"{subject} calls/s / {floor} calls/s"] = by[subject].calls_per_s / by[floor].calls_per_s
    gateway = by.get("gateway")
    if gateway is None:
        return out
    if "direct" in by and "floor" in by:
        added = gateway.p50_ms - by["direct"].p50_ms
        out["added p50 vs floor p50 (target <= 1.3)"] = added / by["floor"].p50_ms
    if "direct" in by:
        out["gateway p50 / direct p50"] = gateway.p50_ms / by["direct"].p50_ms
    if proxies and gateway.cpu_ms_per_call > 0:
        cheaper = min(p.cpu_ms_per_call for p in proxies)
        out["CPU per call vs the leaner proxy's"] = gateway.cpu_ms_per_call / cheaper
    if "floor" in by and by["floor"].cpu_ms_per_call > 0:
        out["CPU per call vs the floor's"] = gateway.cpu_ms_per_call / by["floor"].cpu_ms_per_call
    return out


def _median_figures(rounds: list[dict[str, Figures]], name: str) -> Figures:
    """A target's figures as the median of its rounds (errors summed)."""
    each = [r[name] for r in rounds]
    return Figures(
        name,
        statistics.median(f.p50_ms for f in each),
        statistics.median(f.p99_ms for f in each),
        statistics.median(f.calls_per_s for f in each),
        sum(f.errors for f in each),
        statistics.median(f.cpu_ms_per_call for f in each),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke test: 200 calls, 20 warm-up calls")
    parser.add_argument("--calls", type=int, default=2000, help="sequential calls, and calls at 64 in flight")
    parser.add_argument("--concurrent-calls", type=int, default=64, help="calls in flight for the throughput")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"a subset of {','.join(TARGETS)}")
    parser.add_argument("--rounds", type=int, default=1, help="measure every target N times, taking turns")
    parser.add_argument("--slices", type=int, default=4, help="within a round, the targets take turns this many times")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.slices < 1:
        parser.error(f"--slices must be at least 1, got {args.slices}")
    calls, warmup = (200, 20) if args.quick else (args.calls, 200)
    names = [n for n in args.targets.split(",") if n]
    unknown = sorted(set(names) - set(TARGETS))
    if unknown:
        parser.error(f"unknown targets: {', '.join(unknown)}")
    missing = [str(p) for p in (EVERYTHING, MCP_PROXY, FASTMCP) if not p.exists()]
    if str(EVERYTHING) in missing:
        print(f"gateway_overhead: {EVERYTHING} is missing: run tests/real/install_servers.sh", file=sys.stderr)
        return 2
    names = [n for n in names if not (n == "mcp-proxy" and str(MCP_PROXY) in missing)]
    names = [n for n in names if not (n == "fastmcp" and str(FASTMCP) in missing)]

    async def run_all() -> list[dict[str, Figures]]:
        rounds: list[dict[str, Figures]] = []
        with tempfile.TemporaryDirectory(prefix="mcpwire-gateway-bench-") as folder:
            for number in range(args.rounds):
                if args.rounds > 1:
                    print(f"round {number + 1} of {args.rounds}", file=sys.stderr, flush=True)
                rounds.append(
                    await measure_round(names, Path(folder), calls, args.concurrent_calls, warmup, args.slices)
                )
        return rounds

    rounds = trio.run(run_all)
    figures = [_median_figures(rounds, n) for n in names]
    rate_head = f"calls/s @{args.concurrent_calls}"
    if args.rounds > 1:
        print(f"the median of {args.rounds} rounds:")
    print(f"{'target':<15} {'p50 ms':>8} {'p99 ms':>8} {rate_head:>14} {'errors':>7} {'cpu ms/call':>12}")
    for f in figures:
        line = f"{f.target:<15} {f.p50_ms:>8.3f} {f.p99_ms:>8.3f} {f.calls_per_s:>14.0f}"
        print(f"{line} {f.errors:>7} {f.cpu_ms_per_call:>12.3f}")
    per_round = [_ratios(r) for r in rounds]
    ratios = {label: statistics.median(r[label] for r in per_round) for label in per_round[0]}
    width = max((len(label) for label in ratios), default=0)
    for label, value in ratios.items():
        each = " ".join(f"{r[label]:.2f}" for r in per_round) if args.rounds > 1 else ""
        print(f"{label:<{width}} {value:6.2f}" + (f"   rounds: {each}" if each else ""))
    if args.json:
        document = {
            "figures": [asdict(f) for f in figures],
            "ratios": ratios,
            "rounds": [
                {"figures": [asdict(f) for f in r.values()], "ratios": q}
                for r, q in zip(rounds, per_round, strict=True)
            ],
        }
        Path(args.json).write_text(json.dumps(document, indent=2))
    return 1 if any(f.errors for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
