"""Integration tests over HTTP against real servers: server-everything in ``streamableHttp``
and ``sse`` modes (npm), and a server built on the official Python SDK 2.x, which speaks both
eras over Streamable HTTP. Every server listens on 127.0.0.1 on a free port; every process is
stopped at the end of its fixture.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from _paths import NPM_BIN, PY_BIN
from _paths import require as _require

import mcpwire
from mcpwire import HttpServer
from mcpwire.protocol.versions import Era

pytestmark = pytest.mark.real

FIXTURES = Path(__file__).parent / "fixtures"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


def _serve(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[int]:
    proc = subprocess.Popen(
        argv, env={**os.environ, "PORT": str(port), **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_listening(port, proc)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def everything_http() -> Iterator[int]:
    yield from _serve([_require(NPM_BIN / "mcp-server-everything"), "streamableHttp"], _free_port())


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[int]:
    yield from _serve([_require(NPM_BIN / "mcp-server-everything"), "sse"], _free_port())


@pytest.fixture(scope="module", params=["sse-answers", "json-answers"])
def sdk_http(request: pytest.FixtureRequest) -> Iterator[int]:
    port = _free_port()
    flags = ["--json-response"] if request.param == "json-answers" else []
    yield from _serve([_require(PY_BIN / "python"), str(FIXTURES / "sdk_http_server.py"), str(port), *flags], port)


async def _exercise_everything(client: mcpwire.Client) -> None:
    tools = await client.list_tools()
    assert "echo" in {t.name for t in tools}
    assert (await client.call_tool("echo", {"message": "over http"})).text() == "Echo: over http"
    seen: list[mcpwire.Progress] = []
    await client.call_tool("trigger-long-running-operation", {"duration": 0.3, "steps": 3}, on_progress=seen.append)
    assert [p.progress for p in seen] == [1, 2, 3]
    resources = await client.list_resources()
    read = await client.read_resource(resources[0].uri)
    assert read.contents[0].uri == resources[0].uri
    await client.ping()
    assert client.statistics().pending == 0


async def test_everything_streamable_http(everything_http: int) -> None:
    url = f"http://127.0.0.1:{everything_http}/mcp"
    with trio.fail_after(30):
        async with mcpwire.open_client(url, era_cache=False) as client:
            assert client.era is Era.LEGACY
            assert client.protocol_version == "2025-11-25"
            await _exercise_everything(client)


async def test_everything_legacy_sse_is_detected(everything_sse: int) -> None:
    """LC-46: POST fails (404), so the client falls back to GET + the endpoint event."""
    url = f"http://127.0.0.1:{everything_sse}/sse"
    with trio.fail_after(30):
        async with mcpwire.open_client(url, era_cache=False) as client:
            assert client.era is Era.LEGACY
            await _exercise_everything(client)


async def test_everything_forced_sse_transport(everything_sse: int) -> None:
    spec = HttpServer(url=f"http://127.0.0.1:{everything_sse}/sse", transport="sse")
    with trio.fail_after(30):
        async with mcpwire.open_client(spec, era_cache=False) as client:
            assert (await client.call_tool("echo", {"message": "x"})).text() == "Echo: x"


@pytest.mark.parametrize("era", [Era.LEGACY, Era.MODERN])
async def test_sdk_server_both_eras(sdk_http: int, era: Era) -> None:
    url = f"http://127.0.0.1:{sdk_http}/mcp"
    with trio.fail_after(30):
        async with mcpwire.open_client(url, era=era.value, era_cache=False) as client:
            assert client.era is era
            assert client.server_info is not None and client.server_info.name == "sdk-http-fixture"
            assert {t.name for t in await client.list_tools()} == {"echo", "add"}
            result = await client.call_tool("add", {"a": 2, "b": 3})
            assert result.structured_content == {"result": 5}
            assert (await client.read_resource("fixture://hello")).text() == "hello from the SDK"
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert prompt.messages[0].content["text"] == "Hello, Ada!"


async def test_sdk_server_auto_detects_modern(sdk_http: int) -> None:
    url = f"http://127.0.0.1:{sdk_http}/mcp"
    with trio.fail_after(30):
        async with mcpwire.open_client(url, era_cache=False) as client:
            assert client.era is Era.MODERN
            assert client.protocol_version == "2026-07-28"


async def test_cancelling_the_whole_block_leaves_no_socket(everything_http: int) -> None:
    """Structured concurrency over HTTP: the block is cancelled from outside while the legacy
    GET stream is open and a call has just finished. The session is still DELETEd, and no
    socket is left for the garbage collector (it would say so with a ResourceWarning)."""
    import gc
    import warnings

    url = f"http://127.0.0.1:{everything_http}/mcp"

    async def consume(client: mcpwire.Client) -> None:
        async for _ in client.notifications():
            pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with trio.fail_after(30):
            with trio.CancelScope() as scope:
                async with mcpwire.open_client(url, era="legacy", era_cache=False) as client:
                    assert (await client.call_tool("echo", {"message": "x"})).text().endswith("x")
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(consume, client)
                        await trio.sleep(0.2)
                        scope.cancel()
            assert scope.cancelled_caught
        gc.collect()
    leaks = [str(w.message) for w in caught if "unclosed" in str(w.message) and "socket" in str(w.message)]
    assert leaks == []
