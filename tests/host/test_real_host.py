"""The host against real third-party servers, configured through a file: server-everything
(stdio, Streamable HTTP and HTTP+SSE on 127.0.0.1), server-filesystem on a temporary folder,
server-memory and mcp-server-time, next to broken entries (a missing command, a bad URL, an
entry of the wrong JSON shape, a port nobody listens on). HTTP processes are stopped at the end
of their fixture."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from mcpwire.host import Host, ServerStatus
from mcpwire.host.cli import main

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))
NPM_BIN = SERVERS / "npm" / "node_modules" / ".bin"
PY_BIN = SERVERS / "py" / "bin"
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _require(path: Path) -> str:
    if not path.exists():
        message = f"{path} is missing: run tests/real/install_servers.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _HttpServer:
    """server-everything in an HTTP mode on a loopback port; start() and stop() may repeat."""

    def __init__(self, mode: str) -> None:
        self.argv = [_require(NPM_BIN / "mcp-server-everything"), mode]
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PORT": str(self.port)}
        self.proc = subprocess.Popen(self.argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv} exited with {self.proc.returncode} before listening")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"nothing listens on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def everything_http() -> Iterator[_HttpServer]:
    server = _HttpServer("streamableHttp")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[_HttpServer]:
    server = _HttpServer("sse")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, everything_http: _HttpServer, everything_sse: _HttpServer
) -> Path:
    files = tmp_path / "files"
    files.mkdir()
    (files / "hello.txt").write_text("hello from the host\n")
    monkeypatch.setenv("HOST_TEST_MEMORY", str(tmp_path / "memory.jsonl"))
    monkeypatch.setenv("HOST_TEST_TOKEN", "t0ken")
    data = {
        "mcpServers": {
            "everything": {"command": _require(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]},
            "fs": {"command": [_require(NPM_BIN / "mcp-server-filesystem"), "{BASE_PATH}/files"]},
            "memory": {
                "command": _require(NPM_BIN / "mcp-server-memory"),
                "env": {"MEMORY_FILE_PATH": "${env:HOST_TEST_MEMORY}"},
                "policy": {"approval": {"create_*": "allow"}},  # HIGH: asked by default
            },
            "time": {"command": _require(PY_BIN / "mcp-server-time"), "args": ["--local-timezone", "UTC"]},
            "web": {
                "type": "http",
                "url": f"http://127.0.0.1:{everything_http.port}/mcp",
                "headers": {"X-Team": "host-tests"},
                "auth": {"type": "bearer", "token": "${HOST_TEST_TOKEN}"},
            },
            "legacy_web": {
                "type": "sse",
                "url": f"http://127.0.0.1:{everything_sse.port}/sse",
                "auth": {"type": "api_key", "token": "k", "header_name": "X-Api-Key"},
            },
            "missing": {"command": str(tmp_path / "no-such-server")},
            "badurl": {"type": "http", "url": "not a url"},
            "shape": ["not", "an", "object"],
            "refused": {"url": f"http://127.0.0.1:{_free_port()}/mcp", "timeout_seconds": 5},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data))
    return path


async def test_real_servers_through_a_config_file(config: Path) -> None:
    async with Host.from_config(config, health_interval=0, backoff_base=30.0) as host:
        assert host.config.problems == (
            "$.mcpServers.badurl.url: expected an http:// or https:// URL, got 'not a url'",
            "$.mcpServers.shape: expected an object, got a list",
        )
        statuses = {i.name: i.status for i in host.list()}
        assert statuses == {
            "everything": ServerStatus.CONNECTED,
            "fs": ServerStatus.CONNECTED,
            "memory": ServerStatus.CONNECTED,
            "time": ServerStatus.CONNECTED,
            "web": ServerStatus.CONNECTED,
            "legacy_web": ServerStatus.CONNECTED,
            "missing": ServerStatus.ERROR,
            "refused": ServerStatus.ERROR,
        }
        assert (host.get("missing").error or "").startswith("ServerNotFound: ")
        assert (host.get("refused").error or "").startswith("ConnectError: ")
        assert host.get("web").transport == "http" and host.get("web").era == "legacy"
        names = {t.name for t in host.tools()}
        assert {
            "everything__echo",
            "fs__read_text_file",
            "memory__read_graph",
            "time__get_current_time",
            "web__echo",
            "legacy_web__echo",
        } <= names
        assert all(OPENAI_NAME.match(n) for n in names)
        for server in ("everything", "web", "legacy_web"):
            echoed = await host.call_tool(f"{server}__echo", {"message": f"via {server}"})
            assert echoed.text == f"Echo: via {server}" and echoed.server == server
        text = await host.call_tool("fs__read_text_file", {"path": str(config.parent / "files" / "hello.txt")})
        assert text.text == "hello from the host\n"
        now = await host.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert json.loads(now.text)["timezone"] == "UTC"
        entity = {"name": "host", "entityType": "library", "observations": ["routes calls"]}
        await host.call_tool("memory__create_entities", {"entities": [entity]})
        graph = await host.call_tool("memory__read_graph", {})
        assert "routes calls" in graph.text
        for exported in host.registry.to_openai(strict=True):
            params = exported["function"]["parameters"]
            assert params["additionalProperties"] is False
            assert params["required"] == list(params["properties"])
        anthropic = {t["name"] for t in host.registry.to_anthropic()}
        assert anthropic == names
        assert "### `fs__read_text_file`" in host.registry.to_markdown()
        stats = host.statistics()
        assert stats.servers["web"].calls["echo"].calls == 1 and stats.servers["refused"].status == "error"


async def test_http_server_reconnects_after_it_restarts(tmp_path: Path) -> None:
    server = _HttpServer("streamableHttp")
    server.start()
    try:
        path = tmp_path / "mcp.json"
        entry = {"url": f"http://127.0.0.1:{server.port}/mcp", "health_interval_seconds": 0.2, "timeout_seconds": 2}
        path.write_text(json.dumps({"mcpServers": {"web": entry}}))
        async with Host.from_config(path, backoff_base=0.1, backoff_cap=0.5) as host:
            assert (await host.call_tool("web__echo", {"message": "one"})).text == "Echo: one"
            events = host.events()
            await trio.to_thread.run_sync(server.stop)
            with trio.fail_after(20):
                async for event in events:
                    if event.kind == "status" and event.status == "error":
                        break
            await trio.to_thread.run_sync(server.start)
            info = await host.wait_status("web", ServerStatus.CONNECTED, timeout=30)
            assert info.restart_count >= 1
            assert (await host.call_tool("web__echo", {"message": "two"})).text == "Echo: two"
    finally:
        server.stop()


def test_cli_against_an_http_server(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--config", str(config), "--server", "web"]
    assert main("servers", [*argv, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["transport"], row["status"]) == ("web", "http", "connected")
    # only the server the name points at is started
    assert main("call", ["--config", str(config), "web__echo", '{"message": "cli"}']) == 0
    assert capsys.readouterr().out == "Echo: cli\n"
    assert main("export", [*argv, "--format", "anthropic"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert "web__echo" in {t["name"] for t in exported} and all(t["name"].startswith("web__") for t in exported)
