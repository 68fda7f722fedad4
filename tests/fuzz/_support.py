"""Helpers of the fuzz tests: the fixture servers, running the CLI in-process, free ports."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from mcpwire.fuzz.cli import main

FIXTURES = Path(__file__).with_name("fixtures")
BUGGY = str(FIXTURES / "buggy_server.py")
BUGGY_HTTP = str(FIXTURES / "buggy_http_server.py")
SERVER = [sys.executable, BUGGY]
FIXED = [*SERVER, "--fixed"]
DEMO = [sys.executable, "-m", "mcpwire.testing.demo_server"]
REPO = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("MCPWIRE_SERVERS_DIR", REPO / ".cache" / "servers"))


def run_cli(args: list[str]) -> tuple[int, str, str]:
    """``mcpwire fuzz ARGS``: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


def run_json(args: list[str]) -> tuple[int, dict[str, Any]]:
    status, stdout, stderr = run_cli(["--json", *args])
    assert stdout, f"no JSON report (status {status}): {stderr[-2000:]}"
    return status, json.loads(stdout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def by_key(report: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Findings by (oracle, tool), errors only (warnings such as answer-slow depend on the machine's load)."""
    return {(f["oracle"], f["tool"]): f for f in report["findings"] if f["severity"] == "error"}


def call_arguments(finding: dict[str, Any]) -> Any:
    """The arguments of the (first) tools/call of a finding's minimal input."""
    request = json.loads(finding["input"][0])
    assert request["method"] == "tools/call", request
    return request["params"]["arguments"]


def our_children(marker: str) -> list[str]:
    """Pids of this process's children whose command line contains ``marker``."""
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
    left = []
    for pid in children.read_text().split() if children.exists() else []:
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                left.append(pid)
    return left
