"""The bundled servers survive hostile input (docs/fuzz-findings.md F-3) and serve HTTP for
real clients: mcpwire's own client over Streamable HTTP in both eras."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
import trio
from _targets import http_server, reference_argv

import mcpwire
from mcpwire.protocol.versions import Era

DEEP = 100_000  # past the recursion limit of json.loads on every Python (3.12 reads 1000 levels)


def _deep_ping(depth: int) -> bytes:
    params = "[" * depth + "]" * depth
    return f'{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":{params}}}}}\n'.encode()


@pytest.mark.parametrize("module", ["mcpwire.testing.demo_server", "mcpwire.testing.everything"])
def test_a_deeply_nested_request_is_a_parse_error_not_a_crash(module: str) -> None:
    """F-3: json.loads raises RecursionError past the recursion limit; the server must answer."""
    lines = _deep_ping(DEEP) + b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
    proc = subprocess.run([sys.executable, "-m", module], input=lines, capture_output=True, timeout=30)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert answers[0]["id"] is None
    assert answers[0]["error"]["code"] == -32700
    assert answers[0]["error"]["message"] == "Parse error: the JSON text is nested too deeply"
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}  # still serving
    assert proc.returncode == 0, proc.stderr.decode()[-500:]
    assert b"RecursionError" not in proc.stderr


async def test_a_deeply_nested_post_is_400_with_a_parse_error() -> None:
    async with http_server(reference_argv()) as url, httpx.AsyncClient() as client:
        reply = await client.post(url, content=_deep_ping(DEEP), headers={"Content-Type": "application/json"})
        assert reply.status_code == 400
        assert reply.json()["error"]["code"] == -32700
        ping = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
        ping["params"] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        assert (await client.post(url, json=ping)).status_code == 200


@pytest.mark.parametrize("era", [Era.LEGACY, Era.MODERN])
async def test_mcpwire_client_over_http_in_both_eras(era: Era) -> None:
    async with http_server(reference_argv()) as url:
        with trio.fail_after(30):
            async with mcpwire.open_client(url, era=era.value, era_cache=False) as client:
                assert client.era is era
                tools = await client.list_tools()
                assert {"echo", "test_simple_text", "test_header_param"} <= {t.name for t in tools}
                assert (await client.call_tool("test_simple_text")).text() == (
                    "This is a simple text response for testing."
                )
                # a 2026-07-28 client mirrors the x-mcp-header argument; the server checks it
                assert (await client.call_tool("test_header_param", {"region": "eu west"})).text() == (
                    "region: eu west"
                )
                seen: list[mcpwire.Progress] = []
                await client.call_tool("slow", {"seconds": 0.2, "steps": 2}, on_progress=seen.append)
                assert [p.progress for p in seen] == [1, 2]
                read = await client.read_resource("test://static-text")
                assert read.contents[0].uri == "test://static-text"
