"""Era parity (ERA-01) on the real case: FastMCP 4.1.2's proxy in front of server-everything, over
stdio and over Streamable HTTP. It answers ``server/discover`` and declares tools in 2026-07-28 but
lists none there (its backend connects only for handshake sessions), while ``initialize`` sessions
list server-everything's tools: the check names what only the legacy era lists.

The proxy starts its backend in every process it runs, which takes seconds on a loaded machine:
answers get 60 s and the check 240 s.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcpwire.conformance.context import Target
from mcpwire.conformance.runner import Run, run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real"))
from _paths import NPM_BIN, SERVERS, require

pytestmark = [pytest.mark.real, pytest.mark.slow]

FASTMCP = SERVERS / "fastmcp" / "bin" / "fastmcp"
ANSWER_S = 60.0
CHECK_S = 240.0
LISTEN_S = 120.0


@pytest.fixture
def proxy_config(tmp_path: Path) -> Path:
    everything = require(NPM_BIN / "mcp-server-everything")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"everything": {"command": everything, "args": []}}}))
    return config


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def proxy_url(proxy_config: Path) -> Iterator[str]:
    port = _free_port()
    argv = [require(FASTMCP), "run", str(proxy_config), "--transport", "http", "--host", "127.0.0.1"]
    process = subprocess.Popen(
        [*argv, "--port", str(port), "--no-banner"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=proxy_config.parent,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + LISTEN_S
        while True:
            assert process.poll() is None, f"fastmcp exited with {process.returncode} before listening"
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, f"fastmcp did not listen on {port} within {LISTEN_S:g} s"
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if process.poll() is not None:
                break
            os.killpg(process.pid, sig)
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                continue


def _assert_parity_finding(outcome: Run) -> None:
    [era01] = [r for r in outcome.results if r.id == "ERA-01"]
    assert (era01.status, era01.level, era01.revision) == ("warning", "MAY", "2026-07-28"), era01.message
    assert era01.message.startswith("2026-07-28 lacks what 2025-11-25 offers: ")
    # server-everything's tools are listed in the legacy era only
    assert " tools: " in era01.message and "'echo'" in era01.message


async def test_fastmcp_proxy_over_stdio_lists_fewer_tools_in_2026_07_28(proxy_config: Path) -> None:
    target = Target((require(FASTMCP), "run", str(proxy_config), "--no-banner"), cwd=str(proxy_config.parent))
    outcome = await run(target, revisions=["2026-07-28"], only=["ERA-01"], timeout=ANSWER_S, check_timeout=CHECK_S)
    _assert_parity_finding(outcome)


async def test_fastmcp_proxy_over_streamable_http_lists_fewer_tools_in_2026_07_28(proxy_url: str) -> None:
    target = Target(url=proxy_url, transport="http", name="fastmcp proxy")
    outcome = await run(target, revisions=["2026-07-28"], only=["ERA-01"], timeout=ANSWER_S, check_timeout=CHECK_S)
    assert outcome.transport == "http"
    _assert_parity_finding(outcome)
