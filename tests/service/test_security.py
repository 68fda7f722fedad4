"""Security of the service: the token, Host and Origin checks, CORS, body limits, rate limits,
and server text in log lines."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
import trio
from _harness import demo_entry, running_service, write_config

from mcpwire.service.cli import SafeFormatter
from mcpwire.service.events import EventHub
from mcpwire.service.middleware import RateLimiter, TraceFilter
from mcpwire.service.settings import Secret, Settings, SettingsError, read_token

TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "mcp.json", {"demo": demo_entry()})


def test_a_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(
        SettingsError,
        match=r"^refusing to listen on 0\.0\.0\.0: a non-loopback address needs a token \(set \$MCPWIRE_TOKEN or "
        r"pass --token-file FILE\), or listen on 127\.0\.0\.1$",
    ):
        Settings(host="0.0.0.0").check()
    Settings(host="0.0.0.0", token=Secret(TOKEN)).check()
    for loopback in ("127.0.0.1", "localhost", "::1", "127.0.0.2"):
        Settings(host=loopback).check()


def test_tokens_are_read_checked_and_never_shown(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text(TOKEN + "\nsecond line ignored\n")
    secret = read_token(str(file), {})
    assert secret is not None and secret.matches(TOKEN) and not secret.matches(TOKEN + "x")
    assert TOKEN not in repr(secret) and TOKEN not in str(Settings(token=secret))
    assert read_token(None, {"MCPWIRE_TOKEN": TOKEN}) is not None
    assert read_token(None, {}) is None
    with pytest.raises(SettingsError, match=r"^\$MCPWIRE_TOKEN: the token must be at least 16 characters$"):
        read_token(None, {"MCPWIRE_TOKEN": "short"})
    with pytest.raises(SettingsError, match=r"^--token-file /nonexistent: cannot read it \(FileNotFoundError\)$"):
        read_token("/nonexistent", {})


async def test_the_token_guards_everything_but_the_probes(db: str, config: Path) -> None:
    settings = Settings(port=0, token=Secret(TOKEN), rate_limit=0)
    async with running_service(db, config, settings=settings) as svc:
        c = svc.client
        for method, path in (("GET", "/api/v1/servers"), ("GET", "/metrics"), ("POST", "/mcp"), ("GET", "/events")):
            reply = await c.request(method, path)
            assert reply.status_code == 401, path
            assert reply.headers["www-authenticate"] == 'Bearer realm="mcpwire"'
            assert reply.json()["detail"] == (
                "this endpoint needs a token as 'Authorization: Bearer ...'; got no token"
            )
        wrong = await c.get("/api/v1/servers", headers={"Authorization": "Bearer " + TOKEN[:-1] + "X"})
        assert wrong.status_code == 401 and wrong.json()["detail"].endswith("got a token it does not accept")
        assert TOKEN not in wrong.text
        ok = await c.get("/api/v1/servers", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 200
        assert (await c.get("/healthz")).status_code == 200
        assert (await c.get("/readyz")).status_code == 200
        assert (await c.get("/api/v1/openapi.json")).status_code == 200


async def test_host_and_origin_checks(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        c = svc.client
        port = svc.url.rsplit(":", 1)[1]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
            assert (await c.get("/api/v1/servers", headers={"Host": host})).status_code == 200, host
        rebound = await c.get("/api/v1/servers", headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 403
        assert rebound.json()["detail"] == (
            f"the Host header 'attacker.example:{port}' is not allowed here (DNS rebinding protection)"
        )
        cross = await c.post("/api/v1/tools/demo__echo/call", json={}, headers={"Origin": "https://evil.example"})
        assert cross.status_code == 403
        assert cross.json()["detail"] == "requests from the origin 'https://evil.example' are not allowed"
        assert "access-control-allow-origin" not in cross.headers
        same = await c.get("/api/v1/servers", headers={"Origin": f"http://127.0.0.1:{port}"})
        assert same.status_code == 200 and "access-control-allow-origin" not in same.headers
        assert (await c.get("/api/v1/servers", headers={"Origin": "null"})).status_code == 403
        preflight = await c.options(
            "/api/v1/servers", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"}
        )
        assert preflight.status_code == 403


async def test_cors_only_for_configured_origins(db: str, config: Path) -> None:
    settings = Settings(port=0, cors_origins=("https://console.example",), rate_limit=0)
    async with running_service(db, config, settings=settings) as svc:
        c = svc.client
        preflight = await c.options(
            "/api/v1/servers",
            headers={"Origin": "https://console.example", "Access-Control-Request-Method": "POST"},
        )
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "https://console.example"
        assert "authorization" in preflight.headers["access-control-allow-headers"]
        reply = await c.get("/api/v1/servers", headers={"Origin": "https://console.example"})
        assert reply.status_code == 200
        assert reply.headers["access-control-allow-origin"] == "https://console.example"
        assert "x-trace-id" in reply.headers["access-control-expose-headers"]
        assert (await c.get("/api/v1/servers", headers={"Origin": "https://other.example"})).status_code == 403


async def test_body_limits(db: str, config: Path) -> None:
    settings = Settings(port=0, max_body_bytes=1000, rate_limit=0)
    async with running_service(db, config, settings=settings) as svc:
        c = svc.client
        big = {"arguments": {"text": "x" * 2000}}
        reply = await c.post("/api/v1/tools/demo__echo/call", json=big)
        assert reply.status_code == 413
        assert reply.json()["detail"] == "the request body is larger than 1000 bytes"

        async def chunks() -> object:
            for _ in range(5):
                yield b"x" * 400

        chunked = await c.post(
            "/api/v1/tools/demo__echo/call", content=chunks(), headers={"content-type": "application/json"}
        )
        assert chunked.status_code == 413
        assert (await c.post("/api/v1/tools/demo__echo/call", json={"arguments": {"text": "ok"}})).status_code == 200


async def test_rate_limit_on_calls(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=0.5, rate_burst=3)
    async with running_service(db, config, settings=settings) as svc:
        c = svc.client
        codes = [
            (await c.post("/api/v1/tools/demo__echo/call", json={"arguments": {"text": "x"}})).status_code
            for _ in range(4)
        ]
        assert codes == [200, 200, 200, 429]
        limited = await c.post("/api/v1/tools/demo__echo/call", json={})
        assert limited.status_code == 429 and limited.headers["retry-after"] == "2"
        assert limited.json()["detail"] == "too many calls from 127.0.0.1; retry in 2 s"
        assert (await c.get("/api/v1/servers")).status_code == 200  # reads are not calls
        assert "mcpwire_rate_limited_total 2" in (await c.get("/metrics")).text


def test_rate_limiter_refills_and_bounds_its_memory() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=2, clients=3, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(3)] == [None, None, 0.5]
    now[0] = 0.5
    assert limiter.take("a") is None and limiter.take("a") == 0.5
    for client in "bcde":
        limiter.take(client)
    assert len(limiter._buckets) == 3 and "a" not in limiter._buckets
    assert RateLimiter(rate=0, burst=1).take("x") is None


async def test_a_slow_events_client_is_dropped_not_buffered() -> None:
    hub = EventHub(kept=5, buffer=3)
    sub, missed = hub.subscribe()
    assert missed == []
    for i in range(4):
        hub.publish("status", {"i": i})
    assert sub.dropped and hub.dropped_clients == 1 and hub.subscribers == 0
    got = []
    with pytest.raises(trio.EndOfChannel):
        while True:
            event = await sub.receive(1)
            assert event is not None
            got.append(event.data["i"])
    assert got == [0, 1, 2]
    # reconnecting with the last id seen gets the rest from the ring
    again, missed = hub.subscribe(f"{hub.boot}-3")
    assert [e.data["i"] for e in missed] == [3]
    # an id older than the ring gets a reset first
    for i in range(4, 12):
        hub.publish("status", {"i": i})
    _, missed = hub.subscribe(f"{hub.boot}-1")
    assert missed[0].kind == "reset" and [e.data["i"] for e in missed[1:]] == [7, 8, 9, 10, 11]
    again.close()


def test_log_lines_show_server_text_escaped() -> None:
    record = logging.LogRecord(
        "mcpwire.host", logging.WARNING, __file__, 1, "%s: error: %s", ("srv", "boom\x1b[2J\r\nFAKE LINE\u202e"), None
    )
    TraceFilter().filter(record)
    line = SafeFormatter("%(name)s [%(trace_id)s] %(message)s").format(record)
    assert line == "mcpwire.host [-] srv: error: boom\\x1b[2J\\x0d\\x0aFAKE LINE\\u202e"


async def test_requests_from_a_server_never_reach_a_log_line_raw(
    db: str, config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_service(db, config) as svc:
        with caplog.at_level(logging.INFO, logger="mcpwire.service.access"):
            await svc.client.get("/api/v1/servers/%1b%5b31mred%0d%0aforged")
            # the line is written once the response is sent; the next request on the connection
            # starts after it
            await svc.client.get("/healthz")
    lines = [r.getMessage() for r in caplog.records if r.name == "mcpwire.service.access"]
    assert any('"GET /api/v1/servers/\\x1b[31mred\\x0d\\x0aforged" 404' in line for line in lines), lines


async def test_token_is_never_logged(db: str, config: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(port=0, token=Secret(TOKEN), rate_limit=0)
    with caplog.at_level(logging.DEBUG):
        async with running_service(db, config, settings=settings, headers={"Authorization": f"Bearer {TOKEN}"}) as svc:
            await svc.client.get("/api/v1/servers")
            await svc.client.get("/api/v1/servers", headers={"Authorization": "Bearer wrong-but-long-enough"})
    assert caplog.records and not [r for r in caplog.records if TOKEN in r.getMessage()]
    assert not [r for r in caplog.records if "wrong-but-long-enough" in r.getMessage()]


def test_httpx_is_what_the_tests_speak() -> None:
    assert httpx.__version__


async def test_the_trace_id_is_in_the_log_line_of_the_call(db: str, config: Path) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.INFO)
    handler.addFilter(TraceFilter())
    host_log = logging.getLogger("mcpwire.host")
    old_level = host_log.level
    host_log.addHandler(handler)
    host_log.setLevel(logging.INFO)
    try:
        async with running_service(db, config) as svc:
            reply = await svc.client.post(
                "/api/v1/tools/demo__echo/call",
                json={"arguments": {"text": "x"}},
                headers={"X-Trace-ID": "log-trace-1"},
            )
            assert reply.status_code == 200
    finally:
        host_log.removeHandler(handler)
        host_log.setLevel(old_level)
    lines = [(r.getMessage(), getattr(r, "trace_id", None)) for r in records]
    assert ("demo: echo -> ok", "log-trace-1") in lines, lines
