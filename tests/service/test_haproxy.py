"""Two ``mcpwire serve`` replicas on one PostgreSQL behind HAProxy, configured as docs/deploy.md
says (docs/deploy/haproxy.cfg, addresses replaced): the official Python SDK through the balancer
in both eras, changes made on one replica seen through the other, an approval decided on one
releasing a call waiting on the other, and a replica killed under load losing nothing it
acknowledged while clients carry on through the other."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from _harness import demo_entry, write_config
from _process import READY_LINE, ServeProcess, clean_env, start_serve

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real"))
from _paths import PY_BIN, require

pytestmark = [pytest.mark.slow, pytest.mark.real]

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).with_name("fixtures")
TOKEN = "haproxy-admin-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "load", "version": "1"},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _replica(tmp_path: Path, name: str, config: Path, db: str) -> ServeProcess:
    folder = tmp_path / name
    folder.mkdir()
    args = [
        "--config",
        str(config),
        "--port",
        "0",
        "--db",
        db,
        "--rate-limit",
        "0",
        "--forwarded-allow-ips",
        "127.0.0.1",
    ]
    serve = start_serve(args, cwd=folder, env=clean_env(folder, MCPWIRE_TOKEN=TOKEN))
    serve.read_until(READY_LINE, timeout=120)
    return serve


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@contextmanager
def balancer(tmp_path: Path, a: ServeProcess, b: ServeProcess) -> Iterator[str]:
    """HAProxy with the documented configuration in front of ``a`` and ``b``; its URL."""
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        pytest.skip("haproxy is not installed (tests/install_peers.sh installs it)")
    port = _free_port()
    text = (REPO / "docs" / "deploy" / "haproxy.cfg").read_text()
    text = text.replace("bind 127.0.0.1:8080", f"bind 127.0.0.1:{port}")
    text = text.replace("127.0.0.1:8751", f"127.0.0.1:{_port(a.url)}").replace(
        "127.0.0.1:8752", f"127.0.0.1:{_port(b.url)}"
    )
    config = tmp_path / "haproxy.cfg"
    config.write_text(text)
    checked = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    proc = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # both replicas are taken in after two good health checks each
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "HAProxy never answered"
            time.sleep(0.1)
        time.sleep(1.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _mcp_posts(url: str) -> int:
    """How many POSTs to /mcp a replica answered (its own metrics)."""
    text = httpx.get(f"{url}/metrics", headers=AUTH, timeout=10).text
    total = 0
    for line in text.splitlines():
        if line.startswith('mcpwire_http_requests_total{route="/mcp",method="POST"'):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def _sdk(url: str, mode: str, count: int) -> dict[str, Any]:
    python = require(PY_BIN / "python")
    argv = [python, str(FIXTURES / "sdk_calls.py"), f"{url}/mcp", mode, TOKEN, "demo__echo", str(count)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_replicas_behind_haproxy(tmp_path: Path, postgres: Any) -> None:
    db = postgres.create_database()
    entry = {**demo_entry(), "policy": {"tools": {"add": {"approval": "ask"}}}}
    config = write_config(tmp_path / "mcp.json", {"demo": entry})
    a = _replica(tmp_path, "a", config, db)
    b = _replica(tmp_path, "b", config, db)
    try:
        with balancer(tmp_path, a, b) as url:
            # 2026-07-28: stateless, round robin: both replicas answer the one client
            before = (_mcp_posts(a.url), _mcp_posts(b.url))
            assert _sdk(url, "2026-07-28", 40) == {"right": 40, "wrong": None}
            after = (_mcp_posts(a.url), _mcp_posts(b.url))
            assert after[0] > before[0] and after[1] > before[1], (before, after)
            # legacy: one session, kept on the replica that opened it
            assert _sdk(url, "legacy", 40) == {"right": 40, "wrong": None}
            _changes_cross_replicas(a, b)
            _approval_crosses_replicas(a, b)
            trio.run(_kill_under_load, url, a, b)
    finally:
        a.kill()
        b.kill()


def _changes_cross_replicas(a: ServeProcess, b: ServeProcess) -> None:
    added = httpx.post(f"{a.url}/api/v1/servers", json={**demo_entry(), "name": "extra"}, headers=AUTH, timeout=30)
    assert added.status_code == 201, added.text
    start = time.monotonic()
    while "extra" not in [s["name"] for s in httpx.get(f"{b.url}/api/v1/servers", headers=AUTH).json()["items"]]:
        assert time.monotonic() - start < 2.0, "a server added on A was not listed on B within 2 s"
        time.sleep(0.05)
    deadline = time.monotonic() + 60
    while True:
        called = httpx.post(
            f"{b.url}/api/v1/tools/extra__echo/call", json={"arguments": {"text": "via b"}}, headers=AUTH, timeout=30
        )
        if called.status_code == 200:
            assert called.json()["text"] == "via b"
            break
        assert time.monotonic() < deadline, called.text
        time.sleep(0.2)


def _approval_crosses_replicas(a: ServeProcess, b: ServeProcess) -> None:
    asked = httpx.post(f"{a.url}/api/v1/tools/demo__add/call", json={"arguments": {"a": 20, "b": 22}}, headers=AUTH)
    assert asked.status_code == 202, asked.text
    approval, location = asked.json()["approvalId"], asked.json()["location"]
    decided = httpx.post(f"{b.url}/api/v1/approvals/{approval}", json={"decision": "approve"}, headers=AUTH)
    assert decided.status_code == 200, decided.text
    waited = httpx.get(f"{a.url}{location}", params={"wait": 30}, headers=AUTH, timeout=60)
    assert waited.status_code == 200 and waited.json()["state"] == "approved", waited.text


async def _kill_under_load(url: str, a: ServeProcess, b: ServeProcess) -> None:
    acked: set[str] = set()
    after_kill: list[bool] = []
    killed = trio.Event()
    headers = {**AUTH, "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/call", "Mcp-Name": "demo__echo"}  # fmt: skip

    async def caller(worker: int, client: httpx.AsyncClient) -> None:
        n = 0
        while True:
            trace = f"load-{worker}-{n}"
            n += 1
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                    "params": {"name": "demo__echo", "arguments": {"text": trace}, "_meta": MODERN_META}}  # fmt: skip
            try:
                reply = await client.post(f"{url}/mcp", json=body, headers={**headers, "X-Trace-ID": trace})
                ok = reply.status_code == 200 and "result" in reply.json()
            except (httpx.HTTPError, ValueError):
                ok = False
            if ok:
                acked.add(trace)
            if killed.is_set():
                after_kill.append(ok)

    limits = httpx.Limits(max_connections=16)
    async with httpx.AsyncClient(timeout=10, limits=limits) as client, trio.open_nursery() as nursery:
        for worker in range(8):
            nursery.start_soon(caller, worker, client)
        await trio.sleep(3)
        a.proc.send_signal(signal.SIGKILL)
        killed.set()
        await trio.sleep(6)
        nursery.cancel_scope.cancel()
    assert a.proc.wait(10) == -signal.SIGKILL
    # the clients carried on through B: the calls of the last seconds all succeeded
    assert len(after_kill) > 20 and all(after_kill[-20:]), after_kill[-40:]
    # nothing acknowledged was lost: every answered call has its audit record (read through B)
    traces: set[str] = set()
    cursor = None
    async with httpx.AsyncClient(base_url=b.url, headers=AUTH, timeout=30) as reader:
        while True:
            page = (
                await reader.get("/api/v1/audit", params={"limit": 500, **({"cursor": cursor} if cursor else {})})
            ).json()
            traces |= {r["traceId"] for r in page["items"] if r["kind"] == "tool"}
            cursor = page["nextCursor"]
            if cursor is None:
                break
    missing = acked - traces
    assert len(acked) > 50 and not missing, (len(acked), sorted(missing)[:5])
