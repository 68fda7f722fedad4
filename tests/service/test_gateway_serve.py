"""The gateway as ``mcpwire serve`` serves it: at ``/mcp`` behind the service's middleware (both
eras, the caller's trace id reaching the audit record, the service's body bound and Host check),
and on stdin/stdout with ``mcpwire serve --stdio`` (both eras) for desktop clients' config files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from _harness import demo_entry, running_service, write_config
from _process import clean_env

import mcpwire
from mcpwire.protocol.versions import Era
from mcpwire.service.settings import Settings
from mcpwire.transports import HttpServer, StdioServer

ERAS = [Era.LEGACY, Era.MODERN]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'service.db'}"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "mcp.json", {"demo": demo_entry(), "legacy": demo_entry("--era", "legacy")})


@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_the_service_serves_the_gateway_at_mcp(db: str, config: Path, era: Era) -> None:
    trace = f"gateway-trace-{era.value}"
    async with running_service(db, config) as svc:
        endpoint = HttpServer(url=f"{svc.url}/mcp", headers={"X-Trace-ID": trace})
        with trio.fail_after(60):
            async with mcpwire.open_client(endpoint, era=era.value, era_cache=False) as client:
                assert client.server_info is not None and client.server_info.name == "mcpwire-gateway"
                names = {t.name for t in await client.list_tools()}
                assert {"demo__echo", "legacy__echo"} <= names
                assert names == {t.name for t in svc.host.tools()}
                assert (await client.call_tool("legacy__echo", {"text": "through /mcp"})).text() == "through /mcp"
        audit = (await svc.client.get("/api/v1/audit", params={"trace_id": trace})).json()["items"]
    [record] = [r for r in audit if r["tool"] == "echo"]
    assert (record["server"], record["outcome"], record["traceId"]) == ("legacy", "ok", trace)
    assert record["caller"] == "mcp 127.0.0.1 (mcpwire)"


async def test_mcp_is_behind_the_services_middleware(db: str, config: Path) -> None:
    settings = Settings(port=0, rate_limit=0, max_body_bytes=4096)
    async with running_service(db, config, settings=settings) as svc:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        big = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "' + b"x" * 8192 + b'"}}'
        too_big = await svc.client.post("/mcp", content=big, headers=headers)
        assert too_big.status_code == 413
        rebound = await svc.client.post(
            "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={**headers, "Host": "evil.example"}
        )
        assert rebound.status_code == 403
        assert "X-Trace-ID" in too_big.headers

        async def chunks() -> object:  # no Content-Length: the body is counted as it is read
            for _ in range(3):
                yield b"x" * 2048

        chunked = await svc.client.post("/mcp", content=chunks(), headers=headers)
        assert chunked.status_code == 413
        metrics = (await svc.client.get("/metrics")).text
        assert 'mcpwire_http_requests_total{route="/mcp",method="POST",code="413"} 2' in metrics


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS, ids=lambda e: e.value)
async def test_mcpwire_serve_stdio_serves_the_gateway(tmp_path: Path, config: Path, era: Era) -> None:
    serve = StdioServer(
        command=sys.executable,
        args=("-m", "mcpwire", "serve", "--stdio", "--config", str(config), "--db", f"sqlite:///{tmp_path / 's.db'}"),
        env=clean_env(tmp_path),
        cwd=str(tmp_path),
        name="serve",
    )
    with trio.fail_after(120):
        async with mcpwire.open_client(serve, era=era.value, era_cache=False, timeout=60) as client:
            assert client.server_info is not None and client.server_info.name == "mcpwire-gateway"
            # the gateway answers before its backends are up: their tools come as they connect
            names = {t.name for t in await client.list_tools()}
            while not {"demo__echo", "legacy__echo", "demo__add"} <= names:
                await trio.sleep(0.2)
                names = {t.name for t in await client.list_tools()}
            assert (await client.call_tool("demo__echo", {"text": "over stdio"})).text() == "over stdio"


async def test_clients_of_the_2024_11_05_http_sse_transport_connect_at_sse(db: str, config: Path) -> None:
    async with running_service(db, config) as svc:
        endpoint = HttpServer(url=f"{svc.url}/sse", transport="sse")
        with trio.fail_after(60):
            async with mcpwire.open_client(endpoint, era_cache=False) as client:
                assert client.server_info is not None and client.server_info.name == "mcpwire-gateway"
                assert "demo__echo" in {t.name for t in await client.list_tools()}
                assert (await client.call_tool("demo__echo", {"text": "over sse"})).text() == "over sse"
        refused = await svc.client.post("/sse", json={})
        assert refused.status_code == 405
        metrics = (await svc.client.get("/metrics")).text
        assert 'route="/sse",method="GET",code="200"' in metrics
        assert 'route="/messages",method="POST",code="202"' in metrics
