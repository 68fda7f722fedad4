"""Integration tests against third-party MCP servers (npm and PyPI), installed by
``tests/real/install_servers.sh`` into ``$MCPWIRE_SERVERS_DIR`` (default ``.cache/servers``).

For each server and era it speaks: connect, list what it offers, call a harmless tool, and shut
down within the bound, leaving no process behind. mcp-server-time and mcp-server-git are built on
the official Python SDK 2.x and speak both eras; the npm servers speak the legacy era only (they
answer the 2026-07-28 probe with -32601, LC-41).
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
from _paths import CRON, FASTMCP_BIN, NPM_BIN, PY_BIN, fastmcp_config
from _paths import require as _require

import mcpwire
from mcpwire import EraDetectionError, StdioServer
from mcpwire.protocol.versions import Era

pytestmark = pytest.mark.real


@dataclass
class Case:
    name: str
    argv: list[str]
    eras: tuple[Era, ...]
    tool: str
    arguments: dict[str, object]
    expect_text: str
    env: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "hello.txt").write_text("hello\n")
    yield repo


def _cases(workdir: Path) -> dict[str, Case]:
    return {
        "everything": Case(
            "everything",
            [_require(NPM_BIN / "mcp-server-everything"), "stdio"],
            (Era.LEGACY,),
            "echo",
            {"message": "hi from mcpwire"},
            "hi from mcpwire",
        ),
        "filesystem": Case(
            "filesystem",
            [_require(NPM_BIN / "mcp-server-filesystem"), str(workdir)],
            (Era.LEGACY,),
            "list_directory",
            {"path": str(workdir)},
            "hello.txt",
        ),
        "memory": Case(
            "memory",
            [_require(NPM_BIN / "mcp-server-memory")],
            (Era.LEGACY,),
            "read_graph",
            {},
            "entities",
            env={"MEMORY_FILE_PATH": str(workdir.parent / "memory.jsonl")},
        ),
        "time": Case(
            "time",
            [_require(PY_BIN / "mcp-server-time"), "--local-timezone", "UTC"],
            (Era.LEGACY, Era.MODERN),
            "get_current_time",
            {"timezone": "UTC"},
            "UTC",
        ),
        "git": Case(
            "git",
            [_require(PY_BIN / "mcp-server-git"), "--repository", str(workdir)],
            (Era.LEGACY, Era.MODERN),
            "git_status",
            {"repo_path": str(workdir)},
            "hello.txt",
        ),
    }


def _auto_cases(workdir: Path) -> dict[str, list[str]]:
    """Every stdio server the tests install, as argv, for auto mode."""
    cases = {name: case.argv for name, case in _cases(workdir).items()}
    cases["cron"] = [_require(CRON), "-transport", "stdio", "-db-path", str(workdir.parent / "cron.db")]
    cases["fastmcp-proxy"] = [
        _require(FASTMCP_BIN / "fastmcp"),
        "run",
        str(fastmcp_config(workdir.parent)),
        "--no-banner",
    ]
    return cases


AUTO = ["everything", "filesystem", "memory", "time", "git", "cron", "fastmcp-proxy"]


ALL = [(name, era) for name in ("everything", "filesystem", "memory") for era in (Era.LEGACY,)] + [
    (name, era) for name in ("time", "git") for era in (Era.LEGACY, Era.MODERN)
]


def _gone(pid: int) -> bool:
    """True once ``pid`` exited *and* was reaped: a zombie still answers ``kill(pid, 0)``, so it
    counts as left behind (the client must wait for its server)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "?"


@pytest.mark.parametrize(("name", "era"), ALL, ids=[f"{n}-{e.value}" for n, e in ALL])
async def test_connect_list_call_close(name: str, era: Era, workdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpwire")
    case = _cases(workdir)[name]
    # a long grace: a loaded machine may take seconds to run a server's exit; no signal is still due
    spec = StdioServer(command=case.argv[0], args=tuple(case.argv[1:]), env=case.env, name=name, shutdown_grace=15.0)
    with trio.fail_after(90):
        async with mcpwire.open_client(spec, era=era.value, era_cache=False, timeout=20) as client:
            pid = client.pid
            assert pid is not None
            assert client.era is era
            assert client.protocol_version is not None
            assert client.server_info is not None and client.server_info.name
            tools = await client.list_tools()
            names = {t.name for t in tools}
            assert case.tool in names
            assert all(isinstance(t.input_schema, dict) for t in tools)
            caps = client.server_capabilities
            if caps.resources is not None:
                resources = await client.list_resources()
                assert all(r.uri for r in resources)
            if caps.prompts is not None:
                prompts = await client.list_prompts()
                assert all(p.name for p in prompts)
            result = await client.call_tool(case.tool, case.arguments)
            assert not result.is_error, result.text()
            assert case.expect_text in result.text()
            if era is Era.LEGACY:
                await client.ping()
            stats = client.statistics()
            assert stats.pending == 0
            assert stats.protocol_violations == 0
    # Leaving the block waited for the process: it is gone and reaped (no zombie left), and a
    # server that exits on EOF (each of these does) needed no signal.
    assert _gone(pid), f"pid {pid} is still there (state {_state(pid)})"
    escalations = [r.getMessage() for r in caplog.records if "sending SIG" in r.getMessage()]
    assert escalations == []


@pytest.mark.parametrize("name", ["everything", "filesystem", "memory"])
async def test_npm_servers_are_detected_as_legacy(name: str, workdir: Path) -> None:
    """LC-40/LC-41: the npm servers answer the probe with an error; auto-detection falls back."""
    case = _cases(workdir)[name]
    spec = StdioServer(command=case.argv[0], args=tuple(case.argv[1:]), env=case.env, name=name)
    with trio.fail_after(60):
        async with mcpwire.open_client(spec, era_cache=False) as client:
            assert client.era is Era.LEGACY
            assert client.protocol_version == "2025-11-25"
        with pytest.raises(EraDetectionError, match=r"server/discover answered error -32601"):
            async with mcpwire.open_client(spec, era="modern", era_cache=False):
                pass  # pragma: no cover


@pytest.mark.parametrize("name", ["time", "git"])
async def test_dual_era_servers_prefer_modern(name: str, workdir: Path) -> None:
    """The SDK 2.x servers answer server/discover: auto-detection picks 2026-07-28."""
    case = _cases(workdir)[name]
    spec = StdioServer(command=case.argv[0], args=tuple(case.argv[1:]), name=name)
    with trio.fail_after(60):
        async with mcpwire.open_client(spec, era_cache=False) as client:
            assert client.era is Era.MODERN
            assert client.protocol_version == "2026-07-28"
            discovered = await client.discover()
            assert "2026-07-28" in discovered.supported_versions


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_everything_negotiates_each_legacy_revision(version: str, workdir: Path) -> None:
    case = _cases(workdir)["everything"]
    with trio.fail_after(60):
        async with mcpwire.open_client(case.argv, protocol_version=version) as client:
            assert client.protocol_version == version
            result = await client.call_tool("echo", {"message": "v"})
            assert result.text() == "Echo: v"


async def test_everything_progress_and_structured_content(workdir: Path) -> None:
    case = _cases(workdir)["everything"]
    seen: list[mcpwire.Progress] = []
    with trio.fail_after(60):
        async with mcpwire.open_client(case.argv) as client:
            await client.list_tools()  # so outputSchema is known and checked
            result = await client.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=seen.append
            )
            assert not result.is_error
            assert [p.progress for p in seen] == [1, 2, 3, 4]
            assert all(p.total == 4 for p in seen)
            structured = await client.call_tool("get-structured-content", {"location": "Chicago"})
            assert isinstance(structured.structured_content, dict)
            added = await client.call_tool("get-sum", {"a": 2, "b": 3})
            assert "5" in added.text()


async def test_everything_resources_and_prompts(workdir: Path) -> None:
    case = _cases(workdir)["everything"]
    with trio.fail_after(60):
        async with mcpwire.open_client(case.argv) as client:
            resources = await client.list_resources()
            assert resources, "server-everything lists resources"
            first = await client.read_resource(resources[0].uri)
            assert first.contents and first.contents[0].uri == resources[0].uri
            templates = await client.list_resource_templates()
            assert templates
            prompts = await client.list_prompts()
            simple = next(p for p in prompts if not any(a.required for a in p.arguments))
            rendered = await client.get_prompt(simple.name)
            assert rendered.messages


@pytest.mark.slow
@pytest.mark.parametrize("name", AUTO)
async def test_every_server_lists_its_tools_in_auto_mode(name: str, workdir: Path) -> None:
    """Auto mode lists the same tools as the era the server serves them in: FastMCP's proxy
    answers ``server/discover`` but lists nothing in 2026-07-28, so it is used in the legacy era
    (era parity); the others keep the era they are detected in."""
    argv = _auto_cases(workdir)[name]
    memory = {"MEMORY_FILE_PATH": str(workdir.parent / "memory.jsonl")} if name == "memory" else {}
    spec = StdioServer(command=argv[0], args=tuple(argv[1:]), env=memory, name=name)
    with trio.fail_after(90):
        async with mcpwire.open_client(spec, era="legacy", era_cache=False, timeout=30) as pinned:
            legacy = sorted(t.name for t in await pinned.list_tools())
        async with mcpwire.open_client(spec, era_cache=False, timeout=30) as client:
            auto = sorted(t.name for t in await client.list_tools())
            era = client.era
    assert legacy, f"{name} lists no tools in the legacy era"
    assert auto == legacy
    assert era is (Era.MODERN if name in ("time", "git") else Era.LEGACY)
