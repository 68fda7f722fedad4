"""Fixtures shared across the test directories: the reference server over HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def reference_url() -> Iterator[str]:
    """``python -m mcpwire.testing.everything --http 127.0.0.1:0``: its MCP URL, for the module."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "mcpwire.testing.everything", "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("listening on "), line
        yield line.removeprefix("listening on ")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a stuck server
            proc.kill()
            proc.wait()
