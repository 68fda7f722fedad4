"""mcpwire.aio: the client and host awaited from asyncio (trio in guest mode inside the loop).

Each test is a plain function that calls ``asyncio.run``: the suite itself runs on trio.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcpwire
import mcpwire.aio
from mcpwire.aio import _RUNTIMES
from mcpwire.errors import RPCError, UnknownTool
from mcpwire.host.config import parse_config

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))


def require(path: Path) -> str:
    if not path.exists():
        message = f"{path} is missing: run tests/real/install_servers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


@pytest.fixture(autouse=True, params=["thread", "guest"])
def mode(request: pytest.FixtureRequest) -> Any:
    """Every test runs with trio in its own thread and in guest mode inside the loop."""
    mcpwire.aio.set_mode(request.param)
    yield request.param
    mcpwire.aio.set_mode("thread")


def test_set_mode_refuses_unknown_modes() -> None:
    with pytest.raises(ValueError, match=r"^mode must be 'thread' or 'guest', not 'fast'$"):
        mcpwire.aio.set_mode("fast")  # type: ignore[arg-type]


def _gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); it is gone once it is reaped or shows as Z
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_a_call_from_asyncio_and_nothing_left_running() -> None:
    pids: list[int | None] = []

    async def main() -> str:
        async with mcpwire.aio.open_client() as client:
            pids.append(client.trio_client.pid)
            assert client.era is not None and client.protocol_version
            names = [tool.name for tool in await client.list_tools()]
            assert "echo" in names
            result = await client.call_tool("echo", {"text": "hi from asyncio"})
            return result.text()

    assert asyncio.run(main()) == "hi from asyncio"
    assert not _RUNTIMES
    assert pids and _gone(pids[0])


def test_concurrent_calls_share_one_trio_run() -> None:
    async def main() -> list[str]:
        async with mcpwire.aio.open_client() as first, mcpwire.aio.open_client() as second:
            assert len(_RUNTIMES) == 1
            calls = [
                (first if n % 2 else second).call_tool("add", {"a": n, "b": 1}) for n in range(40)
            ]
            results = await asyncio.gather(*calls)
            return [r.text() for r in results]

    texts = asyncio.run(main())
    assert [float(t) for t in texts] == [n + 1 for n in range(40)]
    assert not _RUNTIMES


def test_errors_cross_as_themselves() -> None:
    async def main() -> None:
        async with mcpwire.aio.open_client() as client:
            with pytest.raises(RPCError) as info:
                await client.call_tool("no-such-tool", {})
            assert info.value.method == "tools/call"
            result = await client.call_tool("fail", {"message": "boom"})
            assert result.is_error and "boom" in result.text()

    asyncio.run(main())


def test_cancelling_the_asyncio_task_cancels_the_call_on_the_wire() -> None:
    async def main() -> tuple[float, Any]:
        async with mcpwire.aio.open_client() as client:
            task = asyncio.create_task(client.call_tool("slow", {"seconds": 20, "steps": 40}))
            await asyncio.sleep(0.3)
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            elapsed = time.monotonic() - started
            # the connection is still usable, and the cancellation was sent
            assert (await client.call_tool("echo", {"text": "after"})).text() == "after"
            return elapsed, client.statistics()

    elapsed, stats = asyncio.run(main())
    assert elapsed < 5.0
    assert stats.pending == 0


def test_wait_for_timeout_leaves_nothing_behind() -> None:
    async def main() -> None:
        async with mcpwire.aio.open_client() as client:
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(client.call_tool("slow", {"seconds": 20}), 0.2)
            assert (await client.call_tool("echo", {"text": "ok"})).text() == "ok"

    asyncio.run(main())
    assert not _RUNTIMES


def test_asyncio_handlers_answer_server_requests() -> None:
    seen: list[str] = []

    async def sampling(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)  # a real asyncio await inside the handler
        seen.append(asyncio.current_task().get_name() if asyncio.current_task() else "")
        return {"role": "assistant", "content": {"type": "text", "text": "from asyncio"}, "model": "m"}

    async def main() -> str:
        async with mcpwire.aio.open_client(None, sampling=sampling, era="legacy") as client:
            return (await client.call_tool("sample", {"prompt": "hello"})).text()

    assert "from asyncio" in asyncio.run(main())
    assert seen


def test_a_connect_error_reaches_asyncio_and_the_runtime_ends() -> None:
    async def main() -> None:
        async with mcpwire.aio.open_client(["/no/such/server-binary"]):
            pass

    with pytest.raises(mcpwire.ServerNotFound):
        asyncio.run(main())
    assert not _RUNTIMES


def test_notifications_and_subscriptions_from_asyncio() -> None:
    async def main() -> list[str]:
        async with mcpwire.aio.open_client() as client, client.subscribe(tools_list_changed=True) as sub:
            await client.call_tool("notify", {})
            note = await asyncio.wait_for(sub.__anext__(), 10)
            return [note.method]

    assert asyncio.run(main()) == ["notifications/tools/list_changed"]


@pytest.mark.real
def test_a_starlette_app_calls_a_real_server_per_request() -> None:
    """An asyncio web app (starlette, as FastAPI is) holds a host for its lifetime and calls a tool
    of server-everything in every request, concurrently."""
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    everything = require(SERVERS / "npm" / "node_modules" / ".bin" / "mcp-server-everything")
    time_server = require(SERVERS / "py" / "bin" / "mcp-server-time")
    config = {"mcpServers": {"everything": {"command": everything}, "time": {"command": time_server}}}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        host_cm = mcpwire.aio.Host(parse_config(config))
        async with host_cm as host:
            app.state.host = host
            yield

    async def echo(request: Request) -> JSONResponse:
        host: mcpwire.aio.AsyncHost = request.app.state.host
        result = await host.call_tool("everything__echo", {"message": request.query_params["m"]})
        return JSONResponse({"text": result.text})

    app = Starlette(routes=[Route("/echo", echo)], lifespan=lifespan)

    async def main() -> list[str]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
                responses = await asyncio.gather(*(http.get("/echo", params={"m": f"m{n}"}) for n in range(25)))
                host: mcpwire.aio.AsyncHost = app.state.host
                with pytest.raises(UnknownTool):
                    await host.call_tool("everything__nope", {})
                assert any(t.name.startswith("time__") for t in host.tools())
        return [r.json()["text"] for r in responses]

    texts = asyncio.run(main())
    assert texts == [f"Echo: m{n}" for n in range(25)]
    assert not _RUNTIMES


def test_run_awaits_any_trio_function() -> None:
    import trio

    async def trio_only(x: int) -> int:
        await trio.lowlevel.checkpoint()
        trio.lowlevel.current_task()  # raises RuntimeError outside trio
        return x * 2

    assert asyncio.run(mcpwire.aio.run(trio_only, 21)) == 42


def test_host_from_config_file(tmp_path: Path) -> None:
    import json
    import sys

    config = tmp_path / "mcp.json"
    entry = {"command": sys.executable, "args": ["-m", "mcpwire.testing.demo_server"]}
    config.write_text(json.dumps({"mcpServers": {"demo": entry}}))

    async def main() -> str:
        async with mcpwire.aio.Host.from_config(config) as host:
            assert [info.name for info in host.list()] == ["demo"]
            return (await host.call_tool("demo__echo", {"text": "cfg"})).text

    assert asyncio.run(main()) == "cfg"
