"""``mcpwire serve`` exposed: attacked by slow clients, asked odd questions, behind a proxy, over
TLS. Real service processes, both HTTP servers; the attackers and the clients are real sockets."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import httpx
import pytest
import trio
import trustme
from _harness import demo_entry, write_config
from _process import READY_LINE, ServeProcess, clean_env, start_serve

from mcpwire.server.http import HTTP_SERVERS

TOKEN = "exposure-test-token-0123456789"
FIXTURES = Path(__file__).with_name("fixtures")
AUTH = f"Authorization: Bearer {TOKEN}"
#: a call (it counts against the rate limit): reading the demo server's resource
READ = "/api/v1/resources/read?uri=demo://static/hello"

pytestmark = pytest.mark.slow


@contextmanager
def serving(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[ServeProcess]:
    config = write_config(tmp_path / "mcp.json", {"demo": demo_entry()})
    argv = ["--config", str(config), "--port", "0", "--db", f"sqlite:///{tmp_path / 'service.db'}", *args]
    serve = start_serve(argv, cwd=tmp_path, env=clean_env(tmp_path, MCPWIRE_TOKEN=TOKEN, **(env or {})))
    try:
        serve.read_until(READY_LINE, timeout=90)
        yield serve
    finally:
        serve.kill()


def port_of(serve: ServeProcess) -> int:
    return int(serve.url.rsplit(":", 1)[1])


async def connect_from(source: str, port: int) -> trio.SocketStream:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    await sock.bind((source, 0))
    await sock.connect(("127.0.0.1", port))
    return trio.SocketStream(sock)


async def exchange(stream: trio.abc.Stream, raw: bytes) -> bytes:
    """Sends ``raw``, reads until the server closes (bounded)."""
    await stream.send_all(raw)
    data = b""
    with trio.move_on_after(10):
        while chunk := await stream.receive_some(65536):
            data += chunk
    return data


@pytest.mark.parametrize("kind", HTTP_SERVERS)
async def test_a_thousand_idle_and_a_thousand_trickling_connections_leave_others_served_at_once(
    tmp_path: Path, kind: str
) -> None:
    with serving(tmp_path, "--http-server", kind) as serve:
        port = port_of(serve)
        request = f"GET /api/v1/servers HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{AUTH}\r\nConnection: close\r\n\r\n"
        attacker = [sys.executable, str(FIXTURES / "slow_clients.py"), str(port), "1000", "1000", "20"]
        latencies: list[float] = []
        async with trio.open_nursery() as nursery:
            # the attack from 127.0.0.1 in a process of its own; the client measured from 127.0.0.2
            attack = await nursery.start(partial(trio.run_process, attacker, stdout=subprocess.PIPE, check=False))
            assert attack.stdout is not None
            with trio.fail_after(120):
                assert (await attack.stdout.receive_some(100)).startswith(b"attacking")
            for _ in range(20):
                start = time.perf_counter()
                stream = await connect_from("127.0.0.2", port)
                with trio.fail_after(10):
                    reply = await exchange(stream, request.encode())
                latencies.append(time.perf_counter() - start)
                await stream.aclose()
                assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
                await trio.sleep(0.3)
            with trio.fail_after(60):
                await attack.wait()
        assert max(latencies) < 1.0, latencies


@pytest.mark.parametrize("kind", HTTP_SERVERS)
async def test_options_asterisk_is_answered_without_an_error(tmp_path: Path, kind: str) -> None:
    with serving(tmp_path, "--http-server", kind, "-v") as serve:
        port = port_of(serve)
        stream = await connect_from("127.0.0.1", port)
        reply = await exchange(
            stream, f"OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        assert reply.startswith(b"HTTP/1.1 204"), reply
        assert b"\r\nallow: GET, HEAD, POST, PATCH, DELETE, OPTIONS\r\n" in reply
        stream = await connect_from("127.0.0.1", port)
        reply = await exchange(
            stream, f"GET * HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        assert reply.startswith(b"HTTP/1.1 400"), reply
        serve.stop()
        errors = serve.proc.stderr.read().decode() if serve.proc.stderr else ""
        assert "Traceback" not in errors
        assert " 500 " not in errors


def _session_cookie(url: str, headers: dict[str, str], transport: httpx.HTTPTransport) -> str:
    with httpx.Client(base_url=url, transport=transport, headers=headers) as client:
        response = client.post("/login", data={"token": TOKEN, "next": "/"}, follow_redirects=False)
        assert response.status_code == 303, response.text
        return response.headers["set-cookie"]


def test_behind_a_trusted_proxy_the_client_and_scheme_are_the_proxys_word(tmp_path: Path) -> None:
    args = ("--forwarded-allow-ips", "127.0.0.1", "--rate-limit", "0.001", "--rate-burst", "1")
    with serving(tmp_path, *args) as serve:
        api = {"Authorization": f"Bearer {TOKEN}"}
        via_proxy = httpx.HTTPTransport(local_address="127.0.0.1")
        direct = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(base_url=serve.url, transport=via_proxy, headers=api) as proxy:
            # one call each per forwarded client: their own buckets
            for client in ("203.0.113.1", "203.0.113.2"):
                assert proxy.get(READ, headers={"X-Forwarded-For": client}).status_code == 200
            assert proxy.get(READ, headers={"X-Forwarded-For": "203.0.113.1"}).status_code == 429
        with httpx.Client(base_url=serve.url, transport=direct, headers=api) as forger:
            # not a trusted proxy: its forwarding headers are ignored; its own address is limited
            assert forger.get(READ, headers={"X-Forwarded-For": "198.51.100.1"}).status_code == 200
            assert forger.get(READ, headers={"X-Forwarded-For": "198.51.100.2"}).status_code == 429
        secure = _session_cookie(serve.url, {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.3"}, via_proxy)
        assert "secure" in secure.lower()
        plain = _session_cookie(serve.url, {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.3"}, direct)
        assert "secure" not in plain.lower()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.mark.parametrize("kind", HTTP_SERVERS)
def test_the_gateway_over_tls_is_verified_by_the_client_and_a_wrong_name_refused(
    tmp_path: Path, kind: str, ca: trustme.CA
) -> None:
    cert = ca.issue_cert("localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with serving(tmp_path, "--http-server", kind, "--certfile", str(tmp_path / "server.pem")) as serve:
        assert serve.url.startswith("https://127.0.0.1:")
        port = port_of(serve)
        env = {**clean_env(tmp_path, MCP_TOKEN=TOKEN, SSL_CERT_FILE=str(tmp_path / "ca.pem"))}
        tools = [sys.executable, "-m", "mcpwire", "tools", "--bearer-env", "MCP_TOKEN"]
        good = subprocess.run(
            [*tools, f"https://localhost:{port}/mcp"], env=env, capture_output=True, text=True, timeout=120
        )
        assert good.returncode == 0, good.stderr
        assert "demo__echo" in good.stdout
        wrong = subprocess.run(
            [*tools, f"https://127.0.0.1:{port}/mcp"], env=env, capture_output=True, text=True, timeout=120
        )
        assert wrong.returncode != 0
        assert "certificate" in wrong.stderr.lower() and "127.0.0.1" in wrong.stderr, wrong.stderr
        context = ssl.create_default_context()
        ca.configure_trust(context)
        with httpx.Client(verify=context, http2=True) as client:
            response = client.get(f"https://localhost:{port}/healthz")
            assert response.status_code == 200
            assert response.http_version == ("HTTP/2" if kind == "hypercorn" else "HTTP/1.1")


def test_a_certificate_that_cannot_be_used_is_a_one_line_refusal(tmp_path: Path, ca: trustme.CA) -> None:
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    cases = {
        ("--certfile", "nope.pem"): "cannot read the TLS certificate or key nope.pem: no such file",
        ("--certfile", "ca.pem"): (
            "cannot load the TLS certificate ca.pem: not a PEM certificate chain with its matching private key "
            "(give the key with --keyfile if it is in a file of its own)"
        ),
        ("--keyfile", "ca.pem"): "--keyfile needs a --certfile",
        ("--forwarded-allow-ips", "10.0.0.0/8,bogus"): (
            "--forwarded-allow-ips: 'bogus' is not an IP address or network (e.g. 10.0.0.0/8, ::1, *)"
        ),
        ("--max-connections-per-client", "0"): "--max-connections-per-client must be a positive whole number, not 0",
    }
    for args, message in cases.items():
        done = subprocess.run(
            [sys.executable, "-m", "mcpwire", "serve", "--port", "0", *args],
            cwd=tmp_path,
            env=clean_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert (done.returncode, done.stderr) == (2, f"mcpwire serve: {message}\n"), args
