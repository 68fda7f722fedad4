"""Integration tests over HTTP against real servers: server-everything in ``streamableHttp``
and ``sse`` modes (npm), a server built on the official Python SDK 2.x, which speaks both eras
over Streamable HTTP, and mcpwire's own reference server (``python -m mcpwire.testing.everything
--http``), for subscriptions in both eras. Every server listens on 127.0.0.1 on a free port;
every process is stopped at the end of its fixture. Each connection is checked to leave no task
and no socket behind.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from _paths import FASTMCP_BIN, NPM_BIN, PROXY_BIN, PY_BIN, fastmcp_config
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


@pytest.fixture(scope="module")
def proxy_http() -> Iterator[int]:
    """mcp-proxy 0.13 (the Python SDK 1.x streamable HTTP transport) fronting server-everything."""
    port = _free_port()
    everything = _require(NPM_BIN / "mcp-server-everything")
    yield from _serve([_require(PROXY_BIN / "mcp-proxy"), "--port", str(port), "--", everything, "stdio"], port)


@pytest.fixture(scope="module")
def fastmcp_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """FastMCP 4.1.2's proxy for server-everything, over streamable HTTP."""
    port = _free_port()
    config = fastmcp_config(tmp_path_factory.mktemp("fastmcp"))
    argv = [_require(FASTMCP_BIN / "fastmcp"), "run", str(config), "--no-banner", "--transport", "http"]
    yield from _serve([*argv, "--port", str(port)], port)


@pytest.fixture(scope="module", params=["sse-answers", "json-answers"])
def sdk_http(request: pytest.FixtureRequest) -> Iterator[int]:
    port = _free_port()
    flags = ["--json-response"] if request.param == "json-answers" else []
    yield from _serve([_require(PY_BIN / "python"), str(FIXTURES / "sdk_http_server.py"), str(port), *flags], port)


@pytest.fixture(scope="module")
def reference_http() -> Iterator[str]:
    """mcpwire's reference server over HTTP; yields its base URL (``http://127.0.0.1:PORT``)."""
    argv = [sys.executable, "-u", "-m", "mcpwire.testing.everything", "--http", "127.0.0.1:0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode().strip()
        assert line.startswith("listening on "), line
        url = line.removeprefix("listening on ")
        assert url.endswith("/mcp"), url
        yield url.removesuffix("/mcp")
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _task_names() -> list[str]:
    """Every task of this run, by name (the tree under trio's root task)."""
    names: list[str] = []

    def walk(task: trio.lowlevel.Task) -> None:
        names.append(task.name)
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child)

    walk(trio.lowlevel.current_root_task())
    return sorted(names)


def _open_sockets() -> set[str] | None:
    """The sockets this process holds open (Linux: ``/proc/self/fd``; elsewhere ``None``)."""
    if not os.path.isdir("/proc/self/fd"):
        return None
    found: set[str] = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


@asynccontextmanager
async def _no_leftovers() -> AsyncIterator[None]:
    """Asserts that what runs inside leaves no task and no open socket behind (nor one for the
    garbage collector to find: it would say so with a ResourceWarning)."""
    import warnings

    tasks = _task_names()
    sockets = _open_sockets()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    assert _task_names() == tasks
    if sockets is not None:
        assert (_open_sockets() or set()) - sockets == set()
    assert [str(w.message) for w in caught if "unclosed" in str(w.message)] == []


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
        async with _no_leftovers(), mcpwire.open_client(url, era_cache=False) as client:
            assert client.era is Era.LEGACY
            assert client.protocol_version == "2025-11-25"
            await _exercise_everything(client)


async def test_everything_legacy_sse_is_detected(everything_sse: int) -> None:
    """LC-46: POST fails (404), so the client falls back to GET + the endpoint event."""
    url = f"http://127.0.0.1:{everything_sse}/sse"
    with trio.fail_after(30):
        async with _no_leftovers(), mcpwire.open_client(url, era_cache=False) as client:
            assert client.era is Era.LEGACY
            await _exercise_everything(client)


async def test_everything_forced_sse_transport(everything_sse: int) -> None:
    spec = HttpServer(url=f"http://127.0.0.1:{everything_sse}/sse", transport="sse")
    with trio.fail_after(30):
        async with _no_leftovers(), mcpwire.open_client(spec, era_cache=False) as client:
            assert (await client.call_tool("echo", {"message": "x"})).text() == "Echo: x"


@pytest.mark.parametrize("era", [Era.LEGACY, Era.MODERN])
async def test_sdk_server_both_eras(sdk_http: int, era: Era) -> None:
    url = f"http://127.0.0.1:{sdk_http}/mcp"
    with trio.fail_after(30):
        async with _no_leftovers(), mcpwire.open_client(url, era=era.value, era_cache=False) as client:
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
        async with _no_leftovers(), mcpwire.open_client(url, era_cache=False) as client:
            assert client.era is Era.MODERN
            assert client.protocol_version == "2026-07-28"


@pytest.mark.slow
async def test_sdk1_proxy_is_detected_as_legacy_at_once(proxy_http: int) -> None:
    """mcp-proxy answers the session-less ``server/discover`` probe with HTTP 400 and an error
    whose id is its own ("server-error"): that is the legacy signal, so the handshake follows at
    once instead of after the connect timeout; every tool of server-everything is listed."""
    url = f"http://127.0.0.1:{proxy_http}/mcp"
    with trio.fail_after(60):
        async with _no_leftovers():
            start = trio.current_time()
            async with mcpwire.open_client(url, era_cache=False) as client:
                connected = trio.current_time() - start
                assert client.era is Era.LEGACY
                tools = {t.name for t in await client.list_tools()}
                assert (await client.call_tool("echo", {"message": "via proxy"})).text() == "Echo: via proxy"
    assert "echo" in tools and len(tools) >= 10
    assert connected < 10


@pytest.mark.slow
async def test_fastmcp_proxy_lists_the_same_tools_in_auto_mode(fastmcp_http: int) -> None:
    """FastMCP 4.1.2's proxy answers ``server/discover`` but lists nothing in 2026-07-28; auto
    mode lists the tools a legacy pin lists (era parity), and the era override still works."""
    url = f"http://127.0.0.1:{fastmcp_http}/mcp"
    with trio.fail_after(90):
        async with _no_leftovers():
            async with mcpwire.open_client(url, era="legacy", era_cache=False) as pinned:
                legacy = sorted(t.name for t in await pinned.list_tools())
            async with mcpwire.open_client(url, era_cache=False) as client:
                auto = sorted(t.name for t in await client.list_tools())
                assert client.era is Era.LEGACY
                assert (await client.call_tool("echo", {"message": "parity"})).text() == "Echo: parity"
            async with mcpwire.open_client(url, era="modern", era_cache=False) as forced:
                assert forced.era is Era.MODERN
                assert await forced.list_tools() == []
    assert "echo" in legacy
    assert auto == legacy


async def test_cancelling_the_whole_block_leaves_no_socket(
    everything_http: int, caplog: pytest.LogCaptureFixture
) -> None:
    """HT-L15, structured concurrency over HTTP: the block is cancelled from outside while the
    legacy GET stream is open and a call has just finished. The session is still DELETEd (the
    default client's pool logs every answer at DEBUG, with its status), and no task or socket is
    left, not even one for the garbage collector (it would say so with a ResourceWarning)."""
    url = f"http://127.0.0.1:{everything_http}/mcp"
    caplog.set_level(logging.DEBUG, logger="mcpwire.actors.http_pool")

    async def consume(client: mcpwire.Client) -> None:
        async for _ in client.notifications():
            pass

    with trio.fail_after(30):
        async with _no_leftovers():
            with trio.CancelScope() as scope:
                async with mcpwire.open_client(url, era="legacy", era_cache=False) as client:
                    assert (await client.call_tool("echo", {"message": "x"})).text().endswith("x")
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(consume, client)
                        await trio.sleep(0.2)
                        scope.cancel()
            assert scope.cancelled_caught
    requests = [r.getMessage() for r in caplog.records if r.name == "mcpwire.actors.http_pool"]
    deletes = [m for m in requests if m.startswith(f"DELETE {url}: ")]
    assert len(deletes) == 1, requests
    assert deletes[0].removeprefix(f"DELETE {url}: ") in ("HTTP 200", "HTTP 202", "HTTP 204"), deletes


@pytest.mark.parametrize(
    ("era", "path"),
    [(Era.LEGACY, "/mcp"), (Era.MODERN, "/mcp"), (Era.LEGACY, "/sse")],
    ids=["streamable-http-legacy", "streamable-http-2026", "http-sse-2024"],
)
async def test_subscriptions_end_to_end(reference_http: str, era: Era, path: str) -> None:
    """UT-S01..UT-S06 (2026-07-28: one ``subscriptions/listen`` stream, acknowledged, its
    notifications tagged with its id), legacy ``resources/subscribe`` over Streamable HTTP and
    over HTTP+SSE: against the reference server, a ``subscribe`` block receives the
    ``notifications/resources/updated`` the ``touch`` tool causes and the
    ``notifications/tools/list_changed`` the ``notify`` tool causes; leaving the block ends the
    subscription, and nothing is left behind."""
    uri = "demo://static/hello"
    with trio.fail_after(30):
        async with (
            _no_leftovers(),
            mcpwire.open_client(f"{reference_http}{path}", era=era.value, era_cache=False) as client,
        ):
            assert client.era is era
            async with client.subscribe([uri], tools_list_changed=True) as sub:
                assert sub.acknowledged is not None
                assert sub.acknowledged.get("toolsListChanged") is True
                if era is Era.MODERN:
                    assert sub.id is not None
                    assert sub.acknowledged.get("resourceSubscriptions") == [uri]
                await client.call_tool("touch", {"uri": uri})
                await client.call_tool("notify", {})
                seen: list[tuple[str, object]] = []
                async for note in sub:
                    seen.append((note.method, note.params.get("uri")))
                    if era is Era.MODERN:
                        assert note.subscription_id == sub.id
                    if len(seen) == 2:
                        break
            assert seen == [("notifications/resources/updated", uri), ("notifications/tools/list_changed", None)]
            assert client.statistics().pending == 0
