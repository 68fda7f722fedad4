"""A bounded load test of ``mcpwire serve`` on loopback.

    python bench/service_load.py [--clients 100] [--pollers 20] [--seconds 40] [--warmup 10]
                                 [--via gateway|api] [--db URL] [--json OUT]

One ``mcpwire serve`` process fronts three real backends over stdio (server-everything,
server-memory, mcp-server-time, from ``.cache/servers``). ``--clients`` MCP clients (mcpwire's,
half of them in the legacy era with sessions, half in the stateless 2026-07-28 era) call read-only
tools through the gateway at ``/mcp`` in a loop (``--via api``: through ``POST /api/v1/tools/{name}
/call`` instead), while ``--pollers`` API clients read ``/api/v1/servers``, ``/api/v1/tools``,
``/api/v1/audit``, ``/metrics`` and ``/readyz`` in turn. Every call is audited into the store.

It reports, for the measured window after the warm-up: requests, errors (exceptions, non-2xx
answers, and tool results with ``isError``), p50/p99 latency of calls and of polls, throughput,
and the service's resident memory sampled each second; memory is "flat" when the median of the
last five samples is within 10% (and 16 MiB) of the median of the first five after the warm-up.
The exit status is 1 when there were errors or memory was not flat.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import trio

REPO = Path(__file__).resolve().parents[1]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"
READY = "Ctrl+C stops."
_API = re.compile(r"^API\s+(http://\S+)/api/v1\b")

#: read-only tools of each backend and their arguments (namespaced as the gateway shows them)
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("everything__echo", {"message": "hello"}),
    ("everything__get-sum", {"a": 2, "b": 3}),
    ("memory__read_graph", {}),
    ("memory__search_nodes", {"query": "x"}),
    ("time__get_current_time", {"timezone": "UTC"}),
    ("time__convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}),
]
#: the admin token the service runs with (it needs one, as on every address)
TOKEN = "service-load-token-0123456789"
POLLS = ["/api/v1/servers", "/api/v1/tools", "/api/v1/audit?limit=20", "/metrics", "/readyz"]


@dataclass
class Series:
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_errors: list[str] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.first_errors) < 5:
            self.first_errors.append(what[:300])

    def summary(self, seconds: float) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def pick(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0

        return {
            "requests": len(ordered),
            "errors": self.errors,
            "first_errors": self.first_errors,
            "per_second": round(len(ordered) / seconds, 1) if seconds > 0 else 0.0,
            "p50_ms": round(pick(0.50), 2),
            "p99_ms": round(pick(0.99), 2),
            "max_ms": round(ordered[-1] * 1000, 2) if ordered else 0.0,
        }


@dataclass
class Run:
    measuring: bool = False
    calls: Series = field(default_factory=Series)
    polls: Series = field(default_factory=Series)
    rss: list[tuple[float, int]] = field(default_factory=list)
    #: the service's CPU seconds over the measured window
    cpu: float = 0.0


def config(tmp: Path) -> Path:
    for binary in (NPM_BIN / "mcp-server-everything", NPM_BIN / "mcp-server-memory", PY_BIN / "mcp-server-time"):
        if not binary.exists():
            raise SystemExit(f"{binary} is missing: run tests/real/install_servers.sh")
    allow = {"approval": {"*": "allow"}}
    servers = {
        "everything": {"command": str(NPM_BIN / "mcp-server-everything"), "args": ["stdio"], "policy": allow},
        "memory": {
            "command": str(NPM_BIN / "mcp-server-memory"),
            "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
            "policy": allow,
        },
        "time": {
            "command": str(PY_BIN / "mcp-server-time"),
            "args": ["--local-timezone", "UTC"],
            "policy": allow,
        },
    }
    path = tmp / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def start_service(tmp: Path, db: str | None) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp / "data"), "PYTHONUNBUFFERED": "1", "MCPWIRE_TOKEN": TOKEN}
    argv = [sys.executable, "-m", "mcpwire", "serve", "--config", str(config(tmp)), "--port", "0"]
    argv += ["--rate-limit", "0", "--db", db or f"sqlite:///{tmp / 'service.db'}"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    url = ""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace").rstrip("\n")
        if not line and proc.poll() is not None:
            raise SystemExit(f"mcpwire serve exited with {proc.returncode} before serving")
        match = _API.match(line)
        if match:
            url = match.group(1)
        if line == READY:
            return proc, url
    proc.kill()
    raise SystemExit("mcpwire serve did not start within 120 s")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used (not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def gateway_client(url: str, number: int, run: Run, stop: trio.Event) -> None:
    from mcpwire import HttpServer, open_client

    era: Literal["legacy", "auto"] = "legacy" if number % 2 else "auto"
    try:
        async with open_client(HttpServer(url=f"{url}/mcp", bearer_token=TOKEN), era=era, timeout=30) as client:
            i = number
            while not stop.is_set():
                name, arguments = CALLS[i % len(CALLS)]
                i += 1
                began = time.perf_counter()
                try:
                    result = await client.call_tool(name, arguments)
                except Exception as exc:
                    if run.measuring:
                        run.calls.error(f"{name}: {type(exc).__name__}: {exc}")
                    continue
                elapsed = time.perf_counter() - began
                if run.measuring:
                    if result.is_error:
                        run.calls.error(f"{name}: isError: {result.text()}")
                    else:
                        run.calls.latencies.append(elapsed)
    except Exception as exc:
        run.calls.error(f"client {number}: {type(exc).__name__}: {exc}")


async def api_caller(http: httpx.AsyncClient, number: int, run: Run, stop: trio.Event) -> None:
    i = number
    while not stop.is_set():
        name, arguments = CALLS[i % len(CALLS)]
        i += 1
        began = time.perf_counter()
        try:
            reply = await http.post(f"/api/v1/tools/{name}/call", json={"arguments": arguments})
        except httpx.HTTPError as exc:
            if run.measuring:
                run.calls.error(f"{name}: {type(exc).__name__}: {exc}")
            continue
        elapsed = time.perf_counter() - began
        if run.measuring:
            if reply.status_code != 200 or reply.json().get("isError"):
                run.calls.error(f"{name}: {reply.status_code} {reply.text}")
            else:
                run.calls.latencies.append(elapsed)


async def poller(http: httpx.AsyncClient, number: int, run: Run, stop: trio.Event) -> None:
    i = number
    while not stop.is_set():
        path = POLLS[i % len(POLLS)]
        i += 1
        began = time.perf_counter()
        try:
            reply = await http.get(path)
        except httpx.HTTPError as exc:
            if run.measuring:
                run.polls.error(f"{path}: {type(exc).__name__}: {exc}")
            continue
        elapsed = time.perf_counter() - began
        if run.measuring:
            if reply.status_code != 200:
                run.polls.error(f"{path}: {reply.status_code} {reply.text[:200]}")
            else:
                run.polls.latencies.append(elapsed)


async def sample_memory(pid: int, run: Run, stop: trio.Event, began: float) -> None:
    while not stop.is_set():
        run.rss.append((time.monotonic() - began, rss_bytes(pid)))
        with trio.move_on_after(1.0):
            await stop.wait()


async def load(url: str, pid: int, args: argparse.Namespace) -> Run:
    run = Run()
    stop = trio.Event()
    began = time.monotonic()
    connections = args.clients + args.pollers + 10
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx.AsyncClient(base_url=url, timeout=30, limits=limits, headers=auth) as http,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(sample_memory, pid, run, stop, began)
        for number in range(args.clients):
            if args.via == "gateway":
                nursery.start_soon(gateway_client, url, number, run, stop)
            else:
                nursery.start_soon(api_caller, http, number, run, stop)
        for number in range(args.pollers):
            nursery.start_soon(poller, http, number, run, stop)
        await trio.sleep(args.warmup)
        run.measuring = True
        cpu = cpu_seconds(pid)
        await trio.sleep(args.seconds - args.warmup)
        run.measuring = False
        run.cpu = cpu_seconds(pid) - cpu
        stop.set()  # each client finishes its request in flight (bounded by its timeout) and leaves
    return run


def memory_verdict(run: Run, warmup: float) -> dict[str, Any]:
    after = [rss for at, rss in run.rss if at >= warmup]
    if len(after) < 10:
        return {"flat": False, "reason": "too few samples", "samples": len(after)}
    start = statistics.median(after[:5])
    end = statistics.median(after[-5:])
    growth = end - start
    flat = growth <= max(0.10 * start, 16 * 1024 * 1024)
    return {
        "flat": flat,
        "start_mib": round(start / 2**20, 1),
        "end_mib": round(end / 2**20, 1),
        "peak_mib": round(max(after) / 2**20, 1),
        "growth_mib": round(growth / 2**20, 1),
        "samples": len(after),
    }


def _print(report: dict[str, Any], args: argparse.Namespace, measured: float) -> None:
    c, p, m = report["calls"], report["polls"], report["memory"]
    print(f"mcpwire serve under load: {args.clients} clients via {args.via}, {args.pollers} API pollers, ", end="")
    print(f"{measured:.0f} s measured")
    for label, s in (("calls", c), ("polls", p)):
        print(f"  {label}  {s['requests']:>7} ({s['per_second']}/s)  ", end="")
        print(f"p50 {s['p50_ms']} ms  p99 {s['p99_ms']} ms  errors {s['errors']}")
    verdict = "flat" if m["flat"] else "GROWING"
    print(f"  memory {m.get('start_mib')} -> {m.get('end_mib')} MiB (peak {m.get('peak_mib')}): {verdict}")
    for line in c["first_errors"] + p["first_errors"]:
        print(f"  error: {line}")
    print(f"  service CPU {report['service_cpu_ms_per_request']} ms per request, ", end="")
    load = report["load_average"]
    print(f"{report['service_cpu_share']:.0%} of a core; load average {load:.1f} on {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100, help="MCP clients calling tools (default 100)")
    parser.add_argument("--pollers", type=int, default=20, help="API pollers (default 20)")
    parser.add_argument("--seconds", type=float, default=40.0, help="load duration, warm-up included (max 60)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring (default 10)")
    parser.add_argument("--via", choices=["gateway", "api"], default="gateway", help="how clients call tools")
    parser.add_argument("--db", help="the service's database (default: SQLite in a temporary folder)")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if not 0 < args.warmup < args.seconds <= 60:
        parser.error("need 0 < --warmup < --seconds <= 60")
    with tempfile.TemporaryDirectory(prefix="mcpwire-load-") as tmp:
        proc, url = start_service(Path(tmp), args.db)
        try:
            run = trio.run(load, url, proc.pid, args)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    measured = args.seconds - args.warmup
    report = {
        "clients": args.clients,
        "pollers": args.pollers,
        "via": args.via,
        "seconds_measured": measured,
        "calls": run.calls.summary(measured),
        "polls": run.polls.summary(measured),
        "memory": memory_verdict(run, args.warmup),
        # CPU time the service process spent per answered request: a figure a loaded machine
        # (many processes sharing few cores) does not inflate the way it inflates latencies
        "service_cpu_ms_per_request": round(
            1000 * run.cpu / max(1, len(run.calls.latencies) + len(run.polls.latencies)), 3
        ),
        "service_cpu_share": round(run.cpu / measured, 2),
        "load_average": os.getloadavg()[0],
        "service_exit": proc.returncode,
    }
    ok = run.calls.errors == 0 and run.polls.errors == 0 and report["memory"]["flat"] and proc.returncode == 0
    report["ok"] = ok
    _print(report, args, measured)
    print(f"  exit status of the service after SIGTERM: {proc.returncode}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
