"""The first connect in a fresh process: mcpwire against a raw asyncio client, each in its own
interpreter, against servers that are already running.

What every ``mcpwire tools URL`` pays before its answer. Each sample is a new process that first
imports its client (``import trio`` and ``from mcpwire import open_client``; ``import asyncio``
for the floor), then is timed from just before its event loop starts to the moment the tools are
listed: whatever the connect imports lazily counts, as it does for a user.

- ``floor``: the least a client can do, on asyncio streams and the standard library: one
  connection, ``initialize`` (its ``Mcp-Session-Id`` kept), ``notifications/initialized``,
  ``tools/list``, each a hand-written HTTP/1.1 request whose answer (a JSON body, or an SSE
  stream) is read with ``readuntil`` and ``readexactly``. No era detection, no checks, no
  timeouts.
- ``mcpwire``: ``open_client(url)`` as the command line runs it (transport and era detected from
  nothing), then ``list_tools()``.

Servers: the benchmark's HTTP echo server, dual-era (the ``server/discover`` probe answers) and
``--legacy-only`` (the probe is refused and detection falls back: the slow case), and, when the
official SDK's server can be run (``--sdk-python``, default the test peers' venv in ``.cache``),
the SDK's Streamable HTTP server on uvicorn. Samples are interleaved (floor, mcpwire, floor, ...);
each figure is the median. Target: mcpwire <= 3 x the floor on every server.

    python bench/http_first_connect.py [--rounds N] [--json FILE] [--sdk-python PYTHON]
    python bench/http_first_connect.py --client floor|mcpwire URL    # one sample, printed in ms
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from _common import HTTP_ECHO_SERVER, http_server

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
TARGET_RATIO = 3.0
SDK_SERVER = ROOT / "tests" / "real" / "fixtures" / "sdk_http_server.py"
SDK_PYTHON = ROOT / ".cache" / "servers" / "py" / "bin" / "python"


# -- the two clients (each runs in a process of its own) --------------------------------------------


def floor_sample(url: str) -> tuple[float, float]:
    """Milliseconds (wall and this process's CPU) from the start of an asyncio loop to the tools
    listed, on raw HTTP/1.1."""
    import asyncio

    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(_floor(url))
    return (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000


async def _floor(url: str) -> None:
    import asyncio
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

    async def post(message: dict[str, Any]) -> tuple[dict[str, str], Any]:
        body = json.dumps(message, separators=(",", ":")).encode()
        lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in head[1:] if line)}
        if "content-length" in fields:
            data = await reader.readexactly(int(fields["content-length"]))
        else:  # chunked (an SSE stream that ends after the answer): every chunk, to the last
            data = b""
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                data += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")  # no trailers
        if "id" not in message:
            return fields, None
        if fields.get("content-type", "").startswith("text/event-stream"):
            data = next(line[5:] for line in data.split(b"\n") if line.startswith(b"data:") and b'"result"' in line)
        return fields, json.loads(data)["result"]

    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}
    fields, result = await post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    if "mcp-session-id" in fields:
        headers["Mcp-Session-Id"] = fields["mcp-session-id"]
    headers["MCP-Protocol-Version"] = result["protocolVersion"]
    await post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    _, listed = await post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    assert listed["tools"], listed
    writer.close()


def mcpwire_sample(url: str) -> tuple[float, float]:
    """Milliseconds (wall and this process's CPU) from the start of a trio run to the tools
    listed, through ``open_client``."""
    import trio

    from mcpwire import open_client

    async def main() -> tuple[float, float]:
        async with open_client(url) as client:
            tools = await client.list_tools()
            listed = time.perf_counter(), time.process_time()
            assert tools
        return listed

    start, cpu = time.perf_counter(), time.process_time()
    listed, listed_cpu = trio.run(main)
    return (listed - start) * 1000, (listed_cpu - cpu) * 1000


# -- the run -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _sdk_server(sdk_python: Path) -> Iterator[str]:
    """The SDK's server on a free port, once it listens."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(sdk_python), str(SDK_SERVER), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the SDK's server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait()


def serving(label: str, sdk_python: Path | None) -> AbstractContextManager[str]:
    if label == "sdk (uvicorn)":
        assert sdk_python is not None
        return _sdk_server(sdk_python)
    flags = ["--legacy-only"] if label == "legacy-only" else []
    return http_server([sys.executable, "-u", str(HTTP_ECHO_SERVER), *flags])


def sample(client: str, url: str) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--client", client, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{client} failed: {done.stderr.strip().splitlines()[-1:]}")
    wall, cpu = done.stdout.split()
    return float(wall), float(cpu)


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--sdk-python", type=Path, default=SDK_PYTHON if SDK_PYTHON.exists() else None)
    parser.add_argument("--client", choices=("floor", "mcpwire"), help=argparse.SUPPRESS)
    parser.add_argument("url", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client is not None:
        elapsed, spent = (floor_sample if args.client == "floor" else mcpwire_sample)(args.url)
        print(f"{elapsed:.3f} {spent:.3f}")
        return 0
    servers = ["dual-era", "legacy-only"] + (["sdk (uvicorn)"] if args.sdk_python is not None else [])
    results: dict[str, Any] = {"python": sys.version.split()[0], "rounds": args.rounds, "servers": {}}
    print(f"first connect in a fresh process (median of {args.rounds}; start of the event loop -> tools listed)")
    print("(the client's own CPU time over the same span in brackets: what a loaded machine does not inflate)")
    print(f"{'server':<16}{'floor (ms)':>16}{'mcpwire (ms)':>18}{'ratio':>8}{'(cpu)':>8}  target <= {TARGET_RATIO:g}x")
    failed = False
    for label in servers:
        with serving(label, args.sdk_python) as url:
            samples: dict[str, list[tuple[float, float]]] = {"floor": [], "mcpwire": []}
            for client in samples:  # one untimed sample each: the server's own first answers
                sample(client, url)
            for _ in range(args.rounds):
                for client, values in samples.items():
                    values.append(sample(client, url))
        wall = {client: _median([w for w, _ in values]) for client, values in samples.items()}
        cpu = {client: _median([c for _, c in values]) for client, values in samples.items()}
        ratio = wall["mcpwire"] / wall["floor"]
        ok = ratio <= TARGET_RATIO
        failed |= not ok
        results["servers"][label] = {**wall, "cpu": cpu, "ratio": ratio, "pass": ok, "samples": samples}
        verdict = "PASS" if ok else "FAIL"
        shown = {client: f"{wall[client]:.2f} ({cpu[client]:.2f})" for client in wall}
        print(
            f"{label:<16}{shown['floor']:>16}{shown['mcpwire']:>18}{ratio:>7.2f}x"
            f"{cpu['mcpwire'] / cpu['floor']:>7.2f}x  {verdict}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
